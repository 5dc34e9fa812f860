/*
 * sandgate-runner end to end on this machine: the built static runner is
 * started on a socketpair and driven through the plugins' own client
 * (plugins/runner/client.c), so every rule of the runner is checked without
 * a container: exact output per request, 20 requests in flight, exit codes
 * and signals, timeouts and kills that leave no process behind, background
 * children that outlive a normal exit, the subreaper, stdin and the status
 * fd, output caps, the runner's death with its stream, and deliberately
 * broken frames (the --fault switch) that end the connection, not sandgate.
 *
 * The runner is $SG_RUNNER, else $SG_TEST_BUILDDIR/sandgate-runner.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "plugins/runner/client.h"

/* Output of one request, gathered by drain(). */
struct got {
	char out[65536], err[65536], status[4096];
	size_t out_len, err_len, status_len;
	char order[256];   /* one letter per chunk: o, e, s */
	size_t n_order;
	struct rn_exit ex;
	enum rn_req_state st;
	char why[256];
};

static char runner_path[4096];

static const char *runner(void)
{
	const char *p = getenv("SG_RUNNER"), *b = getenv("SG_TEST_BUILDDIR");

	if (runner_path[0])
		return runner_path;
	if (p && *p)
		snprintf(runner_path, sizeof(runner_path), "%s", p);
	else
		snprintf(runner_path, sizeof(runner_path), "%s/sandgate-runner",
			 b && *b ? b : ".");
	return runner_path;
}

/* Starts a runner on a socketpair.  *pid is the runner process. */
static struct rn_conn *start(bool faults, pid_t *pid)
{
	struct rn_conn_opts o = { .name = "local", .hello_timeout_ms = 5000 };
	char id[RN_BUILD_ID_LEN + 1], why[256] = "";
	struct rn_transport t;
	struct rn_conn *c = NULL;
	int sv[2];

	assert_int_equal(rn_build_id_file(runner(), id), 0);
	o.build_id = id;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	*pid = fork();
	assert_true(*pid >= 0);
	if (*pid == 0) {
		dup2(sv[1], 0);
		dup2(sv[1], 1);
		execl(runner(), "sandgate-runner", faults ? "--fault" : "--stdio",
		      (char *)NULL);
		_exit(127);
	}
	close(sv[1]);
	rn_fd_transport(sv[0], &t);
	if (rn_conn_open(&t, &o, &c, why, sizeof(why)) < 0)
		fail_msg("runner %s did not start: %s", runner(), why);
	return c;
}

static void stop(struct rn_conn *c, pid_t pid)
{
	int st;

	rn_conn_close(c);
	assert_int_equal(waitpid(pid, &st, 0), pid);
}

static void on_data(int chan, const void *p, size_t n, void *ud)
{
	struct got *g = ud;
	char *buf = chan == RN_R_STDOUT ? g->out : chan == RN_R_STDERR ? g->err : g->status;
	size_t *len = chan == RN_R_STDOUT ? &g->out_len : chan == RN_R_STDERR ?
		      &g->err_len : &g->status_len;
	size_t cap = chan == RN_R_STATUS ? sizeof(g->status) : sizeof(g->out);

	if (*len + n < cap) {
		memcpy(buf + *len, p, n);
		*len += n;
		buf[*len] = '\0';
	}
	if (g->n_order + 1 < sizeof(g->order))
		g->order[g->n_order++] = chan == RN_R_STDOUT ? 'o' : chan == RN_R_STDERR ?
					 'e' : 's';
}

/* Waits for the end of r, gathering everything into g. */
static void drain(struct rn_req *r, struct got *g, int limit_ms)
{
	long long waited = 0;

	for (;;) {
		g->st = rn_req_drain(r, on_data, g, &g->ex, g->why, sizeof(g->why));
		if (g->st != RN_REQ_RUNNING)
			return;
		if (rn_req_wait(r, 100, -1) == 0)
			waited += 100;
		if (waited > limit_ms)
			fail_msg("request still running after %d ms", limit_ms);
	}
}

static struct rn_req *spawn(struct rn_conn *c, const struct rn_spawn *sp)
{
	struct rn_req *r = NULL;
	char why[256];

	if (rn_spawn(c, sp, &r, why, sizeof(why)) != 0)
		fail_msg("spawn failed: %s", why);
	return r;
}

static void run(struct rn_conn *c, const char *cmd, struct got *g)
{
	struct rn_spawn sp = { .command = cmd, .grace_ms = 500 };
	struct rn_req *r = spawn(c, &sp);

	memset(g, 0, sizeof(*g));
	drain(r, g, 10000);
	rn_req_put(r);
}

static bool group_alive(long pgid)
{
	return kill(-(pid_t)pgid, 0) == 0;
}

/* Polls cond for up to ms. */
static bool eventually(bool (*cond)(long), long arg, int ms)
{
	for (int i = 0; i < ms / 20; i++) {
		if (cond(arg))
			return true;
		usleep(20000);
	}
	return cond(arg);
}

static bool group_gone(long pgid)
{
	return !group_alive(pgid);
}

static bool pid_gone(long pid)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%ld", pid);
	return access(path, F_OK) < 0;
}

/* ---- tests ------------------------------------------------------------------------ */

static void test_hello_and_ping(void **state)
{
	struct rn_hello h;
	pid_t pid;
	struct rn_conn *c = start(false, &pid);
	char id[RN_BUILD_ID_LEN + 1];

	(void)state;
	rn_conn_hello(c, &h);
	assert_int_equal(h.major, RN_VERSION_MAJOR);
	assert_int_equal(h.pid, pid);
	assert_int_equal(rn_build_id_file(runner(), id), 0);
	assert_string_equal(h.build_id, id);
	assert_true(rn_ping(c, 2000) >= 0);
	stop(c, pid);
}

static void test_exact_output(void **state)
{
	struct got g;
	pid_t pid;
	struct rn_conn *c = start(false, &pid);

	(void)state;
	run(c, "echo hi", &g);
	assert_int_equal(g.st, RN_REQ_DONE);
	assert_string_equal(g.out, "hi\n");
	assert_int_equal(g.err_len, 0);
	assert_int_equal(g.ex.code, 0);
	run(c, "printf 'a\\0b'; echo oops >&2; exit 3", &g);
	assert_int_equal(g.out_len, 3);
	assert_memory_equal(g.out, "a\0b", 3);
	assert_string_equal(g.err, "oops\n");
	assert_int_equal(g.ex.code, 3);
	run(c, "kill -USR1 $$", &g);
	assert_int_equal(g.ex.code, -1);
	assert_int_equal(g.ex.signal, SIGUSR1);
	/* stdin is /dev/null */
	run(c, "cat; echo end", &g);
	assert_string_equal(g.out, "end\n");
	stop(c, pid);
}

static void test_argv_env_cwd(void **state)
{
	const char *argv[] = { "sh", "-c", "printf '%s|%s|%s' \"$0\" \"$FOO\" \"$(pwd)\"",
			       "zero", NULL };
	const char *env[] = { "FOO=bar baz", "PATH=/usr/bin:/bin", NULL };
	struct rn_spawn sp = { .argv = argv, .env = env, .cwd = "/tmp", .grace_ms = 100 };
	struct got g = { 0 };
	pid_t pid;
	struct rn_conn *c = start(false, &pid);
	struct rn_req *r = spawn(c, &sp);

	(void)state;
	drain(r, &g, 5000);
	rn_req_put(r);
	assert_string_equal(g.out, "zero|bar baz|/tmp");
	sp = (struct rn_spawn){ .command = "true", .cwd = "/no/such/dir" };
	memset(&g, 0, sizeof(g));
	r = spawn(c, &sp);
	drain(r, &g, 5000);
	rn_req_put(r);
	assert_int_equal(g.st, RN_REQ_DONE);
	assert_int_equal(g.ex.spawn_stage, RN_STAGE_CHDIR);
	assert_int_equal(g.ex.spawn_errno, ENOENT);
	{
		const char *nf[] = { "/no/such/program", NULL };

		sp = (struct rn_spawn){ .argv = nf };
		memset(&g, 0, sizeof(g));
		r = spawn(c, &sp);
		drain(r, &g, 5000);
		rn_req_put(r);
		assert_int_equal(g.ex.spawn_stage, RN_STAGE_EXEC);
		assert_int_equal(g.ex.code, 127);
	}
	stop(c, pid);
}

#define N_CONCURRENT 20

/* Twenty commands in flight at once, each output exact and its own. */
static void test_concurrent(void **state)
{
	struct rn_req *r[N_CONCURRENT];
	char cmd[N_CONCURRENT][160], want[4096];
	static struct got g[N_CONCURRENT]; /* large: not on the stack */
	pid_t pid;
	struct rn_conn *c = start(false, &pid);

	(void)state;
	memset(g, 0, sizeof(g));
	for (int i = 0; i < N_CONCURRENT; i++) {
		struct rn_spawn sp = { .command = cmd[i], .grace_ms = 100 };

		/* Interleaved writes: each sleeps a little between lines. */
		snprintf(cmd[i], sizeof(cmd[i]), "for j in 1 2 3 4 5; do echo req%d-line$j; "
			 "echo err%d >&2; sleep 0.0%d; done; exit %d", i, i, i % 10, i);
		r[i] = spawn(c, &sp);
	}
	for (int i = 0; i < N_CONCURRENT; i++) {
		drain(r[i], &g[i], 10000);
		rn_req_put(r[i]);
		want[0] = '\0';
		for (int j = 1; j <= 5; j++)
			snprintf(want + strlen(want), sizeof(want) - strlen(want),
				 "req%d-line%d\n", i, j);
		assert_string_equal(g[i].out, want);
		assert_int_equal(g[i].err_len, 5 * (strlen("err\n") + (i >= 10 ? 2 : 1)));
		assert_int_equal(g[i].ex.code, i);
	}
	stop(c, pid);
}

/* A timeout ends the whole group, TERM first. */
static void test_timeout_kills_group(void **state)
{
	struct rn_spawn sp = { .command = "echo started; sleep 300 & sleep 300; echo never",
			       .timeout_ms = 300, .grace_ms = 500 };
	struct got g = { 0 };
	long pgid = 0;
	pid_t pid;
	struct rn_conn *c = start(false, &pid);
	struct rn_req *r = spawn(c, &sp);

	(void)state;
	drain(r, &g, 5000);
	assert_true(rn_req_started(r, NULL, &pgid));
	rn_req_put(r);
	assert_true(g.ex.flags & RN_EXIT_TIMED_OUT);
	assert_string_equal(g.out, "started\n");
	assert_true(pgid > 1);
	assert_true(group_gone(pgid));
	/* A group that ignores TERM gets KILL after the grace. */
	sp.command = "trap '' TERM; sleep 300 & trap '' TERM; sleep 300";
	sp.grace_ms = 200;
	memset(&g, 0, sizeof(g));
	r = spawn(c, &sp);
	drain(r, &g, 5000);
	assert_true(rn_req_started(r, NULL, &pgid));
	rn_req_put(r);
	assert_true(g.ex.flags & RN_EXIT_TIMED_OUT);
	assert_true(group_gone(pgid));
	stop(c, pid);
}

static void test_kill_frame(void **state)
{
	struct rn_spawn sp = { .command = "sleep 301 & sleep 301", .grace_ms = 300 };
	struct got g = { 0 };
	long pgid = 0;
	pid_t pid;
	struct rn_conn *c = start(false, &pid);
	struct rn_req *r = spawn(c, &sp);

	(void)state;
	while (!rn_req_started(r, NULL, &pgid))
		rn_req_wait(r, 100, -1);
	assert_int_equal(rn_req_kill(r, 0), 0);
	drain(r, &g, 5000);
	rn_req_put(r);
	assert_true(g.ex.flags & RN_EXIT_KILLED);
	assert_false(g.ex.flags & RN_EXIT_TIMED_OUT);
	assert_int_equal(g.ex.signal, SIGTERM);
	assert_true(group_gone(pgid));
	stop(c, pid);
}

/* A normal exit leaves background children running; the runner exiting
 * kills only what is in flight. */
static void test_background_survives(void **state)
{
	struct got g;
	long bg;
	pid_t pid;
	struct rn_conn *c = start(false, &pid);
	struct rn_spawn sp = { .command = "sleep 302", .grace_ms = 100 };
	struct rn_req *inflight;
	long inflight_pgid = 0;

	(void)state;
	run(c, "sleep 303 >/dev/null 2>&1 & echo $!", &g);
	bg = strtol(g.out, NULL, 10);
	assert_true(bg > 1);
	/* Still writing to the pipe after the exit: no SIGPIPE for it. */
	run(c, "(sleep 0.3; echo late; sleep 303) & echo $!", &g);
	assert_int_equal(g.ex.code, 0);
	inflight = spawn(c, &sp);
	while (!rn_req_started(inflight, NULL, &inflight_pgid))
		rn_req_wait(inflight, 100, -1);
	usleep(500000);
	assert_false(pid_gone(bg));
	assert_false(pid_gone(strtol(g.out, NULL, 10)));
	rn_req_put(inflight);
	stop(c, pid);
	assert_true(eventually(group_gone, inflight_pgid, 3000));
	assert_false(pid_gone(bg));
	kill((pid_t)bg, SIGKILL);
	kill((pid_t)strtol(g.out, NULL, 10), SIGKILL);
}

/* Orphans come to the runner (subreaper) and are reaped: no zombies left. */
static void test_subreaper(void **state)
{
	struct got g;
	pid_t pid;
	struct rn_conn *c = start(false, &pid);
	char cmd[64];
	long orphan;

	(void)state;
	run(c, "sh -c 'sleep 0.2 & echo $!' ", &g);
	orphan = strtol(g.out, NULL, 10);
	assert_true(orphan > 1);
	usleep(600000);
	rn_ping(c, 1000); /* one more loop round */
	snprintf(cmd, sizeof(cmd), "/proc/%ld", orphan);
	assert_true(eventually(pid_gone, orphan, 2000));
	stop(c, pid);
}

static void test_cap(void **state)
{
	struct rn_spawn sp = { .command = "head -c 100000 /dev/zero; head -c 10 /dev/zero >&2",
			       .cap = 1000 };
	struct got g = { 0 };
	pid_t pid;
	struct rn_conn *c = start(false, &pid);
	struct rn_req *r = spawn(c, &sp);

	(void)state;
	drain(r, &g, 5000);
	rn_req_put(r);
	assert_int_equal(g.out_len, 1000);
	assert_int_equal(g.err_len, 10);
	assert_true(g.ex.flags & RN_EXIT_OUT_TRUNC);
	assert_false(g.ex.flags & RN_EXIT_ERR_TRUNC);
	stop(c, pid);
}

/* A shell on stdin with a status fd: the end marker comes on its own
 * channel, after all output written before it; stdin reads of a command
 * cannot eat it. */
static void test_shell_status_fd(void **state)
{
	struct rn_spawn sp = { .command = "exec sh", .mode = RN_MODE_STDIN | RN_MODE_MERGE |
			       RN_MODE_STATUS, .status_fd = 3, .grace_ms = 200 };
	static const char cmd1[] = "{ echo one; echo two >&2; head -c 70000 /dev/zero | tr '\\0' x; "
				   "echo; } 3>&-; echo \"end $?\" >&3\n";
	static const char cmd2[] = "{ cat; echo fake-end >&3; true; } 3>&- </dev/null 2>/dev/null; "
				   "echo \"end2 $?\" >&3\n";
	struct got g = { 0 };
	char buf[8192];
	int chan;
	size_t n, outn = 0;
	pid_t pid;
	struct rn_conn *c = start(false, &pid);
	struct rn_req *r = spawn(c, &sp);
	int rounds = 0;

	(void)state;
	assert_int_equal(rn_req_stdin(r, cmd1, strlen(cmd1)), 0);
	/* Read until the status comes; every output byte must come first. */
	while (g.status_len == 0 && rounds++ < 200) {
		while ((n = rn_req_take(r, buf, sizeof(buf), &chan)) > 0) {
			if (chan == RN_R_STATUS) {
				memcpy(g.status + g.status_len, buf, n);
				g.status_len += n;
			} else {
				assert_int_equal(g.status_len, 0);
				outn += n;
			}
		}
		if (g.status_len == 0)
			rn_req_wait(r, 50, -1);
	}
	assert_int_equal(outn, strlen("one\ntwo\n") + 70000 + 1);
	assert_memory_equal(g.status, "end 0\n", 6);
	g.status_len = 0;
	assert_int_equal(rn_req_stdin(r, cmd2, strlen(cmd2)), 0);
	rounds = 0;
	while (g.status_len < 7 && rounds++ < 200) {
		while ((n = rn_req_take(r, buf, sizeof(buf), &chan)) > 0)
			if (chan == RN_R_STATUS) {
				memcpy(g.status + g.status_len, buf, n);
				g.status_len += n;
			}
		if (g.status_len < 7)
			rn_req_wait(r, 50, -1);
	}
	g.status[g.status_len] = '\0';
	assert_string_equal(g.status, "end2 0\n");
	assert_int_equal(rn_req_stdin_close(r), 0);
	memset(&g, 0, sizeof(g));
	drain(r, &g, 5000);
	assert_int_equal(g.st, RN_REQ_DONE);
	assert_int_equal(g.ex.code, 0);
	rn_req_put(r);
	stop(c, pid);
}

/* Each broken frame ends the connection with a reason; nothing crashes, and
 * the runner's other commands are killed with it. */
static void test_faults(void **state)
{
	static const char *const modes[] = { "corrupt", "truncate", "huge", "badid" };
	static const char *const reasons[] = { "bad frame header", "truncated",
					       "bad frame header", "not running" };

	(void)state;
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		char cmd[128], why[256];
		struct got g;
		pid_t pid;
		struct rn_conn *c = start(true, &pid);
		struct rn_spawn sp = { .command = "sleep 304" };
		struct rn_req *bystander = spawn(c, &sp);
		long pgid = 0;

		while (!rn_req_started(bystander, NULL, &pgid))
			rn_req_wait(bystander, 100, -1);
		snprintf(cmd, sizeof(cmd), "echo sandgate-fault:%s", modes[i]);
		run(c, cmd, &g);
		assert_int_equal(g.st, RN_REQ_FAILED);
		assert_false(rn_conn_alive(c, why, sizeof(why)));
		if (!strstr(why, reasons[i]))
			fail_msg("fault %s: reason '%s' lacks '%s'", modes[i], why, reasons[i]);
		memset(&g, 0, sizeof(g));
		drain(bystander, &g, 1000);
		assert_int_equal(g.st, RN_REQ_FAILED);
		rn_req_put(bystander);
		stop(c, pid);
		assert_true(eventually(group_gone, pgid, 3000));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hello_and_ping),
		cmocka_unit_test(test_exact_output),
		cmocka_unit_test(test_argv_env_cwd),
		cmocka_unit_test(test_concurrent),
		cmocka_unit_test(test_timeout_kills_group),
		cmocka_unit_test(test_kill_frame),
		cmocka_unit_test(test_background_survives),
		cmocka_unit_test(test_subreaper),
		cmocka_unit_test(test_cap),
		cmocka_unit_test(test_shell_status_fd),
		cmocka_unit_test(test_faults),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
