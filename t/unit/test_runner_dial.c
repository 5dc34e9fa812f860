/*
 * The runner's --dial (doc/runner-protocol.md; docker.so's channel): it
 * takes a token line from stdin, connects to the Unix socket it was given,
 * sends exactly that line and then its HELLO there, and nothing on stdout.
 * When it cannot (no socket there, no token line), it says why on stderr
 * and greets on stdout as without --dial.  The built runner, forked here.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "plugins/runner/rclient.h"
#include "t/lib/fakehost.h"
#include "t/lib/runner_fork.h"

#define TOKEN "0123456789abcdef0123456789abcdef\n"

struct child {
	pid_t pid;
	int io;  /* its stdin and stdout */
	int err; /* its stderr */
};

/* Forks the runner with --dial path, stdin and stdout on a socketpair. */
static int spawn(const char *path, struct child *c)
{
	int sv[2], ep[2];

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0 || pipe2(ep, O_CLOEXEC) < 0)
		return -1;
	c->pid = fork();
	if (c->pid == 0) {
		dup2(sv[1], 0);
		dup2(sv[1], 1);
		dup2(ep[1], 2);
		execl(tl_runner_path(), "sandgate-runner", "--stdio", "--dial", path, (char *)NULL);
		_exit(127);
	}
	close(sv[1]);
	close(ep[1]);
	c->io = sv[0];
	c->err = ep[0];
	return c->pid > 0 ? 0 : -1;
}

static void reap(struct child *c)
{
	close(c->io);
	close(c->err);
	kill(c->pid, SIGKILL);
	waitpid(c->pid, NULL, 0);
}

/* rn_conn_open on fd: 0 when the runner's HELLO came. */
static int greet(int fd, char *why, size_t size)
{
	struct rn_conn_opts o = { .name = "dial", .hello_timeout_ms = 10000 };
	char id[RN_BUILD_ID_LEN + 1];
	struct rn_transport t;
	struct rn_conn *c = NULL;
	int rc;

	if (rn_build_id_file(tl_runner_path(), id) < 0)
		return snprintf(why, size, "no build id"), -1;
	o.build_id = id;
	rn_fd_transport(fd, &t);
	rc = rn_conn_open(&t, &o, &c, why, size);
	rn_conn_close(c);
	return rc;
}

static bool readable(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, ms) > 0;
}

static void test_dials(const char *dir)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char line[sizeof(TOKEN)] = "", why[256] = "";
	struct child c;
	ssize_t n = 0;
	int l, s = -1;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/r.sock", dir);
	l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	fakehost_ok(l >= 0 && bind(l, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(l, 1) == 0,
		    "a socket to dial");
	fakehost_ok(spawn(sa.sun_path, &c) == 0, "the runner starts");
	fakehost_ok(write(c.io, TOKEN, strlen(TOKEN)) == (ssize_t)strlen(TOKEN), "its token line goes on stdin");
	if (readable(l, 5000))
		s = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	fakehost_ok(s >= 0, "it connects to the socket");
	while (s >= 0 && (size_t)n < strlen(TOKEN) && readable(s, 5000)) {
		ssize_t r = read(s, line + n, strlen(TOKEN) - (size_t)n);

		if (r <= 0)
			break;
		n += r;
	}
	fakehost_ok(n == (ssize_t)strlen(TOKEN) && !memcmp(line, TOKEN, strlen(TOKEN)),
		    "and sends exactly the token line first (%zd bytes)", n);
	fakehost_ok(s >= 0 && greet(s, why, sizeof(why)) == 0,
		    "then its HELLO on the socket: %s", why);
	n = recv(c.io, line, 1, MSG_DONTWAIT); /* 0: it ended with its socket */
	fakehost_ok(n <= 0, "and not a byte on its stdout");
	if (s >= 0)
		close(s);
	close(l);
	unlink(sa.sun_path);
	reap(&c);
}

/* No socket at path, or no token line (none within its 5 s): HELLO on
 * stdout, why on stderr. */
static void test_falls_back(const char *dir, bool token)
{
	char path[4096], why[256] = "", note[512] = "";
	const char *says = token ? "No such file or directory: on stdio" : "no token line on stdin";
	struct child c;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/none.sock", dir);
	fakehost_ok(spawn(path, &c) == 0, "the runner starts (%s)", token ? "no socket" : "no token");
	if (token)
		fakehost_ok(write(c.io, TOKEN, strlen(TOKEN)) > 0, "its token line goes on stdin");
	fakehost_ok(greet(c.io, why, sizeof(why)) == 0, "its HELLO comes on stdout: %s", why);
	n = readable(c.err, 5000) ? read(c.err, note, sizeof(note) - 1) : -1;
	note[n > 0 ? n : 0] = '\0';
	note[strcspn(note, "\n")] = '\0';
	fakehost_ok(strstr(note, says) != NULL, "stderr says why: %s", note);
	reap(&c);
}

int main(void)
{
	char dir[] = "/tmp/sg-dial-XXXXXX";

	signal(SIGPIPE, SIG_IGN);
	if (!mkdtemp(dir))
		return 99;
	test_dials(dir);
	test_falls_back(dir, true);
	test_falls_back(dir, false);
	rmdir(dir);
	return fakehost_done();
}
