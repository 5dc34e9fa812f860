/*
 * sandgate backend plugin ABI.
 *
 * A backend is a shared object (docker.so, ssh.so, fc.so) that exports exactly
 * one data symbol, `sg_backend`, of type `const struct sg_backend`.  The core
 * dlopen()s the file, reads that descriptor and checks its header (magic, ABI
 * major and minor, size, name, required slots) before it calls any plugin code.
 *
 * Rules (doc/plugin-abi.md keeps the dated change list):
 *  - Append only.  A new slot goes at the end of its struct and bumps
 *    SG_PLUGIN_ABI_MINOR; removing or changing anything bumps SG_PLUGIN_ABI_MAJOR.
 *  - The core accepts a plugin whose major equals its own and whose minor is
 *    not newer than its own.  Slots past the 1.0 layout are read only through
 *    SG_HAS(), which checks the plugin's `size`.
 *  - A plugin never links against the daemon: everything it needs from the core
 *    comes through `struct sg_host_api`, handed to init().
 *  - Every slot may be called from several threads at once; a plugin guards its
 *    own shared state.  Calls on one machine may also overlap.
 *
 * Error convention (one for the whole project): functions return 0 (or a count)
 * on success and -1 on failure, and then have filled the caller-owned
 * `struct sg_err` through host->errf().  A NULL err is allowed.
 *
 * Memory: JSON values given to a plugin are borrowed for the call.  Buffers
 * (struct sg_buf) are initialised and freed by the core and grown by the plugin
 * with host->buf_append().  JSON values a plugin returns (json_t **out) become
 * the caller's reference.  `struct sg_machine` is allocated by the core; the
 * plugin owns only `machine->handle`, which it frees in machine_release().
 *
 * This header is self-contained and never includes config.h.
 */
#ifndef SG_SANDGATE_PLUGIN_H
#define SG_SANDGATE_PLUGIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SG_PLUGIN_MAGIC     0x53475042u /* "SGPB" */
#define SG_PLUGIN_ABI_MAJOR 1u          /* bump on any removal or change */
#define SG_PLUGIN_ABI_MINOR 2u          /* bump on append */

#define SG_MACHINE_MAGIC 0x53474d41u /* "SGMA" */

#define SG_EXPORT __attribute__((visibility("default")))

#if defined(__GNUC__)
#define SG_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define SG_PRINTF(f, a)
#endif

/* ---- errors ------------------------------------------------------------ */

/* One error code set for core and plugins.  The text in sg_err.msg is what a
 * user reads: it says what failed, on what, and how to fix it. */
enum sg_errc {
	SG_E_OK = 0,
	SG_E_INVAL,       /* bad argument: the message names the field */
	SG_E_NOMEM,
	SG_E_NOTSUP,      /* the backend has no such operation */
	SG_E_NOTFOUND,    /* no such machine, file, image or action */
	SG_E_TIMEOUT,
	SG_E_IO,          /* local or remote I/O failure */
	SG_E_BACKEND,     /* the backend refused or failed (HTTP status, exit code) */
	SG_E_PROTO,       /* the backend spoke garbage */
	SG_E_PERM,        /* permission denied */
	SG_E_CANCELLED,   /* the MCP client cancelled the call */
	SG_E_TOOBIG,      /* a size cap was hit */
	SG_E_BUSY,
	SG_E_EXISTS,
	SG_E_UNAVAILABLE, /* the backend service is down or unreachable */
	SG_E_GONE,        /* the machine expired or was killed outside sandgate */
	SG_E_INTERNAL
};

#define SG_ERR_MSG_MAX 512

/* Caller-owned, never allocates. */
struct sg_err {
	int code;      /* enum sg_errc */
	int sys_errno; /* errno behind the failure, or 0 */
	char msg[SG_ERR_MSG_MAX];
};

/* MCP logging levels (MCP 2025-11-25, server/utilities/logging), most verbose first. */
enum sg_log_level {
	SG_LOG_DEBUG = 0,
	SG_LOG_INFO,
	SG_LOG_NOTICE,
	SG_LOG_WARNING,
	SG_LOG_ERROR,
	SG_LOG_CRITICAL,
	SG_LOG_ALERT,
	SG_LOG_EMERGENCY
};

/* A growable byte buffer.  The core initialises it ({0}) and frees it with
 * host->buf_release(); a plugin appends with host->buf_append().  `data` is
 * always NUL-terminated after an append (the NUL is not counted in len). */
struct sg_buf {
	char *data;
	size_t len;
	size_t cap;
};

/* The context of one MCP call that reached a plugin: cancellation and
 * notifications.  Opaque, owned by the core, valid until the slot returns.
 * May be NULL (internal calls such as the reaper). */
struct sg_call;

/* ---- host API: what the core offers a plugin ---------------------------- */

struct sg_host_api {
	uint32_t size;  /* sizeof(struct sg_host_api) as the core built it */
	uint32_t minor; /* SG_PLUGIN_ABI_MINOR of the core */

	/* Log a line to sandgate's log (stderr or file), tagged "[plugin]".
	 * Never pass secrets or whole command output. */
	void (*log)(enum sg_log_level level, const char *plugin,
		    const char *fmt, ...) SG_PRINTF(3, 4);

	/* Fill err (may be NULL) with code and a printf message; keeps errno.
	 * Returns -1 always, so `return host->errf(err, ...)` reads well. */
	int (*errf)(struct sg_err *err, int code, const char *fmt, ...)
		SG_PRINTF(3, 4);

	/* Look up a configuration value, "section" and "key" as in the INI file
	 * (section "docker", key "host"), after CLI, environment and file
	 * precedence.  Returns a borrowed string valid for the life of the
	 * process, or NULL when unset and without default. */
	const char *(*config_get)(const char *section, const char *key);

	/* Calls fn(key, value, ud) for each key of `section` that starts with
	 * `prefix` (e.g. section "docker", prefix "template."), in file order. */
	void (*config_each)(const char *section, const char *prefix,
			    void (*fn)(const char *key, const char *value, void *ud),
			    void *ud);

	/* Append n bytes to b.  Returns 0, or -1 when the allocation fails. */
	int (*buf_append)(struct sg_buf *b, const void *p, size_t n);
	void (*buf_release)(struct sg_buf *b);

	/* True once the MCP client cancelled this call (notifications/cancelled)
	 * or the session ended.  False for a NULL call. */
	bool (*cancelled)(const struct sg_call *call);

	/* A file descriptor that becomes readable when the call is cancelled, to
	 * put in a poll() set next to backend sockets; -1 for a NULL call.
	 * Borrowed: never read from or close it, and use it only while the
	 * call runs (the core reuses the descriptor for later calls). */
	int (*cancel_fd)(const struct sg_call *call);

	/* Send notifications/progress for this call when the client asked for
	 * it (a progressToken); otherwise nothing.  `progress` must grow from
	 * call to call; `total` <= 0 means unknown; message may be NULL. */
	void (*progress)(struct sg_call *call, double progress, double total,
			 const char *message);

	/* Send notifications/message to the client of this call, at `level`,
	 * when the client's logging/setLevel lets it through. */
	void (*notify)(struct sg_call *call, enum sg_log_level level,
		       const char *fmt, ...) SG_PRINTF(3, 4);

	/* sandgate's per-user state directory (created, mode 0700), for plugin
	 * state such as SSH known-hosts caches.  Borrowed, process lifetime. */
	const char *(*state_dir)(void);
};

/* ---- machines ------------------------------------------------------------ */

#define SG_ID_MAX   128
#define SG_PATH_MAX 1024
#define SG_URL_MAX  512

/* A machine (sandbox) as the core holds it.  Allocated and freed by the core;
 * create() and attach() fill id, workspace, url and handle. */
struct sg_machine {
	uint32_t magic;                   /* SG_MACHINE_MAGIC, set by the core */
	const struct sg_backend *backend; /* set by the core */
	void *backend_priv;               /* the plugin's init() priv, set by the core */
	char id[SG_ID_MAX];               /* backend id: container id, dir, E2B sandboxID */
	char workspace[SG_PATH_MAX];      /* default cwd and list path */
	char url[SG_URL_MAX];             /* backend address of the machine, or "" */
	char template_name[SG_ID_MAX];    /* what it was made from: image, target, template */
	void *handle;                     /* plugin-owned; freed by machine_release() */
};

/* What create() is asked to make.  All pointers borrowed for the call. */
struct sg_create_req {
	const char *template_name;  /* NULL: the backend's configured default */
	unsigned lifetime_s;        /* idle lifetime; backends label or set it */
	const char *const *env;     /* "KEY=VALUE" strings, NULL-terminated, or NULL */
	const char *owner;          /* "host:pid:starttime" of this sandgate process */
	const char *session_hash;   /* hex SHA-256 prefix of the session id, never the id */
	bool persistent;            /* survives its session (sandbox_env machines) */
	const char *name;           /* persistent machine name, or NULL */
	const json_t *options;      /* backend-specific create options, or NULL */
};

/* One machine a backend reports in machine_list(). */
struct sg_machine_entry {
	char id[SG_ID_MAX];
	char owner[SG_ID_MAX];        /* the owner label, "" when none */
	char session_hash[SG_ID_MAX]; /* "" when none */
	int64_t created;              /* unix seconds, 0 when unknown */
	unsigned lifetime_s;          /* 0 when unknown */
	bool running;
	bool persistent;
};

/* ---- exec ------------------------------------------------------------------ */

/* A one-shot command.  Exactly one of command and argv is set.  stdin is
 * always closed (reads see EOF at once). */
struct sg_exec_req {
	const char *command;      /* run by a non-login `/bin/sh -c`, or NULL */
	const char *const *argv;  /* NULL-terminated vector, used when command == NULL */
	const char *cwd;          /* NULL: the machine's workspace */
	const char *const *env;   /* "KEY=VALUE", NULL-terminated, or NULL */
	unsigned timeout_ms;      /* 0: no timeout */
	size_t output_cap;        /* bytes kept per stream; 0: SG_OUTPUT_CAP_DEFAULT */
};

#define SG_OUTPUT_CAP_DEFAULT (1024u * 1024u)

/* Filled by exec().  out and err are initialised by the core. */
struct sg_exec_result {
	struct sg_buf out;   /* stdout bytes, exact */
	struct sg_buf err;   /* stderr bytes, exact */
	int exit_code;       /* 0..255, or -1 when killed by a signal or unknown */
	int signal;          /* signal number that ended it, or 0 */
	bool timed_out;      /* the timeout killed the command's process group */
	bool out_truncated;  /* more than output_cap bytes were produced */
	bool err_truncated;
};

/* An interactive byte stream into the machine: a process with stdin open
 * (Docker attached exec, SSH channel, FC process with stdin).  Opaque to the
 * core, owned by the plugin, closed with stream_close(). */
struct sg_stream;

/* ---- files ----------------------------------------------------------------- */

enum sg_file_type { SG_FT_FILE = 0, SG_FT_DIR, SG_FT_SYMLINK, SG_FT_OTHER };

struct sg_stat {
	int type;      /* enum sg_file_type, of the path itself (lstat) */
	uint64_t size; /* bytes */
	uint32_t mode; /* permission bits (07777) */
	int64_t mtime; /* unix seconds */
	uint32_t uid, gid;
};

struct sg_write_opts {
	uint32_t mode;        /* mode for a new file; 0 means 0644.  An existing
				 file keeps its own mode and owner. */
	bool no_mkdir;        /* do not create missing parent directories */
};

/* ---- code ------------------------------------------------------------------ */

struct sg_code_req {
	const char *language; /* "python", "javascript", "typescript", "shell", "r" */
	const char *code;
	const char *cwd;      /* NULL: workspace */
	unsigned timeout_ms;
	size_t output_cap;
};

struct sg_code_result {
	struct sg_buf out, err;    /* initialised by the core */
	int exit_code;
	bool timed_out;
	char interpreter[128];     /* what ran: "python3 3.11.2", "bash" */
	json_t *results;           /* rich results (array) or NULL; caller's reference */
	json_t *error;             /* {name, value, traceback} or NULL; caller's reference */
};

/* ---- backend actions (sandbox_env discovery) ------------------------------- */

/* One backend-specific action, listed by `sandbox_env` as `<name>` in the
 * `<backend>_help` topic.  `machine` is NULL when the action needs none. */
typedef int sg_action_fn(void *priv, struct sg_machine *machine,
			 const json_t *params, struct sg_call *call,
			 json_t **result, struct sg_err *err);

struct sg_action {
	const char *name;        /* "docker_ps" */
	const char *summary;     /* one line */
	const char *params_schema; /* JSON Schema text of params (an object) */
	const char *example;     /* a params example as JSON text, or NULL */
	bool needs_machine;
	sg_action_fn *handler;
};

/* ---- configuration keys a plugin declares ---------------------------------- */

/* The core validates the plugin's INI section against this list: unknown
 * keys are warned about with file and line, bad values stop startup. */
struct sg_config_key {
	const char *key;     /* "host"; a trailing '*' matches a prefix ("template.*") */
	const char *def;     /* built-in default, or NULL */
	const char *accepts; /* "a|b|c" for an enum, "uint", "bool", or NULL for any */
	const char *help;    /* one line for etc/sandgate.ini.example and errors */
	const char *env;     /* a seed's own environment variables, ':'-separated, read
				after SANDGATE_<SECTION>_<KEY> and before the file
				("DOCKER_HOST", "ABX_SANDBOX_API_KEY:E2B_API_KEY"), or NULL */
	bool secret;         /* never echoed or logged */
};

/* A further configuration section of a plugin (ABI 1.2). */
struct sg_config_section {
	const char *section;              /* "ssh.target.*" */
	const struct sg_config_key *keys; /* NULL-key terminated */
};

/* ---- the descriptor --------------------------------------------------------- */

typedef int  sg_backend_init_fn(const struct sg_host_api *host, void **priv,
				struct sg_err *err);
typedef void sg_backend_fini_fn(void *priv);

typedef int  sg_machine_create_fn(void *priv, const struct sg_create_req *req,
				  struct sg_call *call, struct sg_machine *m,
				  struct sg_err *err);
typedef int  sg_machine_attach_fn(void *priv, const char *id,
				  struct sg_call *call, struct sg_machine *m,
				  struct sg_err *err);
typedef int  sg_machine_destroy_fn(struct sg_machine *m, struct sg_call *call,
				   struct sg_err *err);
typedef void sg_machine_release_fn(struct sg_machine *m);
typedef int  sg_machine_list_fn(void *priv, struct sg_call *call,
				struct sg_machine_entry **entries, size_t *n,
				struct sg_err *err);
typedef int  sg_machine_keepalive_fn(struct sg_machine *m, unsigned lifetime_s,
				     struct sg_err *err);

typedef int  sg_exec_fn(struct sg_machine *m, const struct sg_exec_req *req,
			struct sg_call *call, struct sg_exec_result *res,
			struct sg_err *err);

typedef int  sg_stream_open_fn(struct sg_machine *m, const struct sg_exec_req *req,
			       struct sg_stream **out, struct sg_err *err);
typedef ssize_t sg_stream_write_fn(struct sg_stream *s, const void *p, size_t n,
				   struct sg_err *err);
typedef ssize_t sg_stream_read_fn(struct sg_stream *s, void *p, size_t n,
				  int timeout_ms, struct sg_err *err);
typedef int  sg_stream_close_fn(struct sg_stream *s, int *exit_code);

/* Channels of a stream opened with stream_open_status (ABI 1.1). */
enum sg_stream_channel {
	SG_STREAM_OUTPUT = 0, /* stdout and stderr, merged in order */
	SG_STREAM_STATUS = 1  /* what the process wrote on its status fd */
};

typedef int  sg_stream_open_status_fn(struct sg_machine *m,
				      const struct sg_exec_req *req, int status_fd,
				      struct sg_stream **out, struct sg_err *err);
typedef ssize_t sg_stream_read_ch_fn(struct sg_stream *s, void *p, size_t n,
				     int timeout_ms, int *channel,
				     struct sg_err *err);

typedef int  sg_file_read_fn(struct sg_machine *m, const char *path, size_t max,
			     struct sg_call *call, struct sg_buf *out,
			     struct sg_err *err);
typedef int  sg_file_write_fn(struct sg_machine *m, const char *path,
			      const void *data, size_t len,
			      const struct sg_write_opts *opts, struct sg_call *call,
			      struct sg_err *err);
typedef int  sg_file_list_fn(struct sg_machine *m, const char *path,
			     struct sg_call *call, json_t **entries,
			     struct sg_err *err);
typedef int  sg_file_stat_fn(struct sg_machine *m, const char *path,
			     struct sg_call *call, struct sg_stat *st,
			     struct sg_err *err);
typedef int  sg_file_mkdir_fn(struct sg_machine *m, const char *path,
			      bool parents, struct sg_call *call, struct sg_err *err);
typedef int  sg_file_remove_fn(struct sg_machine *m, const char *path,
			       bool recursive, struct sg_call *call,
			       struct sg_err *err);

typedef int  sg_run_code_fn(struct sg_machine *m, const struct sg_code_req *req,
			    struct sg_call *call, struct sg_code_result *res,
			    struct sg_err *err);

struct sg_backend {
	/* --- header: first, never changes ----------------------------------- */
	uint32_t magic;     /* SG_PLUGIN_MAGIC */
	uint32_t abi_major; /* SG_PLUGIN_ABI_MAJOR the plugin was built with */
	uint32_t abi_minor; /* SG_PLUGIN_ABI_MINOR the plugin was built with */
	uint32_t size;      /* sizeof(struct sg_backend) as the plugin saw it */
	const char *name;   /* must equal the file stem: "docker" for docker.so */
	const char *version;

	/* --- ABI 1.0 ----------------------------------------------------------- */
	const char *summary;  /* one line for sandbox_env help */

	/* Required.  Called once after the checks; may not block on the network
	 * (connect lazily), so cold start stays fast.  *priv is passed back. */
	sg_backend_init_fn *init;
	/* Required.  Frees priv; machines were released before. */
	sg_backend_fini_fn *fini;

	/* Required.  Makes a machine.  SG_E_NOTFOUND: no such template/image;
	 * SG_E_UNAVAILABLE: backend down.  Long waits report progress. */
	sg_machine_create_fn *machine_create;
	/* Optional.  Binds m to an existing machine `id` (adoption after a
	 * restart, explicit ids).  SG_E_NOTFOUND when there is none. */
	sg_machine_attach_fn *machine_attach;
	/* Required.  Destroys the machine; an already gone one is success. */
	sg_machine_destroy_fn *machine_destroy;
	/* Required.  Frees m->handle without touching the machine. */
	sg_machine_release_fn *machine_release;
	/* Optional.  Lists the machines sandgate made on this backend; entries
	 * is allocated with malloc() and freed by the caller with free(). */
	sg_machine_list_fn *machine_list;
	/* Optional.  Pushes the backend-side expiry (FC set timeout). */
	sg_machine_keepalive_fn *machine_keepalive;

	/* Required.  One-shot command.  A command that ran and exited non-zero
	 * is success (res->exit_code says so); a timeout is success with
	 * res->timed_out and the partial output.  SG_E_CANCELLED when the call
	 * was cancelled (the command's process group is killed first). */
	sg_exec_fn *exec;

	/* Optional.  Interactive stream (persistent shells).  read returns the
	 * bytes read (stdout and stderr merged in order), 0 at EOF, -1 on error
	 * (SG_E_TIMEOUT when timeout_ms passed with nothing to read). */
	sg_stream_open_fn *stream_open;
	sg_stream_write_fn *stream_write;
	sg_stream_read_fn *stream_read;
	/* Closes and frees s; *exit_code (may be NULL) gets the status or -1. */
	sg_stream_close_fn *stream_close;

	/* Required.  Reads a whole file, binary safe.  SG_E_NOTFOUND, SG_E_TOOBIG
	 * (larger than max), SG_E_INVAL (a directory). */
	sg_file_read_fn *file_read;
	/* Required.  Atomic replace: the file is either the old or the new bytes. */
	sg_file_write_fn *file_write;
	/* Required.  *entries: array of {name, path, type ("file"|"dir"|"symlink"
	 * |"other"), size, mode, mtime}, caller's reference. */
	sg_file_list_fn *file_list;
	/* Optional slots: the core falls back to exec where it can. */
	sg_file_stat_fn *file_stat;
	sg_file_mkdir_fn *file_mkdir;
	sg_file_remove_fn *file_remove;

	/* Optional.  Runs code natively (FC code interpreter); without it the
	 * core writes the code to a file and runs the interpreter with exec. */
	sg_run_code_fn *run_code;

	/* Backend-specific actions for sandbox_env, and a help text for the
	 * `<name>_help` topic. */
	const struct sg_action *actions;
	size_t n_actions;
	const char *help;

	/* Configuration keys of section [<name>]; NULL-key terminated. */
	const struct sg_config_key *config_keys;

	/* --- ABI 1.1: append only ------------------------------------------------- */

	/* Optional.  Like stream_open, and the process also has file descriptor
	 * `status_fd` (3..9) open for writing on a channel of its own: a
	 * persistent shell writes its end-of-command marker there, out of reach
	 * of the command's output and stdin.  SG_E_NOTSUP when this machine
	 * cannot do it right now (Docker without its runner): use stream_open.
	 * Write with stream_write, close with stream_close. */
	sg_stream_open_status_fn *stream_open_status;
	/* Optional, set with stream_open_status.  As stream_read, and each call
	 * returns bytes of one channel only, in *channel (enum
	 * sg_stream_channel).  Output the process wrote before a status write
	 * is always returned before that status. */
	sg_stream_read_ch_fn *stream_read_ch;

	/* --- ABI 1.2: append only ------------------------------------------------- */

	/* Optional.  Further sections the plugin reads, each with its keys,
	 * NULL-section terminated.  A section name may end in ".*" for a family
	 * ("ssh.target.*" covers [ssh.target.lab]); the core validates those
	 * sections like [<name>] and config_get() returns their defaults. */
	const struct sg_config_section *config_sections;

	/* --- ABI 1.3+: append only ---------------------------------------------- */
};

/* Size of the 1.0 layout: the smallest descriptor the core accepts. */
#define SG_BACKEND_SIZE_1_0 (offsetof(struct sg_backend, config_keys) + \
			     sizeof(((struct sg_backend *)0)->config_keys))

/* True when descriptor b is large enough to hold `field` and the slot is set. */
#define SG_HAS(b, field) \
	((b)->size >= offsetof(struct sg_backend, field) + sizeof((b)->field) && \
	 (b)->field != NULL)

/* Fills the header in a plugin's descriptor. */
#define SG_BACKEND_HEADER \
	.magic = SG_PLUGIN_MAGIC, .abi_major = SG_PLUGIN_ABI_MAJOR, \
	.abi_minor = SG_PLUGIN_ABI_MINOR, .size = sizeof(struct sg_backend)

#ifdef __cplusplus
}
#endif
#endif /* SG_SANDGATE_PLUGIN_H */
