/*
 * docker.so's runner slots on a real container, through the plugin ABI only
 * (dlopen of the built .libs/docker.so with a fake host): one-shot exec
 * through the runner, the ABI 1.1 status-fd stream a persistent shell uses
 * (stream_open_status + stream_read_ch), plain streams, the docker_runner
 * action, and [docker] runner = false answering SG_E_NOTSUP for a status
 * stream.  Needs Docker and the image sandgate/base:1, like the e2e tests.
 */
#include "config.h"

#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <sandgate/plugin.h>

#include "t/lib/fakehost.h"

static const struct sg_backend *B;
static void *priv;
static bool runner_off;

/* ---- a fake host ------------------------------------------------------------------ */

static void h_log(enum sg_log_level level, const char *plugin, const char *fmt, ...) SG_PRINTF(3, 4);
static void h_log(enum sg_log_level level, const char *plugin, const char *fmt, ...)
{
	va_list ap;

	if (level < SG_LOG_INFO && !getenv("SG_TEST_VERBOSE"))
		return;
	fprintf(stderr, "# [%s] ", plugin);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static const char *h_config_get(const char *section, const char *key)
{
	if (strcmp(section, "docker") == 0 && strcmp(key, "runner") == 0)
		return runner_off ? "false" : "true";
	return NULL;
}

static const char *h_state_dir(void) { return "/tmp"; }

static const struct sg_host_api host = FAKEHOST_API(h_log, h_config_get, h_state_dir);

/* ---- setup -------------------------------------------------------------------------- */

/* "host:pid:starttime" of this process, so no sandgate takes the container
 * for an orphan while the test runs. */
static void owner_label(char *out, size_t size)
{
	char host_name[128] = "localhost", buf[1024], *p;
	unsigned long long start = 0;
	FILE *fp = fopen("/proc/self/stat", "r");
	int field = 2;

	gethostname(host_name, sizeof(host_name) - 1);
	if (fp && fgets(buf, sizeof(buf), fp) && (p = strrchr(buf, ')'))) {
		for (p++; *p && field < 22; p++)
			if (*p == ' ')
				field++;
		start = strtoull(p, NULL, 10);
	}
	if (fp)
		fclose(fp);
	snprintf(out, size, "%s:%ld:%llu", host_name, (long)getpid(), start);
}

static int load(void **state)
{
	const char *dir = getenv("SANDGATE_PLUGIN_DIR");
	char path[4096];
	struct sg_err err = { 0 };
	void *h;

	(void)state;
	snprintf(path, sizeof(path), "%s/docker.so", dir && *dir ? dir : ".libs");
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		fail_msg("dlopen %s: %s", path, dlerror());
	B = dlsym(h, "sg_backend");
	assert_non_null(B);
	assert_true(SG_HAS(B, stream_open_status));
	assert_true(SG_HAS(B, stream_read_ch));
	if (B->init(&host, &priv, &err) < 0)
		fail_msg("init: %s", err.msg);
	return 0;
}

static int unload(void **state)
{
	(void)state;
	B->fini(priv);
	return 0;
}

static struct sg_machine *make_machine(void)
{
	static struct sg_machine m;
	char owner[256];
	struct sg_create_req req = { .lifetime_s = 600, .session_hash = "runnertest" };
	struct sg_err err = { 0 };

	owner_label(owner, sizeof(owner));
	req.owner = owner;
	memset(&m, 0, sizeof(m));
	m.magic = SG_MACHINE_MAGIC;
	m.backend = B;
	m.backend_priv = priv;
	if (B->machine_create(priv, &req, NULL, &m, &err) < 0)
		fail_msg("create: %s (is sandgate/base:1 built? etc/image/build.sh)", err.msg);
	return &m;
}

static void drop_machine(struct sg_machine *m)
{
	struct sg_err err = { 0 };

	B->machine_destroy(m, NULL, &err);
	B->machine_release(m);
}

/* ---- tests ---------------------------------------------------------------------------- */

/* docker.so's docker_runner action (the table has others). */
static const struct sg_action *runner_action(void)
{
	for (size_t i = 0; i < B->n_actions; i++)
		if (!strcmp(B->actions[i].name, "docker_runner"))
			return &B->actions[i];
	return NULL;
}

static void test_exec_and_status_stream(void **state)
{
	struct sg_machine *m = make_machine();
	struct sg_exec_req req = { .command = "echo hi; echo err >&2; exit 4", .timeout_ms = 10000 };
	struct sg_exec_result res = { 0 };
	struct sg_exec_req sreq = { .command = "exec sh" };
	static const char cmd[] = "{ head -c 100000 /dev/zero | tr '\\0' o; echo; echo two >&2; } 3>&- "
				  "</dev/null; echo \"E $?\" >&3\n";
	struct sg_stream *s = NULL;
	struct sg_err err = { 0 };
	char buf[8192], status[64] = "";
	size_t out = 0, st = 0;
	int chan, code = -2, rounds = 0;
	ssize_t n;
	json_t *info = NULL;

	(void)state;
	assert_int_equal(B->exec(m, &req, NULL, &res, &err), 0);
	assert_string_equal(res.out.data, "hi\n");
	assert_string_equal(res.err.data, "err\n");
	assert_int_equal(res.exit_code, 4);
	sg_buf_release(&res.out);
	sg_buf_release(&res.err);

	if (B->stream_open_status(m, &sreq, 3, &s, &err) < 0)
		fail_msg("stream_open_status: %s", err.msg);
	assert_int_equal(B->stream_write(s, cmd, strlen(cmd), &err), (ssize_t)strlen(cmd));
	while (st < 4 && rounds++ < 100) {
		n = B->stream_read_ch(s, buf, sizeof(buf), 200, &chan, &err);
		if (n < 0 && err.code == SG_E_TIMEOUT)
			continue;
		assert_true(n > 0);
		if (chan == SG_STREAM_STATUS) {
			memcpy(status + st, buf, (size_t)n < sizeof(status) - st - 1 ?
			       (size_t)n : sizeof(status) - st - 1);
			st += (size_t)n;
		} else {
			assert_int_equal(st, 0); /* all output before the status */
			out += (size_t)n;
		}
	}
	assert_int_equal(out, 100000 + 1 + 4);
	assert_string_equal(status, "E 0\n");
	assert_int_equal(B->stream_close(s, &code), 0);
	assert_int_equal(code, 0);

	assert_non_null(runner_action());
	assert_int_equal(runner_action()->handler(priv, m, NULL, NULL, &info, &err), 0);
	assert_string_equal(json_string_value(json_object_get(info, "runner")), "active");
	assert_true(json_is_true(json_object_get(info, "connected")));
	json_decref(info);
	drop_machine(m);
}

static void test_plain_stream_through_runner(void **state)
{
	struct sg_machine *m = make_machine();
	struct sg_exec_req sreq = { .command = "cat; exit 5" };
	struct sg_stream *s = NULL;
	struct sg_err err = { 0 };
	char buf[64];
	ssize_t n, got = 0;
	int code = -2;

	(void)state;
	if (B->stream_open(m, &sreq, &s, &err) < 0)
		fail_msg("stream_open: %s", err.msg);
	assert_int_equal(B->stream_write(s, "ping\n", 5, &err), 5);
	while (got < 5) {
		n = B->stream_read(s, buf + got, sizeof(buf) - (size_t)got, 2000, &err);
		assert_true(n > 0);
		got += n;
	}
	assert_memory_equal(buf, "ping\n", 5);
	assert_int_equal(B->stream_close(s, &code), 0);
	assert_int_equal(code, 5);
	drop_machine(m);
}

/* With the runner off, a status stream is refused and plain ones still work. */
static void test_runner_off(void **state)
{
	struct sg_machine *m;
	struct sg_exec_req sreq = { .command = "exec sh" };
	struct sg_stream *s = NULL;
	struct sg_err err = { 0 };
	json_t *info = NULL;

	(void)state;
	B->fini(priv);
	runner_off = true;
	assert_int_equal(B->init(&host, &priv, &err), 0);
	m = make_machine();
	assert_int_equal(B->stream_open_status(m, &sreq, 3, &s, &err), -1);
	assert_int_equal(err.code, SG_E_NOTSUP);
	assert_int_equal(B->stream_open(m, &sreq, &s, &err), 0);
	assert_int_equal(B->stream_close(s, NULL), 0);
	assert_int_equal(runner_action()->handler(priv, m, NULL, NULL, &info, &err), 0);
	assert_string_equal(json_string_value(json_object_get(info, "runner")), "off");
	json_decref(info);
	drop_machine(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exec_and_status_stream),
		cmocka_unit_test(test_plain_stream_through_runner),
		cmocka_unit_test(test_runner_off),
	};

	return cmocka_run_group_tests(tests, load, unload);
}
