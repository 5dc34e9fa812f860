/*
 * The runner's commands: each SPAWN forks a child that becomes the leader of
 * a new process group (setpgid), gets stdin from /dev/null (or a pipe in
 * stdin mode), its stdout and stderr on pipes, and execs a non-login
 * `/bin/sh -c`.  The runner forwards what the pipes carry as frames, enforces
 * the timeout (TERM to the group, KILL after the grace), and reports EXIT
 * once the main process was reaped and, after a kill, the group is empty.
 *
 * A command that exits by itself leaves its background children alone: their
 * pipes go to the drain list, read and dropped until EOF.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/runner/runner.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define PROC_STDIN_MAX  (8u * 1024u * 1024u) /* queued stdin per command */
#define PROC_DRAINS_MAX 256                  /* orphaned pipes kept open */
#define PROC_LINGER_MS  1000                 /* after KILL, wait this for the group */
#define PROC_STOP_GRACE 500                  /* runner ending: TERM -> KILL */
#define PROC_HIGH_FD    10                   /* above every target fd (0..9) */

extern char **environ;

/* A SPAWN request, parsed.  Every pointer is malloc'd and freed by
 * spawn_req_free(). */
struct spawn_req {
	char *command;
	char **argv;
	size_t argc;
	char **env;
	size_t envc;
	char *cwd;
	uint32_t timeout_ms, grace_ms, mode, status_fd;
	uint64_t cap;
};

/* The child's end of each pipe and the error pipe, or -1. */
struct child_fds {
	int in, out, err, status, ep;
};

/* ---- parsing ---------------------------------------------------------------------- */

static void spawn_req_free(struct spawn_req *q)
{
	free(q->command);
	for (size_t i = 0; i < q->argc; i++)
		free(q->argv[i]);
	free(q->argv);
	for (size_t i = 0; i < q->envc; i++)
		free(q->env[i]);
	free(q->env);
	free(q->cwd);
}

/* A field's text as a new string; NULL when it holds a NUL or on ENOMEM. */
char *rn_field_dup(const struct rn_field *f)
{
	char *s;

	if (memchr(f->val, '\0', f->len))
		return NULL;
	s = malloc((size_t)f->len + 1);
	if (!s)
		return NULL;
	memcpy(s, f->val, f->len);
	s[f->len] = '\0';
	return s;
}

/* Appends a field's text to a NULL-terminated vector. */
static int vec_add(char ***v, size_t *n, const struct rn_field *f)
{
	char **nv = realloc(*v, (*n + 2) * sizeof(**v));
	char *s;

	if (!nv)
		return -1;
	*v = nv;
	s = rn_field_dup(f);
	if (!s)
		return -1;
	nv[(*n)++] = s;
	nv[*n] = NULL;
	return 0;
}

static int spawn_field(struct spawn_req *q, const struct rn_field *f)
{
	switch (f->tag) {
	case RN_F_COMMAND:
		free(q->command);
		return (q->command = rn_field_dup(f)) ? 0 : -1;
	case RN_F_CWD:
		free(q->cwd);
		return (q->cwd = rn_field_dup(f)) ? 0 : -1;
	case RN_F_ARG:
		return vec_add(&q->argv, &q->argc, f);
	case RN_F_ENV:
		return f->len && f->val[0] != '=' && memchr(f->val, '=', f->len) ?
		       vec_add(&q->env, &q->envc, f) : -1;
	case RN_F_TIMEOUT_MS:
		return rn_field_u32(f, &q->timeout_ms);
	case RN_F_GRACE_MS:
		return rn_field_u32(f, &q->grace_ms);
	case RN_F_MODE:
		return rn_field_u32(f, &q->mode);
	case RN_F_STATUS_FD:
		return rn_field_u32(f, &q->status_fd);
	case RN_F_CAP:
		return rn_field_u64(f, &q->cap);
	default:
		return 0; /* a newer minor's field: ignored */
	}
}

/* Returns 0, or -1 with why filled. */
static int spawn_parse(struct spawn_req *q, const unsigned char *payload, size_t len,
		       char *why, size_t size)
{
	struct rn_iter it;
	struct rn_field f;
	int rc;

	memset(q, 0, sizeof(*q));
	q->grace_ms = RN_GRACE_MS_DEFAULT;
	q->status_fd = 3;
	rn_iter_init(&it, payload, len);
	while ((rc = rn_iter_next(&it, &f)) > 0) {
		if (spawn_field(q, &f) < 0) {
			snprintf(why, size, "bad SPAWN field %u", f.tag);
			return -1;
		}
	}
	if (rc < 0) {
		snprintf(why, size, "SPAWN fields run past the frame");
		return -1;
	}
	if (!q->command && q->argc == 0) {
		snprintf(why, size, "SPAWN has neither COMMAND nor ARG");
		return -1;
	}
	if ((q->mode & RN_MODE_STATUS) && (q->status_fd < 3 || q->status_fd > 9)) {
		snprintf(why, size, "status fd %u is not in 3..9", q->status_fd);
		return -1;
	}
	return 0;
}

char **rn_envp(char *const *env, size_t envc)
{
	size_t n = 0, k = 0;
	char **envp;

	while (environ && environ[n])
		n++;
	envp = calloc(n + envc + 1, sizeof(*envp));
	if (!envp)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		size_t klen = strcspn(environ[i], "=");
		bool replaced = false;

		for (size_t j = 0; j < envc && !replaced; j++)
			replaced = strncmp(env[j], environ[i], klen) == 0 &&
				   env[j][klen] == '=';
		if (!replaced)
			envp[k++] = environ[i];
	}
	for (size_t j = 0; j < envc; j++)
		envp[k++] = env[j];
	envp[k] = NULL;
	return envp;
}

static enum rn_fault spawn_fault(const struct runner *r, const struct spawn_req *q)
{
	static const char *const names[] = { NULL, "sandgate-fault:corrupt",
					     "sandgate-fault:truncate",
					     "sandgate-fault:huge",
					     "sandgate-fault:badid" };

	if (!r->faults || !q->command)
		return RN_FAULT_NONE;
	for (size_t i = 1; i < sizeof(names) / sizeof(names[0]); i++)
		if (strstr(q->command, names[i]))
			return (enum rn_fault)i;
	return RN_FAULT_NONE;
}

/* ---- the child ------------------------------------------------------------------------ */

void rn_child_fail(int ep, uint32_t stage)
{
	unsigned char msg[8];
	ssize_t w;

	rn_set_u32(msg, stage);
	rn_set_u32(msg + 4, (uint32_t)errno);
	w = write(ep, msg, sizeof(msg));
	(void)w;
	_exit(127);
}

/* Moves fd above every target number, so no dup2() below clobbers it. */
int rn_child_lift(int fd)
{
	return fd < 0 ? -1 : fcntl(fd, F_DUPFD_CLOEXEC, PROC_HIGH_FD);
}

/* Never returns.  Runs in the vforked child (spawn_child()): only system
 * calls on the child's own state, then execve() or _exit(). */
static __attribute__((noreturn)) void child_exec(const struct spawn_req *q, char **envp,
						 struct child_fds c, pid_t parent)
{
	static char sh[] = "sh", dash_c[] = "-c";
	char *shell_argv[4] = { sh, dash_c, q->command, NULL };
	sigset_t none;
	int in;

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_DFL);
	setpgid(0, 0);
	/* A runner killed outright takes its commands' leaders with it; one
	 * killed before this line is seen by getppid(). */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
		rn_child_fail(c.ep, RN_STAGE_SETUP);
	in = c.in >= 0 ? c.in : open("/dev/null", O_RDONLY | O_CLOEXEC);
	in = rn_child_lift(in);
	c.out = rn_child_lift(c.out);
	c.err = rn_child_lift(c.err >= 0 ? c.err : c.out);
	c.status = rn_child_lift(c.status);
	if (in < 0 || c.out < 0 || c.err < 0 ||
	    dup2(in, 0) < 0 || dup2(c.out, 1) < 0 || dup2(c.err, 2) < 0 ||
	    (c.status >= 0 && dup2(c.status, (int)q->status_fd) < 0))
		rn_child_fail(c.ep, RN_STAGE_SETUP);
	if (q->cwd && *q->cwd && chdir(q->cwd) < 0)
		rn_child_fail(c.ep, RN_STAGE_CHDIR);
	if (q->command) {
		execve("/bin/sh", shell_argv, envp);
	} else {
		execvpe(q->argv[0], q->argv, envp);
	}
	rn_child_fail(c.ep, RN_STAGE_EXEC);
}

/* vfork: the child borrows the runner's memory until it execs, so a spawn
 * costs no copy of the page tables and no copy-on-write faults afterwards
 * (1.3 ms a command on a VM whose page faults are dear: doc/performance.md).
 * What makes it safe here: the runner is single-threaded and installs no
 * signal handler (SIGCHLD comes through a signalfd, SIGPIPE is ignored), so
 * nothing but the child runs in the shared memory until it execs; the child
 * only makes system calls on its own state and writes nothing the parent
 * reads but errno, which the parent reads only when vfork() itself failed;
 * and this function is never inlined, so the child's frames lie below the
 * caller's and never overwrite them. */
static __attribute__((noinline)) pid_t spawn_child(const struct spawn_req *q, char **envp,
						   struct child_fds c)
{
	pid_t parent = getpid(), pid = vfork();

	if (pid == 0)
		child_exec(q, envp, c, parent);
	return pid;
}

/* ---- spawning ------------------------------------------------------------------------ */

int rn_proc_stat(long pid, char *state, long long *ticks)
{
	char path[64], buf[1024], *p, st;
	unsigned long long ut, sy;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	/* after the name, which may hold anything but ends at the last ')' */
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 1, " %c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &st, &ut,
			 &sy) != 3)
		return -1;
	if (state)
		*state = st;
	if (ticks)
		*ticks = (long long)(ut + sy);
	return 0;
}

void rn_close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* A pipe whose runner end (read end unless `write_end`) is non-blocking. */
int rn_make_pipe(int fds[2], bool runner_writes)
{
	if (pipe2(fds, O_CLOEXEC) < 0)
		return -1;
	return fcntl(fds[runner_writes ? 1 : 0], F_SETFL, O_NONBLOCK);
}

void rn_send_spawn_error(struct runner *r, uint32_t id, uint32_t stage, int err)
{
	struct rn_buf b = { 0 };
	/* Like a shell: 126 found but not runnable, 127 not found or no start. */
	uint32_t code = stage == RN_STAGE_EXEC && (err == EACCES || err == ENOEXEC) ?
			126 : 127;

	rn_put_u32(&b, RN_F_CODE, code);
	rn_put_u32(&b, RN_F_ERRNO, (uint32_t)err);
	rn_put_u32(&b, RN_F_STAGE, stage);
	rn_put_u32(&b, RN_F_FLAGS, 0);
	if (!b.oom)
		rn_send(r, RN_R_EXIT, id, b.data, b.len);
	rn_buf_free(&b);
}

static struct proc *proc_new(uint32_t id, const struct spawn_req *q)
{
	struct proc *p = calloc(1, sizeof(*p)); /* freed by proc_finish() */

	if (!p)
		return NULL;
	p->id = id;
	p->fd_out = p->fd_err = p->fd_status = p->fd_in = -1;
	p->cap = q->cap;
	p->grace_ms = q->grace_ms;
	p->deadline = q->timeout_ms ? rn_now_ms() + q->timeout_ms : 0;
	return p;
}

/* Makes the pipes: runner ends in p, child ends in c.  Returns 0 or -1. */
static int spawn_pipes(const struct spawn_req *q, struct proc *p, struct child_fds *c)
{
	int fds[2];

	if (rn_make_pipe(fds, false) < 0)
		return -1;
	p->fd_out = fds[0];
	c->out = fds[1];
	if (!(q->mode & RN_MODE_MERGE)) {
		if (rn_make_pipe(fds, false) < 0)
			return -1;
		p->fd_err = fds[0];
		c->err = fds[1];
	}
	if (q->mode & RN_MODE_STATUS) {
		if (rn_make_pipe(fds, false) < 0)
			return -1;
		p->fd_status = fds[0];
		c->status = fds[1];
	}
	if (q->mode & RN_MODE_STDIN) {
		if (rn_make_pipe(fds, true) < 0)
			return -1;
		p->fd_in = fds[1];
		c->in = fds[0];
	}
	if (pipe2(fds, O_CLOEXEC) < 0)
		return -1;
	c->ep = fds[1];
	return fds[0];
}

static void child_fds_close(struct child_fds *c)
{
	rn_close_fd(&c->in);
	rn_close_fd(&c->out);
	rn_close_fd(&c->err);
	rn_close_fd(&c->status);
	rn_close_fd(&c->ep);
}

static void proc_close_fds(struct proc *p)
{
	rn_close_fd(&p->fd_out);
	rn_close_fd(&p->fd_err);
	rn_close_fd(&p->fd_status);
	rn_close_fd(&p->fd_in);
}

/* Reads the error pipe: 0 when the child exec'd, else fills stage/err. */
int rn_wait_exec(int ep, pid_t pid, uint32_t *stage, int *err)
{
	unsigned char msg[8];
	ssize_t n;
	int st;

	do
		n = read(ep, msg, sizeof(msg));
	while (n < 0 && errno == EINTR);
	if (n == 0)
		return 0;
	*stage = n == (ssize_t)sizeof(msg) ? rn_get_u32(msg) : RN_STAGE_SETUP;
	*err = n == (ssize_t)sizeof(msg) ? (int)rn_get_u32(msg + 4) : EIO;
	/* It is _exit()ing now: reap it here, it never becomes a proc. */
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	return -1;
}

static void send_started(struct runner *r, const struct proc *p)
{
	struct rn_buf b = { 0 };

	rn_put_u32(&b, RN_F_PID, (uint32_t)p->pid);
	rn_put_u32(&b, RN_F_PGID, (uint32_t)p->pgid);
	if (!b.oom)
		rn_send(r, RN_R_STARTED, p->id, b.data, b.len);
	rn_buf_free(&b);
}

void proc_spawn(struct runner *r, uint32_t id, const unsigned char *payload, size_t len)
{
	struct spawn_req q;
	struct child_fds c = { -1, -1, -1, -1, -1 };
	struct proc *p = NULL;
	char why[128], **envp = NULL;
	uint32_t stage = RN_STAGE_SETUP;
	int ep = -1, err = 0;
	pid_t pid;

	if (spawn_parse(&q, payload, len, why, sizeof(why)) < 0) {
		rn_send_error(r, id, "%s", why);
		goto out;
	}
	if (id == 0 || proc_find(r, id) || kernel_has_id(r, id) || file_has_id(r, id)) {
		rn_send_error(r, id, "request id %u is 0 or already running", id);
		goto out;
	}
	p = proc_new(id, &q);
	envp = rn_envp(q.env, q.envc);
	if (!p || !envp || (ep = spawn_pipes(&q, p, &c)) < 0) {
		err = errno;
		goto fail;
	}
	p->fault = spawn_fault(r, &q);
	pid = spawn_child(&q, envp, c);
	if (pid < 0) {
		err = errno;
		goto fail;
	}
	/* The child made its group (setpgid) before it exec'd, and vfork()
	 * returns only after that: a KILL right after STARTED finds it. */
	child_fds_close(&c);
	if (rn_wait_exec(ep, pid, &stage, &err) < 0)
		goto fail;
	p->pid = p->pgid = pid;
	p->next = r->procs;
	r->procs = p;
	send_started(r, p);
	p = NULL;
	goto out;
fail:
	rn_send_spawn_error(r, id, stage, err ? err : EIO);
out:
	if (p) {
		proc_close_fds(p);
		free(p);
	}
	child_fds_close(&c);
	if (ep >= 0)
		close(ep);
	free(envp);
	spawn_req_free(&q);
}

struct proc *proc_find(struct runner *r, uint32_t id)
{
	for (struct proc *p = r->procs; p; p = p->next)
		if (p->id == id)
			return p;
	return NULL;
}

static void proc_signal(struct proc *p, int sig);

/* ---- output ---------------------------------------------------------------------------- */

/* Sends the first output frame of a faulty command wrong on purpose. */
static void proc_misbehave(struct runner *r, struct proc *p, uint8_t type,
			   const unsigned char *data, size_t n)
{
	unsigned char hdr[RN_HDR_SIZE];
	ssize_t w;

	switch (p->fault) {
	case RN_FAULT_CORRUPT:
		rn_hdr_put(hdr, type, p->id, (uint32_t)n);
		hdr[6] = 0x5a;
		break;
	case RN_FAULT_HUGE:
		rn_hdr_put(hdr, type, p->id, RN_MAX_PAYLOAD + 1);
		break;
	case RN_FAULT_BADID:
		rn_hdr_put(hdr, type, p->id + 100000, (uint32_t)n);
		break;
	case RN_FAULT_TRUNCATE:
	default:
		rn_hdr_put(hdr, type, p->id, (uint32_t)n + 64);
		break;
	}
	w = write(r->out_fd, hdr, sizeof(hdr));
	w = write(r->out_fd, data, n);
	(void)w;
	if (p->fault == RN_FAULT_TRUNCATE) {
		/* The frame stays short: the stream ends inside it.  Like a crash,
		 * but the commands in flight go first, so tests see no leftovers. */
		for (struct proc *q = r->procs; q; q = q->next)
			proc_signal(q, SIGKILL);
		_exit(3);
	}
	p->fault = RN_FAULT_NONE;
}

static void proc_forward(struct runner *r, struct proc *p, uint8_t type,
			 const unsigned char *data, size_t n)
{
	uint64_t *sent = type == RN_R_STDERR ? &p->sent_err : &p->sent_out;
	bool *trunc = type == RN_R_STDERR ? &p->trunc_err : &p->trunc_out;

	if (type != RN_R_STATUS && p->cap) {
		uint64_t room = *sent < p->cap ? p->cap - *sent : 0;

		if (n > room) {
			*trunc = true; /* the rest is read and dropped */
			n = (size_t)room;
		}
		*sent += n;
	}
	if (n == 0)
		return;
	if (p->fault != RN_FAULT_NONE) {
		proc_misbehave(r, p, type, data, n);
		return;
	}
	rn_send(r, type, p->id, data, n);
}

/* One read of *fd.  Returns 1 after data, 0 when nothing is there now, -1
 * at EOF or error (fd closed). */
static int proc_read(struct runner *r, struct proc *p, int *fd, uint8_t type)
{
	static unsigned char buf[RN_CHUNK];
	ssize_t n;

	if (*fd < 0)
		return -1;
	n = read(*fd, buf, sizeof(buf));
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (n <= 0) {
		rn_close_fd(fd);
		return -1;
	}
	proc_forward(r, p, type, buf, (size_t)n);
	return 1;
}

/* Everything the pipe holds right now. */
static void proc_drain_now(struct runner *r, struct proc *p, int *fd, uint8_t type)
{
	while (proc_read(r, p, fd, type) > 0)
		;
}

/* Status bytes go out only after all output written before them: the
 * process wrote its output first, so it is in the pipes already. */
static void proc_read_status(struct runner *r, struct proc *p)
{
	proc_drain_now(r, p, &p->fd_out, RN_R_STDOUT);
	proc_drain_now(r, p, &p->fd_err, RN_R_STDERR);
	proc_read(r, p, &p->fd_status, RN_R_STATUS);
}

/* ---- stdin ----------------------------------------------------------------------------- */

static void proc_flush_stdin(struct proc *p)
{
	ssize_t w;

	while (p->fd_in >= 0 && p->inq_off < p->inq.len) {
		w = write(p->fd_in, p->inq.data + p->inq_off, p->inq.len - p->inq_off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN)
			return;
		if (w < 0) { /* EPIPE: nobody reads stdin any more */
			rn_close_fd(&p->fd_in);
			break;
		}
		p->inq_off += (size_t)w;
	}
	p->inq.len = 0;
	p->inq_off = 0;
	if (p->in_close)
		rn_close_fd(&p->fd_in);
}

void proc_stdin(struct runner *r, struct proc *p, const unsigned char *data, size_t len)
{
	(void)r;
	if (p->fd_in < 0 || p->in_close)
		return;
	if (p->inq.len - p->inq_off + len > PROC_STDIN_MAX) {
		fprintf(stderr, "sandgate-runner: request %u: stdin backlog over %u "
			"bytes, dropping %zu bytes\n", p->id, PROC_STDIN_MAX, len);
		return;
	}
	rn_buf_add(&p->inq, data, len);
	if (p->inq.oom) {
		rn_buf_free(&p->inq);
		p->inq_off = 0;
		return;
	}
	proc_flush_stdin(p);
}

void proc_stdin_close(struct proc *p)
{
	p->in_close = true;
	proc_flush_stdin(p);
}

/* ---- poll ---------------------------------------------------------------------------------- */

static size_t add_pfd(struct pollfd *pfd, size_t n, size_t room, int fd, short ev)
{
	if (fd < 0 || n >= room)
		return n;
	pfd[n] = (struct pollfd){ .fd = fd, .events = ev };
	return n + 1;
}

size_t proc_pollfds(struct runner *r, struct pollfd *pfd, size_t room)
{
	size_t n = 0;

	for (struct proc *p = r->procs; p; p = p->next) {
		n = add_pfd(pfd, n, room, p->fd_out, POLLIN);
		n = add_pfd(pfd, n, room, p->fd_err, POLLIN);
		n = add_pfd(pfd, n, room, p->fd_status, POLLIN);
		if (p->inq.len > p->inq_off)
			n = add_pfd(pfd, n, room, p->fd_in, POLLOUT);
	}
	return n;
}

/* Procs may have been added since the fds were gathered: match by fd.  A
 * stale match only costs a read or write that finds nothing to do. */
static void proc_event(struct runner *r, const struct pollfd *q)
{
	for (struct proc *p = r->procs; p; p = p->next) {
		if (q->fd == p->fd_out)
			proc_read(r, p, &p->fd_out, RN_R_STDOUT);
		else if (q->fd == p->fd_err)
			proc_read(r, p, &p->fd_err, RN_R_STDERR);
		else if (q->fd == p->fd_status)
			proc_read_status(r, p);
		else if (q->fd == p->fd_in)
			proc_flush_stdin(p);
		else
			continue;
		return;
	}
}

void proc_events(struct runner *r, const struct pollfd *pfd, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (pfd[i].revents)
			proc_event(r, &pfd[i]);
}

/* ---- killing and reaping ------------------------------------------------------------------ */

static void proc_signal(struct proc *p, int sig)
{
	if (p->pgid > 1)
		kill(-p->pgid, sig);
	/* The leader may have left its group (setsid in the command). */
	if (!p->exited && p->pid > 1)
		kill(p->pid, sig);
}

void proc_kill(struct runner *r, struct proc *p, int sig)
{
	(void)r;
	if (sig > 0) {
		proc_signal(p, sig);
		return;
	}
	if (p->kill_stage != KILL_NONE)
		return;
	p->killed = !p->timed_out;
	if (p->grace_ms == 0) {
		proc_signal(p, SIGKILL);
		p->kill_stage = KILL_KILL_SENT;
		p->give_up_at = rn_now_ms() + PROC_LINGER_MS;
		return;
	}
	proc_signal(p, SIGTERM);
	/* A stopped process cannot act on TERM until it runs again. */
	proc_signal(p, SIGCONT);
	p->kill_stage = KILL_TERM_SENT;
	p->kill_at = rn_now_ms() + p->grace_ms;
}

void proc_kill_all(struct runner *r)
{
	for (struct proc *p = r->procs; p; p = p->next) {
		if (p->grace_ms > PROC_STOP_GRACE)
			p->grace_ms = PROC_STOP_GRACE;
		proc_kill(r, p, 0);
	}
}

void proc_reap(struct runner *r)
{
	pid_t pid;
	int st;

	/* As subreaper we also get orphans of every command: reap them all. */
	while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
		bool mine = false;

		for (struct proc *p = r->procs; p && !mine; p = p->next) {
			if (p->pid == pid && !p->exited) {
				p->exited = true;
				p->wstatus = st;
				mine = true;
			}
		}
		if (!mine)
			kernel_reaped(r, pid, st);
	}
}

static bool group_gone(const struct proc *p)
{
	return kill(-p->pgid, 0) < 0 && errno == ESRCH;
}

/* Keeps an orphaned output pipe open and drained (see the file comment). */
void drain_add(struct runner *r, int *fd)
{
	struct drain *d;

	if (*fd < 0)
		return;
	d = r->n_drains < PROC_DRAINS_MAX ? malloc(sizeof(*d)) : NULL; /* drain_events() frees */
	if (!d) {
		rn_close_fd(fd);
		return;
	}
	d->fd = *fd;
	d->next = r->drains;
	r->drains = d;
	r->n_drains++;
	*fd = -1;
}

static void send_exit(struct runner *r, const struct proc *p)
{
	struct rn_buf b = { 0 };
	uint32_t flags = (p->timed_out ? RN_EXIT_TIMED_OUT : 0) |
			 (p->killed ? RN_EXIT_KILLED : 0) |
			 (p->trunc_out ? RN_EXIT_OUT_TRUNC : 0) |
			 (p->trunc_err ? RN_EXIT_ERR_TRUNC : 0);

	if (WIFEXITED(p->wstatus))
		rn_put_u32(&b, RN_F_CODE, (uint32_t)WEXITSTATUS(p->wstatus));
	else if (WIFSIGNALED(p->wstatus))
		rn_put_u32(&b, RN_F_SIGNAL, (uint32_t)WTERMSIG(p->wstatus));
	rn_put_u32(&b, RN_F_FLAGS, flags);
	if (!b.oom)
		rn_send(r, RN_R_EXIT, p->id, b.data, b.len);
	rn_buf_free(&b);
}

/* Last output, EXIT, and the proc leaves the list (and is freed). */
static void proc_finish(struct runner *r, struct proc **pp)
{
	struct proc *p = *pp;

	proc_drain_now(r, p, &p->fd_out, RN_R_STDOUT);
	proc_drain_now(r, p, &p->fd_err, RN_R_STDERR);
	proc_drain_now(r, p, &p->fd_status, RN_R_STATUS);
	send_exit(r, p);
	drain_add(r, &p->fd_out);
	drain_add(r, &p->fd_err);
	drain_add(r, &p->fd_status);
	rn_close_fd(&p->fd_in);
	rn_buf_free(&p->inq);
	*pp = p->next;
	free(p);
}

static int min_wait(int cur, int64_t at, int64_t now)
{
	int64_t d = at - now;
	int w = d <= 0 ? 0 : d > 60000 ? 60000 : (int)d;

	return cur < 0 || w < cur ? w : cur;
}

/* Advances one proc; returns true when it finished (and was freed). */
static bool proc_step(struct runner *r, struct proc **pp, int64_t now, int *wait)
{
	struct proc *p = *pp;

	if (!p->exited && p->deadline && now >= p->deadline && p->kill_stage == KILL_NONE) {
		p->timed_out = true;
		proc_kill(r, p, 0);
	}
	if (p->kill_stage == KILL_TERM_SENT && now >= p->kill_at) {
		proc_signal(p, SIGKILL);
		p->kill_stage = KILL_KILL_SENT;
		p->give_up_at = now + PROC_LINGER_MS;
	}
	if (p->exited && (p->kill_stage == KILL_NONE || group_gone(p) ||
			  (p->kill_stage == KILL_KILL_SENT && now >= p->give_up_at))) {
		proc_finish(r, pp);
		return true;
	}
	if (p->exited) /* waiting for the rest of a killed group: look again soon */
		*wait = min_wait(*wait, now + 20, now);
	if (p->kill_stage == KILL_TERM_SENT)
		*wait = min_wait(*wait, p->kill_at, now);
	else if (p->kill_stage == KILL_KILL_SENT)
		*wait = min_wait(*wait, now + 20, now);
	else if (p->deadline)
		*wait = min_wait(*wait, p->deadline, now);
	return false;
}

int proc_tick(struct runner *r)
{
	int64_t now = rn_now_ms();
	int wait = -1;

	for (struct proc **pp = &r->procs; *pp;)
		if (!proc_step(r, pp, now, &wait))
			pp = &(*pp)->next;
	return wait;
}

/* ---- drains ------------------------------------------------------------------------------ */

size_t drain_pollfds(struct runner *r, struct pollfd *pfd, size_t room)
{
	size_t n = 0;

	for (struct drain *d = r->drains; d; d = d->next)
		n = add_pfd(pfd, n, room, d->fd, POLLIN);
	return n;
}

void drain_events(struct runner *r, const struct pollfd *pfd, size_t n)
{
	static unsigned char sink[RN_CHUNK];

	for (size_t i = 0; i < n; i++) {
		ssize_t got;

		if (!pfd[i].revents)
			continue;
		got = read(pfd[i].fd, sink, sizeof(sink));
		if (got > 0 || (got < 0 && (errno == EAGAIN || errno == EINTR)))
			continue;
		for (struct drain **dp = &r->drains; *dp; dp = &(*dp)->next) {
			if ((*dp)->fd == pfd[i].fd) {
				struct drain *d = *dp;

				*dp = d->next;
				close(d->fd);
				free(d);
				r->n_drains--;
				break;
			}
		}
	}
}
