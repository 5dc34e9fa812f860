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

enum rn_lang { RN_LANG_PYTHON = 0, RN_LANG_JAVASCRIPT, RN_LANG_N };

/* One KEXEC request.  Owned by its kernel (its queue, then its current
 * call); freed by kernel.c when it ends. */
struct kcall {
	uint32_t id;
	enum rn_lang lang;
	char *source;             /* the code, source_len bytes (not text-checked) */
	size_t source_len;
	char **env;               /* "K=V", envc of them: for a kernel it starts */
	size_t envc;
	char *cwd;                /* where a kernel it starts runs, or NULL */
	char *scope;              /* whose kernel (SCOPE), never NULL */
	bool has_lang;            /* LANG was given (END may go without) */
	uint32_t timeout_ms, grace_ms, flags, rich_cap;
	uint64_t cap;             /* stdout/stderr bytes forwarded each, 0: all */
	struct kcall *next;
};

/* A kernel: one long-lived interpreter per scope (a sandbox) and language,
 * started by the first call for it (kernel.c, doc/kernel-protocol.md).
 * Owned by runner->kernels until the scope ends or the runner does.  pid 0:
 * none runs now. */
struct kernel {
	char *scope;              /* owned */
	enum rn_lang lang;
	struct kernel *next;
	pid_t pid;
	int fd_out, fd_err;       /* its stdout and stderr, read ends */
	int fd_req;               /* write end of its fd 3 (requests) */
	int fd_ev;                /* read end of its fd 4 (event lines) */
	struct rn_buf reqq;       /* request bytes not yet written */
	size_t reqq_off;
	struct rn_buf line;       /* a partial event line */
	char hello[512];          /* its hello line, repeated at each call's start */
	char dead_why[200];       /* it ended: told to the next call, then cleared */
	char kill_why[200];       /* the runner killed it: why */
	struct kcall *cur;        /* the call it runs, or NULL */
	struct kcall *queue;      /* calls waiting for it, in order */
	size_t n_queued;
	/* The current call's state: */
	uint64_t sent_out, sent_err;
	bool trunc_out, trunc_err;
	int64_t deadline;         /* interrupt at this time; 0: none */
	int64_t kill_at;          /* interrupted: kill the kernel at this time; 0: not */
	long long int_ticks;      /* its CPU time when interrupted (clock ticks), or -1 */
	bool kill_extended;       /* kill_at was moved once: the kernel was idle, not busy */
	bool timed_out, cancelled;
	char restarted[200];      /* this call runs on a restarted kernel: why */
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
	bool is_init;             /* pid 1 of its namespace (a jail's --as-pid-1) */
	char build_id[RN_BUILD_ID_LEN + 1];
	struct proc *procs;
	struct drain *drains;
	size_t n_drains;
	struct kernel *kernels;   /* at most RN_KERNELS_MAX */
	size_t n_kernels;
	struct fwrite *writes;    /* file writes in flight (files.c) */
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

/* The capability names this runner announces in its HELLO. */
extern const char *const rn_capabilities[];

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
/* Hands an output pipe whose writer may live on to the drains (*fd = -1). */
void drain_add(struct runner *r, int *fd);

/* Helpers shared with kernel.c. */
/* A field's text as a new string (malloc'd, the caller frees); NULL when it
 * holds a NUL or on ENOMEM. */
char *rn_field_dup(const struct rn_field *f);
/* The runner's environment with env[0..envc) set over it: a malloc'd vector
 * (the caller frees it) of borrowed strings. */
char **rn_envp(char *const *env, size_t envc);
/* A pipe, both ends close-on-exec, the runner's end (the read end unless
 * runner_writes) non-blocking.  Returns 0 or -1. */
int rn_make_pipe(int fds[2], bool runner_writes);
void rn_close_fd(int *fd);
/* What /proc/PID/stat says of pid: its state letter ('R', 'S', 'Z', ...)
 * into *state and its CPU time (utime + stime, fields 14 and 15, clock
 * ticks) into *ticks; either may be NULL.  Returns 0, or -1 when it cannot
 * be read (no such process). */
int rn_proc_stat(long pid, char *state, long long *ticks);
/* In a forked child: moves fd above 0..9 (close-on-exec); -1 stays -1. */
int rn_child_lift(int fd);
/* In a forked child: reports errno at `stage` on the error pipe, exits 127. */
void rn_child_fail(int ep, uint32_t stage) __attribute__((noreturn));
/* Reads the error pipe ep of child pid: 0 when it exec'd, else -1 with
 * *stage and *err filled (the child is reaped). */
int rn_wait_exec(int ep, pid_t pid, uint32_t *stage, int *err);
/* Answers a request whose process could not start: a lone EXIT with CODE
 * (126 or 127, as a shell), ERRNO and STAGE. */
void rn_send_spawn_error(struct runner *r, uint32_t id, uint32_t stage, int err);

/* ---- kernel.c ---------------------------------------------------------------------- */

void kernel_init(struct runner *r);
/* A KEXEC frame: runs it at once, or queues it behind the kernel's call, or
 * refuses it with ERROR (malformed, id in use, queue full). */
void kernel_exec(struct runner *r, uint32_t id, const unsigned char *payload,
		 size_t len);
/* True when id is a kernel call, running or queued. */
bool kernel_has_id(struct runner *r, uint32_t id);
/* A KILL frame for id: sig 0 interrupts the call (the kernel is killed when
 * it does not stop within the grace), else sends sig to the kernel.  A
 * queued call ends at once.  Returns false when id is no kernel call. */
bool kernel_kill(struct runner *r, uint32_t id, int sig);
/* Adds the fds to watch (4 per kernel at most); returns how many. */
size_t kernel_pollfds(struct runner *r, struct pollfd *pfd, size_t room);
void kernel_events(struct runner *r, const struct pollfd *pfd, size_t n);
/* A reaped child that is no command: true when it was a kernel. */
bool kernel_reaped(struct runner *r, pid_t pid, int wstatus);
/* Timeouts and kills; returns the poll timeout in ms (-1: none). */
int kernel_tick(struct runner *r);
/* The runner ends: every kernel's process group is killed. */
void kernel_stop_all(struct runner *r);

/* ---- files.c ----------------------------------------------------------------------- */

struct fwrite;

/* A FILE frame: answers at once (one FILE answer), or, for a WRITE, opens
 * its temporary file and waits for its bytes; ERROR for a malformed one. */
void file_op(struct runner *r, uint32_t id, const unsigned char *payload, size_t len);
/* True when id is a write in flight. */
bool file_has_id(struct runner *r, uint32_t id);
/* STDIN, STDIN_CLOSE (commit) and KILL (drop) for a write: false when id is
 * none. */
bool file_stdin(struct runner *r, uint32_t id, const unsigned char *data, size_t len);
bool file_stdin_close(struct runner *r, uint32_t id);
bool file_kill(struct runner *r, uint32_t id);
/* The runner ends: every write in flight is dropped with its temporary file. */
void file_stop_all(struct runner *r);

#endif /* SG_RUNNER_RUNNER_H */
