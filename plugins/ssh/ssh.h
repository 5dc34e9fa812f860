/*
 * ssh.so internals shared between its files.
 *
 *   ssh.c      descriptor, init/fini, configuration keys, help
 *   target.c   targets: [ssh] default_* and [ssh.target.NAME] sections
 *   conn.c     connections: the pool per target, channel slots, the
 *              per-connection lock and the wait discipline every libssh2
 *              call goes through
 *   connect.c  making a connection (TCP, handshake, host key, sign-in) and
 *              tearing it down
 *   (host keys against known_hosts and the sign-in with the agent or key
 *   files are plugins/sshcommon/, shared with docker.so's ssh:// engines)
 *   errmap.c   the one adapter from libssh2 and SFTP errors to sg_err
 *   quote.c    POSIX shell quoting and the remote command line
 *   exec.c     one-shot commands: wrapper, process groups, timeouts
 *   stream.c   interactive streams (stdin open, stderr merged)
 *   sftp.c     files through SFTP (sftp_int.h shared with sftp_confine.c:
 *              keeping an unjailed sandbox's file tools in its directory,
 *              and sftp_x.c: the same through exec with stdin on a host
 *              without the sftp subsystem)
 *   machine.c  sandboxes: working directories under the root, state files
 *   runner.c   sandgate-runner on each target: upload, start, removal;
 *              its channel as the runner's transport (its life, commands
 *              and streams through it: plugins/runner/rclient.h)
 *   code.c     run_code on the runner's kernels, one per sandbox and language
 *
 * Threading model.  A libssh2 session is not thread-safe, and in
 * non-blocking mode one session carries many channels.  Every call into
 * libssh2 for a connection happens with that connection's mutex held; a
 * caller that gets LIBSSH2_ERROR_EAGAIN waits in ssh_op_wait(), which
 * releases the mutex and poll()s the socket, its own eventfd and the call's
 * cancel fd.  A thread whose libssh2 call read bytes off the socket may have
 * queued packets for other channels, so it kicks every other waiter's
 * eventfd (no lost wake-ups).  libssh2 keeps a single partially sent packet
 * per session and refuses any other send until the same call is repeated
 * (LIBSSH2_ERROR_BAD_USE), so the op that owns such a packet is the only
 * one allowed to call libssh2 until it is flushed (conn->out_owner).
 */
#ifndef SG_SSH_SSH_H
#define SG_SSH_SSH_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <libssh2.h>
#include <libssh2_sftp.h>

#include <sandgate/plugin.h>

#include "plugins/runner/binary.h"
#include "plugins/runner/client.h"
#include "plugins/runner/rclient.h"
#include "plugins/runner/rcode.h"
#include "plugins/sshcommon/sshcommon.h"

#define SSH_PLUGIN "ssh"

#define SSH_ID_MAX   128     /* sandbox ids */
#define SSH_PATH_MAX 1024    /* a path on this host or a remote one */
#define SSH_NAME_MAX 64      /* target names */
#define SSH_HOST_MAX 256
#define SSH_USER_MAX 128

enum ssh_policy { SSH_POLICY_STRICT = 0, SSH_POLICY_ACCEPT_NEW, SSH_POLICY_OFF };

/* [ssh] isolation: auto is bwrap where the host has it, else none. */
enum ssh_isolation { SSH_ISO_AUTO = 0, SSH_ISO_BWRAP, SSH_ISO_NONE };

/* A resolved target: where and how to connect.  A plain value, copied. */
struct ssh_target {
	char name[SSH_NAME_MAX];          /* "default" or the NAME of [ssh.target.NAME] */
	char host[SSH_HOST_MAX];
	unsigned port;
	char user[SSH_USER_MAX];
	char key[SSH_PATH_MAX];            /* identity file, "" for the defaults */
	char known_hosts[SSH_PATH_MAX];    /* ~ expanded */
	char root[SSH_PATH_MAX];           /* remote directory of the working dirs */
	enum ssh_policy policy;
	unsigned connect_timeout_s;
	unsigned keepalive_s;             /* 0: off */
	enum ssh_isolation isolation;     /* [ssh] isolation, per target too */
	bool network_host;                /* [ssh] network = host: jails share the host's */
	const char *passphrase;           /* borrowed from the config; never logged */
};

struct ssh_pool;

/* The plugin's priv: made by init(), freed by fini(). */
struct ssh_ctx {
	const struct sg_host_api *host;   /* borrowed, process lifetime */
	pthread_mutex_t lock;             /* guards pools and lib_started */
	bool lib_started;                 /* libssh2_init() done (ssh_lib_start) */
	struct ssh_pool *pools;           /* owned, one per target, freed by fini */
	char nonce[17];                   /* marks the wrapper's line (random per process) */
	size_t file_cap;
	bool runner_on;                   /* [ssh] runner */
	bool runner_faults;               /* SANDGATE_RUNNER_FAULTS=1: the runner's --fault hook */
	pthread_mutex_t bin_lock;         /* guards the three below */
	bool bin_tried;
	struct rn_binary bin;             /* the runner binary, read on first use, freed by fini */
	char bin_why[256];                /* why it could not be read */
	/* [ssh] prewarm (prewarm.c): */
	char prewarm[512];                /* its value while the thread runs */
	pthread_t prewarm_thread;
	bool prewarm_running;             /* the thread was started: join it */
	atomic_bool prewarm_stop;         /* fini: skip the targets not begun */
};

struct ssh_rsite;

/* m->handle: allocated by create()/attach(), freed by machine_release(). */
struct ssh_machine {
	struct ssh_ctx *ctx;              /* borrowed */
	struct ssh_pool *pool;            /* borrowed: pools live until fini */
	struct ssh_rsite *jail;           /* a jailed sandbox's own runner site
					     (owned), or NULL: isolation none */
	char dir[SSH_PATH_MAX];           /* the sandbox directory on the host */
	struct rnc_kstate code;           /* its kernels' runners (code.c) */
};

/* The variable that marks every process of a sandbox without a jail: its
 * value is the sandbox directory. */
#define SSH_MARK_VAR "SANDGATE_SANDBOX"

/* The environment of a command of sm: env (may be NULL) after the mark of a
 * sandbox without a jail, into *out (NULL when empty; the caller frees with
 * ssh_strv_free).  Returns 0, or -1 when out of memory. */
int ssh_machine_env(const struct ssh_machine *sm, const char *const *env, char ***out);

/* Kills every process of sandbox sm (no jail) on its host: those that carry
 * its mark or work beneath its directory.  Logs what fails. */
void ssh_machine_kill(struct ssh_machine *sm, const struct sg_call *call);

/* ---- ssh.c ------------------------------------------------------------------ */

void ssh_log(const struct ssh_ctx *ctx, enum sg_log_level lvl, const char *fmt, ...)
	SG_PRINTF(3, 4);
/* Monotonic milliseconds. */
int64_t ssh_now_ms(void);
/* Fills out with 2*n random hex digits and a NUL. */
int ssh_random_hex(char *out, size_t n);
/* Frees a NULL-terminated string vector. */
void ssh_strv_free(char **v);

/* ---- target.c --------------------------------------------------------------- */

/* Resolves target `name` (NULL or "default": the [ssh] default_* keys).
 * Returns 0, or -1 with SG_E_NOTFOUND (no such section) / SG_E_INVAL. */
int ssh_target_resolve(struct ssh_ctx *ctx, const char *name, struct ssh_target *t,
		       struct sg_err *err);
/* Starts libssh2 once, before the first connection.  Returns 0 or -1 with
 * err. */
int ssh_lib_start(struct ssh_ctx *ctx, struct sg_err *err);

/* True when [ssh.target.NAME] names a host. */
bool ssh_target_exists(struct ssh_ctx *ctx, const char *name);
/* "user@host:port" for messages. */
const char *ssh_target_str(const struct ssh_target *t, char *buf, size_t n);

/* ---- conn.c ----------------------------------------------------------------- */

struct ssh_op;

/* One SSH connection.  Owned by its pool while listed there, and by every
 * holder of a reference (refs, guarded by the pool's lock); the last
 * ssh_conn_put() frees it. */
struct ssh_conn {
	struct ssh_pool *pool;            /* borrowed back pointer */
	pthread_mutex_t lock;             /* guards the session and the fields below */
	LIBSSH2_SESSION *session;         /* owned */
	int fd;                           /* owned */
	LIBSSH2_SFTP *sftp;               /* owned, lazily started */
	bool sftp_busy;                   /* one SFTP operation at a time */
	struct ssh_op *gate;              /* the op with a request in flight that
					     waits for its reply (see ssh_gate_take) */
	struct ssh_op *waiters;           /* ops sleeping in ssh_op_wait() */
	struct ssh_op *out_owner;         /* op whose packet is partially sent */
	uint64_t rx, rx_notified;         /* bytes received / when waiters were last kicked */
	int64_t ka_unanswered_ms;         /* when a keepalive went out with nothing
					     received since, or 0 */
	bool broken;                      /* dead: no new work, freed when unused */
	char broken_why[256];
	bool setenv_refused;              /* sshd refused an env request once */
	/* guarded by the pool's lock: */
	unsigned refs;
	unsigned slots;                   /* channels reserved (opening or open), SFTP included */
	unsigned open;                    /* channels open */
	unsigned max_slots;               /* learned from a refusal (MaxSessions), 0: unknown */
	bool sftp_slot;                   /* a slot is held for the SFTP session */
	unsigned sftp_users;              /* SFTP ops using or waiting for it */
	bool listed;                      /* in pool->conns */
	struct ssh_conn *next;
};

/* A place a runner lives on a target (runner.c): the one runner client's
 * site (plugins/runner/rclient.h) and what the SSH side of it keeps. */
struct ssh_rsite {
	struct rnc_site site;
	struct ssh_pool *pool;            /* borrowed: pools live until fini */
	pthread_mutex_t tlock;            /* guards the fields below */
	struct ssh_conn *sc;              /* a reference on the connection carrying
					     the runner, or NULL */
	/* Written by the transport (its reader thread, its free()), read by the
	 * starter after a start failed or the runner ended: */
	char note[200];                   /* the last line it wrote on stderr */
	char status[64];                  /* how its channel ended: "exit status 1" */
	/* A jailed sandbox's site (runner.c, ssh_jail_new()); the pool's has
	 * jailed false: */
	bool jailed;
	char dir[SSH_PATH_MAX];           /* the sandbox directory: /workspace */
	char etc[SSH_PATH_MAX];           /* its passwd, group, hosts, hostname */
	char hostname[64];
};

/* The connections to one target. */
/* Temporary files of failed writes a pool remembers for later removal. */
#define SSH_STALE_MAX 8

struct ssh_pool {
	struct ssh_ctx *ctx;              /* borrowed */
	struct ssh_target target;
	pthread_mutex_t lock;             /* guards conns, connecting and the conns' counters */
	pthread_cond_t cond;
	struct ssh_conn *conns;
	bool connecting;                  /* one connect at a time per target */
	unsigned max_slots;               /* the server's limit once learned: new
					     connections start with it */
	bool off_warned;                  /* host_key_policy = off was logged */
	struct ssh_rsite runner;           /* the target's runner */
	/* What the host has for jails (machine.c), found once; guarded by lock: */
	int bwrap;                        /* 0 not looked yet, 1 there, -1 not there */
	bool bwrap_disable_userns;        /* bwrap 0.8 or later: --disable-userns */
	bool bwrap_clearenv;              /* bwrap 0.5 or later: --clearenv (else env -i) */
	bool unjailed_warned;             /* isolation none was logged */
	bool no_sftp;                     /* the server refused the sftp subsystem:
					     files go through the runner or exec
					     (sftp_x.c); guarded by lock */
	char *stale[SSH_STALE_MAX];       /* temporary files of failed writes whose
					     session died before it removed them:
					     the next SFTP session does (owned,
					     under lock) */
	struct ssh_pool *next;
};

/* Why an op stopped waiting. */
enum ssh_stop { SSH_GO = 0, SSH_STOP_TIMEOUT, SSH_STOP_CANCEL, SSH_STOP_BROKEN };

/* One logical operation on a connection (a command, a file transfer).  Lives
 * on the caller's stack; ssh_op_begin() locks, ssh_op_end() unlocks. */
struct ssh_op {
	struct ssh_conn *c;
	const struct sg_call *call;       /* cancellation source, or NULL */
	int64_t deadline_ms;              /* -1: none */
	int64_t flush_deadline_ms;        /* while it owns a half-sent packet */
	int efd;                          /* eventfd, made on the first wait */
	uint64_t rx_seen;                 /* conn->rx when this op last looked */
	bool stopping;                    /* cleanup: ignore the cancellation */
	enum ssh_stop stop;
	struct ssh_op *next;              /* in c->waiters */
};

/* Finds or makes the pool of target `name` (NULL: default).  The pool lives
 * until fini.  Returns NULL with err. */
struct ssh_pool *ssh_pool_get(struct ssh_ctx *ctx, const char *name, struct sg_err *err);
void ssh_pool_free(struct ssh_pool *p);

/* Reserves one channel slot on a live connection of the pool, connecting
 * when none has room.  Returns a referenced connection (ssh_slot_release()
 * gives both back) or NULL with err. */
struct ssh_conn *ssh_slot_reserve(struct ssh_pool *p, int64_t deadline_ms,
				  const struct sg_call *call, struct sg_err *err);
/* Picks a connection for an SFTP operation: an idle SFTP session, else a
 * connection with room for one (a slot is reserved for it), else a busy
 * session to queue on, else a new connection (`fresh` forces one).
 * Returns a referenced connection; ssh_sftp_unreserve() gives it back,
 * dropping the SFTP slot when `drop` (the session is gone or never came). */
struct ssh_conn *ssh_sftp_reserve(struct ssh_pool *p, const struct sg_call *call, bool fresh,
				  struct sg_err *err);
void ssh_sftp_unreserve(struct ssh_conn *c, bool drop, bool was_open);
/* The SFTP session of c opened (counts as an open channel). */
void ssh_sftp_opened(struct ssh_conn *c);
/* Gives a slot back; `was_open` when its channel had opened. */
void ssh_slot_release(struct ssh_conn *c, bool was_open);
/* The server refused a channel: this connection is full at its open count. */
void ssh_slot_refused(struct ssh_conn *c);

void ssh_conn_get(struct ssh_conn *c);
void ssh_conn_put(struct ssh_conn *c);
/* Marks c dead (lock held) with a reason; its pool stops handing it out. */
void ssh_conn_break(struct ssh_conn *c, const char *why);
/* True when c is dead, also when its server closed the socket while no op
 * was reading (lock not held); why (may be NULL) gets the reason. */
bool ssh_conn_dropped(struct ssh_conn *c, char *why, size_t n);
/* True when the pool has a live connection (no connect needed). */
bool ssh_pool_connected(struct ssh_pool *p);

void ssh_op_init(struct ssh_op *op, struct ssh_conn *c, const struct sg_call *call,
		 int64_t deadline_ms);
/* Locks the connection and waits until no other op owns a pending send. */
int ssh_op_begin(struct ssh_op *op);
/* Kicks waiters if this op's calls received bytes, unlocks, frees the efd. */
void ssh_op_end(struct ssh_op *op);
/* After LIBSSH2_ERROR_EAGAIN (lock held): sleeps until the socket or another
 * op made progress.  Returns 0 to retry the same call, or -1 with op->stop. */
int ssh_op_wait(struct ssh_op *op);
/* Sleeps (lock held) until another op kicks this one, the deadline or a
 * cancellation: for waits on a flag another op clears. */
int ssh_op_pend(struct ssh_op *op);
/* Temporarily drops the lock (for work that takes other locks), and back. */
void ssh_op_pause(struct ssh_op *op);
int ssh_op_resume(struct ssh_op *op);
/* The request gate (lock held).  libssh2 1.10 fails a wait for a reply
 * (channel open confirmation, CHANNEL_SUCCESS of an env or exec request)
 * with -1 when a reply of the same type for another channel arrives first,
 * so at most one op per connection may have such a request in flight.
 * take: waits for the gate (0, or -1 with op->stop); drop: frees it. */
int ssh_gate_take(struct ssh_op *op);
void ssh_gate_drop(struct ssh_op *op);
/* Wakes every waiter but `self` (lock held). */
void ssh_conn_kick(struct ssh_conn *c, const struct ssh_op *self);

/* Repeats a libssh2 call while it says EAGAIN.  rc gets the last result. */
#define SSH_CALL(op, rc, expr) \
	do { (rc) = (expr); } while ((rc) == LIBSSH2_ERROR_EAGAIN && ssh_op_wait(op) == 0)

/* The same for calls that return a pointer and set the session's errno. */
#define SSH_CALLP(op, ptr, expr)                                                \
	do {                                                                    \
		(ptr) = (expr);                                                 \
	} while (!(ptr) &&                                                      \
		 libssh2_session_last_errno((op)->c->session) == LIBSSH2_ERROR_EAGAIN && \
		 ssh_op_wait(op) == 0)

/* Opens a session channel on the pool: reserves a slot (a new connection
 * when every one is full, the server's refusal teaching the limit), and
 * reconnects once when a connection turns out dead.  On success *cp holds a
 * reference and a slot, *chp the channel, and op is begun (locked) and
 * holds the request gate for its channel requests: ssh_gate_drop() it. */
int ssh_chan_open(struct ssh_pool *p, struct ssh_op *op, const struct sg_call *call,
		  int64_t deadline_ms, struct ssh_conn **cp, LIBSSH2_CHANNEL **chp,
		  struct sg_err *err);
/* Frees the channel (bounded wait for the close), ends op, releases the
 * slot and the reference. */
void ssh_chan_done(struct ssh_op *op, LIBSSH2_CHANNEL *ch);

/* ---- connect.c ---------------------------------------------------------------- */

/* Opens a TCP connection to t (non-blocking connect, NODELAY and
 * keepalive set) by the monotonic deadline (ssh_now_ms() units), honouring
 * call's cancellation.  Returns the socket, or -1 with err
 * (SG_E_UNAVAILABLE, SG_E_CANCELLED). */
int ssh_tcp_connect(struct ssh_ctx *ctx, const struct ssh_target *t, int64_t deadline,
		    const struct sg_call *call, struct sg_err *err);
/* Makes a new authenticated connection to pool p's target within the
 * target's connect_timeout, honouring call's cancellation (may be NULL).
 * The result is not listed and has no references counted yet: the pool
 * (conn.c) lists it and counts them.  NULL with err (SG_E_NOMEM,
 * SG_E_UNAVAILABLE, SG_E_CANCELLED, or what the host key check or the
 * sign-in said). */
struct ssh_conn *ssh_conn_connect(struct ssh_pool *p, const struct sg_call *call,
				  struct sg_err *err);
/* Tears c's session down without ever blocking and frees c (NULL is
 * fine): for the last reference gone, or a connection never listed. */
void ssh_conn_free(struct ssh_conn *c);

/* ---- host keys and sign-in: plugins/sshcommon/sshcommon.h ------------------------ */

/* The peer of pool p's target, for sshcommon's checks (strings borrowed
 * from p). */
void ssh_peer_of(const struct ssh_pool *p, struct sshc_peer *peer, char *label, size_t size);

/* ---- errmap.c ----------------------------------------------------------------- */

/* The one adapter: maps libssh2 result rc (and, for SFTP, the server's
 * status) to an sg_err code with libssh2's own text, says what failed on
 * which target, and marks the connection broken for transport errors.  Call
 * with the lock held.  sftp may be NULL.  Returns -1. */
int ssh_fail(struct ssh_op *op, LIBSSH2_SFTP *sftp, int rc, const char *what,
	     struct sg_err *err);
/* True for results that mean the connection itself is gone. */
bool ssh_rc_is_transport(int rc);
/* The SFTP status of the last failed SFTP call (lock held). */
unsigned long ssh_sftp_status(LIBSSH2_SFTP *sftp, int rc);

/* ---- quote.c ------------------------------------------------------------------ */

/* Appends s to b, single-quoted for any POSIX shell (and fish).  0 or -1. */
int ssh_quote(const struct sg_host_api *host, struct sg_buf *b, const char *s);

/* What one remote command is: the remote command line is built from it. */
struct ssh_cmdspec {
	const char *command;              /* run by /bin/sh -c, or NULL */
	const char *const *argv;          /* when command is NULL */
	const char *cwd;                  /* required, absolute */
	const char *const *env_prefix;    /* "K=V" passed through env(1), or NULL */
	const char *nonce;                /* the wrapper's marker */
	bool merge_stderr;                /* streams: 2>&1 */
	bool end_mark;                    /* one-shot: wait, print "<nonce> end <status>" */
};

/* Builds `[exec env 'K=V'...] exec /bin/sh -c '<wrapper>' sg '<nonce>'
 * '<cwd>' '<command>' | '<argv0>' ...` into b: the login shell removes one
 * level of quoting and runs /bin/sh, which prints "<nonce> <pgid>" (or
 * "<nonce> cwd" when cd fails), cds and execs the command. */
int ssh_cmdline(const struct sg_host_api *host, const struct ssh_cmdspec *spec,
		struct sg_buf *b);
/* True when name is a portable environment variable name. */
bool ssh_env_name_ok(const char *kv);

/* ---- exec.c ------------------------------------------------------------------- */

struct ssh_run {
	const char *command;              /* exactly one of command and argv */
	const char *const *argv;
	const char *cwd;                  /* required */
	const char *const *env;           /* "K=V" (machine's and call's), or NULL */
	unsigned timeout_ms;              /* 0: none */
	size_t cap;                       /* bytes kept per stream */
	bool group;                       /* kill the process group on timeout/cancel */
	unsigned start_ms;                /* limit to open the channel and start; 0: the
					     connect timeout + 30 s */
	bool end_mark;                    /* set by ssh_run: the wrapper's end marker */
	const void *in;                   /* stdin bytes (borrowed), or NULL: stdin
					     closed at once; EOF follows them */
	size_t in_len;
};

/* The first line of b (without its newline) into out, n bytes, NUL-ended:
 * a command's stderr for a message. */
void ssh_first_line(const struct sg_buf *b, char *out, size_t n);

/* Runs r on the pool and fills res.  Returns 0 when the command ran (any
 * exit status, also a timeout), -1 with err otherwise: SG_E_CANCELLED after
 * a cancellation (the group was killed first), SG_E_NOTFOUND when r->cwd
 * does not exist (res->exit_code 1), SG_E_UNAVAILABLE when the target is
 * unreachable. */
int ssh_run(struct ssh_pool *p, const struct ssh_run *r, const struct sg_call *call,
	    struct sg_exec_result *res, struct sg_err *err);
/* Runs a short internal script: argv with cwd "/", a 60 s limit; fails with
 * SG_E_BACKEND and its stderr when it exits non-zero. */
/* Whether sandboxes of p's target get a bwrap jail: 1 yes, 0 no (logged
 * once), -1 with err (isolation = bwrap and there is none).  Connects. */
int ssh_jail_decide(struct ssh_pool *p, struct sg_call *call, struct sg_err *err);

/* [ssh] prewarm in a server: starts the thread that makes the targets
 * ready (prewarm.c).  0, or -1 with err (a bad value, no thread). */
int ssh_prewarm_start(struct ssh_ctx *ctx, struct sg_err *err);
/* Waits for that thread (fini, before the pools go). */
void ssh_prewarm_join(struct ssh_ctx *ctx);

int ssh_script(struct ssh_pool *p, const char *const *argv, const struct sg_call *call,
	       const char *what, struct sg_err *err);
/* Opens a channel and starts spec on it (env via setenv requests where sshd
 * takes them); op is begun on success.  Used by exec and streams. */
int ssh_exec_start(struct ssh_pool *p, struct ssh_op *op, const struct sg_call *call,
		   int64_t deadline_ms, const struct ssh_run *r, bool merge,
		   bool send_eof, struct ssh_conn **cp, LIBSSH2_CHANNEL **chp,
		   struct sg_err *err);
/* One channel read (lock held) that never leaves a half-sent window
 * adjustment behind.  Returns bytes, 0 at EOF, EAGAIN or an error. */
ssize_t ssh_chan_read(struct ssh_op *op, LIBSSH2_CHANNEL *ch, int stream, char *buf, size_t n);
/* Kills process group pgid (> 1) on the pool's host: TERM, then KILL. */
void ssh_kill_group(struct ssh_pool *p, long pgid);
/* Signal number of an SSH exit-signal name ("KILL"), 0 when unknown. */
int ssh_signal_number(const char *name);
/* SG_E_INVAL unless every entry of env is NAME=VALUE with a portable name. */
int ssh_env_check(const struct sg_host_api *host, const char *const *env, struct sg_err *err);
/* Merges the machine's env with the call's into a new vector (caller frees
 * with ssh_strv_free); NULL when both are empty. */
char **ssh_env_merge(const char *const *a, const char *const *b);

sg_exec_fn ssh_exec;

/* ---- stream.c ----------------------------------------------------------------- */

sg_stream_open_fn ssh_stream_open;
sg_stream_write_fn ssh_stream_write;
sg_stream_read_fn ssh_stream_read;
sg_stream_close_fn ssh_stream_close;
sg_stream_open_status_fn ssh_stream_open_status;
sg_stream_read_ch_fn ssh_stream_read_ch;

/* ---- sftp.c ------------------------------------------------------------------- */

sg_file_read_fn ssh_file_read;
sg_file_read_at_fn ssh_file_read_at;
sg_file_write_fn ssh_file_write;
sg_file_list_fn ssh_file_list;
sg_file_stat_fn ssh_file_stat;
sg_file_remove_fn ssh_file_remove;
/* For a sandbox without isolation: 0 when path, canonicalised on the host
 * (realpath of it or its nearest existing ancestor; with parent, of its
 * directory: the path itself may be a link the slot does not follow),
 * stays inside the sandbox directory, compared component by component;
 * else -1 with SG_E_PERM. */
int ssh_confine(struct ssh_machine *sm, const char *path, bool parent, const struct sg_call *call,
		struct sg_err *err);
/* Writes a whole file on the pool's host (atomic: temporary name, then
 * rename), mode for a new file; the directory must exist. */
int ssh_sftp_put(struct ssh_pool *p, const char *path, const void *data, size_t len,
		 unsigned mode, struct sg_err *err);

/* ---- machine.c ---------------------------------------------------------------- */

sg_machine_create_fn ssh_machine_create;
sg_machine_attach_fn ssh_machine_attach;
sg_machine_destroy_fn ssh_machine_destroy;
sg_machine_release_fn ssh_machine_release;
sg_machine_list_fn ssh_machine_list;
sg_probe_fn ssh_probe;

/* The sandbox_env actions (actions.c). */
#define SSH_N_ACTIONS 4
extern const struct sg_action ssh_actions[SSH_N_ACTIONS];

/* The handle of a machine made here, or NULL with err. */
struct ssh_machine *ssh_machine_of(const struct sg_machine *m, struct sg_err *err);

/* ---- runner.c ----------------------------------------------------------------- */

/* Reads [ssh] runner and the test hook; frees the binary at teardown. */
void ssh_runner_setup(struct ssh_ctx *ctx);
void ssh_runner_teardown(struct ssh_ctx *ctx);
/* Per pool: init at creation; fini ends the runner and removes its file
 * from the host (the connection is closed for good). */
void ssh_runner_pool_init(struct ssh_pool *p);
void ssh_runner_pool_fini(struct ssh_pool *p);

/* ---- code.c ------------------------------------------------------------------- */

/* run_code on the machine's runner (the target's, or its jail's): a kernel
 * per sandbox (scope: its id) and language; SG_E_NOTSUP without a runner or
 * for another language. */
sg_run_code_fn ssh_run_code;
/* Ends the machine's kernels, when a runner runs (never starts one). */
void ssh_code_end(struct sg_machine *m);

/* The runner command of r: cwd, env, timeout and cap as they are. */
void ssh_runner_cmd(const struct ssh_run *r, struct rnc_cmd *c);

/* A jailed sandbox's runner site: its runner starts inside a bwrap jail on
 * the host, over dir (seen as /workspace), with the passwd, group, hosts
 * and hostname files of etc; where names it in messages.  NULL with err.
 * Freed by ssh_jail_free(), which ends the jail. */
struct ssh_rsite *ssh_jail_new(struct ssh_pool *p, const char *id, const char *dir,
			       const char *etc, struct sg_err *err);
void ssh_jail_free(struct ssh_rsite *rs);

/* The runner site a machine's commands, shells and (jailed) files use. */
struct rnc_site *ssh_site_of(struct ssh_machine *sm);

#endif /* SG_SSH_SSH_H */
