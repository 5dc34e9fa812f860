/*
 * The runner's code kernels end to end on this machine: the built static
 * runner on a socketpair, driven through the plugins' kernel client
 * (plugins/runner/kernel_client.c), with real interpreters: Debian's
 * /usr/bin/python3 and /usr/bin/node (the kernels get PATH=/usr/bin:/bin,
 * as in the sandbox image).  State that persists (names, imports, functions,
 * cwd, the process), output in order with a subprocess's, values as text
 * results, errors, timeouts and cancels that keep the state, a stubborn call
 * that costs its kernel, a kernel that dies and comes back saying so once,
 * reset, top-level await, written files, figures, caps, two calls at once,
 * a missing interpreter, and no kernel left when the runner ends.
 *
 * The runner is $SG_RUNNER, else $SG_TEST_BUILDDIR/sandgate-runner.  The
 * figure test is skipped when /usr/bin/python3 has no matplotlib.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "plugins/runner/kernel_client.h"

static char runner_path[4096];
static char workdir[] = "/tmp/sg-kernel-test.XXXXXX";
static const char *const kenv[] = { "PATH=/usr/bin:/bin", NULL };

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

static struct rn_conn *start(pid_t *pid)
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
		execl(runner(), "sandgate-runner", "--stdio", (char *)NULL);
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

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A call with defaults: the test's workdir, its PATH, no timeout. */
static struct rn_kernel_call call_of(const char *lang, const char *code)
{
	return (struct rn_kernel_call){ .language = lang, .code = code, .env = kenv,
					.cwd = workdir, .cancel_fd = -1 };
}

/* Runs kc, which must run; res is the caller's to free. */
static void run_call(struct rn_conn *c, const struct rn_kernel_call *kc,
		     struct rn_kernel_result *res)
{
	char why[256] = "";

	if (rn_kernel_run(c, kc, res, why, sizeof(why)) != 0)
		fail_msg("call %.60s failed: %s", kc->code, why);
}

static void run(struct rn_conn *c, const char *lang, const char *code,
		struct rn_kernel_result *res)
{
	struct rn_kernel_call kc = call_of(lang, code);

	run_call(c, &kc, res);
}

/* The text of the call's main result, or NULL. */
static const char *value_text(const struct rn_kernel_result *res)
{
	size_t i;
	json_t *r;

	json_array_foreach(res->results, i, r)
		if (json_is_true(json_object_get(r, "is_main_result")))
			return json_string_value(json_object_get(r, "text"));
	return NULL;
}

static const char *error_name(const struct rn_kernel_result *res)
{
	return res->error ? json_string_value(json_object_get(res->error, "name")) : NULL;
}

/* Runs code and checks its value's text. */
static void expect_text(struct rn_conn *c, const char *lang, const char *code,
			 const char *want)
{
	struct rn_kernel_result res;

	run(c, lang, code, &res);
	if (res.error)
		fail_msg("%s: error %s", code, json_dumps(res.error, 0));
	assert_non_null(value_text(&res));
	assert_string_equal(value_text(&res), want);
	rn_kernel_result_free(&res);
}

static bool pid_gone(long pid)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%ld", pid);
	for (int i = 0; i < 150; i++) {
		if (access(path, F_OK) < 0)
			return true;
		usleep(20000);
	}
	return false;
}

/* ---- Python ------------------------------------------------------------------------ */

static void test_capability(void **state)
{
	pid_t pid;
	struct rn_conn *c = start(&pid);

	(void)state;
	assert_true(rn_conn_has_cap(c, RN_CAP_KERNEL));
	assert_false(rn_conn_has_cap(c, "kern"));
	stop(c, pid);
}

static void test_py_state(void **state)
{
	struct rn_kernel_result a, b;
	pid_t pid;
	struct rn_conn *c = start(&pid);

	(void)state;
	run(c, "python", "x = 41", &a);
	assert_null(a.error);
	assert_int_equal(json_array_size(a.results), 0);
	assert_false(a.kernel_restarted);
	assert_memory_equal(a.interpreter, "python3 3.", 10);
	rn_kernel_result_free(&a);
	expect_text(c, "python", "x + 1", "42");
	run(c, "python", "import json", &a);
	rn_kernel_result_free(&a);
	expect_text(c, "python", "json.dumps([1, 'a'])", "'[1, \"a\"]'");
	run(c, "python", "def twice(v):\n    return 2 * v\n", &a);
	rn_kernel_result_free(&a);
	expect_text(c, "python", "twice(21)", "42");
	run(c, "python", "import os; os.chdir('/')", &a);
	rn_kernel_result_free(&a);
	expect_text(c, "python", "os.getcwd()", "'/'");
	/* One process: the same pid twice, and the one the runner reports. */
	run(c, "python", "os.getpid()", &a);
	run(c, "python", "os.getpid()", &b);
	assert_string_equal(value_text(&a), value_text(&b));
	assert_int_equal(strtol(value_text(&a), NULL, 10), a.kernel_pid);
	rn_kernel_result_free(&a);
	rn_kernel_result_free(&b);
	stop(c, pid);
}

static void test_py_output(void **state)
{
	struct rn_kernel_result res;
	pid_t pid;
	struct rn_conn *c = start(&pid);

	(void)state;
	run(c, "python", "import sys, subprocess\n"
	    "print('a')\n"
	    "print('b', file=sys.stderr)\n"
	    "print('c')\n"
	    "subprocess.run(['sh', '-c', 'echo d; echo e >&2; head -c 100000 /dev/zero | tr \"\\\\0\" z'])\n"
	    "print('f')\n"
	    "None", &res);
	assert_null(res.error);
	assert_int_equal(json_array_size(res.results), 0);
	/* The subprocess's 100000 bytes, more than a pipe holds, all before
	 * the end of the call, in order with the kernel's own. */
	assert_int_equal(res.out_len, strlen("a\nc\nd\n") + 100000 + strlen("f\n"));
	assert_memory_equal(res.out, "a\nc\nd\n", 6);
	assert_int_equal(strspn(res.out + 6, "z"), 100000);
	assert_string_equal(res.out + 6 + 100000, "f\n");
	assert_string_equal(res.err, "b\ne\n");
	rn_kernel_result_free(&res);
	/* An error after output: both come back. */
	run(c, "python", "print('before')\n1 / 0", &res);
	assert_string_equal(res.out, "before\n");
	assert_string_equal(error_name(&res), "ZeroDivisionError");
	assert_string_equal(json_string_value(json_object_get(res.error, "value")),
			    "division by zero");
	assert_non_null(strstr(json_string_value(json_object_get(res.error, "traceback")),
			       "File \"<cell-2>\", line 2"));
	rn_kernel_result_free(&res);
	run(c, "python", "def broken(:", &res);
	assert_string_equal(error_name(&res), "SyntaxError");
	rn_kernel_result_free(&res);
	stop(c, pid);
}

static void test_py_timeout(void **state)
{
	struct rn_kernel_call kc = call_of("python", "while True: pass");
	struct rn_kernel_result res;
	int64_t t0;
	pid_t pid;
	struct rn_conn *c = start(&pid);

	(void)state;
	run(c, "python", "x = 41", &res);
	rn_kernel_result_free(&res);
	kc.timeout_ms = 2000;
	t0 = now_ms();
	run_call(c, &kc, &res);
	assert_true(now_ms() - t0 < 5000);
	assert_true(now_ms() - t0 >= 2000);
	assert_true(res.timed_out);
	assert_false(res.kernel_died);
	assert_string_equal(error_name(&res), "KeyboardInterrupt");
	/* The traceback is the cell's: none of the kernel's own frames. */
	assert_string_equal(json_string_value(json_object_get(res.error, "traceback")),
			    "Traceback (most recent call last):\n"
			    "  File \"<cell-2>\", line 1, in <module>\n"
			    "    while True: pass\n"
			    "KeyboardInterrupt\n");
	rn_kernel_result_free(&res);
	run(c, "python", "x", &res);
	assert_false(res.kernel_restarted);
	assert_string_equal(value_text(&res), "41");
	rn_kernel_result_free(&res);
	/* Code that ignores the interrupt costs its kernel after the grace. */
	kc.code = "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
		  "while True: pass";
	kc.timeout_ms = 300;
	kc.grace_ms = 1000; /* long enough to see it busy on a loaded machine */
	t0 = now_ms();
	run_call(c, &kc, &res);
	assert_true(now_ms() - t0 < 4000);
	assert_true(res.timed_out);
	assert_true(res.kernel_died);
	assert_non_null(strstr(res.died_reason, "did not stop within 1000 ms"));
	rn_kernel_result_free(&res);
	run(c, "python", "x", &res);
	assert_true(res.kernel_restarted);
	assert_non_null(strstr(res.restart_reason, "did not stop within 1000 ms"));
	assert_string_equal(error_name(&res), "NameError");
	rn_kernel_result_free(&res);
	stop(c, pid);
}

/* Stops the kernel 200 ms in, lets it go 3.5 s in.  A thread, not a forked
 * process: under valgrind a forked child's exit runs a leak check that
 * counts the reader thread's buffer (no such thread in the child) lost. */
static void *stop_and_go(void *arg)
{
	pid_t kpid = *(pid_t *)arg;

	usleep(200000);
	kill(kpid, SIGSTOP);
	usleep(3300000);
	kill(kpid, SIGCONT);
	return NULL;
}

/* A kernel that cannot answer its interrupt within the grace because it is
 * not scheduled (stopped here from outside, as a loaded machine leaves a
 * process) is idle, not busy: it gets more time, answers with its
 * KeyboardInterrupt, and keeps its state. */
static void test_py_timeout_slow(void **state)
{
	struct rn_kernel_call kc = call_of("python", "import time\ntime.sleep(30)");
	struct rn_kernel_result res;
	pid_t pid, kpid;
	pthread_t helper;
	int64_t t0, took;
	struct rn_conn *c = start(&pid);

	(void)state;
	run(c, "python", "x = 41", &res);
	kpid = (pid_t)res.kernel_pid;
	rn_kernel_result_free(&res);
	assert_true(kpid > 1);
	kc.timeout_ms = 1500;
	kc.grace_ms = 500;
	t0 = now_ms();
	/* stopped well before the interrupt, let go well after the grace */
	assert_int_equal(pthread_create(&helper, NULL, stop_and_go, &kpid), 0);
	run_call(c, &kc, &res);
	took = now_ms() - t0;
	assert_int_equal(pthread_join(helper, NULL), 0);
	if (took < 3500)
		fail_msg("the call ended after %lld ms, before the kernel was let go", (long long)took);
	assert_true(res.timed_out);
	assert_false(res.kernel_died);
	assert_string_equal(error_name(&res), "KeyboardInterrupt");
	rn_kernel_result_free(&res);
	run(c, "python", "x", &res);
	assert_false(res.kernel_restarted);
	assert_string_equal(value_text(&res), "41");
	rn_kernel_result_free(&res);
	stop(c, pid);
}

static void test_py_exit_restart(void **state)
{
	struct rn_kernel_result res;
	long old_pid;
	pid_t pid;
	struct rn_conn *c = start(&pid);

	(void)state;
	run(c, "python", "x = 41", &res);
	old_pid = res.kernel_pid;
	rn_kernel_result_free(&res);
	run(c, "python", "import os; print('bye', flush=True); os._exit(1)", &res);
	assert_true(res.kernel_died);
	assert_string_equal(res.died_reason, "the kernel exited with status 1");
	assert_string_equal(res.out, "bye\n");
	rn_kernel_result_free(&res);
	run(c, "python", "x", &res);
	assert_true(res.kernel_restarted);
	assert_string_equal(res.restart_reason, "the kernel exited with status 1");
	assert_string_equal(error_name(&res), "NameError");
	assert_true(res.kernel_pid != old_pid);
	rn_kernel_result_free(&res);
	/* Said once. */
	run(c, "python", "x = 1", &res);
	assert_false(res.kernel_restarted);
	rn_kernel_result_free(&res);
	/* Killed from outside between calls: the next call says how. */
	run(c, "python", "import os; os.getpid()", &res);
	old_pid = res.kernel_pid;
	rn_kernel_result_free(&res);
	kill((pid_t)old_pid, SIGKILL);
	assert_true(pid_gone(old_pid));
	usleep(100000);
	run(c, "python", "x", &res);
	assert_true(res.kernel_restarted);
	assert_non_null(strstr(res.restart_reason, "SIGKILL"));
	rn_kernel_result_free(&res);
	stop(c, pid);
}

static void test_py_reset(void **state)
{
	struct rn_kernel_call kc = call_of("python", "'x' in globals()");
	struct rn_kernel_result res;
	pid_t pid;
	struct rn_conn *c = start(&pid);

	(void)state;
	run(c, "python", "x = 5", &res);
	rn_kernel_result_free(&res);
	expect_text(c, "python", "'x' in globals()", "True");
	kc.reset = true;
	run_call(c, &kc, &res);
	assert_string_equal(value_text(&res), "False");
	assert_false(res.kernel_restarted);
	rn_kernel_result_free(&res);
	stop(c, pid);
}

static void test_py_await(void **state)
{
	pid_t pid;
	struct rn_conn *c = start(&pid);

	(void)state;
	expect_text(c, "python", "import asyncio\nawait asyncio.sleep(0.01)\n7", "7");
	expect_text(c, "python", "async def f():\n    return 8\nawait f()", "8");
	stop(c, pid);
}

static void test_py_files(void **state)
{
	struct rn_kernel_result res;
	json_t *f;
	pid_t pid;
	struct rn_conn *c = start(&pid);
	char path[256];

	(void)state;
	run(c, "python", "open('out.txt', 'w').write('hi')\n"
	    "open('out.txt').read()\n"
	    "import os\n"
	    "os.makedirs('d', exist_ok=True)\n"
	    "with open('d/b.bin', 'ab') as fh: fh.write(b'123')\n"
	    "fd = os.open('/tmp/sg-kernel-outside-%d' % os.getpid(), os.O_WRONLY | os.O_CREAT)\n"
	    "os.close(fd); os.unlink('/tmp/sg-kernel-outside-%d' % os.getpid())\n"
	    "open('/etc/hostname').read()\n"
	    "None", &res);
	assert_null(res.error);
	assert_int_equal(json_array_size(res.output_files), 2);
	f = json_array_get(res.output_files, 0);
	assert_string_equal(json_string_value(json_object_get(f, "name")), "out.txt");
	snprintf(path, sizeof(path), "%s/out.txt", workdir);
	assert_string_equal(json_string_value(json_object_get(f, "path")), path);
	assert_int_equal(json_integer_value(json_object_get(f, "size")), 2);
	f = json_array_get(res.output_files, 1);
	assert_string_equal(json_string_value(json_object_get(f, "name")), "d/b.bin");
	assert_int_equal(json_integer_value(json_object_get(f, "size")), 3);
	rn_kernel_result_free(&res);
	/* Per call: a call that writes nothing lists nothing. */
	run(c, "python", "open('out.txt').read()", &res);
	assert_int_equal(json_array_size(res.output_files), 0);
	rn_kernel_result_free(&res);
	stop(c, pid);
}

/* Decodes base64 into out; returns the length, or -1. */
static long b64_decode(const char *in, unsigned char *out, size_t room)
{
	static const char set[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	unsigned long acc = 0;
	size_t n = 0;
	int bits = 0;

	for (; *in && *in != '='; in++) {
		const char *p = strchr(set, *in);

		if (!p)
			return -1;
		acc = acc << 6 | (unsigned long)(p - set);
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			if (n >= room)
				return -1;
			out[n++] = (unsigned char)(acc >> bits);
		}
	}
	return (long)n;
}

static void test_py_rich(void **state)
{
	static unsigned char png[1 << 20];
	struct rn_kernel_call kc = call_of("python", "'x' * 5000");
	struct rn_kernel_result res;
	json_t *fig;
	long n;
	pid_t pid;
	struct rn_conn *c;

	(void)state;
	if (system("/usr/bin/python3 -c 'import matplotlib' 2>/dev/null") != 0)
		skip();
	c = start(&pid);
	run(c, "python", "class H:\n    def _repr_html_(self):\n        return '<b>x</b>'\nH()", &res);
	assert_string_equal(json_string_value(json_object_get(json_array_get(res.results, 0),
							      "html")), "<b>x</b>");
	rn_kernel_result_free(&res);
	run(c, "python", "import matplotlib.pyplot as plt\n"
	    "fig = plt.figure(figsize=(4, 3), dpi=100)\n"
	    "plt.plot([1, 2, 3])\n"
	    "plt.show()", &res);
	assert_null(res.error);
	assert_int_equal(json_array_size(res.results), 1);
	fig = json_array_get(res.results, 0);
	n = b64_decode(json_string_value(json_object_get(fig, "png")), png, sizeof(png));
	assert_true(n > 24);
	assert_memory_equal(png, "\x89PNG\r\n\x1a\n", 8);
	/* IHDR: width and height, big-endian, at 16 and 20. */
	assert_int_equal((png[16] << 24 | png[17] << 16 | png[18] << 8 | png[19]), 400);
	assert_int_equal((png[20] << 24 | png[21] << 16 | png[22] << 8 | png[23]), 300);
	assert_int_equal(json_integer_value(json_object_get(fig, "width")), 400);
	rn_kernel_result_free(&res);
	/* The figure was closed with its call. */
	run(c, "python", "len(plt.get_fignums())", &res);
	assert_string_equal(value_text(&res), "0");
	rn_kernel_result_free(&res);
	/* Over the cap: an explicit note instead of the value. */
	kc.rich_cap = 1000;
	run_call(c, &kc, &res);
	assert_int_equal(json_array_size(res.results), 1);
	assert_non_null(strstr(json_string_value(json_object_get(json_array_get(res.results, 0),
								     "omitted")), "passed the cap"));
	rn_kernel_result_free(&res);
	stop(c, pid);
}

static void test_output_cap(void **state)
{
	struct rn_kernel_call kc = call_of("python", "print('x' * 1000)\nimport sys\n"
					   "print('y' * 10, file=sys.stderr)");
	struct rn_kernel_result res;
	pid_t pid;
	struct rn_conn *c = start(&pid);

	(void)state;
	kc.output_cap = 100;
	run_call(c, &kc, &res);
	assert_int_equal(res.out_len, 100);
	assert_true(res.out_trunc);
	assert_string_equal(res.err, "yyyyyyyyyy\n");
	assert_false(res.err_trunc);
	rn_kernel_result_free(&res);
	stop(c, pid);
}

/* ---- JavaScript -------------------------------------------------------------------- */

static void test_js(void **state)
{
	struct rn_kernel_call kc = call_of("javascript", "while (true) {}");
	struct rn_kernel_result res;
	pid_t pid;
	struct rn_conn *c = start(&pid);
	int64_t t0;

	(void)state;
	expect_text(c, "javascript", "globalThis.n = 1", "1");
	expect_text(c, "javascript", "n + 1", "2");
	run(c, "javascript", "const os = require('os'); function f(v) { return v * 3 }", &res);
	assert_memory_equal(res.interpreter, "node v", 6);
	rn_kernel_result_free(&res);
	expect_text(c, "javascript", "f(14)", "42");
	expect_text(c, "javascript", "typeof os.cpus", "'function'");
	run(c, "javascript", "console.log('a'); console.error('b');\n"
	    "require('child_process').execSync('echo c; echo d >&2', { stdio: 'inherit' });\n"
	    "console.log('e'); undefined", &res);
	assert_string_equal(res.out, "a\nc\ne\n");
	assert_string_equal(res.err, "b\nd\n");
	assert_int_equal(json_array_size(res.results), 0);
	rn_kernel_result_free(&res);
	run(c, "javascript", "throw new TypeError('bad')", &res);
	assert_string_equal(error_name(&res), "TypeError");
	assert_string_equal(json_string_value(json_object_get(res.error, "value")), "bad");
	rn_kernel_result_free(&res);
	expect_text(c, "javascript", "new Promise(r => setTimeout(() => r(6 * 7), 20))", "42");
	run(c, "javascript", "require('fs').writeFileSync('j.txt', 'abc');\n"
	    "require('fs').readFileSync('j.txt', 'utf8')", &res);
	assert_string_equal(value_text(&res), "'abc'");
	assert_int_equal(json_array_size(res.output_files), 1);
	assert_string_equal(json_string_value(json_object_get(json_array_get(res.output_files, 0),
							      "name")), "j.txt");
	rn_kernel_result_free(&res);
	kc.timeout_ms = 1000;
	t0 = now_ms();
	run_call(c, &kc, &res);
	assert_true(now_ms() - t0 < 4000);
	assert_true(res.timed_out);
	assert_false(res.kernel_died);
	assert_string_equal(error_name(&res), "Interrupted");
	rn_kernel_result_free(&res);
	expect_text(c, "javascript", "n", "1");
	stop(c, pid);
}

/* ---- cancel, concurrency, failures, the end --------------------------------------- */

struct firer {
	int fd;
	int after_ms;
};

static void *fire(void *arg)
{
	struct firer *f = arg;
	uint64_t one = 1;

	usleep((useconds_t)f->after_ms * 1000);
	if (write(f->fd, &one, sizeof(one)) != sizeof(one))
		abort();
	return NULL;
}

static void cancel_one(struct rn_conn *c, const char *lang, const char *code,
		       const char *err_name)
{
	struct rn_kernel_call kc = call_of(lang, code);
	struct rn_kernel_result res;
	struct firer f = { eventfd(0, EFD_CLOEXEC), 300 };
	pthread_t th;
	int64_t t0 = now_ms();

	assert_true(f.fd >= 0);
	kc.cancel_fd = f.fd;
	assert_int_equal(pthread_create(&th, NULL, fire, &f), 0);
	run_call(c, &kc, &res);
	pthread_join(th, NULL);
	close(f.fd);
	assert_true(now_ms() - t0 < 3000);
	assert_true(res.cancelled);
	assert_false(res.timed_out);
	assert_false(res.kernel_died);
	assert_string_equal(error_name(&res), err_name);
	rn_kernel_result_free(&res);
}

static void test_cancel(void **state)
{
	pid_t pid;
	struct rn_conn *c = start(&pid);
	struct rn_kernel_result res;

	(void)state;
	run(c, "python", "x = 41", &res);
	rn_kernel_result_free(&res);
	cancel_one(c, "python", "while True: pass", "KeyboardInterrupt");
	expect_text(c, "python", "x", "41");
	cancel_one(c, "python", "import time\ntime.sleep(60)", "KeyboardInterrupt");
	expect_text(c, "python", "x + 1", "42");
	expect_text(c, "javascript", "globalThis.m = 5", "5");
	cancel_one(c, "javascript", "new Promise(() => {})", "Interrupted");
	cancel_one(c, "javascript", "for (;;) {}", "Interrupted");
	expect_text(c, "javascript", "m", "5");
	stop(c, pid);
}

struct worker {
	struct rn_conn *c;
	const char *code;
	struct rn_kernel_result res;
	int rc;
};

static void *work(void *arg)
{
	struct worker *w = arg;
	struct rn_kernel_call kc = call_of("python", w->code);
	char why[256];

	w->rc = rn_kernel_run(w->c, &kc, &w->res, why, sizeof(why));
	return NULL;
}

/* Two calls at once on one kernel: one waits for the other.  Which goes
 * first is the scheduler's choice (the 100 ms head start is a hint, not a
 * guarantee under valgrind); either way the reader never sees the 1 that
 * the writer holds only while it sleeps. */
static void test_one_at_a_time(void **state)
{
	struct worker w[2] = { { .code = "import time\nt = 1\ntime.sleep(0.5)\nt = 2\n'first'" },
			       { .code = "t" } };
	const char *seen;
	struct rn_kernel_result res;
	pthread_t th[2];
	pid_t pid;
	struct rn_conn *c = start(&pid);

	(void)state;
	run(c, "python", "t = 0", &res); /* the kernel is up */
	rn_kernel_result_free(&res);
	w[0].c = w[1].c = c;
	assert_int_equal(pthread_create(&th[0], NULL, work, &w[0]), 0);
	usleep(100000);
	assert_int_equal(pthread_create(&th[1], NULL, work, &w[1]), 0);
	pthread_join(th[0], NULL);
	pthread_join(th[1], NULL);
	assert_int_equal(w[0].rc, 0);
	assert_int_equal(w[1].rc, 0);
	assert_string_equal(value_text(&w[0].res), "'first'");
	/* "0" (it ran first) or "2" (it waited for the writer's last line). */
	seen = value_text(&w[1].res);
	assert_non_null(seen);
	assert_true(strcmp(seen, "0") == 0 || strcmp(seen, "2") == 0);
	rn_kernel_result_free(&w[0].res);
	rn_kernel_result_free(&w[1].res);
	stop(c, pid);
}

static void test_no_interpreter(void **state)
{
	static const char *const noenv[] = { "PATH=/nonexistent", NULL };
	struct rn_kernel_call kc = call_of("python", "1");
	struct rn_kernel_result res;
	char why[256] = "";
	pid_t pid;
	struct rn_conn *c = start(&pid);

	(void)state;
	kc.env = noenv;
	assert_int_equal(rn_kernel_run(c, &kc, &res, why, sizeof(why)), 1);
	assert_string_equal(why, "no python interpreter in the machine (looked for "
			    "python3 on PATH)");
	rn_kernel_result_free(&res);
	kc = call_of("javascript", "1");
	kc.env = noenv;
	assert_int_equal(rn_kernel_run(c, &kc, &res, why, sizeof(why)), 1);
	assert_non_null(strstr(why, "node, nodejs"));
	rn_kernel_result_free(&res);
	kc = call_of("python", "1");
	kc.cwd = "/no/such/dir";
	assert_int_equal(rn_kernel_run(c, &kc, &res, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "/no/such/dir"));
	rn_kernel_result_free(&res);
	/* None of it broke the runner: a good call still runs. */
	expect_text(c, "python", "1 + 1", "2");
	stop(c, pid);
}

static void test_runner_end_kills_kernels(void **state)
{
	struct rn_kernel_result res;
	long py, js;
	pid_t pid;
	struct rn_conn *c = start(&pid);

	(void)state;
	run(c, "python", "1", &res);
	py = res.kernel_pid;
	rn_kernel_result_free(&res);
	run(c, "javascript", "1", &res);
	js = res.kernel_pid;
	rn_kernel_result_free(&res);
	assert_true(py > 1 && js > 1);
	stop(c, pid);
	assert_true(pid_gone(py));
	assert_true(pid_gone(js));
}

/* Kernels are per scope: two sandboxes on one runner keep their own x;
 * ending a scope kills its kernels (a call in flight ends with the death)
 * and leaves the other scope's alone; a scope's next call starts afresh,
 * not as a restart. */
struct scoped {
	struct rn_conn *c;
	struct rn_kernel_result res;
	int rc;
};

static void *scoped_loop(void *arg)
{
	struct scoped *w = arg;
	struct rn_kernel_call kc = call_of("python", "while True: pass");
	char why[256];

	kc.scope = "sb-a";
	w->rc = rn_kernel_run(w->c, &kc, &w->res, why, sizeof(why));
	return NULL;
}

static void run_scoped(struct rn_conn *c, const char *scope, const char *code,
		       struct rn_kernel_result *res)
{
	struct rn_kernel_call kc = call_of("python", code);

	kc.scope = scope;
	run_call(c, &kc, res);
}

static void test_scopes(void **state)
{
	struct rn_kernel_result a, b;
	struct scoped w = { 0 };
	char why[256] = "";
	long pa, pb;
	pthread_t th;
	pid_t pid;
	struct rn_conn *c = start(&pid);

	(void)state;
	assert_true(rn_conn_has_cap(c, RN_CAP_KERNEL_SCOPE));
	run_scoped(c, "sb-a", "x = 'a'", &a);
	run_scoped(c, "sb-b", "x = 'b'", &b);
	pa = a.kernel_pid;
	pb = b.kernel_pid;
	assert_true(pa > 1 && pb > 1 && pa != pb);
	rn_kernel_result_free(&a);
	rn_kernel_result_free(&b);
	run_scoped(c, "sb-a", "x", &a);
	run_scoped(c, "sb-b", "x", &b);
	assert_string_equal(value_text(&a), "'a'");
	assert_string_equal(value_text(&b), "'b'");
	rn_kernel_result_free(&a);
	rn_kernel_result_free(&b);
	/* The unscoped kernel is a third one. */
	run(c, "python", "'x' in globals()", &a);
	assert_string_equal(value_text(&a), "False");
	rn_kernel_result_free(&a);

	w.c = c;
	assert_int_equal(pthread_create(&th, NULL, scoped_loop, &w), 0);
	usleep(300000);
	assert_int_equal(rn_kernel_end(c, "sb-a", NULL, why, sizeof(why)), 0);
	pthread_join(th, NULL);
	assert_int_equal(w.rc, 0);
	assert_true(w.res.kernel_died);
	assert_string_equal(w.res.died_reason, "the kernel was ended: its sandbox ended");
	rn_kernel_result_free(&w.res);
	assert_true(pid_gone(pa));
	run_scoped(c, "sb-b", "x", &b);
	assert_string_equal(value_text(&b), "'b'");
	assert_int_equal(b.kernel_pid, pb);
	rn_kernel_result_free(&b);
	run_scoped(c, "sb-a", "'x' in globals()", &a);
	assert_string_equal(value_text(&a), "False");
	assert_false(a.kernel_restarted);
	rn_kernel_result_free(&a);
	/* Ending a scope with no kernel is fine; a language only ends that one. */
	assert_int_equal(rn_kernel_end(c, "sb-none", NULL, why, sizeof(why)), 0);
	assert_int_equal(rn_kernel_end(c, "sb-b", "javascript", why, sizeof(why)), 0);
	run_scoped(c, "sb-b", "x", &b);
	assert_int_equal(b.kernel_pid, pb);
	rn_kernel_result_free(&b);
	stop(c, pid);
	assert_true(pid_gone(pb));
}

static int setup(void **state)
{
	(void)state;
	return mkdtemp(workdir) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", workdir);
	return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_capability),
		cmocka_unit_test(test_py_state),
		cmocka_unit_test(test_py_output),
		cmocka_unit_test(test_py_timeout),
		cmocka_unit_test(test_py_timeout_slow),
		cmocka_unit_test(test_py_exit_restart),
		cmocka_unit_test(test_py_reset),
		cmocka_unit_test(test_py_await),
		cmocka_unit_test(test_py_files),
		cmocka_unit_test(test_py_rich),
		cmocka_unit_test(test_output_cap),
		cmocka_unit_test(test_js),
		cmocka_unit_test(test_cancel),
		cmocka_unit_test(test_one_at_a_time),
		cmocka_unit_test(test_no_interpreter),
		cmocka_unit_test(test_runner_end_kills_kernels),
		cmocka_unit_test(test_scopes),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, setup, teardown);
}
