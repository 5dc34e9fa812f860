/*
 * sandgate-runner internals: the state of the one process, shared by
 * sandgate-runner.c (the event loop and the frames) and proc.c (the commands).
 *
 * The runner is a single-threaded poll() loop over its stdin (frames from
 * sandgate), a signalfd (SIGCHLD, SIGTERM, SIGINT, SIGHUP) and the pipes of
 * its commands.  Nothing here allocates on behalf of anyone else: every proc
 * and drain is owned by the runner's lists and freed when it leaves them.
 */
#ifndef SG_RUNNER_RUNNER_H
#define SG_RUNNER_RUNNER_H

#include <stdbool.h>
#include <stddef.h>
#include <poll.h>
#include <stdint.h>
#include <sys/types.h>

#include "plugins/runner/proto.h"

/* Test-only misbehaviour (the hidden --fault flag): the first output frame of
 * a command whose text holds "sandgate-fault:<name>" goes wrong on purpose,
 * so the plugin's handling of a broken stream can be tested end to end. */
enum rn_fault {
	RN_FAULT_NONE = 0,
	RN_FAULT_CORRUPT,  /* non-zero reserved header bytes */
	RN_FAULT_TRUNCATE, /* half a frame, then the runner exits */
	RN_FAULT_HUGE,     /* a length over RN_MAX_PAYLOAD */
	RN_FAULT_BADID     /* a request id sandgate never used */
};

enum rn_kill_stage { KILL_NONE = 0, KILL_TERM_SENT, KILL_KILL_SENT };

/* One command.  Owned by runner->procs; freed by proc_finish(). */
struct proc {
	uint32_t id;
	pid_t pid;                /* the `sh -c` (or argv[0]) process */
	pid_t pgid;               /* == pid: setpgid(0, 0) in the child */
	int fd_out, fd_err;       /* read ends, -1 once closed; fd_err -1 when merged */
	int fd_status;            /* read end of the status fd, or -1 */
	int fd_in;                /* write end of stdin, or -1 */
	struct rn_buf inq;        /* stdin bytes not yet written */
	size_t inq_off;
	bool in_close;            /* close stdin once inq is written */
	uint64_t cap;             /* bytes forwarded per stream, 0: all */
	uint64_t sent_out, sent_err;
	bool trunc_out, trunc_err;
	int64_t deadline;         /* monotonic ms of the timeout, 0: none */
	uint32_t grace_ms;
	enum rn_kill_stage kill_stage;
	int64_t kill_at;          /* TERM sent: KILL at this time */
	int64_t give_up_at;       /* KILL sent: report even if the group lingers */
	bool timed_out, killed;
	bool exited;              /* main process reaped; wstatus valid */
	int wstatus;
	enum rn_fault fault;
	struct proc *next;
};

/* An output pipe of a finished command that a background child still holds:
 * read and dropped until EOF, so that child never gets SIGPIPE. */
struct drain {
	int fd;
	struct drain *next;
};

struct runner {
	int in_fd, out_fd;        /* the protocol stream: 0 and 1 */
	int sig_fd;
	struct rn_reader rd;
	bool hello_seen;          /* sandgate's HELLO arrived */
	bool in_eof;              /* sandgate closed our stdin */
	bool out_dead;            /* writing to sandgate failed */
	bool stopping;            /* ending: in-flight commands are being killed */
	int64_t stop_deadline;
	bool faults;              /* --fault given */
	char build_id[RN_BUILD_ID_LEN + 1];
	struct proc *procs;
	struct drain *drains;
	size_t n_drains;
};

/* ---- sandgate-runner.c ------------------------------------------------------ */

int64_t rn_now_ms(void);

/* Sends one frame to sandgate (blocking).  A failed write marks out_dead and
 * starts the shutdown; later sends do nothing.  Returns 0 or -1. */
int rn_send(struct runner *r, uint8_t type, uint32_t id, const void *payload,
	    size_t len);
/* Sends an ERROR frame with a printf text. */
void rn_send_error(struct runner *r, uint32_t id, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* ---- proc.c -------------------------------------------------------------------- */

/* Starts the command of a SPAWN frame (fields in payload).  Answers with
 * STARTED, or with EXIT (ERRNO, STAGE) when it could not start, or ERROR for
 * a malformed request. */
void proc_spawn(struct runner *r, uint32_t id, const unsigned char *payload,
		size_t len);

struct proc *proc_find(struct runner *r, uint32_t id);

/* Sends sig (0: the TERM-then-KILL sequence) to p's process group. */
void proc_kill(struct runner *r, struct proc *p, int sig);

/* Queues stdin bytes / closes stdin after them. */
void proc_stdin(struct runner *r, struct proc *p, const unsigned char *data,
		size_t len);
void proc_stdin_close(struct proc *p);

/* Adds the fds to watch to pfd (room for 4 per proc) and returns how many. */
size_t proc_pollfds(struct runner *r, struct pollfd *pfd, size_t room);
/* Handles poll results for every proc (pfd as filled by proc_pollfds). */
void proc_events(struct runner *r, const struct pollfd *pfd, size_t n);

/* Reaps every child that ended (SIGCHLD). */
void proc_reap(struct runner *r);
/* Timeouts, kill escalation, finished commands.  Returns the poll timeout
 * in ms until the next thing to do (-1: none). */
int proc_tick(struct runner *r);

/* Starts killing every command still in flight (the runner is ending). */
void proc_kill_all(struct runner *r);

/* Drains: watch, read, drop. */
size_t drain_pollfds(struct runner *r, struct pollfd *pfd, size_t room);
void drain_events(struct runner *r, const struct pollfd *pfd, size_t n);

#endif /* SG_RUNNER_RUNNER_H */
