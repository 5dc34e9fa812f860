/*
 * sandgate backend plugin ABI 2.1.
 *
 * A backend is a shared object (docker.so, ssh.so, fc.so, local.so, yours)
 * that exports exactly one data symbol, `sg_backend`, of type
 * `const struct sg_backend`.  The core dlopen()s the file, reads that
 * descriptor and checks it (magic, ABI major and minor, size, name, and that
 * every slot group is complete or absent) before it calls any plugin code.
 * doc/plugin-guide.md walks through writing one; doc/plugin-abi.md keeps
 * the dated change list.
 *
 * Rules:
 *  - Append only within a major.  A new slot goes at the end of its struct
 *    and bumps SG_PLUGIN_ABI_MINOR; removing or changing anything bumps
 *    SG_PLUGIN_ABI_MAJOR.  Slots appended after 2.0 are read only through
 *    SG_HAS(), which checks the plugin's `size`.
 *  - The core accepts a plugin whose major equals its own and whose minor is
 *    not newer than its own.
 *  - A plugin never links against the daemon: everything it needs from the
 *    core comes through `struct sg_host_api`, handed to init().
 *  - Every slot may be called from several threads at once; a plugin guards
 *    its own shared state.  Calls on one machine may also overlap.
 *
 * Contracts the core keeps, so a backend need not:
 *  - Paths reach a plugin absolute (relative ones were joined to the
 *    machine's workspace, "~" expanded).
 *  - The create-time environment of a machine (create_sandbox `envs`) is
 *    applied by the core to every exec and stream: it arrives in
 *    sg_exec_req.env, first, followed by the call's own variables (a name
 *    the call sets is not repeated from the machine's).  A backend may
 *    also apply it at create; it need not store it.  Its values never
 *    reach a log line or an audit row.
 *  - The core keeps one record per machine (its state.db): id, backend,
 *    name, owner, session and credential hashes, template, workspace,
 *    lifetime, last use, the create-time environment and an opaque JSON
 *    value the plugin may keep (host->machine_keep).  An explicit id that
 *    this process does not know is looked up there and bound with
 *    machine_attach; ownership is checked from the record, the same way on
 *    every backend.  A backend tags what it creates with req->owner so that
 *    machines whose record was lost (a crash between create and record) can
 *    still be found by machine_list.
 *  - Logs never cut an id; ids, workspace and url are set through
 *    host->machine_set (no fixed-size buffers in the ABI).
 *
 * Error convention (one for the whole project): functions return 0 (or a
 * count) on success and -1 on failure, and then have filled the
 * caller-owned `struct sg_err` through host->errf().  A NULL err is allowed.
 *
 * Memory: JSON values given to a plugin are borrowed for the call.  Buffers
 * (struct sg_buf) are initialised and freed by the core and grown by the
 * plugin with host->buf_append().  JSON values a plugin returns (json_t
 * **out) become the caller's reference.  `struct sg_machine` and its strings
 * belong to the core; the plugin owns only `machine->handle`, which it frees
 * in machine_release().
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
#define SG_PLUGIN_ABI_MAJOR 2u          /* bump on any removal or change */
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

/* A growable byte buffer.  The core initialises it and frees it with
 * host->buf_release(); a plugin appends with host->buf_append(), after
 * whatever it holds already (file_read_at may get one whose first bytes
 * the core set aside), and never replaces or empties it.  `data` is
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

struct sg_backend;
struct sg_machine;
struct sg_create_req;

/* The strings of a machine a plugin sets with host->machine_set(). */
enum sg_machine_field {
	SG_MACHINE_ID = 0,    /* backend id: container id, directory name, E2B sandboxID */
	SG_MACHINE_WORKSPACE, /* default cwd and list path: an absolute path in the machine */
	SG_MACHINE_URL,       /* the machine's address on its backend, or "" */
	SG_MACHINE_TEMPLATE   /* what it was made from: image, target, template */
};

/* Longest value host->machine_set() takes, in bytes. */
#define SG_MACHINE_FIELD_MAX 4096

/* ---- host API: what the core offers a plugin ---------------------------- */

struct sg_host_api {
	uint32_t size;  /* sizeof(struct sg_host_api) as the core built it */
	uint32_t minor; /* SG_PLUGIN_ABI_MINOR of the core */

	/* Log a line to sandgate's log (stderr or file), tagged "[plugin]".
	 * Never pass secrets, environment values or whole command output. */
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

	/* Sets one string of m (a printf format), in machine_create or
	 * machine_attach only, before the machine is shared.  The core copies
	 * it; m->id and the others point at the copy until the next set.
	 * Returns 0, or -1 with errno EINVAL (an empty id, or a value with a
	 * control character) or E2BIG (longer than SG_MACHINE_FIELD_MAX). */
	int (*machine_set)(struct sg_machine *m, enum sg_machine_field field,
			   const char *fmt, ...) SG_PRINTF(3, 4);

	/* Keeps a copy of `data` (a JSON object, borrowed) in the machine's
	 * record, in place of what was kept before; machine_attach gets it
	 * back.  For what the backend cannot read off the machine itself (the
	 * SSH target a directory lives on).  Never put secrets in it.  Call it
	 * from machine_create or machine_attach, or (since 2.1) from an action
	 * handler on the machine it was given.  Returns 0 or -1 (not an
	 * object, or the record could not be written). */
	int (*machine_keep)(struct sg_machine *m, const json_t *data);

	/* From an action handler: makes a persistent machine on backend `self`
	 * (the plugin's own descriptor) for the caller of `call`, exactly as
	 * sandbox_env machine_create does: named req->name (required, unique
	 * among the caller's machines), kept after the session, reachable only
	 * with the caller's credential.  `purpose` may be NULL.  *result gets
	 * a new object {name, status, backend, sandbox_id, workspace} (the
	 * caller's reference).  Returns 0, or -1 with err (SG_E_EXISTS, or
	 * what machine_create said). */
	int (*machine_create)(struct sg_call *call, const struct sg_backend *self,
			      const struct sg_create_req *req, const char *purpose,
			      json_t **result, struct sg_err *err);

	/* From an action handler: destroys m (given to the handler) with its
	 * shells and record, as sandbox_env machine_remove does.  m stays valid
	 * until the handler returns.  Returns 0 or -1 with err. */
	int (*machine_remove)(struct sg_call *call, struct sg_machine *m,
			      struct sg_err *err);

	/* Ends every persistent shell of m (what they run included); the
	 * machine stays.  Safe to call when it has none. */
	void (*shells_close)(struct sg_machine *m);

	/* A name for the credential behind `call` (a bearer token over HTTP,
	 * the local user over stdio): 16 hex digits of a hash, the same for
	 * every session of that credential, never the credential itself; for
	 * scoping what a backend keeps per caller (directories, networks).
	 * "" for a NULL call.  Borrowed, valid while the call runs. */
	const char *(*call_credential)(const struct sg_call *call);

	/* --- ABI 2.1: append only; read with SG_HOST_HAS() ------------------- */

	/* The persistent machines of backend `self` that the caller of `call`
	 * may use (its credential's and the operator's shared ones), from the
	 * core's machine record, oldest first: a new array (the caller's
	 * reference) of {name, id, purpose, template, workspace, created (unix
	 * seconds), shared (bool: another credential's, shared with all)}.
	 * For an action that lists a backend's machines as the caller sees
	 * them (docker_ps).  NULL for a NULL call. */
	json_t *(*call_machines)(struct sg_call *call, const struct sg_backend *self);

	/* How many credentials this server serves: 1 for stdio, `sandgate call`
	 * and an HTTP server without bearer tokens, else the number of tokens.
	 * A backend that keeps things apart per credential (directories,
	 * networks: call_credential) may keep one plain layout when it is 1. */
	unsigned (*credentials)(void);

	/* Facts about m a user should see (its isolation, its limits): a copy of
	 * `facts` (a JSON object, borrowed) is returned by create_sandbox as
	 * `details`.  Call from machine_create or machine_attach.  Never put
	 * secrets in it.  Returns 0 or -1 (not an object, out of memory). */
	int (*machine_report)(struct sg_machine *m, const json_t *facts);

	/* The server this process runs: "stdio" or "http"; NULL in `sandgate
	 * call`, `tools`, `config` and `status`.  Work done ahead of the calls
	 * (a warm pool, a prewarmed connection) belongs in a server only.
	 * Set before any plugin's init.  Static string, never freed. */
	const char *(*server)(void);
};

/* True when the core's host API `h` has slot `field` (appended after 2.0). */
#define SG_HOST_HAS(h, field) \
	((h)->size >= offsetof(struct sg_host_api, field) + sizeof((h)->field) && \
	 (h)->field != NULL)

/* ---- machines ------------------------------------------------------------ */

/* A machine (sandbox) as the core holds it.  Allocated and freed by the
 * core, as are its strings: a plugin reads them and sets them through
 * host->machine_set().  Every string is "" until set, never NULL. */
struct sg_machine {
	uint32_t magic;                   /* SG_MACHINE_MAGIC, set by the core */
	const struct sg_backend *backend; /* set by the core */
	void *backend_priv;               /* the plugin's init() priv, set by the core */
	const char *id;                   /* SG_MACHINE_ID, required */
	const char *workspace;            /* SG_MACHINE_WORKSPACE, required */
	const char *url;                  /* SG_MACHINE_URL */
	const char *template_name;        /* SG_MACHINE_TEMPLATE */
	const char *name;                 /* set by the core: the persistent
					     machine's name, or "" */
	void *handle;                     /* plugin-owned, may stay NULL; machine_release()
					     is called for every machine create or
					     attach bound, handle or not */
};

/* What machine_create is asked to make.  All pointers borrowed for the call. */
struct sg_create_req {
	const char *template_name;  /* NULL: the backend's configured default */
	unsigned lifetime_s;        /* idle lifetime; the core expires it, a backend
				       with its own expiry may push it */
	const char *const *env;     /* "KEY=VALUE", NULL-terminated, or NULL: the
				       create-time environment (see the contracts) */
	const char *owner;          /* the owner tag to put on what you create
				       ("host:pid:starttime" of this sandgate) */
	const char *session_hash;   /* hex SHA-256 prefix of the session id, never the id */
	bool persistent;            /* survives its session (sandbox_env machines) */
	const char *name;           /* persistent machine name, or NULL */
	const json_t *options;      /* backend-specific create options (an object), or NULL */
};

/* ---- exec ------------------------------------------------------------------ */

/* A one-shot command.  Exactly one of command and argv is set.  stdin is
 * always closed (reads see EOF at once). */
struct sg_exec_req {
	const char *command;      /* run by a non-login `/bin/sh -c`, or NULL */
	const char *const *argv;  /* NULL-terminated vector, used when command == NULL */
	const char *cwd;          /* absolute; NULL: the machine's workspace */
	const char *const *env;   /* "KEY=VALUE", NULL-terminated, or NULL: the
				     machine's create-time environment, then the
				     call's own; no name twice */
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

/* Channels of a stream opened with stream_open_status. */
enum sg_stream_channel {
	SG_STREAM_OUTPUT = 0, /* stdout and stderr, merged in order */
	SG_STREAM_STATUS = 1  /* what the process wrote on its status fd */
};

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

/* run_code runs code in a stateful interpreter of the machine (a kernel per
 * machine and language: names, imports and the working directory persist
 * from call to call).  A slot that cannot run this language or this machine
 * statefully returns SG_E_NOTSUP: the core then runs the code once with
 * exec (a fresh interpreter, "stateful": false in the tool's result).  The
 * core runs "shell" itself, in the machine's persistent bash. */
struct sg_code_req {
	const char *language; /* "python", "javascript", "typescript", "r" */
	const char *code;
	const char *cwd;      /* absolute; NULL: workspace (a kernel starts there) */
	const char *const *env; /* as sg_exec_req.env: for a kernel this call starts */
	unsigned timeout_ms;  /* interrupt the code after this (the state stays); 0: none */
	size_t output_cap;    /* bytes kept of stdout and of stderr each */
	/* ABI 2.1 (the core always fills them; a 2.0 plugin never reads them): */
	bool reset;           /* discard the interpreter and its state first */
};

/* Filled by run_code().  The core zeroes it and owns what it holds after. */
struct sg_code_result {
	struct sg_buf out, err;    /* initialised by the core */
	int exit_code;             /* 0; 1 when the code raised (error); 124 on timeout */
	bool timed_out;            /* the timeout interrupted the code */
	char interpreter[128];     /* what ran: "python3 3.11.2", "bash" */
	json_t *results;           /* rich results (array) or NULL; caller's reference.
				      An entry may hold "_content": MCP content blocks
				      (a png as an image block) the core lifts out */
	json_t *error;             /* {name, value, traceback} or NULL; caller's reference */
	/* ABI 2.1 (zero from a 2.0 plugin): */
	json_t *output_files;      /* [{name, path, size}] the code wrote in the
				      workspace, or NULL; caller's reference */
	bool out_truncated, err_truncated; /* cut at output_cap */
	bool kernel_restarted;     /* this call runs on a new interpreter: the old one died */
	char restart_reason[200];  /* why, with kernel_restarted */
	bool kernel_died;          /* the interpreter ended during this call (the next
				      call starts a new one) */
	char died_reason[200];     /* why, with kernel_died */
};

/* ---- probe ----------------------------------------------------------------- */

/* What probe() tells the core besides usable or not. */
struct sg_probe {
	/* Rank for the default backend when [sandbox] default_backend is
	 * unset: the usable backend with the highest one is taken.  The
	 * project's own: docker 40, local 30, ssh 20, fc 10. */
	int preference;
	/* Facts for `sandgate status` and `sandgate config` (endpoint, engine
	 * version, targets), a new object the core takes, or NULL.  Never a
	 * secret. */
	json_t *details;
};

/* ---- backend actions (sandbox_env discovery) ------------------------------- */

/* One backend-specific action, listed by `sandbox_env` in the
 * `<backend>_help` topic.  `machine` is the machine the call named (the
 * session's default when it named none) when needs_machine, else NULL; it
 * is always one of this backend's.  *result: an object (or any JSON value,
 * wrapped as {"result": value}), the caller's reference. */
typedef int sg_action_fn(void *priv, struct sg_machine *machine,
			 const json_t *params, struct sg_call *call,
			 json_t **result, struct sg_err *err);

struct sg_action {
	const char *name;        /* "docker_ps"; unique across loaded plugins */
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

/* A further configuration section of a plugin. */
struct sg_config_section {
	const char *section;              /* "ssh.target.*" */
	const struct sg_config_key *keys; /* NULL-key terminated */
};

/* ---- slot types --------------------------------------------------------------- */

typedef int  sg_backend_init_fn(const struct sg_host_api *host, void **priv,
				struct sg_err *err);
typedef void sg_backend_fini_fn(void *priv);

typedef int  sg_probe_fn(void *priv, unsigned timeout_ms, struct sg_probe *out,
			 struct sg_err *err);

typedef int  sg_machine_create_fn(void *priv, const struct sg_create_req *req,
				  struct sg_call *call, struct sg_machine *m,
				  struct sg_err *err);
typedef int  sg_machine_attach_fn(void *priv, const char *id, const json_t *kept,
				  struct sg_call *call, struct sg_machine *m,
				  struct sg_err *err);
typedef int  sg_machine_destroy_fn(struct sg_machine *m, struct sg_call *call,
				   struct sg_err *err);
typedef void sg_machine_release_fn(struct sg_machine *m);
typedef int  sg_machine_list_fn(void *priv, struct sg_call *call, json_t **machines,
				struct sg_err *err);
typedef int  sg_machine_keepalive_fn(struct sg_machine *m, unsigned lifetime_s,
				     struct sg_err *err);

typedef int  sg_exec_fn(struct sg_machine *m, const struct sg_exec_req *req,
			struct sg_call *call, struct sg_exec_result *res,
			struct sg_err *err);
typedef int  sg_run_code_fn(struct sg_machine *m, const struct sg_code_req *req,
			    struct sg_call *call, struct sg_code_result *res,
			    struct sg_err *err);

typedef int  sg_stream_open_fn(struct sg_machine *m, const struct sg_exec_req *req,
			       struct sg_stream **out, struct sg_err *err);
typedef ssize_t sg_stream_write_fn(struct sg_stream *s, const void *p, size_t n,
				   struct sg_err *err);
typedef ssize_t sg_stream_read_fn(struct sg_stream *s, void *p, size_t n,
				  int timeout_ms, struct sg_err *err);
typedef int  sg_stream_close_fn(struct sg_stream *s, int *exit_code);
typedef int  sg_stream_open_status_fn(struct sg_machine *m,
				      const struct sg_exec_req *req, int status_fd,
				      struct sg_stream **out, struct sg_err *err);
typedef ssize_t sg_stream_read_ch_fn(struct sg_stream *s, void *p, size_t n,
				     int timeout_ms, int *channel,
				     struct sg_err *err);

typedef int  sg_file_read_fn(struct sg_machine *m, const char *path, size_t max,
			     struct sg_call *call, struct sg_buf *out,
			     struct sg_err *err);
/* ABI 2.2: a part of a file (see the range group below). */
typedef int  sg_file_read_at_fn(struct sg_machine *m, const char *path,
				uint64_t offset, size_t len,
				struct sg_call *call, struct sg_buf *out,
				uint64_t *size, struct sg_err *err);
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
typedef int  sg_file_remove_fn(struct sg_machine *m, const char *path,
			       bool recursive, struct sg_call *call,
			       struct sg_err *err);

/* ---- the descriptor --------------------------------------------------------- */

/*
 * Slots come in groups.  The loader refuses a plugin where a group is
 * partly filled, naming the missing slot; a required group must be there.
 *
 *   group      slots                                             needed
 *   probe      probe                                             required
 *   lifecycle  machine_create, machine_attach, machine_destroy,  required
 *              machine_release, machine_list
 *   expiry     machine_keepalive                                 optional
 *   exec       exec                                              required
 *   code       run_code                                          optional
 *   stream     stream_open, stream_write, stream_read,           optional
 *              stream_close
 *   status     stream_open_status, stream_read_ch                optional,
 *                                                                with stream
 *   files      file_read, file_write, file_list, file_stat,      required
 *              file_remove
 *   range      file_read_at (ABI 2.2)                            optional,
 *                                                                with files
 *   actions    actions and n_actions (each with name, summary,   optional
 *              params_schema and handler)
 *
 * Every slot a plugin fills is called by the core.
 */
struct sg_backend {
	/* --- header: first, never changes ----------------------------------- */
	uint32_t magic;     /* SG_PLUGIN_MAGIC */
	uint32_t abi_major; /* SG_PLUGIN_ABI_MAJOR the plugin was built with */
	uint32_t abi_minor; /* SG_PLUGIN_ABI_MINOR the plugin was built with */
	uint32_t size;      /* sizeof(struct sg_backend) as the plugin saw it */
	const char *name;   /* must equal the file stem: "docker" for docker.so */
	const char *version;

	/* --- ABI 2.0 ----------------------------------------------------------- */
	const char *summary;  /* one line for sandbox_env help and create_sandbox's schema */
	const char *help;     /* the text of the `<name>_help` topic, or NULL */

	/* Configuration keys of section [<name>], NULL-key terminated, or NULL;
	 * further sections (a name may end in ".*" for a family, such as
	 * "ssh.target.*"), NULL-section terminated, or NULL.  The core
	 * validates those sections, documents them (`sandgate config`) and
	 * returns their defaults. */
	const struct sg_config_key *config_keys;
	const struct sg_config_section *config_sections;

	/* Required.  Called once after the checks; must not block on the
	 * network (connect lazily), so startup stays fast: a backend that is
	 * not configured still initialises and says so when used.  *priv is
	 * passed back to the other slots. */
	sg_backend_init_fn *init;
	/* Required.  Frees priv; machines were released before. */
	sg_backend_fini_fn *fini;

	/* probe.  Whether the backend can make a machine now.  Returns 0 when
	 * it can, -1 when it cannot with err saying why and naming the fix
	 * (SG_E_UNAVAILABLE: the service is down; SG_E_INVAL: not configured).
	 * Fills out->preference in both cases, out->details when it has any.
	 * Returns within timeout_ms.  The core calls it at most once per
	 * process for the default backend, lazily, and for status reports. */
	sg_probe_fn *probe;

	/* lifecycle.  machine_create makes a machine and sets at least its id
	 * and workspace (host->machine_set); SG_E_NOTFOUND: no such
	 * template/image; SG_E_UNAVAILABLE: backend down; long waits report
	 * progress.  machine_attach binds m to the existing machine `id` with
	 * what the plugin kept in the record (`kept`, borrowed, or NULL);
	 * SG_E_NOTFOUND or SG_E_GONE when there is none.  machine_destroy
	 * destroys it (an already gone one is success; everything it ran
	 * ends).  machine_release frees m->handle without touching the
	 * machine.  machine_list sets *machines to a new array with one object
	 * for every machine this backend holds that sandgate tagged: {"id":
	 * string, "owner": the owner tag or "", and when known "persistent":
	 * bool, "created": unix seconds, "lifetime": seconds}.  The core uses
	 * it only to find machines whose record was lost (a crash between
	 * create and record): it removes one when its sandgate is gone, no
	 * record names it, it is not persistent and created + lifetime has
	 * passed (several state directories may share one backend). */
	sg_machine_create_fn *machine_create;
	sg_machine_attach_fn *machine_attach;
	sg_machine_destroy_fn *machine_destroy;
	sg_machine_release_fn *machine_release;
	sg_machine_list_fn *machine_list;

	/* expiry.  Pushes a backend-side expiry (FC set timeout) after a use. */
	sg_machine_keepalive_fn *machine_keepalive;

	/* exec.  One-shot command.  A command that ran and exited non-zero is
	 * success (res->exit_code says so); a timeout is success with
	 * res->timed_out and the partial output.  SG_E_CANCELLED when the call
	 * was cancelled (the command's process group is killed first). */
	sg_exec_fn *exec;

	/* code.  Runs code in a stateful interpreter of the machine (FC's code
	 * interpreter, the kernels of docker's and ssh's runner): see struct
	 * sg_code_req.  SG_E_NOTSUP (this language, or this machine now): the
	 * core runs the code once with exec instead; without the slot it
	 * always does.  A timeout is success with res->timed_out; a code error
	 * is success with res->error; SG_E_CANCELLED when the call was
	 * cancelled (the code is interrupted first, the state kept). */
	sg_run_code_fn *run_code;

	/* stream.  Interactive stream (persistent shells).  read returns the
	 * bytes read (stdout and stderr merged in order), 0 at EOF, -1 on
	 * error (SG_E_TIMEOUT when timeout_ms passed with nothing to read).
	 * close closes and frees s; *exit_code (may be NULL) gets the status
	 * or -1. */
	sg_stream_open_fn *stream_open;
	sg_stream_write_fn *stream_write;
	sg_stream_read_fn *stream_read;
	sg_stream_close_fn *stream_close;

	/* status.  Like stream_open, and the process also has file descriptor
	 * `status_fd` (3..9) open for writing on a channel of its own: a
	 * persistent shell writes its end-of-command marker there, out of
	 * reach of the command's output and stdin.  SG_E_NOTSUP when this
	 * machine cannot do it right now (Docker without its runner): the core
	 * uses stream_open.  Write with stream_write, close with stream_close.
	 * stream_read_ch is stream_read where each call returns bytes of one
	 * channel only, named in *channel (enum sg_stream_channel); output the
	 * process wrote before a status write is always returned first. */
	sg_stream_open_status_fn *stream_open_status;
	sg_stream_read_ch_fn *stream_read_ch;

	/* files.  file_read reads a whole file, binary safe: SG_E_NOTFOUND,
	 * SG_E_TOOBIG (larger than max), SG_E_INVAL (a directory).  file_write
	 * replaces atomically: the file is either the old or the new bytes.
	 * file_list sets *entries to an array of {name, path, type
	 * ("file"|"dir"|"symlink"|"other"), size, mode, mtime}, the caller's
	 * reference.  file_stat lstat()s: SG_E_NOTFOUND when nothing is there.
	 * file_remove removes a file, link or (recursive) a tree: SG_E_NOTFOUND
	 * when nothing is there. */
	sg_file_read_fn *file_read;
	sg_file_write_fn *file_write;
	sg_file_list_fn *file_list;
	sg_file_stat_fn *file_stat;
	sg_file_remove_fn *file_remove;

	/* actions.  Backend-specific actions for sandbox_env. */
	const struct sg_action *actions;
	size_t n_actions;

	/* --- ABI 2.1+: append only ---------------------------------------------- */

	/* range (ABI 2.2).  Reads at most len bytes of path from byte offset,
	 * appended to out (after the len bytes it may hold already: the
	 * core reads a large page in place for its encoding, and refuses a
	 * buffer left shorter), following links as file_read does, and sets *size
	 * to the whole file's size as the same open saw it: a page of a large
	 * file costs the page, not the file (read_file's default page of a
	 * 64 MiB file took 1.1 s through file_read).  An offset at or past the
	 * end appends nothing.  The bytes are of one version of the file, never
	 * the head of one and the tail of another.  Errors as file_read, and
	 * SG_E_NOTSUP where this machine cannot read a part right now (the
	 * core then reads the whole file with file_read and takes the part). */
	sg_file_read_at_fn *file_read_at;
};

/* Size of the 2.0 layout: the smallest descriptor the core accepts. */
#define SG_BACKEND_SIZE_2_0 (offsetof(struct sg_backend, n_actions) + \
			     sizeof(((struct sg_backend *)0)->n_actions))

/* True when descriptor b is large enough to hold `field` and the slot is
 * set.  Needed only for slots appended after 2.0. */
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
