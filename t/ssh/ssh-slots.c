/*
 * ssh-slots: drives every slot of ssh.so's code (linked in, with a fake host
 * API) against a real sshd, printing TAP.  t/e2e/t7007-ssh-slots.mjs starts
 * the sshd fixture, runs this under valgrind when it is installed, and
 * relays the TAP lines: the slots the MCP tools do not reach (streams,
 * argv, stat, mkdir, remove, attach, list, named targets, GONE) are covered
 * here, and the plugin is checked for leaks.
 *
 * Environment (from the fixture's ready file): SST_PORT, SST_USER, SST_KEY,
 * SST_KNOWN_HOSTS, SST_ROOT, SST_STATE (a writable state directory);
 * SST_RUNNER, the sandgate-runner binary ([ssh] runner_path), and
 * SST_RUNNER_ON ([ssh] runner: "false" runs every step on plain exec).
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sandgate/plugin.h>

#include "plugins/ssh/ssh.h"
#include "t/lib/fakehost.h"

extern const struct sg_backend sg_backend;

#define ok fakehost_ok /* one TAP line (t/lib/fakehost.c) */

/* ---- a fake host ------------------------------------------------------------- */

static const char *h_config_get(const char *section, const char *key)
{
	if (!strcmp(section, "ssh")) {
		if (!strcmp(key, "default_host"))
			return "127.0.0.1";
		if (!strcmp(key, "default_port"))
			return getenv("SST_PORT");
		if (!strcmp(key, "default_user"))
			return getenv("SST_USER");
		if (!strcmp(key, "default_key"))
			return getenv("SST_KEY");
		if (!strcmp(key, "known_hosts"))
			return getenv("SST_KNOWN_HOSTS");
		if (!strcmp(key, "root"))
			return getenv("SST_ROOT");
		if (!strcmp(key, "keepalive_interval"))
			return "5";
		if (!strcmp(key, "runner_path"))
			return getenv("SST_RUNNER");
		if (!strcmp(key, "runner"))
			return getenv("SST_RUNNER_ON");
		if (!strcmp(key, "isolation")) /* plain directories: t7010 drives the jails */
			return getenv("SST_ISOLATION") ? getenv("SST_ISOLATION") : "none";
		return NULL;
	}
	/* a named target with a root of its own */
	if (!strcmp(section, "ssh.target.lab")) {
		if (!strcmp(key, "host"))
			return "localhost";
		if (!strcmp(key, "root"))
			return getenv("SST_LAB_ROOT");
	}
	return NULL;
}

static const char *h_state_dir(void) { return getenv("SST_STATE"); }

static const struct sg_host_api host = FAKEHOST_API(fakehost_log, h_config_get, h_state_dir);

/* ---- helpers ------------------------------------------------------------------ */

static void *priv;

/* Runs a command; returns its stdout (caller frees) and fills *res flags. */
static int run(struct sg_machine *m, const char *cmd, const char *const *argv,
	       const char *const *env, unsigned timeout_ms, size_t cap,
	       struct sg_exec_result *res, struct sg_err *err)
{
	struct sg_exec_req req = { .command = cmd, .argv = argv, .env = env,
				   .timeout_ms = timeout_ms, .output_cap = cap };

	memset(res, 0, sizeof(*res));
	return sg_backend.exec(m, &req, NULL, res, err);
}

static void res_free(struct sg_exec_result *res)
{
	sg_buf_release(&res->out);
	sg_buf_release(&res->err);
}

static const char *str(const struct sg_buf *b)
{
	return b->data ? b->data : "";
}

/* ---- the steps ---------------------------------------------------------------- */

static void step_exec(struct sg_machine *m)
{
	const char *argv[] = { "printf", "%s|%s|%s", "a b", "it's", "\\x", NULL };
	/* As the core passes them: the machine's create-time variables first. */
	const char *env[] = { "MENV=from create", "SG_ACCEPTED_A=accepted", "PLAIN=refused by AcceptEnv", NULL };
	const char *missing[] = { "sg-no-such-program", "x", NULL };
	struct sg_exec_result res;
	struct sg_err err = { 0 };
	int rc;

	rc = run(m, "echo out; echo err >&2; exit 5", NULL, NULL, 0, 0, &res, &err);
	ok(rc == 0 && !strcmp(str(&res.out), "out\n") && !strcmp(str(&res.err), "err\n") &&
	   res.exit_code == 5, "exec command: stdout, stderr, exit 5 (%s)", err.msg);
	res_free(&res);
	rc = run(m, NULL, argv, NULL, 0, 0, &res, &err);
	ok(rc == 0 && !strcmp(str(&res.out), "a b|it's|\\x"), "exec argv: each element quoted once ('%s')",
	   str(&res.out));
	res_free(&res);
	rc = run(m, "printf '%s/%s/%s' \"$SG_ACCEPTED_A\" \"$PLAIN\" \"$MENV\"", NULL, env, 0, 0, &res, &err);
	ok(rc == 0 && !strcmp(str(&res.out), "accepted/refused by AcceptEnv/from create"),
	   "exec env: setenv, the env(1) fallback and the machine's create env first ('%s')", str(&res.out));
	res_free(&res);
	rc = run(m, "sleep 5; echo late", NULL, NULL, 700, 0, &res, &err);
	ok(rc == 0 && res.timed_out && !strcmp(str(&res.out), ""), "exec timeout: success with timed_out");
	res_free(&res);
	rc = run(m, "head -c 100000 /dev/zero; echo done >&2", NULL, NULL, 0, 1000, &res, &err);
	ok(rc == 0 && res.out.len == 1000 && res.out_truncated && !res.err_truncated &&
	   !strcmp(str(&res.err), "done\n"),
	   "exec output cap: 1000 bytes kept, truncated, still drained (rc %d, %zu bytes, %d, stderr %zu, %s)",
	   rc, res.out.len, res.out_truncated, res.err.len, err.msg);
	res_free(&res);
	rc = run(m, "kill -TERM $$", NULL, NULL, 0, 0, &res, &err);
	ok(rc == 0 && res.signal == 15 && res.exit_code == -1, "exec killed by SIGTERM: signal 15");
	res_free(&res);
	rc = run(m, NULL, missing, NULL, 0, 0, &res, &err);
	ok(rc == 0 && res.exit_code == 127 && strstr(str(&res.err), "sg-no-such-program"),
	   "exec argv of a missing program: exit 127 with a message (rc %d, exit %d, '%s')", rc,
	   res.exit_code, str(&res.err));
	res_free(&res);
}

static bool runner_on(void)
{
	const char *v = getenv("SST_RUNNER_ON");

	return !v || strcmp(v, "false") != 0;
}

/* Reads from a status stream until `want` bytes of output and of status
 * came, or nothing more does; records the order of the channels. */
static void read_ch_all(struct sg_stream *s, char *out, size_t out_want, char *st, size_t st_want,
			char *order, size_t order_size)
{
	size_t no = 0, ns = 0, k = 0;
	struct sg_err err = { 0 };
	char buf[256];
	int ch;

	while (no < out_want || ns < st_want) {
		ssize_t n = sg_backend.stream_read_ch(s, buf, sizeof(buf), 5000, &ch, &err);

		if (n <= 0)
			break;
		for (ssize_t i = 0; i < n; i++) {
			if (ch == SG_STREAM_STATUS && ns + 1 < 128)
				st[ns++] = buf[i];
			else if (ch == SG_STREAM_OUTPUT && no + 1 < 128)
				out[no++] = buf[i];
			if (buf[i] == '\n' && k + 1 < order_size)
				order[k++] = ch == SG_STREAM_STATUS ? 'S' : 'o';
		}
	}
	out[no] = st[ns] = order[k] = '\0';
}

static void step_status_streams(struct sg_machine *m)
{
	struct sg_exec_req req = { .command = "echo out; echo err >&2; printf 'S1\\n' >&3; "
					      "echo after; printf 'S2\\n' >&3; exec 3>&-; cat" };
	struct sg_stream *s = NULL;
	struct sg_err err = { 0 };
	char out[128], st[128], order[16];
	int code = -2, rc;

	rc = sg_backend.stream_open_status(m, &req, 3, &s, &err);
	if (!runner_on()) {
		ok(rc < 0 && err.code == SG_E_NOTSUP && !s,
		   "stream_open_status without the runner: SG_E_NOTSUP (%s)", err.msg);
		return;
	}
	ok(rc == 0 && s, "stream_open_status with fd 3 through the runner (%s)", err.msg);
	if (!s)
		return;
	read_ch_all(s, out, 15, st, 6, order, sizeof(order));
	ok(!strcmp(out, "out\nerr\nafter\n") && !strcmp(st, "S1\nS2\n"),
	   "stream_read_ch: output and status apart ('%s' / '%s')", out, st);
	/* "after" may overtake S1 (it was written after it), never S2. */
	ok(!strcmp(order, "ooSoS") || !strcmp(order, "oooSS"),
	   "stream_read_ch: output written before a status comes before it (%s)", order);
	ok(sg_backend.stream_write(s, "x\n", 2, &err) == 2, "stream_write on a status stream");
	read_ch_all(s, out, 2, st, 0, order, sizeof(order));
	ok(!strcmp(out, "x\n"), "... echoed on the output channel ('%s')", out);
	rc = sg_backend.stream_close(s, &code);
	ok(rc == 0 && code == 0, "stream_close of a status stream: exit 0 (%d)", code);
	s = NULL;
	ok(sg_backend.stream_open_status(m, &req, 2, &s, &err) < 0 && err.code == SG_E_INVAL && !s,
	   "stream_open_status with fd 2: SG_E_INVAL");
}

static void step_streams(struct sg_machine *m)
{
	struct sg_exec_req req = { .command = "echo out; echo err >&2; cat" };
	struct sg_stream *s = NULL;
	struct sg_err err = { 0 };
	char buf[256];
	size_t got = 0;
	ssize_t n;
	int code = -2, rc;

	ok(sg_backend.stream_open(m, &req, &s, &err) == 0 && s, "stream_open (%s)", err.msg);
	if (!s)
		return;
	while (got < 8 && (n = sg_backend.stream_read(s, buf + got, sizeof(buf) - got - 1, 5000, &err)) > 0)
		got += (size_t)n;
	buf[got] = '\0';
	ok(!strcmp(buf, "out\nerr\n"), "stream: stdout and stderr merged in order (%zu bytes)", got);
	ok(sg_backend.stream_write(s, "ping\n", 5, &err) == 5, "stream_write");
	got = 0;
	while (got < 5 && (n = sg_backend.stream_read(s, buf + got, sizeof(buf) - got - 1, 5000, &err)) > 0)
		got += (size_t)n;
	buf[got] = '\0';
	ok(!strcmp(buf, "ping\n"), "stream_read echoes what was written");
	n = sg_backend.stream_read(s, buf, sizeof(buf), 200, &err);
	ok(n < 0 && err.code == SG_E_TIMEOUT, "stream_read with nothing to read: SG_E_TIMEOUT");
	rc = sg_backend.stream_close(s, &code);
	ok(rc == 0 && code == 0, "stream_close after EOF: exit 0 (%d)", code);

	req.command = "read line; echo \"got $line\"; exit 7";
	s = NULL;
	ok(sg_backend.stream_open(m, &req, &s, &err) == 0, "stream_open a script");
	if (!s)
		return;
	sg_backend.stream_write(s, "x y\n", 4, &err);
	got = 0;
	while ((n = sg_backend.stream_read(s, buf + got, sizeof(buf) - got - 1, 5000, &err)) > 0)
		got += (size_t)n;
	buf[got] = '\0';
	ok(n == 0 && !strcmp(buf, "got x y\n"), "stream read to EOF (%zu bytes)", got);
	rc = sg_backend.stream_close(s, &code);
	ok(rc == 0 && code == 7, "stream_close: its exit status 7 (%d)", code);

	req.command = "trap '' TERM; sleep 600";
	s = NULL;
	ok(sg_backend.stream_open(m, &req, &s, &err) == 0, "stream_open a process that ignores TERM");
	if (s) {
		rc = sg_backend.stream_close(s, &code);
		ok(rc == 0, "stream_close kills its group (exit %d)", code);
	}
}

static void step_files(struct sg_machine *m)
{
	struct sg_write_opts wo = { .mode = 0600 };
	struct sg_buf b = { 0 };
	struct sg_stat st;
	struct sg_err err = { 0 };
	json_t *list = NULL;
	char path[4096];
	int rc;

	snprintf(path, sizeof(path), "%s/d1/d2/f.txt", m->workspace);
	rc = sg_backend.file_write(m, path, "abc", 3, &wo, NULL, &err);
	ok(rc == 0, "file_write with parents (%s)", err.msg);
	rc = sg_backend.file_stat(m, path, NULL, &st, &err);
	ok(rc == 0 && st.type == SG_FT_FILE && st.size == 3 && st.mode == 0600, "file_stat: file, 3 bytes, mode 0600");
	rc = sg_backend.file_read(m, path, 1024, NULL, &b, &err);
	ok(rc == 0 && b.len == 3 && !memcmp(b.data, "abc", 3), "file_read");
	sg_buf_release(&b);
	rc = sg_backend.file_read(m, path, 2, NULL, &b, &err);
	ok(rc < 0 && err.code == SG_E_TOOBIG, "file_read over max: SG_E_TOOBIG");
	sg_buf_release(&b);
	snprintf(path, sizeof(path), "%s/d1", m->workspace);
	rc = sg_backend.file_read(m, path, 1024, NULL, &b, &err);
	ok(rc < 0 && err.code == SG_E_INVAL, "file_read of a directory: SG_E_INVAL");
	sg_buf_release(&b);
	rc = sg_backend.file_list(m, path, NULL, &list, &err);
	ok(rc == 0 && json_array_size(list) == 1 &&
	   !strcmp(json_string_value(json_object_get(json_array_get(list, 0), "type")), "dir"),
	   "file_list: one directory entry");
	json_decref(list);
	snprintf(path, sizeof(path), "%s/m1/m2/m3/x", m->workspace);
	ok(sg_backend.file_write(m, path, "x", 1, NULL, NULL, &err) == 0 &&
	   sg_backend.file_remove(m, path, false, NULL, &err) == 0, "file_remove of a file");
	ok(sg_backend.file_remove(m, path, false, NULL, &err) < 0 && err.code == SG_E_NOTFOUND,
	   "file_remove of a missing file: SG_E_NOTFOUND");
	snprintf(path, sizeof(path), "%s/m1/m2/m3", m->workspace);
	ok(sg_backend.file_stat(m, path, NULL, &st, &err) == 0 && st.type == SG_FT_DIR, "file_stat: dir");
	ok(sg_backend.file_remove(m, path, false, NULL, &err) == 0, "file_remove of an empty directory");
	snprintf(path, sizeof(path), "%s/d1", m->workspace);
	ok(sg_backend.file_remove(m, path, false, NULL, &err) < 0, "file_remove of a non-empty directory fails");
	ok(sg_backend.file_remove(m, path, true, NULL, &err) == 0, "file_remove recursive");
	ok(sg_backend.file_stat(m, path, NULL, &st, &err) < 0 && err.code == SG_E_NOTFOUND,
	   "file_stat of a removed path: SG_E_NOTFOUND");
	ok(sg_backend.file_write(m, "rel.txt", "r", 1, NULL, NULL, &err) == 0 &&
	   sg_backend.file_read(m, "rel.txt", 10, NULL, &b, &err) == 0 && b.len == 1,
	   "relative paths are under the workspace");
	sg_buf_release(&b);
	snprintf(path, sizeof(path), "%s/../escape.txt", m->workspace);
	ok(sg_backend.file_write(m, path, "e", 1, NULL, NULL, &err) < 0 && err.code == SG_E_PERM &&
	   strstr(err.msg, "outside sandbox directory"), "a write outside the sandbox directory: "
	   "SG_E_PERM (%s)", err.msg);
	ok(sg_backend.file_read(m, "/etc/hostname", 100, NULL, &b, &err) < 0 &&
	   err.code == SG_E_PERM, "a read outside the sandbox directory: SG_E_PERM (%s)", err.msg);
	sg_buf_release(&b);
	/* The file slots went through the runner's files capability, one
	 * request each (the directory checked in it), or (runner off) not at
	 * all. */
	{
		unsigned long long n = ssh_site_of(m->handle)->file_ops;

		ok(runner_on() ? n >= 18 : n == 0, "file slots through the runner: %llu file "
		   "operations (runner %s)", n, runner_on() ? "on" : "off");
	}
}

static void step_attach_list(struct sg_machine *m)
{
	struct sg_machine a;
	struct sg_exec_result res;
	struct sg_err err = { 0 };
	json_t *list = NULL, *e;
	size_t i;
	bool found = false;

	fakehost_machine(&a, &sg_backend, priv);
	ok(sg_backend.machine_attach(priv, m->id, NULL, NULL, &a, &err) == 0 && !strcmp(a.workspace, m->workspace) &&
	   !strcmp(a.id, m->id) && !strcmp(a.url, m->url) && !strcmp(a.template_name, "default"),
	   "machine_attach rebinds the id to the same directory, address and target (%s)", err.msg);
	ok(fakehost_kept(&a) == NULL, "... from its own state file: nothing is kept in the core's record");
	if (a.handle) {
		ok(run(&a, "pwd", NULL, NULL, 0, 0, &res, &err) == 0, "exec on the attached machine");
		ok(res.out.data && !strncmp(res.out.data, a.workspace, strlen(a.workspace)), "... in its workspace");
		res_free(&res);
		sg_backend.machine_release(&a);
	}
	fakehost_machine(&a, &sg_backend, priv);
	ok(sg_backend.machine_attach(priv, "ssh-default-000000000000", NULL, NULL, &a, &err) < 0 &&
	   err.code == SG_E_NOTFOUND, "machine_attach of an unknown id: SG_E_NOTFOUND");
	ok(sg_backend.machine_list(priv, NULL, &list, &err) == 0 && json_is_array(list), "machine_list");
	json_array_foreach(list, i, e)
		if (!strcmp(json_string_value(json_object_get(e, "id")), m->id) &&
		    !strcmp(json_string_value(json_object_get(e, "owner")), "host:1:2") &&
		    json_integer_value(json_object_get(e, "lifetime")) == 60 &&
		    json_integer_value(json_object_get(e, "created")) > 1700000000 &&
		    json_is_false(json_object_get(e, "persistent")))
			found = true;
	ok(found, "machine_list has the sandbox with its owner, creation time and lifetime");
	json_decref(list);
}

static void step_targets(void)
{
	struct sg_create_req req = { .template_name = "lab", .owner = "host:1:2", .session_hash = "ab" };
	struct sg_machine m;
	struct sg_err err = { 0 };
	json_t *opts;
	struct stat sb;

	fakehost_machine(&m, &sg_backend, priv);
	ok(sg_backend.machine_create(priv, &req, NULL, &m, &err) == 0, "create on the named target 'lab' (%s)",
	   err.msg);
	ok(strstr(m.url, "@localhost:") && !strcmp(m.template_name, "lab") && !strncmp(m.id, "ssh-lab-", 8) &&
	   !strncmp(m.workspace, getenv("SST_LAB_ROOT"), strlen(getenv("SST_LAB_ROOT"))),
	   "the target's host, name and root are used (%s, %s)", m.url, m.workspace);
	if (m.handle) {
		ok(sg_backend.machine_destroy(&m, NULL, &err) == 0 && stat(m.workspace, &sb) < 0,
		   "destroy removes its directory");
		sg_backend.machine_release(&m);
	}
	fakehost_machine(&m, &sg_backend, priv);
	req.template_name = NULL;
	opts = json_pack("{s:s}", "target", "nope");
	req.options = opts;
	ok(sg_backend.machine_create(priv, &req, NULL, &m, &err) < 0 && err.code == SG_E_NOTFOUND,
	   "create option target 'nope': SG_E_NOTFOUND (%s)", err.msg);
	json_decref(opts);
	req.options = NULL;
	req.template_name = "nope";
	ok(sg_backend.machine_create(priv, &req, NULL, &m, &err) < 0 && err.code == SG_E_NOTFOUND,
	   "template naming no target: SG_E_NOTFOUND");
}

int main(void)
{
	struct sg_create_req req = { .owner = "host:1:2", .session_hash = "abcd", .lifetime_s = 60 };
	struct sg_machine m;
	struct sg_exec_result res;
	struct sg_err err = { 0 };
	struct stat sb;
	char ws[4096];

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (sg_backend.init(&host, &priv, &err) < 0) {
		printf("Bail out! init: %s\n", err.msg);
		return 1;
	}
	fakehost_machine(&m, &sg_backend, priv);
	ok(sg_backend.machine_create(priv, &req, NULL, &m, &err) == 0, "machine_create (%s)", err.msg);
	if (!m.handle) {
		printf("Bail out! no machine\n");
		return 1;
	}
	ok(stat(m.workspace, &sb) == 0 && S_ISDIR(sb.st_mode) && (sb.st_mode & 0777) == 0700,
	   "the workspace %s exists with mode 0700", m.workspace);
	step_exec(&m);
	step_streams(&m);
	step_status_streams(&m);
	step_files(&m);
	step_attach_list(&m);
	step_targets();

	/* the directory removed behind our back: SG_E_GONE */
	snprintf(ws, sizeof(ws), "%s", m.workspace);
	rename(ws, "/tmp/.sg-ssh-slots-moved");
	ok(run(&m, "true", NULL, NULL, 0, 0, &res, &err) < 0 && err.code == SG_E_GONE,
	   "exec in a workspace removed outside sandgate: SG_E_GONE (%s)", err.msg);
	res_free(&res);
	rename("/tmp/.sg-ssh-slots-moved", ws);
	ok(sg_backend.machine_destroy(&m, NULL, &err) == 0 && stat(ws, &sb) < 0, "machine_destroy removes the directory");
	ok(sg_backend.machine_destroy(&m, NULL, &err) == 0, "machine_destroy of a gone directory is success");
	sg_backend.machine_release(&m);
	sg_backend.fini(priv);
	return fakehost_done();
}
