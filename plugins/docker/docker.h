/*
 * docker.so internals shared between its files: the plugin context, the
 * per-machine handle, and the slot functions each file implements.
 *
 *   docker.c   descriptor, init/fini, configuration, templates
 *   engine.c   HTTP to the Engine API (see engine.h)
 *   machine.c  create, attach, destroy, release, list
 *   exec.c     one-shot commands: process groups, timeouts, cancellation
 *   stream.c   interactive streams (attached exec with stdin open)
 *   files.c    files through the archive API and small exec scripts
 *   demux.c    the 8-byte-header stream parser (see demux.h)
 *   tar.c      libarchive in memory (see tar.h)
 *   runner.c   the in-sandbox runner: upload, start, restart, fallback
 *   rexec.c    commands and streams through the runner
 *   code.c     run_code on the runner's kernels
 */
#ifndef SG_DOCKER_DOCKER_H
#define SG_DOCKER_DOCKER_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include <sandgate/plugin.h>

#include "plugins/docker/engine.h"
#include "plugins/runner/binary.h"
#include "plugins/runner/client.h"
#include "plugins/runner/rcode.h"

#define DOCKER_PLUGIN "docker"

/* Labels on every container sandgate makes. */
#define DOCKER_LABEL_MANAGED    "org.sandgate.managed"
#define DOCKER_LABEL_OWNER      "org.sandgate.owner"
#define DOCKER_LABEL_SESSION    "org.sandgate.session"
#define DOCKER_LABEL_CREATED    "org.sandgate.created"
#define DOCKER_LABEL_LIFETIME   "org.sandgate.lifetime"
#define DOCKER_LABEL_PERSISTENT "org.sandgate.persistent"
#define DOCKER_LABEL_NAME       "org.sandgate.name"
#define DOCKER_LABEL_TEMPLATE   "org.sandgate.template"

#define DOCKER_WORKSPACE "/workspace"

/* Buffers: a container id or name (64 hex digits, or a name), a path in a
 * container. */
#define DOCKER_ID_MAX   128
#define DOCKER_PATH_MAX 1024

/* The plugin's priv, made by init() and freed by fini().  Read-only after
 * init except inside engine, which guards itself: safe to share by threads. */
struct docker_ctx {
	const struct sg_host_api *host;  /* borrowed, process lifetime */
	struct docker_engine *engine;    /* owned */
	const char *default_template;    /* borrowed from the config */
	size_t file_cap;                 /* [docker] file_cap */
	unsigned api_timeout_s;          /* [docker] api_timeout */
	bool runner_on;                  /* [docker] runner */
	bool runner_faults;              /* SANDGATE_RUNNER_FAULTS=1: tests only */

	/* The runner binary on this host, read once (runner.c). */
	pthread_mutex_t bin_lock;        /* guards the bin* fields */
	bool bin_tried;
	struct rn_binary bin;            /* owned, freed by docker_runner_teardown() */
	char bin_why[256];               /* why there is none */
};

/* Temporary files of failed writes a machine remembers for later removal. */
#define DOCKER_STALE_MAX 8

/* Where a machine's runner stands. */
enum docker_runner_state {
	DOCKER_RUNNER_IDLE = 0,    /* not started yet */
	DOCKER_RUNNER_ACTIVE,      /* a connection exists (maybe just died) */
	DOCKER_RUNNER_FALLBACK,    /* cannot run here: plain docker exec */
	DOCKER_RUNNER_OFF          /* [docker] runner = false */
};

/* m->handle: allocated by create()/attach(), freed by machine_release(). */
struct docker_machine {
	struct docker_ctx *ctx;         /* borrowed from init() */
	pthread_mutex_t rlock;          /* guards the runner fields below */
	struct rn_conn *conn;           /* the runner connection (opener's ref) */
	enum docker_runner_state rstate;
	char rwhy[640];                 /* why FALLBACK, or how the last one ended */
	char rpath[DOCKER_PATH_MAX];        /* the runner's path in the container */
	char reid[80];                  /* exec id of the current runner */
	char rnote[200];                /* its last stderr line (the engine's
					   "exec format error" comes that way) */
	unsigned restarts;
	long long start_ms;             /* how long the last start took */
	struct rnc_state code;          /* its kernels' runners (code.c) */
	pthread_mutex_t slock;          /* guards stale[] */
	char *stale[DOCKER_STALE_MAX];  /* temporary files of failed writes not
					   removed then (the engine was down);
					   owned, see docker_stale_drop() */
};

/* Returns the context of a machine made by this plugin, or NULL (err filled). */
struct docker_ctx *docker_ctx_of(const struct sg_machine *m, struct sg_err *err);

/* Looks a template up: config `template.<name>`, then the built-in
 * base -> sandgate/base:1, and copies its image into image[size].  Returns 0,
 * or -1 when there is no such template. */
int docker_template_image(struct docker_ctx *ctx, const char *name, char *image,
			  size_t size);

/* Trims msg to its first line (at most 200 bytes) into out, for messages. */
void docker_first_line(const char *msg, size_t len, char *out, size_t size);

/* ---- exec.c ------------------------------------------------------------------ */

/* One exec inside a container. */
struct docker_run {
	const char *const *argv;  /* NULL-terminated; what runs */
	const char *cwd;          /* NULL: the container's WorkingDir */
	const char *const *env;   /* "K=V", NULL-terminated, or NULL */
	unsigned timeout_ms;      /* 0: none */
	size_t cap;               /* bytes kept per stream */
	bool group;               /* run in a new process group that a timeout or a
				     cancellation kills (the wrapper); off only for
				     the kill itself */
	bool attach_stdin;        /* streams: stdin stays open */
	bool merge_stderr;        /* streams: stderr into stdout, in order */
};

/* Runs r in container cid and fills res (exit code, signal, output, flags).
 * Returns 0 when the command ran (any exit status, also a timeout); -1 with
 * err filled otherwise, SG_E_CANCELLED after a cancellation (the process group
 * was killed first), SG_E_GONE when the container is gone or stopped. */
int docker_run(struct docker_ctx *ctx, const char *cid, const struct docker_run *r,
	       struct sg_call *call, struct sg_exec_result *res,
	       struct sg_err *err);

sg_exec_fn docker_exec;

/* SG_E_INVAL unless every entry of env (may be NULL) is KEY=VALUE. */
int docker_check_env(struct docker_ctx *ctx, const char *const *env,
		     struct sg_err *err);

/* Pieces of docker_run() that stream.c reuses. */
long long docker_now_ms(void);
/* Creates an exec of r in cid (argv wrapped when r->group); copies its id
 * into eid.  A stopped container (an engine restart stops them all) is
 * started again first.  SG_E_GONE when the container is gone or does not
 * start. */
int docker_exec_create(struct docker_ctx *ctx, const char *cid,
		       const struct docker_run *r, char *eid, size_t size,
		       struct sg_err *err);
/* Waits briefly until exec inspect stops saying Running.  Returns the exit
 * code, or -1 when it is unknown. */
int docker_exec_wait(struct docker_ctx *ctx, const char *eid);
/* Kills process group pgid (> 1) in container cid with a second exec. */
void docker_kill_group(struct docker_ctx *ctx, const char *cid, long pgid);

/* Runs r in machine m: through the runner when it works there, else with
 * docker_run().  Same contract as docker_run(). */
int docker_run_machine(struct docker_ctx *ctx, const struct sg_machine *m,
		       const struct docker_run *r, const char *command,
		       struct sg_call *call, struct sg_exec_result *res,
		       struct sg_err *err);

/* ---- runner.c ---------------------------------------------------------------- */

/* Reads the configuration ([docker] runner, runner_path) into ctx. */
void docker_runner_setup(struct docker_ctx *ctx);
void docker_runner_teardown(struct docker_ctx *ctx);
void docker_runner_machine_init(struct docker_machine *dm);
/* Ends the machine's runner connection (handle release). */
void docker_runner_machine_fini(struct docker_machine *dm);

/* A working runner connection for m, started (or restarted) on demand.
 * Returns 0 with a reference in *out (rn_conn_put), 1 when this machine uses
 * plain docker exec, -1 with err (SG_E_GONE: the container is gone). */
int docker_runner_get(struct docker_ctx *ctx, const struct sg_machine *m,
		      struct rn_conn **out, struct sg_err *err);

/* How many times m's runner was started again (kernels die with it). */
unsigned docker_runner_generation(const struct sg_machine *m);

/* The runner state of m as JSON (sandbox_env status); caller's reference. */
json_t *docker_runner_status(struct sg_machine *m);
sg_action_fn docker_action_runner;

/* ---- rexec.c ----------------------------------------------------------------- */

/* Runs a one-shot command through m's runner.  Returns 0 when it ran (as
 * docker_run), -1 with err, or 1 when the runner is not available (or the
 * request does not fit in a frame): then the caller uses docker_run(). */
int docker_runner_exec(struct docker_ctx *ctx, const struct sg_machine *m,
		       const struct docker_run *r, const char *command,
		       struct sg_call *call, struct sg_exec_result *res,
		       struct sg_err *err);

/* An interactive stream through the runner (stdin open, output merged, and
 * with status_fd >= 3 a status channel).  Owned by the sg_stream that holds
 * it (stream.c), freed by docker_rstream_close(). */
struct docker_rstream;

/* Returns 0 with *out, -1 with err, or 1 when the runner is not available. */
int docker_rstream_open(struct docker_ctx *ctx, const struct sg_machine *m,
			const struct sg_exec_req *req, int status_fd,
			struct docker_rstream **out, struct sg_err *err);
ssize_t docker_rstream_write(struct docker_rstream *rs, const void *p, size_t n,
			     struct sg_err *err);
/* As stream_read; *channel (may be NULL) gets enum sg_stream_channel. */
ssize_t docker_rstream_read(struct docker_rstream *rs, void *p, size_t n,
			    int timeout_ms, int *channel, struct sg_err *err);
int docker_rstream_close(struct docker_rstream *rs, int *exit_code);

/* ---- code.c ------------------------------------------------------------------ */

/* run_code on the runner's kernels (a kernel per container and language);
 * SG_E_NOTSUP without a runner or for another language (the core runs it). */
sg_run_code_fn docker_run_code;

/* ---- files.c ------------------------------------------------------------------ */

/* Removes the temporary files of earlier failed writes in m that could not
 * be removed then (the engine was down); called before m's next exec.  What
 * still cannot be removed is kept for the next try. */
void docker_stale_drop(struct docker_ctx *ctx, const struct sg_machine *m);

/* ---- machine.c --------------------------------------------------------------- */

sg_machine_create_fn docker_machine_create;
sg_machine_attach_fn docker_machine_attach;
sg_machine_destroy_fn docker_machine_destroy;
sg_machine_release_fn docker_machine_release;
sg_machine_list_fn docker_machine_list;
sg_probe_fn docker_probe;
/* POST /containers/{id}/start; one already running is success.  -1 with err
 * (the engine's words) otherwise. */
int docker_start(struct docker_ctx *ctx, const char *id, struct sg_err *err);

/* ---- stream.c ---------------------------------------------------------------- */

sg_stream_open_fn docker_stream_open;
sg_stream_write_fn docker_stream_write;
sg_stream_read_fn docker_stream_read;
sg_stream_close_fn docker_stream_close;
sg_stream_open_status_fn docker_stream_open_status;
sg_stream_read_ch_fn docker_stream_read_ch;

/* ---- files.c ----------------------------------------------------------------- */

sg_file_read_fn docker_file_read;
sg_file_write_fn docker_file_write;
sg_file_list_fn docker_file_list;
sg_file_stat_fn docker_file_stat;
sg_file_remove_fn docker_file_remove;

#endif /* SG_DOCKER_DOCKER_H */
