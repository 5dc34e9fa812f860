/*
 * The sandgate side of a runner connection, shared by the plugins that start
 * a runner (docker.so now, ssh.so later).  Backend-neutral: the plugin hands
 * in a transport (the runner's stdin and stdout, however they are carried)
 * and gets a connection that many threads use at once.
 *
 * One reader thread per connection reads every frame, checks it (size caps,
 * known types, request ids it issued and that are still running) and files
 * it with its request; a waiting call wakes on the request's eventfd.  Any
 * frame that breaks the rules kills the connection: every request in flight
 * fails, and rn_conn_alive() says why, so the plugin can start a new runner.
 *
 * Ownership: rn_conn_open() returns the opener's reference, dropped by
 * rn_conn_close().  Each request holds a reference on its connection, and
 * the connection's table one on each request still running; the caller's
 * reference is dropped with rn_req_put().  Nothing here crashes on a bad
 * peer: out of memory and broken frames end the connection, not the process.
 */
#ifndef SG_RUNNER_CLIENT_H
#define SG_RUNNER_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "plugins/runner/proto.h"

/* The byte stream to one runner.  Owned by the connection once opened. */
struct rn_transport {
	/* Blocks until some of the runner's stdout is there: returns bytes,
	 * 0 at EOF, -1 on error.  Only the reader thread calls it. */
	ssize_t (*read)(void *ud, void *p, size_t n);
	/* Writes all n bytes to the runner's stdin, or returns -1.  Calls are
	 * serialised by the connection. */
	int (*write)(void *ud, const void *p, size_t n);
	/* Ends the stream both ways: a blocked read returns soon, later writes
	 * fail.  Any thread, any number of times. */
	void (*shutdown)(void *ud);
	/* Frees ud; called once, after the reader thread ended. */
	void (*free)(void *ud);
	void *ud;
};

enum rn_log_level { RN_LOG_DEBUG = 0, RN_LOG_INFO, RN_LOG_WARNING };

struct rn_conn_opts {
	const char *name;          /* for messages: "container 0123456789ab" */
	const char *build_id;      /* the runner must report this, or NULL */
	int hello_timeout_ms;      /* wait for the runner's HELLO */
	/* Where the connection's own notes go (may be NULL). */
	void (*log)(void *ud, enum rn_log_level level, const char *msg);
	void *log_ud;
};

struct rn_conn;
struct rn_req;

/* What the runner said about itself in its HELLO. */
struct rn_hello {
	unsigned major, minor;
	char build_id[RN_BUILD_ID_LEN + 1];
	long pid;
	char arch[32];
	char caps[256];    /* its capabilities, space-separated ("kernel ...") */
};

/* Starts the reader, sends HELLO and waits for the runner's.  The transport
 * is the connection's from here on, also on failure (then shut down and
 * freed).  Returns 0 and the opener's reference in *out; -2 with why when
 * no HELLO came within o->hello_timeout_ms on a connection that was still
 * up (a slow start: trying again may work); -1 with why otherwise. */
int rn_conn_open(const struct rn_transport *t, const struct rn_conn_opts *o,
		 struct rn_conn **out, char *why, size_t size);

/* Ends the connection (the runner sees EOF and kills what still runs), waits
 * for the reader, fails every request in flight, drops the opener's
 * reference.  NULL is allowed. */
void rn_conn_close(struct rn_conn *c);

/* Another reference for a caller that uses c while someone else may close
 * it; dropped with rn_conn_put(). */
void rn_conn_ref(struct rn_conn *c);
void rn_conn_put(struct rn_conn *c);

/* True while the connection works; else why (may be NULL) says what ended it. */
bool rn_conn_alive(struct rn_conn *c, char *why, size_t size);
void rn_conn_hello(struct rn_conn *c, struct rn_hello *h);
/* True when the runner announced capability `name` (RN_CAP_*) in its HELLO.
 * A runner without it answers that request type with ERROR. */
bool rn_conn_has_cap(struct rn_conn *c, const char *name);

/* ---- requests ---------------------------------------------------------------- */

struct rn_spawn {
	const char *command;       /* `sh -c` text, or NULL for argv */
	const char *const *argv;
	const char *const *env;    /* "K=V", NULL-terminated, or NULL */
	const char *cwd;           /* NULL: the runner's */
	unsigned timeout_ms;       /* 0: none */
	unsigned grace_ms;         /* TERM -> KILL */
	uint64_t cap;              /* bytes per stream the runner forwards; 0: all */
	unsigned mode;             /* RN_MODE_* */
	int status_fd;             /* with RN_MODE_STATUS */
	bool quiet_start;          /* STARTED alone does not wake the waiter: for a
				    * caller that waits for output or the end only */
};

enum rn_req_state {
	RN_REQ_RUNNING = 0,
	RN_REQ_DONE,      /* EXIT came: rn_exit is valid */
	RN_REQ_FAILED     /* refused by the runner, or the connection broke */
};

struct rn_exit {
	int code;          /* 0..255, -1 when signalled or unknown */
	int signal;        /* or 0 */
	unsigned flags;    /* RN_EXIT_* */
	int spawn_errno;   /* the command did not start: errno, 0 when it did */
	int spawn_stage;   /* enum rn_stage */
	char restarted[200]; /* KEXEC: the kernel was restarted for this call, why; or "" */
	char died[200];      /* KEXEC: the kernel ended during this call, why; or "" */
};

/* Sends SPAWN.  Returns 0 and the caller's reference in *out; -1 with why
 * when the connection is dead; 1 when the request does not fit in a frame
 * (the caller runs it another way). */
int rn_spawn(struct rn_conn *c, const struct rn_spawn *sp, struct rn_req **out,
	     char *why, size_t size);

/* Sends a request of another type (RN_KEXEC: kernel_client.c builds it;
 * RN_FILE: rfiles.c) with a new id; its answers are handled as a SPAWN's,
 * KEVENT lines being data on channel RN_R_KEVENT, except that a KEXEC's
 * STARTED wakes nobody (as with quiet_start: the caller waits for events)
 * and a FILE request gets no STARTED: its one FILE answer is data on
 * channel RN_R_FILE and ends it (RN_REQ_DONE).  Returns 0 and the caller's reference in
 * *out, -1 with why when the connection is dead, 1 when the payload does not
 * fit in a frame. */
int rn_request(struct rn_conn *c, uint8_t type, const void *payload, size_t len,
	       struct rn_req **out, char *why, size_t size);

/* rn_request, then the n bytes at data as its stdin (STDIN frames), then
 * STDIN_CLOSE: a FILE WRITE whole.  When all of it fits in RN_CORK_MAX
 * the frames go in one write (each write is a hop through the engine's
 * or the SSH channel's relay, and a small write is latency bound).
 * Returns as rn_request; a stdin frame that cannot be sent after the
 * request was (the runner answered early, or the connection broke) is
 * left to the caller's wait on *out to tell. */
#define RN_CORK_MAX (16u * 1024u)
int rn_request_stdin(struct rn_conn *c, uint8_t type, const void *payload, size_t len,
		     const void *data, size_t n, struct rn_req **out, char *why,
		     size_t size);

/* Waits up to timeout_ms (< 0: forever) for news on r, or for extra_fd (a
 * cancellation fd, -1: none) to become readable.  Returns 1 for news, 2 for
 * extra_fd, 0 at the timeout. */
int rn_req_wait(struct rn_req *r, int timeout_ms, int extra_fd);

/* Called for each piece of data, in order: chan is RN_R_STDOUT, RN_R_STDERR,
 * RN_R_STATUS or RN_R_KEVENT (one whole event line).  Runs with the request locked: be quick. */
typedef void rn_data_fn(int chan, const void *p, size_t n, void *ud);

/* Hands over everything that arrived, then reports the state (exit/why
 * filled when not running).  Data queued before an EXIT is always handed
 * over in the same call that first reports RN_REQ_DONE. */
enum rn_req_state rn_req_drain(struct rn_req *r, rn_data_fn *fn, void *ud,
			       struct rn_exit *ex, char *why, size_t size);

/* Takes up to n bytes of the oldest data, all of one channel (*chan).
 * Returns the bytes taken, 0 when nothing is queued. */
size_t rn_req_take(struct rn_req *r, void *p, size_t n, int *chan);

/* The state without taking data; *queued (may be NULL) gets the bytes still
 * queued. */
enum rn_req_state rn_req_state(struct rn_req *r, struct rn_exit *ex, char *why,
			       size_t size, size_t *queued);

/* True once STARTED came (the command runs or ran); pid/pgid may be NULL. */
bool rn_req_started(struct rn_req *r, long *pid, long *pgid);
/* True when output was dropped because nobody took it (RN_QUEUE_MAX). */
bool rn_req_overflowed(struct rn_req *r);

/* Stdin of an RN_MODE_STDIN command: bytes, in frames of RN_CHUNK. */
int rn_req_stdin(struct rn_req *r, const void *p, size_t n);
int rn_req_stdin_close(struct rn_req *r);
/* sig 0: TERM to the group, KILL after the grace; else that signal once. */
int rn_req_kill(struct rn_req *r, int sig);

/* Takes one more reference on r (dropped with rn_req_put()). */
void rn_req_ref(struct rn_req *r);
/* Drops the caller's reference.  A request still running stays in the
 * connection's table (its frames dropped) until its EXIT. */
void rn_req_put(struct rn_req *r);

/* A PING round trip; returns the microseconds it took, or -1. */
long rn_ping(struct rn_conn *c, int timeout_ms);

#define RN_QUEUE_MAX (64u * 1024u * 1024u) /* bytes queued per request */

/* A transport over a connected stream socket (a runner started locally on a
 * socketpair: tests, and any backend that can hand over a socket).  The
 * transport owns fd and closes it in free(). */
void rn_fd_transport(int fd, struct rn_transport *t);

/* Writes all n bytes of p to the stream socket fd (a runner's: a dead one
 * gives EPIPE, never SIGPIPE), through EINTR and short writes.  Returns 0,
 * or -1 (errno set; 0 bytes written counts as a failure). */
int rn_send_all(int fd, const void *p, size_t n);

#endif /* SG_RUNNER_CLIENT_H */
