/*
 * sandgate-runner: the in-sandbox agent that runs sandgate's commands.
 *
 * sandgate starts it once per sandbox (one docker exec, one SSH channel) and
 * then speaks the runner protocol (proto.h, doc/runner-protocol.md) over its
 * stdin and stdout: many commands at once, each in its own process group,
 * with output, exit status, timeouts and kills, at the cost of a fork+exec
 * instead of a full exec round trip through the container engine.
 *
 * Statically linked, no dependencies: it must run in any Linux image of the
 * same CPU architecture.  It dies with its stream: at EOF on stdin (or
 * SIGTERM/SIGINT/SIGHUP) it kills the commands still in flight and exits.  It
 * is a child subreaper, so orphans of its commands are reaped here.
 *
 * It also keeps the code kernels of run_code (kernel.c) and does file
 * operations where its commands run (files.c).
 *
 * Usage: sandgate-runner [--stdio] [--dial PATH] | --version
 * (--fault is a hidden test switch: see enum rn_fault in runner.h.)
 *
 * --dial PATH: the first line on stdin is a token; the runner connects to
 * the Unix socket PATH, sends the token line and then speaks the protocol
 * on that socket instead of stdin/stdout (docker.so's direct channel: a
 * socket sandgate listens on, bind-mounted read-only into the container,
 * which skips the engine's relay).  When it cannot, it says why on stderr
 * and speaks on stdin/stdout as without it.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/runner/runner.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <poll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/uio.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#define RUNNER_POLL_MAX 1024 /* fds watched at once; more wait a round */
#define DIAL_TOKEN_MAX  128  /* the token line, newline included */
#define DIAL_WAIT_MS    5000 /* for the token line on stdin */

const char *const rn_capabilities[] = { RN_CAP_KERNEL, RN_CAP_KERNEL_SCOPE, RN_CAP_FILES,
						RN_CAP_SWEEP, RN_CAP_BENEATH, NULL };

int64_t rn_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- sending --------------------------------------------------------------------- */

static void runner_stop(struct runner *r)
{
	if (r->stopping)
		return;
	r->stopping = true;
	r->stop_deadline = rn_now_ms() + 2000;
	proc_kill_all(r);
	kernel_stop_all(r);
	file_stop_all(r);
}

/* Writes all of iov (blocking); -1 on any error. */
static int write_all(int fd, struct iovec *iov, int n)
{
	ssize_t w;

	while (n > 0) {
		w = writev(fd, iov, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -1;
		while (n > 0 && (size_t)w >= iov->iov_len) {
			w -= (ssize_t)iov->iov_len;
			iov++;
			n--;
		}
		if (n > 0) {
			iov->iov_base = (char *)iov->iov_base + w;
			iov->iov_len -= (size_t)w;
		}
	}
	return 0;
}

int rn_send(struct runner *r, uint8_t type, uint32_t id, const void *payload,
	    size_t len)
{
	unsigned char hdr[RN_HDR_SIZE];
	struct iovec iov[2];

	if (r->out_dead)
		return -1;
	rn_hdr_put(hdr, type, id, (uint32_t)len);
	iov[0] = (struct iovec){ .iov_base = hdr, .iov_len = sizeof(hdr) };
	iov[1] = (struct iovec){ .iov_base = (void *)payload, .iov_len = len };
	if (write_all(r->out_fd, iov, len ? 2 : 1) < 0) {
		/* sandgate is gone: nobody will read the results. */
		r->out_dead = true;
		runner_stop(r);
		return -1;
	}
	return 0;
}

void rn_send_error(struct runner *r, uint32_t id, const char *fmt, ...)
{
	struct rn_buf b = { 0 };
	char text[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	rn_put_str(&b, RN_F_TEXT, text);
	if (!b.oom)
		rn_send(r, RN_R_ERROR, id, b.data, b.len);
	rn_buf_free(&b);
	fprintf(stderr, "sandgate-runner: request %u: %s\n", id, text);
}

static void send_hello(struct runner *r)
{
	struct rn_buf b = { 0 };
	struct utsname u;

	if (uname(&u) < 0)
		snprintf(u.machine, sizeof(u.machine), "unknown");
	rn_put_u32(&b, RN_F_VERSION, RN_VERSION_MAJOR << 16 | RN_VERSION_MINOR);
	rn_put_str(&b, RN_F_BUILD_ID, r->build_id);
	rn_put_u32(&b, RN_F_PID, (uint32_t)getpid());
	rn_put_u32(&b, RN_F_MAX_PAYLOAD, RN_MAX_PAYLOAD);
	rn_put_str(&b, RN_F_ARCH, u.machine);
	for (size_t i = 0; rn_capabilities[i]; i++)
		rn_put_str(&b, RN_F_CAPABILITY, rn_capabilities[i]);
	if (!b.oom)
		rn_send(r, RN_R_HELLO, 0, b.data, b.len);
	rn_buf_free(&b);
}

/* ---- receiving -------------------------------------------------------------------- */

/* sandgate's HELLO: refuses another major version. */
static int on_hello(struct runner *r, const unsigned char *payload, size_t len)
{
	struct rn_iter it;
	struct rn_field f;
	uint32_t v = 0;
	int rc;

	rn_iter_init(&it, payload, len);
	while ((rc = rn_iter_next(&it, &f)) > 0)
		if (f.tag == RN_F_VERSION && rn_field_u32(&f, &v) < 0)
			rc = -1;
	if (rc < 0 || v >> 16 != RN_VERSION_MAJOR) {
		rn_send_error(r, 0, "protocol version %u.%u is not %u.x", v >> 16,
			      v & 0xffff, RN_VERSION_MAJOR);
		return -1;
	}
	r->hello_seen = true;
	return 0;
}

/* KILL for a command or a kernel call (p NULL: maybe a kernel call). */
static void on_kill(struct runner *r, uint32_t id, struct proc *p,
		    const unsigned char *payload, size_t len)
{
	uint32_t sig = 0;

	if (len == 4)
		sig = rn_get_u32(payload);
	if (len != 0 && (len != 4 || sig == 0 || sig >= 65)) {
		if (p || kernel_has_id(r, id))
			rn_send_error(r, id, "KILL carries a bad signal");
		return;
	}
	if (p)
		proc_kill(r, p, (int)sig);
	else if (!kernel_kill(r, id, (int)sig))
		file_kill(r, id);
}

/* One frame from sandgate.  Frames for commands that already ended are
 * dropped quietly: sandgate may send them before it sees the EXIT. */
static int on_frame(const struct rn_hdr *h, const unsigned char *payload, void *ud)
{
	struct runner *r = ud;
	struct proc *p = h->type == RN_SPAWN ? NULL : proc_find(r, h->id);

	if (!r->hello_seen && h->type != RN_HELLO) {
		rn_send_error(r, 0, "the first frame must be HELLO");
		return -1;
	}
	switch (h->type) {
	case RN_HELLO:
		return on_hello(r, payload, h->len);
	case RN_SPAWN:
		if (!r->stopping)
			proc_spawn(r, h->id, payload, h->len);
		return 0;
	case RN_STDIN:
		if (p)
			proc_stdin(r, p, payload, h->len);
		else
			file_stdin(r, h->id, payload, h->len);
		return 0;
	case RN_STDIN_CLOSE:
		if (p)
			proc_stdin_close(p);
		else
			file_stdin_close(r, h->id);
		return 0;
	case RN_KILL:
		on_kill(r, h->id, p, payload, h->len);
		return 0;
	case RN_KEXEC:
		if (!r->stopping)
			kernel_exec(r, h->id, payload, h->len);
		return 0;
	case RN_FILE:
		if (!r->stopping)
			file_op(r, h->id, payload, h->len);
		return 0;
	case RN_PING:
		rn_send(r, RN_R_PONG, h->id, payload, h->len);
		return 0;
	default:
		/* A newer sandgate's request: say so, keep going. */
		rn_send_error(r, h->id, "unknown frame type 0x%02x", h->type);
		return 0;
	}
}

static void read_input(struct runner *r)
{
	unsigned char buf[RN_CHUNK];
	ssize_t n = read(r->in_fd, buf, sizeof(buf));

	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) {
		r->in_eof = true;
		runner_stop(r);
		return;
	}
	if (rn_reader_feed(&r->rd, buf, (size_t)n, on_frame, r) != 0) {
		if (r->rd.why[0])
			rn_send_error(r, 0, "%s", r->rd.why);
		r->in_eof = true; /* framing is lost: stop reading */
		runner_stop(r);
	}
}

static void read_signals(struct runner *r)
{
	struct signalfd_siginfo si;

	while (read(r->sig_fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		if (si.ssi_signo == SIGCHLD)
			proc_reap(r);
		else if (!(r->is_init && si.ssi_pid != 0))
			runner_stop(r);
		/* else: as a jail's init, a stop sent from inside the jail
		 * (a sender we can see has a pid here; one outside it has
		 * none) is a command's, and the jail is not its to end */
	}
}

/* ---- the loop ----------------------------------------------------------------------- */

/* One poll round.  Returns false when the runner is done. */
static bool runner_round(struct runner *r, struct pollfd *pfd)
{
	size_t n = 0, np, nk, nd;
	int wait, kwait;

	wait = proc_tick(r);
	kwait = kernel_tick(r);
	if (kwait >= 0 && (wait < 0 || kwait < wait))
		wait = kwait;
	if (r->stopping) {
		if (!r->procs)
			return false;
		if (rn_now_ms() >= r->stop_deadline)
			return false;
		wait = wait < 0 || wait > 50 ? 50 : wait;
	}
	pfd[n++] = (struct pollfd){ .fd = r->sig_fd, .events = POLLIN };
	pfd[n++] = (struct pollfd){ .fd = r->in_eof ? -1 : r->in_fd, .events = POLLIN };
	nk = kernel_pollfds(r, pfd + n, RUNNER_POLL_MAX - n);
	np = proc_pollfds(r, pfd + n + nk, RUNNER_POLL_MAX - n - nk);
	nd = drain_pollfds(r, pfd + n + nk + np, RUNNER_POLL_MAX - n - nk - np);
	if (poll(pfd, n + nk + np + nd, wait) < 0)
		return errno == EINTR;
	kernel_events(r, pfd + n, nk);
	proc_events(r, pfd + n + nk, np);
	if (pfd[0].revents)
		read_signals(r);
	if (pfd[1].revents)
		read_input(r);
	drain_events(r, pfd + n + nk + np, nd);
	return true;
}

/* Only 0-2 pass from whoever started the runner: a descriptor a launcher
 * left open (a jail's handle on its host directory did, once) would reach
 * every command, and through /proc/self/fd whatever it names.  close_range
 * is Linux 5.9; before it, each one. */
static void close_inherited(void)
{
	long max = sysconf(_SC_OPEN_MAX);

#ifdef SYS_close_range
	if (syscall(SYS_close_range, 3u, ~0u, 0u) == 0)
		return;
#endif
	for (long fd = 3; fd < (max > 0 && max < 65536 ? max : 65536); fd++)
		close((int)fd);
}

static int runner_setup(struct runner *r)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
		return -1;
	r->sig_fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	if (r->sig_fd < 0)
		return -1;
	/* A write to a dead sandgate must fail, not kill us: we still have
	 * commands to end. */
	signal(SIGPIPE, SIG_IGN);
	/* Orphans of the commands come to us and are reaped in proc_reap(). */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	/* The commands run as our user: not dumpable, our /proc/PID/fd (the
	 * protocol's pipes) and ptrace are closed to them, so a command cannot
	 * speak in our place to sandgate (commands exec, and are dumpable). */
	prctl(PR_SET_DUMPABLE, 0);
	/* Our own stdin/stdout/stderr stay with us, never with a command. */
	for (int fd = 0; fd <= 2; fd++)
		fcntl(fd, F_SETFD, FD_CLOEXEC);
	return 0;
}

/* The runner ends: whatever is still in flight is killed outright. */
static void runner_end(struct runner *r)
{
	for (struct proc *p = r->procs; p; p = p->next) {
		if (p->pgid > 1)
			kill(-p->pgid, SIGKILL);
		if (!p->exited && p->pid > 1)
			kill(p->pid, SIGKILL);
	}
	kernel_stop_all(r);
	file_stop_all(r);
}

/* The token line from stdin, read a byte at a time so that nothing after
 * it is taken from the stream (it stays the protocol's when dialing
 * fails).  Returns its length with the newline, or -1. */
static ssize_t dial_token(char *tok, size_t size)
{
	struct pollfd p = { .fd = 0, .events = POLLIN };
	int64_t end = rn_now_ms() + DIAL_WAIT_MS;
	size_t n = 0;

	while (n + 1 < size) {
		int64_t left = end - rn_now_ms();
		ssize_t r;

		if (left <= 0 || poll(&p, 1, (int)left) <= 0)
			return -1;
		r = read(0, tok + n, 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		if (tok[n++] == '\n')
			return (ssize_t)n;
	}
	return -1;
}

/* --dial: the protocol moves to a socket at path.  On any failure the
 * runner stays on stdin/stdout, and sandgate reads its HELLO there. */
static void dial(struct runner *r, const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char tok[DIAL_TOKEN_MAX];
	ssize_t n = dial_token(tok, sizeof(tok));
	int fd;

	if (n < 0) {
		fprintf(stderr, "sandgate-runner: no token line on stdin: on stdio\n");
		return;
	}
	if (strlen(path) >= sizeof(sa.sun_path)) {
		fprintf(stderr, "sandgate-runner: socket path too long: on stdio\n");
		return;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	/* CLOEXEC: a command must never hold the channel to sandgate */
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    write_all(fd, &(struct iovec){ tok, (size_t)n }, 1) < 0) {
		fprintf(stderr, "sandgate-runner: %s: %s: on stdio\n", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return;
	}
	r->in_fd = r->out_fd = fd;
}

static int usage(void)
{
	fprintf(stderr, "usage: sandgate-runner [--stdio] [--dial PATH] | --version\n"
		"Runs sandgate's commands in a sandbox; spoken to over stdin/stdout "
		"(doc/runner-protocol.md).\n");
	return 2;
}

int main(int argc, char **argv)
{
	static struct pollfd pfd[RUNNER_POLL_MAX];
	struct runner r = { .in_fd = 0, .out_fd = 1, .sig_fd = -1 };
	const char *dial_path = NULL;
	bool version = false;

	close_inherited();
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--version") == 0)
			version = true;
		else if (strcmp(argv[i], "--dial") == 0 && i + 1 < argc)
			dial_path = argv[++i];
		else if (strcmp(argv[i], "--fault") == 0)
			r.faults = true;
		else if (strcmp(argv[i], "--stdio") != 0)
			return usage();
	}
	if (rn_build_id_file("/proc/self/exe", r.build_id) < 0)
		snprintf(r.build_id, sizeof(r.build_id), "unknown");
	if (version) {
		printf("sandgate-runner protocol %u.%u build %s\n", RN_VERSION_MAJOR,
		       RN_VERSION_MINOR, r.build_id);
		return 0;
	}
	r.is_init = getpid() == 1;
	if (runner_setup(&r) < 0) {
		fprintf(stderr, "sandgate-runner: setup failed: %s\n", strerror(errno));
		return 1;
	}
	if (dial_path)
		dial(&r, dial_path);
	rn_reader_init(&r.rd, RN_MAX_PAYLOAD);
	kernel_init(&r);
	send_hello(&r);
	while (runner_round(&r, pfd))
		;
	runner_end(&r);
	rn_reader_free(&r.rd);
	return r.out_dead || !r.in_eof ? 1 : 0;
}
