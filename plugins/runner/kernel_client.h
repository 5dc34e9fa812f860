/*
 * Running code on a runner's kernels (capability "kernel"): one KEXEC
 * request through an open runner connection (client.h), its output, rich
 * results, error and written files gathered into one result.  The plugins'
 * run_code uses this; doc/kernel-protocol.md has the protocol.
 *
 * Thread-safe as the connection is: many threads may run calls at once.
 * Calls for one language on one connection run one at a time in the runner
 * (the others wait there, up to 8; more are refused).
 */
#ifndef SG_RUNNER_KERNEL_CLIENT_H
#define SG_RUNNER_KERNEL_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "plugins/runner/client.h"

#define RN_KERNEL_RESULTS_SLACK (64u * 1024u) /* JSON framing over rich_cap */

/* One call.  Every pointer is borrowed for the duration of rn_kernel_run(). */
struct rn_kernel_call {
	const char *language;    /* "python" or "javascript" */
	const char *scope;       /* whose kernel: a sandbox id (runners shared by
				    several sandboxes, capability "kernel-scope");
				    NULL: the runner's one unscoped kernel */
	const char *code;        /* NUL-terminated; may be "" (with reset: only reset) */
	const char *const *env;  /* "K=V", NULL-terminated, or NULL: set over the
				    runner's environment when the kernel starts */
	const char *cwd;         /* where the kernel starts (kept afterwards); NULL:
				    the runner's working directory */
	unsigned timeout_ms;     /* interrupt the code after this; 0: never */
	unsigned grace_ms;       /* interrupt -> the kernel is killed; 0: RN_KGRACE_MS_DEFAULT */
	uint64_t output_cap;     /* bytes kept of stdout and of stderr each; 0: RN_QUEUE_MAX */
	uint32_t rich_cap;       /* bytes of rich results; 0: RN_RICH_CAP_DEFAULT */
	bool reset;              /* discard the kernel and its state first */
	int cancel_fd;           /* readable: interrupt the call (state kept); -1: none */
};

/* What came back.  Filled by rn_kernel_run() (also when it fails, with what
 * arrived so far) and freed by rn_kernel_result_free(); the struct itself is
 * the caller's. */
struct rn_kernel_result {
	char *out, *err;         /* malloc'd, NUL-terminated (bytes may hold NULs);
				    "" when nothing came, NULL only after a failure */
	size_t out_len, err_len;
	bool out_trunc, err_trunc; /* cut at output_cap */
	json_t *results;         /* array of {"text", "html", "png" (base64), "width",
				    "height", "is_main_result", "omitted"}; owned */
	json_t *error;           /* {"name", "value", "traceback"} or NULL; owned */
	json_t *output_files;    /* array of {"name" (relative), "path", "size"}; owned */
	char interpreter[64];    /* "python3 3.11.2", "node v18.20.4" */
	long kernel_pid;         /* the kernel's pid in the machine */
	bool timed_out;          /* the runner interrupted the code at timeout_ms */
	bool cancelled;          /* cancel_fd fired and the call was interrupted */
	bool kernel_restarted;   /* this call runs on a new kernel: the old one died */
	char restart_reason[200];
	bool kernel_died;        /* the kernel ended during this call (the next
				    call starts a new one and says so) */
	char died_reason[200];
};

/* Runs kc on connection c and waits for its end (the runner bounds it by
 * timeout_ms plus grace_ms; cancel_fd is the caller's way out earlier).
 * Returns 0 when the call ran (whatever the code did: see res->error,
 * timed_out, kernel_died); 1 when the language's interpreter is not in the
 * machine (why names what was looked for); -1 with why when the call could
 * not run: no "kernel" capability (an older runner), the connection broke,
 * the runner refused it (busy, malformed), the code is over 1 MiB, the
 * cwd cannot be entered, or no answer came after a cancel. */
int rn_kernel_run(struct rn_conn *c, const struct rn_kernel_call *kc,
		  struct rn_kernel_result *res, char *why, size_t size);

/* Ends the kernels of `scope` on c (language NULL: every language's): what
 * they run is killed, a call in flight ends with their death.  Waits for
 * the runner's answer (a few ms).  Returns 0, or -1 with why (no
 * "kernel-scope" capability, the connection broke). */
int rn_kernel_end(struct rn_conn *c, const char *scope, const char *language,
		  char *why, size_t size);

/* Frees what res holds (not res); NULL fields are fine. */
void rn_kernel_result_free(struct rn_kernel_result *res);

#endif /* SG_RUNNER_KERNEL_CLIENT_H */
