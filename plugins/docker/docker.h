/*
 * docker.so internals shared between its files: the plugin context, the
 * per-machine handle, and the slot functions each file implements.
 *
 *   docker.c   descriptor, init/fini, configuration, templates
 *   engine.c   HTTP to the Engine API (see engine.h); engine_endpoint.c
 *              where the engine is: host parsing, TLS files, the ssh relay
 *   machine.c  create, attach, destroy, release, list
 *   exec.c     one-shot commands: process groups, timeouts, cancellation
 *   stream.c   interactive streams (attached exec with stdin open)
 *   files.c    reads and writes: the runner, else the archive API and small
 *              exec scripts; files_meta.c list, stat, remove (runner/scripts)
 *   demux.c    the 8-byte-header stream parser (see demux.h)
 *   tar.c      libarchive in memory (see tar.h)
 *   runner.c   the in-sandbox runner: upload and start (its life, commands
 *              and streams through it: plugins/runner/rclient.h)
 *   code.c     run_code on the runner's kernels
 *
 * Named machines (docker_run, sandbox_env machine_create) and the actions:
 *   settings.c [docker] and [storage] keys of named machines; scopes, names
 *   options.c  docker_run's parameters (= machine_create's options)
 *   mounts.c   host directories beneath work_home, the bind mounts
 *   workhome.c work_home on the engine's host, through helper containers
 *   network.c  the shared network: made on first use, gone with the last
 *   named.c    create or re-adopt a named container; the post-start check
 *   actions.c  the action table and what the handlers share
 *   run.c      docker_run (idempotent) and docker_ps (with adoption)
 *   lifecycle.c docker_stop, docker_start, docker_restart, docker_remove
 *   inspect.c  docker_inspect, docker_diff, docker_stats
 *   logs.c     docker_logs
 *   images.c   docker_images, docker_image_history, docker_commit
 *   build.c    docker_build (context from the workspace, streamed output)
 */
#ifndef SG_DOCKER_DOCKER_H
#define SG_DOCKER_DOCKER_H

#include <pthread.h>
#include <sys/stat.h>
#include <stdbool.h>
#include <stddef.h>

#include <sandgate/plugin.h>

#include "plugins/docker/engine.h"
#include "plugins/runner/binary.h"
#include "plugins/runner/client.h"
#include "plugins/runner/rclient.h"
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
/* ... and on named machines. */
#define DOCKER_LABEL_CREDENTIAL "org.sandgate.credential" /* call_credential() */
#define DOCKER_LABEL_SCOPE      "org.sandgate.scope"      /* "" or the credential: the layout */
#define DOCKER_LABEL_PURPOSE    "org.sandgate.purpose"
#define DOCKER_LABEL_SHELL      "org.sandgate.shell"
#define DOCKER_LABEL_NETWORK    "org.sandgate.network"
#define DOCKER_LABEL_POOL       "org.sandgate.pool"      /* the owner tag of the pool's sandgate */
#define DOCKER_LABEL_WORK_HOME  "org.sandgate.work_home" /* [storage] work_home it was made under */

#define DOCKER_LABEL_CHAN       "org.sandgate.runner_chan" /* its channel's name (channel.c) */

#define DOCKER_WORKSPACE "/workspace"

#define DOCKER_CHAN_NAME_LEN 32              /* hex digits of a channel's name */
#define DOCKER_CHAN_DIR      "/run/sandgate" /* where a container sees its channel */
#define DOCKER_CHAN_PATH     DOCKER_CHAN_DIR "/runner.sock"
#define DOCKER_CHAN_TOKEN_BYTES 32           /* a runner's one-time token, before hex */

/* Buffers: a container id or name (64 hex digits, or a name), a path in a
 * container. */
#define DOCKER_ID_MAX   128
#define DOCKER_PATH_MAX 1024

/* What contains a container (limits.c): 0 is no limit. */
struct docker_limits {
	long long pids;          /* HostConfig.PidsLimit */
	long long memory;        /* bytes, memory and swap together */
	long long nano_cpus;     /* 1e9 is one CPU */
	bool no_new_privs;       /* SecurityOpt no-new-privileges */
	char cap_drop[512];      /* "NET_RAW,MKNOD", the engine's spelling */
	char cap_add[512];
};

/* The queue of kills that keep no caller waiting (killer.c). */
struct docker_killer {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct docker_kill *head;        /* owned, FIFO */
	struct docker_kill **tail;
	unsigned queued;
	bool started, stop;
	long long stop_deadline;         /* docker_now_ms() clock, set by the stop */
	pthread_t thread;
};

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

	/* Named machines (settings.c), read at init. */
	const char *prefix;              /* [docker] container_name_prefix */
	const char *admin_machine;       /* [docker] admin_machine, "" none */
	const char *auto_network;        /* [docker] auto_network, "" none */
	const char *default_image;       /* [docker] default_image, "" unset */
	const char *restart_name;        /* [docker] restart_policy_name */
	unsigned restart_max;            /* [docker] restart_max_retry_count */
	char *work_home;                 /* absolute (owned), or NULL: work_home_why */
	char work_home_why[512];
	const char *share_subdir;        /* [storage] share_subdir, "" none */
	unsigned build_timeout_s;        /* [docker] build_timeout */
	size_t build_context_max;        /* [docker] build_context_max */
	struct docker_limits limits;     /* [docker] pids_limit, memory_mb, ... (limits.c) */
	pthread_mutex_t net_lock;        /* one network change at a time (network.c) */
	pthread_mutex_t wh_lock;         /* guards wh_remote (workhome.c) */
	int wh_remote;                   /* work_home through the engine: 1, on this
					    filesystem: 0, not decided yet: -1 */

	pthread_mutex_t chan_lock;       /* guards the chan_* fields (channel.c) */
	bool chan_decided;
	bool chan_on;                    /* new sandboxes get a channel */
	bool chan_worked;                /* a runner has come on one */
	char chan_root[DOCKER_PATH_MAX]; /* the runner channels' root, "" none;
					    written once, under chan_lock */

	struct docker_pool *pool;        /* the warm pool (pool.c), owned; NULL: none */
	struct docker_killer killer;     /* kills after a timeout (killer.c) */

	/* The runner binary on this host, read once (runner.c). */
	pthread_mutex_t bin_lock;        /* guards the bin* fields */
	bool bin_tried;
	struct rn_binary bin;            /* owned, freed by docker_runner_teardown() */
	char bin_why[256];               /* why there is none */
};

/* Temporary files of failed writes a machine remembers for later removal. */
#define DOCKER_STALE_MAX 8

/* m->handle: allocated by create()/attach(), freed by machine_release(). */
struct docker_machine {
	struct docker_ctx *ctx;         /* borrowed from init() */
	char cid[DOCKER_ID_MAX];        /* the container's id */
	struct rnc_site site;           /* its runner (plugins/runner/rclient.h) */
	/* Written by runner.c's start, under the site's lock: */
	char reid[80];                  /* exec id of the current runner */
	char rnote[200];                /* its last stderr line (the engine's
					   "exec format error" comes that way) */
	struct rnc_kstate code;         /* its kernels' runners (code.c) */
	char shell[128];                /* the shell that replaces /bin/sh, "" none */
	char chan[DOCKER_CHAN_NAME_LEN + 1]; /* its runner channel (channel.c), "" none */
	bool chan_fresh;                /* made by this process, its runner not
					   started yet: no sandbox code has run */
	bool persistent;                /* a named machine: stopped is not gone */
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
/* 0 when ref (repo[:tag]) may be written by docker_commit or docker_build;
 * -1 with SG_E_PERM naming why when it is an image sandgate starts
 * containers from: a template's (template.*), [docker] default_image, or
 * anything in sandgate/ (the base image's repository).  "repo" means
 * "repo:latest", as to the engine. */
int docker_tag_reserved(struct docker_ctx *ctx, const char *ref, struct sg_err *err);

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
	const char *sh;           /* replaces /bin/sh (the machine's shell), or NULL */
	bool persistent;          /* a stopped container is SG_E_UNAVAILABLE, not gone */
	bool keep_stopped;        /* a stopped sandbox is not started again for
				     this exec (a kill has nothing to do there) */
};

/* Fills r->sh and r->persistent from machine m (its handle). */
void docker_run_for(const struct sg_machine *m, struct docker_run *r);

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
 * into eid.  A sandbox's stopped container (an engine restart stops them
 * all) is started again first.  SG_E_GONE when the container is gone or does
 * not start; a stopped named machine (r->persistent) is SG_E_UNAVAILABLE. */
int docker_exec_create(struct docker_ctx *ctx, const char *cid,
		       const struct docker_run *r, char *eid, size_t size,
		       struct sg_err *err);
/* Waits briefly until exec inspect stops saying Running.  Returns the exit
 * code, or -1 when it is unknown. */
int docker_exec_wait(struct docker_ctx *ctx, const char *eid);
/* Kills process group pgid (> 1) in container cid with a second exec, in
 * shell sh (NULL: /bin/sh). */
void docker_kill_group(struct docker_ctx *ctx, const char *cid, long pgid, const char *sh);

/* ---- killer.c ---------------------------------------------------------------- */

/* Prepares ctx->killer (docker_init); its thread starts on first use. */
void docker_killer_init(struct docker_killer *k);
/* docker_kill_group() done by ctx's killer thread with a deadline of its
 * own (DOCKER_KILL_TIMEOUT_MS, not the calling command's), so the caller
 * need not wait for it; cid and sh are copied.  Done at once on this
 * thread, as before, when it cannot be queued (no memory or thread, 64
 * queued, the stop begun).  pgid <= 1: nothing. */
void docker_kill_group_later(struct docker_ctx *ctx, const char *cid, long pgid, const char *sh);
/* Does what is queued (within 10 s in all), ends the thread and frees the
 * queue's lock (docker_fini, before the engine goes). */
void docker_killer_stop(struct docker_ctx *ctx);

/* Runs r in machine m: through the runner when it works there, else with
 * docker_run().  Same contract as docker_run(). */
int docker_run_machine(struct docker_ctx *ctx, const struct sg_machine *m,
		       const struct docker_run *r, const char *command,
		       struct sg_call *call, struct sg_exec_result *res,
		       struct sg_err *err);

/* ---- runner.c ---------------------------------------------------------------- */

/* Reads the configuration ([docker] runner, runner_path) into ctx. */
/* ---- the runner's direct channel (channel.c) ---- */

/* The channel of a container, from its inspect answer (or a
 * /containers/json entry): the label's name, but only when the container
 * binds exactly that directory of our root, read-only, at DOCKER_CHAN_DIR
 * (an image's LABEL shows in the labels too).  name[size] receives it.
 * Returns 1, or 0 with name "" (none, or not ours). */
int docker_chan_of(struct docker_ctx *ctx, const json_t *info, char *name, size_t size);
/* Whether name is a channel's name (DOCKER_CHAN_NAME_LEN hex digits): a
 * label is checked before it names a directory. */
bool docker_chan_name_ok(const char *name);
/* Makes a channel directory for a new container and adds its read-only
 * bind and label to the create body.  Whether sandboxes get one is decided
 * once per process, at the first call ([docker] runner_channel; auto: the
 * engine is on this host and sees our state directory).  Thread-safe.
 * name[size] receives its name, "" when there is none (off, a container
 * that could remount it, or the directory could not be made: the container is
 * made without, its runner speaks through the engine).  Returns 0, or -1
 * when the body could not be changed (out of memory). */
int docker_chan_add(struct docker_ctx *ctx, json_t *body, char *name, size_t size);
/* Removes the channel directory of name (a container's label); any name
 * that is not a channel's is ignored.  Never fails: a leftover is logged. */
void docker_chan_remove(struct docker_ctx *ctx, const char *name);
/* Listens on name's socket, replacing the last runner's.  Returns the
 * listening fd (non-blocking, CLOEXEC; the caller closes it through
 * docker_chan_unlisten), or -1 (logged): no channel this time. */
int docker_chan_listen(struct docker_ctx *ctx, const char *name);
/* Closes fd (when >= 0) and removes name's socket: nothing more connects. */
void docker_chan_unlisten(struct docker_ctx *ctx, const char *name, int fd);
/* Waits on lfd (docker_chan_listen) for the runner's connection: the first
 * to send token (hex) and a newline, until end_ms (docker_now_ms() clock).
 * When xfd (the runner's exec stream) can be read, xready(ud) is asked:
 * 0 (it took a note the runner wrote on stderr: keep waiting) or 1 (its
 * stdout speaks or it ended: the runner could not dial and is on stdio, or
 * it died).  Returns the connection (blocking, CLOEXEC, owned by the
 * caller; the runner's HELLO follows on it), or -1: xready said 1, or none
 * came in time. */
int docker_chan_accept(int lfd, int xfd, const char *token, long long end_ms,
		       int (*xready)(void *ud), void *ud);
/* What a runner started with --dial did: reached its socket or not (it
 * spoke on the exec stream).  The caller reports a failure only for the
 * first runner of a container this process made (chan_fresh: no sandbox
 * code has run there to fake one).  The first such failure turns the
 * channel off for new sandboxes (the engine's files are not ours after
 * all); after a runner has reached its socket, nothing changes. */
void docker_chan_result(struct docker_ctx *ctx, bool reached, const char *cid);

void docker_runner_setup(struct docker_ctx *ctx);
void docker_runner_teardown(struct docker_ctx *ctx);
/* The runner site of a new handle for container cid; fini ends its runner. */
void docker_runner_machine_init(struct docker_machine *dm, const char *cid);
void docker_runner_machine_fini(struct docker_machine *dm);

/* How many times m's runner was started again (kernels die with it). */
unsigned docker_runner_generation(const struct sg_machine *m);

/* The runner state of m as JSON (sandbox_env status); caller's reference. */
json_t *docker_runner_status(struct sg_machine *m);
sg_action_fn docker_action_runner;

/* Runs a one-shot command through m's runner.  Returns 0 when it ran (as
 * docker_run), -1 with err, or 1 when the runner is not available (or the
 * request does not fit in a frame): then the caller uses docker_run(). */
int docker_runner_exec(struct docker_ctx *ctx, const struct sg_machine *m,
		       const struct docker_run *r, const char *command,
		       struct sg_call *call, struct sg_exec_result *res,
		       struct sg_err *err);

/* m's runner site for the file slots (rnc_file_*: 1 sends them the archive
 * way), or NULL when [docker] runner = false.  Borrowed from m's handle. */
struct rnc_site *docker_runner_site(const struct sg_machine *m);

/* ---- pool.c ------------------------------------------------------------------ */

/* Reads [docker] pool and pool.<template> and, in a server process
 * (host->server), starts the thread that removes the pools of sandgates
 * that are gone and keeps this one's filled.  0, or -1 with err (out of
 * memory, no thread). */
int docker_pool_start(struct docker_ctx *ctx, struct sg_err *err);
/* Stops the thread and removes every container still in the pool. */
void docker_pool_stop(struct docker_ctx *ctx);
/* Gives m a pooled container of template tmpl: 0 when it did (m filled,
 * its handle set, the runner already running), 1 when the pool had none
 * ready (the caller creates one). */
int docker_pool_take(struct docker_ctx *ctx, const char *tmpl, struct sg_call *call,
		     struct sg_machine *m, struct sg_err *err);
/* The pool for status: in a server {templates: {name: size}, ready, hits,
 * misses}; elsewhere (sandgate status) {templates: the configured sizes,
 * members_on_engine: pool members now, of any sandgate, -1 unknown}.  A
 * new object, or NULL (out of memory). */
json_t *docker_pool_facts(struct docker_ctx *ctx);

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

/* Sets m's strings (id, workspace, template, url) from an inspect answer. */
int docker_machine_fill(struct docker_ctx *ctx, struct sg_machine *m, const json_t *info,
			struct sg_err *err);
/* A new handle for container cid (its shell and kind from the labels of
 * inspect answer info), or NULL (out of memory); docker_machine_free()
 * frees it, ending its runner. */
struct docker_machine *docker_machine_new(struct docker_ctx *ctx, const char *cid,
					  const json_t *info);
void docker_machine_free(struct docker_machine *dm);
/* Gives the core create_sandbox's facts of m (its limits, from info). */
void docker_machine_report(struct docker_ctx *ctx, struct sg_machine *m, const json_t *info);
/* The POST /containers/create body of a sandbox of template tmpl (image),
 * labelled from req; a new reference, or NULL (not UTF-8, out of memory). */
json_t *docker_create_body(struct docker_ctx *ctx, const struct sg_create_req *req,
			   const char *tmpl, const char *image);
/* Makes m's handle; its shell and kind come from the container's labels. */
int docker_machine_handle(struct docker_ctx *ctx, struct sg_machine *m, const json_t *info,
			  struct sg_err *err);
/* Whether container id (borrowed) runs, from its inspect's State.Running,
 * into *running.  Returns 0, or -1 with err: SG_E_NOTFOUND when docker has
 * no such container, else the engine's error. */
int docker_container_running(struct docker_ctx *ctx, const char *id, bool *running,
			     struct sg_err *err);
/* POST /containers/{id}/start (304 is success), no checks.  0 or -1. */
int docker_container_start_raw(struct docker_ctx *ctx, const char *id, struct sg_err *err);
/* DELETE /containers/{id}?force=1&v=1 (gone is success).  0 or -1. */
int docker_container_remove(struct docker_ctx *ctx, const char *id, struct sg_err *err);

sg_machine_create_fn docker_machine_create;
sg_machine_attach_fn docker_machine_attach;
sg_machine_destroy_fn docker_machine_destroy;
sg_machine_release_fn docker_machine_release;
sg_machine_list_fn docker_machine_list;
/* GET /containers/json?filters=FILTERS (the Engine API's JSON filter map,
 * e.g. {"label":["k=v"]}), stopped containers too when all.  Returns the
 * engine's array (the caller decrefs it), or NULL with err (may be NULL:
 * not said) set: SG_E_NOMEM, the engine's transport errors, SG_E_BACKEND
 * for an answer that is not 200 and an array. */
json_t *docker_containers(struct docker_ctx *ctx, const char *filters, bool all,
			  struct sg_err *err);
sg_probe_fn docker_probe;

/* ---- stream.c ---------------------------------------------------------------- */

sg_stream_open_fn docker_stream_open;
sg_stream_write_fn docker_stream_write;
sg_stream_read_fn docker_stream_read;
sg_stream_close_fn docker_stream_close;
sg_stream_open_status_fn docker_stream_open_status;
sg_stream_read_ch_fn docker_stream_read_ch;

/* ---- files.c, files_meta.c ---------------------------------------------------- */

sg_file_read_fn docker_file_read;
sg_file_read_at_fn docker_file_read_at;
sg_file_write_fn docker_file_write;
sg_file_list_fn docker_file_list;
sg_file_stat_fn docker_file_stat;
sg_file_remove_fn docker_file_remove;

/* ---- settings.c: named machines ------------------------------------------------ */

/* Reads [docker] and [storage] keys of named machines into ctx (init).
 * Returns 0, or -1 with err when out of memory. */
int docker_settings_load(struct docker_ctx *ctx, struct sg_err *err);
void docker_settings_free(struct docker_ctx *ctx);

/* Where a caller's named machines live. */
struct docker_scope {
	char cred[17];      /* host->call_credential(call), "" without one */
	char key[17];       /* "" (one plain layout), or cred when the server serves
			       several credentials: work_home/<key>/ and the network */
	char network[192];  /* the network's name, "" when [docker] auto_network is "" */
};

void docker_scope_of(struct docker_ctx *ctx, struct sg_call *call, struct docker_scope *sc);
/* The scope a container was made in, from its labels. */
void docker_scope_labels(struct docker_ctx *ctx, const json_t *labels, struct docker_scope *sc);

/* prefix + name into out.  Returns 0, or -1 (SG_E_INVAL) when too long. */
int docker_container_name(struct docker_ctx *ctx, const char *name, char *out, size_t size,
			  struct sg_err *err);
/* True when name is [docker] admin_machine. */
bool docker_is_admin(struct docker_ctx *ctx, const char *name);

/* ---- limits.c ------------------------------------------------------------------- */

/* Reads [docker] pids_limit, memory_mb, cpus, no_new_privileges, cap_drop,
 * cap_add into ctx->limits and checks every template.<name>.<key> override.
 * Returns 0, or -1 with err (SG_E_INVAL) naming the key and what it takes. */
int docker_limits_load(struct docker_ctx *ctx, struct sg_err *err);
/* The limits of a container of template tmpl (NULL or "": the defaults)
 * into out: ctx->limits with the template's overrides. */
void docker_limits_for(struct docker_ctx *ctx, const char *tmpl, struct docker_limits *out);
/* Adds to l's cap_drop, and takes out of its cap_add, what would let the
 * admin machine's root rename the names in /host (DAC_OVERRIDE, FOWNER,
 * CHOWN, and SETUID, SETGID: becoming their owner): see docker_guard_dirs
 * in mounts.c. */
void docker_admin_caps(struct docker_limits *l);
/* Sets l's fields in a create body's HostConfig hc.  0, or -1 (no memory). */
int docker_limits_apply(const struct docker_limits *l, json_t *hc);
/* What create_sandbox reports of a container (inspect answer): isolation,
 * pids_limit, memory_bytes, cpus, no_new_privileges, cap_drop, cap_add as
 * the engine holds them.  A new object, NULL when out of memory. */
json_t *docker_limits_facts(const json_t *info);

/* ---- options.c ------------------------------------------------------------------- */

/* docker_run's parameters, which sandbox_env machine_create passes as
 * create options.  Strings borrowed from the JSON they came from. */
struct docker_opts {
	const char *image;     /* NULL: the template's, [docker] default_image, base */
	const char *purpose;   /* NULL */
	const char *workdir;   /* NULL: /workspace */
	const char *shell;     /* NULL: /bin/sh and bash */
	json_t *env;           /* new array of "K=V", or NULL */
	json_t *cmd;           /* new array (Cmd), or NULL: the image's own */
	json_t *exposed;       /* new object (ExposedPorts), or NULL */
	json_t *bindings;      /* new object (HostConfig.PortBindings), or NULL */
};

/* Parses and checks o (may be NULL); `what` names the caller in messages
 * ("docker_run", "machine_create").  Unknown names are refused by name, and
 * anything that would mount a host path (volumes, binds, mounts, ...) with
 * the reason.  Returns 0, or -1 with err (SG_E_INVAL). */
int docker_opts_parse(struct docker_ctx *ctx, const json_t *o, const char *what,
		      struct docker_opts *out, struct sg_err *err);
void docker_opts_free(struct docker_opts *o);

/* ---- mounts.c -------------------------------------------------------------------- */

/* Makes the host directories of named machine `name` in scope sc beneath
 * work_home (every component created and opened without following a link)
 * and sets *mounts to a new HostConfig.Mounts array: work_home/<scope>/<name>
 * at /workspace; the share root read-only at /share with its <name> read-
 * write (unless share_subdir is ""); for the admin machine the scope's root
 * at /host instead of the share.  Returns 0 or -1 with err. */
int docker_mounts_make(struct docker_ctx *ctx, const struct docker_scope *sc, const char *name,
		       json_t **mounts, struct sg_err *err);
/* Checks before a start that every bind source of the container (inspect
 * answer) is still a directory beneath work_home reached without a link.
 * Returns 0 or -1 with err (SG_E_PERM). */
int docker_mounts_verify(struct docker_ctx *ctx, const json_t *info, struct sg_err *err);
/* The host share directory of machine `name` in scope sc into out; 0, or
 * -1 when there is none (no share, no work_home). */
int docker_share_dir(struct docker_ctx *ctx, const struct docker_scope *sc, const char *name,
		     char *out, size_t size);
/* Removes the tree at work_home-relative `rel` (never following a link).
 * Returns 0, or -1 with err naming what stayed. */
int docker_tree_remove(struct docker_ctx *ctx, const char *rel, struct sg_err *err);
/* Opens the directory work_home/<rel> (O_PATH, no link followed anywhere
 * beneath work_home).  Returns the fd, or -1 with err (SG_E_NOTFOUND,
 * SG_E_PERM for a link). */
int docker_dir_open(struct docker_ctx *ctx, const char *rel, struct sg_err *err);
/* The work_home-relative directory of machine `name`'s workspace. */
void docker_workspace_rel(const struct docker_scope *sc, const char *name, char *out, size_t size);

/* mkdir -p of work_home on this filesystem and a look that it is a
 * directory.  Returns 0 or -1 with err. */
int docker_wh_local_root(struct docker_ctx *ctx, struct sg_err *err);

/* ---- workhome.c: work_home on the engine's host -------------------------------- */

/* Whether work_home is reached through the engine (1: the engine does not
 * see sandgate's view of it) or on this filesystem (0).  Decided at the
 * first call (one helper container looks for a marker file) and kept.  -1 with err when the engine cannot be asked. */
int docker_wh_remote(struct docker_ctx *ctx, struct sg_err *err);
/* Whether a unix:// engine on this kernel sees dir (absolute) as we do: the
 * daemon's pid from the socket's peer credentials, then dir in its root
 * (/proc/PID/root) against ours, by device and inode.  False when it cannot
 * tell: another user's daemon we may not look into, a forwarded socket,
 * tcp:// or ssh://.  One connect to the engine's socket; no request. */
bool docker_engine_sees_dir(struct docker_ctx *ctx, const char *dir);
/* Through a helper container: walks each work_home-relative path of rels[n]
 * one component at a time, creating missing ones when `create`; a link,
 * "." or ".." is refused (SG_E_PERM), a missing one is SG_E_NOTFOUND.
 * Returns 0 or -1 with err. */
int docker_wh_dirs(struct docker_ctx *ctx, const char *const *rels, size_t n, bool create,
		   struct sg_err *err);
/* Through a helper container: removes the tree at work_home-relative rel
 * (its parents reached without a link).  Nothing there is success.
 * Returns 0 or -1 with err. */
int docker_wh_remove(struct docker_ctx *ctx, const char *rel, struct sg_err *err);

/* ---- network.c ------------------------------------------------------------------- */

/* Makes network `net` unless it exists.  Returns 0 or -1 with err. */
int docker_network_ensure(struct docker_ctx *ctx, const char *net, struct sg_err *err);
/* Removes network `net` when sandgate made it and no container (running or
 * not, labelled for it or attached) uses it any more.  Never fails. */
void docker_network_release(struct docker_ctx *ctx, const char *net);

/* ---- named.c --------------------------------------------------------------------- */

/* machine_create of a named persistent machine: re-adopts the container of
 * that name when it is the caller's (started if stopped), else makes it
 * from req->options.  See docker_machine_create. */
int docker_named_create(struct docker_ctx *ctx, const struct sg_create_req *req,
			struct sg_call *call, struct sg_machine *m, struct sg_err *err);
/* GET /containers/{id}/json; *info the caller's.  SG_E_NOTFOUND on 404. */
int docker_container_inspect(struct docker_ctx *ctx, const char *id, json_t **info,
			     struct sg_err *err);
/* POST /containers/{id}/start after docker_mounts_verify.  0 or -1. */
int docker_container_start(struct docker_ctx *ctx, const char *id, struct sg_err *err);
/* True when a container (inspect answer) is the named machine `name` of
 * credential cred made under this sandgate's work_home (labels): another
 * deployment on the same engine, even of the same user, keeps its own. */
bool docker_container_is(struct docker_ctx *ctx, const json_t *info, const char *name,
			 const char *cred);
/* The state of container id shortly after a start: {status, running} and,
 * when it is not running, exit_code, error and its last log lines.  New
 * object, or NULL when it cannot be inspected. */
json_t *docker_after_start(struct docker_ctx *ctx, const char *id);

/* ---- logs.c ---------------------------------------------------------------------- */

/* The last `lines` lines of container id's output (stdout and stderr in
 * order) into out, at most `cap` bytes (the end kept).  0 or -1. */
int docker_logs_tail(struct docker_ctx *ctx, const char *id, unsigned lines, size_t cap,
		     struct sg_buf *out, struct sg_err *err);
sg_action_fn docker_act_logs;

/* ---- context.c ------------------------------------------------------------------- */

/* Opens name in dfd for reading, only when it is a regular file (a link is
 * not followed) and, when `was` is not NULL, the same one (device and
 * inode) an fstatat saw: a FIFO planted or swapped in by the machine would
 * block the open, then the read, for good.  Returns the fd (blocking) or
 * -1: errno from openat, EINVAL for not a regular file, ESTALE for another
 * file than `was`. */
int docker_open_regular(int dfd, const char *name, const struct stat *was);

/* Packs directory dirfd (a build context beneath a machine's workspace,
 * walked without following a link; links go in as links) and the bytes
 * df[0..df_len) as entry df_name into a tar appended to *out, at most max
 * bytes (SG_E_TOOBIG).  What cannot be read fails with its path (SG_E_IO).
 * Returns 0 or -1 with err. */
int docker_context_pack(struct docker_ctx *ctx, int dirfd, const char *df_name, const void *df,
			size_t df_len, size_t max, struct sg_buf *out, struct sg_err *err);

/* The same from the engine, when work_home is only on its host: the tar of
 * directory dir (an absolute path in container id, borrowed) through GET
 * .../archive, its entries moved to the context's root, and df as df_name.
 * Errors: SG_E_NOTFOUND (no such directory), SG_E_INVAL (not a directory),
 * SG_E_TOOBIG (past max), SG_E_BACKEND, an engine error. */
int docker_context_fetch(struct docker_ctx *ctx, const char *id, const char *dir, const char *df_name,
			 const void *df, size_t df_len, size_t max, struct sg_buf *out,
			 struct sg_err *err);

/* ---- actions ---------------------------------------------------------------------- */

#define DOCKER_N_ACTIONS 15
extern const struct sg_action docker_actions[DOCKER_N_ACTIONS];
extern const char docker_help_text[];
/* The descriptor (docker.c), for host->machine_create. */
extern const struct sg_backend sg_backend;

/* A named machine of the caller by name, id or id prefix (12+), from the
 * record (host->call_machines): a new object {name, id, ...} or NULL with
 * err (SG_E_NOTFOUND). */
json_t *docker_find_machine(struct docker_ctx *ctx, struct sg_call *call, const char *key,
			    struct sg_err *err);
/* A JSON string of p[0..n) with every byte that is not valid UTF-8 (and
 * NUL) replaced by U+FFFD.  New reference, NULL when out of memory. */
json_t *docker_json_text(const char *p, size_t n);
/* Appends `more` to the note of result r ("; " between). */
void docker_note(json_t *r, const char *more);
/* An ISO 8601 UTC time of unix seconds t into out. */
void docker_iso_time(long long t, char *out, size_t size);

sg_action_fn docker_act_run, docker_act_ps;
sg_action_fn docker_act_stop, docker_act_start, docker_act_restart, docker_act_remove;
sg_action_fn docker_act_inspect, docker_act_diff, docker_act_stats;
sg_action_fn docker_act_images, docker_act_history, docker_act_commit;
sg_action_fn docker_act_build;

#endif /* SG_DOCKER_DOCKER_H */
