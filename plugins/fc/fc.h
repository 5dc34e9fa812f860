/*
 * fc.so internals shared between its files: the plugin context, the
 * per-machine handle, and what each file offers the others.
 *
 *   fc.c         descriptor, init/fini, configuration, probe
 *   http.c       libcurl transport: handle pool, cancellation, retries, errors
 *   api.c        platform API: create, get, list, kill, set timeout (ref. 2)
 *   machine.c    the machine slots built on api.c
 *   keepalive.c  the background worker that pushes set-timeout (ref. 2.7)
 *   connect.c    Connect envelopes, proto3-JSON quirks, base64 (ref. 5.1)
 *   envd.c       envd files: read, write, list, stat, remove (ref. 4, 5.5)
 *   process.c    process.Process/Start and friends, the exec slot (ref. 5.2, 5.3)
 *   stream.c     interactive streams: Start with stdin, SendInput (ref. 5.3)
 *   interp.c     the code interpreter's POST /execute, run_code (ref. 6, 7.3)
 *   kernel.c     its kernels: contexts, restart, Jupyter's interrupt
 *
 * "ref." cites shared/reference/fc-protocol.md by section.
 *
 * Threads: every slot may run on several threads at once.  struct fc_ctx is
 * read-only after init except its pool and keepalive worker, which lock
 * themselves; struct fc_machine is read-only after create/attach except its
 * atomics.
 */
#ifndef SG_FC_FC_H
#define SG_FC_FC_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include <sandgate/plugin.h>

#define FC_PLUGIN "fc"

#define FC_ENVD_PORT 49983 /* ref. 1: envd host <port>-<id>.<domain> */
#define FC_CI_PORT   49999 /* ref. 1, 6: code interpreter */
#define FC_JUPYTER_PORT 8888 /* the Jupyter server behind it: kernel interrupts */

#define FC_DEFAULT_TEMPLATE "code-interpreter-v1"
#define FC_DEFAULT_REGION   "cn-hangzhou"
#define FC_DEFAULT_WORKSPACE "/home/user"

/* A sandbox id is at most this long with its NUL (fc_id_valid): ids go in
 * fixed buffers inside fc.so, never in the ABI. */
#define FC_ID_MAX 128
/* A template name from the platform, with its NUL; a longer one is ignored. */
#define FC_TEMPLATE_MAX 256

#define FC_STR_(x) #x
#define FC_STR(x) FC_STR_(x) /* a macro's value as a string literal */

/* fc's rank for the default backend (plugin.h, struct sg_probe). */
#define FC_PREFERENCE 10

/* Caps on what the network may make us hold (frames are untrusted). */
#define FC_MAX_JSON_BODY   (8u * 1024u * 1024u)  /* platform and unary replies */
#define FC_MAX_ERROR_BODY  (64u * 1024u)         /* error bodies we quote */
#define FC_MAX_ENVELOPE    (8u * 1024u * 1024u)  /* one Connect message */
#define FC_MAX_NDJSON_LINE (48u * 1024u * 1024u) /* one /execute line (images) */
#define FC_MAX_RESULTS     (64u * 1024u * 1024u) /* all rich results of a run */

struct fc_http;
struct fc_keepalive;

/* The plugin's priv, made by init() and freed by fini(). */
struct fc_ctx {
	const struct sg_host_api *host;  /* borrowed, process lifetime */
	struct fc_http *http;            /* owned: handle pool */
	struct fc_keepalive *ka;         /* owned: background set-timeout worker */
	char *api_key;                   /* owned, secret, zeroed by fini; NULL: unset */
	char *base_url;                  /* owned, no trailing '/' */
	char *region;                    /* owned: [fc] region */
	char *domain;                    /* owned: data-plane domain */
	char *sandbox_url;               /* owned or NULL: every data-plane request there */
	char *default_template;          /* owned */
	char *workspace;                 /* owned: default cwd and list path */
	char *envd_user;                 /* owned or NULL: Authorization Basic user */
	char *envd_basic;                /* owned or NULL: the header value for it */
	unsigned create_timeout_s;       /* >= 120 (ref. 2.3) */
	unsigned request_timeout_s;      /* other requests */
	unsigned keepalive_interval_s;   /* at most one set-timeout per this */
	unsigned retry_after_max_s;      /* 429 waits longer than this fail */
	unsigned retries;                /* extra attempts of an idempotent request */
};

/* m->handle: allocated by create()/attach(), freed by machine_release(). */
#define FC_KERNEL_LANGS 3 /* python, javascript, typescript */

struct fc_machine {
	struct fc_ctx *ctx;              /* borrowed from init() */
	char id[FC_ID_MAX];
	char token[256];                 /* envdAccessToken: secret, never logged */
	char envd_version[32];
	char *domain;                    /* owned: the sandbox's data-plane domain */
	_Atomic int64_t last_keepalive_ms; /* monotonic ms of the last push */
	atomic_int interp;               /* -1 unknown, 0 no /execute, 1 has it */
	/* The fixed parts of a process Start, made on its first use
	 * (fc_proc_start): the URL, and the headers for one command timeout.
	 * Never changed once set; freed, token wiped, by fc_machine_release(). */
	pthread_mutex_t start_lock;
	char *start_url;
	struct curl_slist *start_headers;
	unsigned start_timeout_ms;
	/* The code interpreter's kernels (interp.c, kernel.c), guarded by
	 * kern_lock: */
	pthread_mutex_t kern_lock;
	bool files_hook;                 /* the Python kernel records written files */
	char died[FC_KERNEL_LANGS][200]; /* a kernel died during a call: why, told to
					    the next call of that language */
};

/* ---- fc.c ------------------------------------------------------------------ */

/* The context and handle of m, or NULL with err filled. */
struct fc_machine *fc_machine_of(struct sg_machine *m, struct sg_err *err);

/* Monotonic milliseconds. */
int64_t fc_now_ms(void);

/* True when s is a plausible sandbox id: [A-Za-z0-9._-], 1..127 chars, so it
 * can go in a URL path and a Host name unescaped. */
bool fc_id_valid(const char *s);

/* Random lower-case hex into out[2n+1]. */
void fc_random_hex(char *out, size_t n);

/* A new JSON object {"NAME": "value"} of "NAME=value" strings (a later NAME
 * wins; entries without a name are skipped), the caller's reference; NULL
 * when out of memory.  Its values may be secrets: never log it. */
json_t *fc_env_json(const char *const *env);

/* The probe slot (ref. 2.5): an authenticated GET /sandboxes?limit=1. */
sg_probe_fn fc_probe;

/* ---- api.c: platform API (ref. 2) ------------------------------------------- */

/* Sandbox facts from a create or get answer. */
struct fc_sandbox_info {
	char id[FC_ID_MAX];
	char token[256];
	char envd_version[32];
	char domain[256];
	char template_name[FC_TEMPLATE_MAX];
	char state[32];
};

/* POST /sandboxes.  body is the request JSON (borrowed).  Never re-sent once
 * the body went out.  Reports progress on call while it waits. */
int fc_api_create(struct fc_ctx *ctx, const json_t *body, struct sg_call *call,
		  struct fc_sandbox_info *info, json_t **metadata, struct sg_err *err);

/* GET /sandboxes/{id}.  SG_E_NOTFOUND when the platform says 404. */
int fc_api_get(struct fc_ctx *ctx, const char *id, struct sg_call *call,
	       struct fc_sandbox_info *info, struct sg_err *err);

/* GET /sandboxes: *out gets the JSON array (caller's reference). */
int fc_api_list(struct fc_ctx *ctx, struct sg_call *call, json_t **out,
		struct sg_err *err);

/* GET /sandboxes?limit=1, sent once, within timeout_ms: whether the platform
 * answers and takes the key.  Returns 0, or -1 with err: SG_E_INVAL (no key,
 * or the key refused), SG_E_UNAVAILABLE (no answer, or an error status);
 * the message names the URL and the fix. */
int fc_api_probe(struct fc_ctx *ctx, unsigned timeout_ms, struct sg_err *err);

/* DELETE /sandboxes/{id}; 404 is success (already gone, ref. 2.6). */
int fc_api_kill(struct fc_ctx *ctx, const char *id, struct sg_call *call,
		struct sg_err *err);

/* POST /sandboxes/{id}/timeout {"timeout":s}.  SG_E_GONE on 404. */
int fc_api_set_timeout(struct fc_ctx *ctx, const char *id, unsigned timeout_s,
		       struct sg_err *err);

/* After a data-plane failure: 1 when the platform says the sandbox is gone
 * (404 or not running), 0 when it is there, -1 when that is unknown. */
int fc_api_gone(struct fc_ctx *ctx, const char *id);

/* Fills err with SG_E_GONE for sandbox id.  Returns -1. */
int fc_gone(struct fc_ctx *ctx, struct sg_err *err, const char *id);

/* ---- keepalive.c ------------------------------------------------------------ */

struct fc_keepalive *fc_keepalive_new(struct fc_ctx *ctx);
/* Queues a set-timeout for id; never blocks on the network. */
void fc_keepalive_push(struct fc_keepalive *ka, const char *id, unsigned lifetime_s);
/* Drops a queued set-timeout for id (its sandbox was just killed: the
 * request could only fail). */
void fc_keepalive_forget(struct fc_keepalive *ka, const char *id);
/* Stops the worker (dropping what is queued) and frees ka. */
void fc_keepalive_free(struct fc_keepalive *ka);

/* ---- machine.c: slots -------------------------------------------------------- */

sg_machine_create_fn fc_machine_create;
sg_machine_attach_fn fc_machine_attach;
sg_machine_destroy_fn fc_machine_destroy;
sg_machine_release_fn fc_machine_release;
sg_machine_list_fn fc_machine_list;
sg_machine_keepalive_fn fc_machine_keepalive;

/* ---- envd.c ------------------------------------------------------------------ */

sg_file_read_fn fc_file_read;
sg_file_write_fn fc_file_write;
sg_file_list_fn fc_file_list;
sg_file_stat_fn fc_file_stat;
sg_file_remove_fn fc_file_remove;

/* A Connect unary call on envd (ref. 5.1): POST /<method> with JSON body.
 * *out gets the reply object (caller's reference) on 200.  A non-200 answer
 * fills err naming `what`, the Connect code and message; *code (may be NULL)
 * gets the Connect code ("not_found") or "".  idempotent: retried. */
int fc_envd_unary(struct fc_machine *fm, const char *method, const json_t *body,
		  bool idempotent, struct sg_call *call, const char *what,
		  json_t **out, char *code, size_t code_size, struct sg_err *err);

/* The envd (port 49983) or interpreter (49999) base URL of fm, malloc'd. */
char *fc_data_url(const struct fc_machine *fm, int port, const char *path);

/* ---- process.c ---------------------------------------------------------------- */

/* The events of a process stream (ref. 5.2), parsed incrementally: feed
 * the response bytes; output goes to `out` as it is decoded. */
struct fc_proc_events {
	void *dec;                 /* owned: struct fc_env_dec */
	long pid;                  /* from the start event, 0 before */
	bool started, ended, trailer;
	int exit_code;             /* end.exitCode (0 when omitted) or -1 */
	int signal;                /* from end.status "signal: killed", or 0 */
	char tcode[48];            /* end-of-stream error code, "" when none */
	char tmsg[256];            /* its message */
	char perr[160];            /* a protocol error, "" when none */
	/* fd 1 stdout, 2 stderr (pty output counts as stdout) */
	void (*out)(void *ud, int fd, const char *p, size_t n);
	void (*on_event)(void *ud); /* after each event, or NULL */
	void *ud;
	pthread_mutex_t *lock;     /* held while a chunk is parsed, or NULL */
};

/* Returns 0, or -1 (pe->perr set) when the stream broke the protocol. */
int fc_proc_init(struct fc_proc_events *pe);
void fc_proc_free(struct fc_proc_events *pe);
int fc_proc_feed(struct fc_proc_events *pe, const char *p, size_t n);

/* Sends the enveloped Start (ref. 5.2) for req, streaming events into pe
 * until the stream ends.  timeout_ms 0: none.  abort_fd: see fc_req.
 * Returns as fc_http_request(); *status gets the HTTP status. */
int fc_proc_start(struct fc_machine *fm, const struct sg_exec_req *req, bool stdin_open,
		  struct fc_proc_events *pe, struct sg_call *call, int abort_fd,
		  long *status, struct sg_err *err);

sg_exec_fn fc_exec;

/* SendSignal SIGKILL to pid (best effort, own short timeout).  Returns 0
 * when it was sent, 1 when envd knows no such process (it ended), -1 when
 * the signal could not be sent (logged). */
int fc_process_kill(struct fc_machine *fm, long pid);

/* Builds the Start request JSON (ref. 5.2): cmd/args from req, cwd, envs,
 * stdin.  Caller's reference. */
json_t *fc_start_request(struct fc_machine *fm, const struct sg_exec_req *req,
			 bool stdin_open);

/* Unary process RPCs on pid: SendInput (bytes), CloseStdin. */
int fc_process_send_input(struct fc_machine *fm, long pid, const void *p, size_t n,
			  struct sg_err *err);
int fc_process_close_stdin(struct fc_machine *fm, long pid, struct sg_err *err);

/* ---- stream.c ------------------------------------------------------------------ */

sg_stream_open_fn fc_stream_open;
sg_stream_write_fn fc_stream_write;
sg_stream_read_fn fc_stream_read;
sg_stream_close_fn fc_stream_close;

/* ---- interp.c ------------------------------------------------------------------ */

/* run_code on the code interpreter: a kernel per sandbox and language, as
 * E2B keeps them.  SG_E_NOTSUP on a template without one (base) or for a
 * language the template lacks: the core runs the code once with exec. */
sg_run_code_fn fc_run_code;

/* The reader of /execute's NDJSON stream (ref. 6), fed as the response
 * arrives: stdout and stderr lines into res->out and res->err (cap bytes
 * each), `result` lines into res->results, `error` into res->error.  The
 * fuzzer (t/fuzz/fuzz_fc.c) drives it too.  Zero it, then set fm (may be
 * NULL), host, res and cap; release `line` with host->buf_release. */
struct fc_run {
	struct fc_machine *fm;
	const struct sg_host_api *host;
	struct sg_code_result *res;
	size_t cap;
	struct sg_buf line;      /* a partial NDJSON line */
	size_t results_bytes;
	bool ended;              /* end_of_execution seen */
	bool restarting;         /* E2B's ContextRestarting: the kernel died */
	char perr[160];          /* protocol error */
};

/* Takes the next n bytes of the stream (an fc_req on_data callback; ud is
 * the struct fc_run).  Returns 0, or -1 with r->perr set (a line over
 * FC_MAX_NDJSON_LINE). */
int fc_run_data(void *ud, const char *p, size_t n);

/* ---- kernel.c ------------------------------------------------------------------ */

/* Interrupts what the kernel of `language` runs (Jupyter's interrupt on
 * the Jupyter server behind the code interpreter): KeyboardInterrupt in
 * Python, the state kept.  Best effort, bounded by a few seconds: returns
 * 0, or -1 with err (no such kernel, no answer). */
int fc_kernel_interrupt(struct fc_machine *fm, const char *language, struct sg_err *err);

/* Restarts the kernel of `language` (POST /contexts/<id>/restart): its
 * state is gone.  A language that never ran has nothing to restart.
 * Returns 0, or -1 with err. */
int fc_kernel_restart(struct fc_machine *fm, const char *language, struct sg_call *call,
		      struct sg_err *err);

#endif /* SG_FC_FC_H */
