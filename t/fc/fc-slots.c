/*
 * fc-slots: drives every slot of fc.so's code (linked in, with a fake host
 * API) against the FC emulator, printing TAP.  t/e2e/t6006-fc-slots.mjs
 * starts the emulator, runs this under valgrind when it is installed, and
 * relays the TAP lines: the slots the MCP tools do not reach (streams, stat,
 * mkdir, remove, attach, list, keepalive) are covered here, and the plugin
 * is checked for leaks.
 *
 * Environment: FCT_BASE_URL (the emulator), FCT_API_KEY.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sandgate/plugin.h>

#include "t/lib/fakehost.h"

extern const struct sg_backend sg_backend;

#define ok fakehost_ok /* one TAP line (t/lib/fakehost.c) */

/* ---- a fake host ------------------------------------------------------------- */

static const char *h_config_get(const char *section, const char *key)
{
	if (strcmp(section, "fc") != 0)
		return NULL;
	if (!strcmp(key, "base_url") || !strcmp(key, "sandbox_url"))
		return getenv("FCT_BASE_URL");
	if (!strcmp(key, "api_key"))
		return getenv("FCT_API_KEY");
	if (!strcmp(key, "keepalive_interval"))
		return "0";
	return NULL;
}

static const char *h_state_dir(void) { return "/tmp"; }

static const struct sg_host_api host = FAKEHOST_API(fakehost_log, h_config_get, h_state_dir);

/* ---- steps ------------------------------------------------------------------------ */

static const struct sg_backend *b = &sg_backend;

static void files(struct sg_machine *m)
{
	struct sg_err err = { 0 };
	struct sg_stat st;
	struct sg_buf buf = { 0 };
	struct sg_write_opts wo = { 0 };

	ok(b->file_mkdir(m, "/home/user/d/e", false, NULL, &err) < 0 && err.code == SG_E_NOTFOUND,
	   "mkdir without parents of a missing parent: not found (%s)", err.msg);
	ok(b->file_mkdir(m, "/home/user/d/e", true, NULL, &err) == 0, "mkdir -p");
	ok(b->file_mkdir(m, "/home/user/d/e", true, NULL, &err) == 0, "mkdir -p of an existing directory");
	ok(b->file_mkdir(m, "/home/user/d/e", false, NULL, &err) < 0 && err.code == SG_E_EXISTS,
	   "mkdir of an existing directory: exists (%s)", err.msg);
	ok(b->file_write(m, "/home/user/d/e/f.txt", "hello", 5, &wo, NULL, &err) == 0, "write");
	ok(b->file_stat(m, "/home/user/d/e/f.txt", NULL, &st, &err) == 0 && st.type == SG_FT_FILE &&
	   st.size == 5 && st.mode == 0644 && st.mtime > 1700000000, "stat: file, 5 bytes, 0644, mtime");
	ok(b->file_stat(m, "/home/user/d", NULL, &st, &err) == 0 && st.type == SG_FT_DIR, "stat: dir");
	ok(b->file_read(m, "/home/user/d/e/f.txt", 1024, NULL, &buf, &err) == 0 && buf.len == 5 &&
	   memcmp(buf.data, "hello", 5) == 0, "read");
	sg_buf_release(&buf);
	ok(b->file_read(m, "/home/user/d/e/f.txt", 3, NULL, &buf, &err) < 0 && err.code == SG_E_TOOBIG,
	   "read past max: too big (%s)", err.msg);
	sg_buf_release(&buf);
	wo.no_mkdir = true;
	ok(b->file_write(m, "/home/user/nodir/x", "x", 1, &wo, NULL, &err) < 0 && err.code == SG_E_NOTFOUND,
	   "write with no_mkdir into a missing directory: not found (%s)", err.msg);
	wo.no_mkdir = false;
	wo.mode = 0600;
	ok(b->file_write(m, "/home/user/d/secret", "s", 1, &wo, NULL, &err) == 0 &&
	   b->file_stat(m, "/home/user/d/secret", NULL, &st, &err) == 0 && st.mode == 0600,
	   "write of a new file with mode 0600");
	ok(b->file_remove(m, "/home/user/d", false, NULL, &err) < 0 && err.code == SG_E_INVAL,
	   "remove of a non-empty directory without recursive: refused (%s)", err.msg);
	ok(b->file_remove(m, "/home/user/d", true, NULL, &err) == 0, "remove recursive");
	ok(b->file_stat(m, "/home/user/d", NULL, &st, &err) < 0 && err.code == SG_E_NOTFOUND,
	   "stat after remove: not found");
	ok(b->file_remove(m, "/home/user/d", true, NULL, &err) < 0 && err.code == SG_E_NOTFOUND,
	   "remove of a missing path: not found");
}

static void execs(struct sg_machine *m)
{
	struct sg_err err = { 0 };
	struct sg_exec_result res = { 0 };
	const char *argv[] = { "/bin/echo", "a  b", NULL };
	const char *env[] = { "FOO=bar baz", NULL };
	struct sg_exec_req rq = { .argv = argv, .env = env, .timeout_ms = 10000 };

	ok(b->exec(m, &rq, NULL, &res, &err) == 0 && res.out.len == 5 && !memcmp(res.out.data, "a  b\n", 5),
	   "exec argv: no shell splitting");
	sg_buf_release(&res.out);
	sg_buf_release(&res.err);
	memset(&res, 0, sizeof(res));
	rq.argv = NULL;
	rq.command = "printf %s \"$FOO\"; head -c 100 /dev/zero >&2; exit 4";
	rq.output_cap = 10;
	ok(b->exec(m, &rq, NULL, &res, &err) == 0 && res.exit_code == 4 && res.err.len == 10 &&
	   res.err_truncated && !res.out_truncated && res.out.len == 7, "exec: env, exit 4, stderr capped at 10");
	sg_buf_release(&res.out);
	sg_buf_release(&res.err);
}

static void read_until(struct sg_stream *s, const char *want, char *got, size_t size)
{
	struct sg_err err;
	size_t n = 0;

	got[0] = '\0';
	for (int i = 0; i < 50 && !strstr(got, want) && n + 1 < size; i++) {
		ssize_t r = b->stream_read(s, got + n, size - n - 1, 200, &err);

		if (r > 0) {
			n += (size_t)r;
			got[n] = '\0';
		} else if (r == 0) {
			break;
		}
	}
}

static void streams(struct sg_machine *m)
{
	struct sg_err err = { 0 };
	struct sg_stream *s = NULL;
	struct sg_exec_req rq = { .command = "cat" };
	char got[256];
	int code = -2;

	ok(b->stream_open(m, &rq, &s, &err) == 0, "stream_open cat (%s)", err.msg);
	if (!s)
		return;
	ok(b->stream_write(s, "ping\n", 5, &err) == 5, "stream_write");
	read_until(s, "ping\n", got, sizeof(got));
	ok(strcmp(got, "ping\n") == 0, "stream_read echoes it back: '%.*s'", (int)strcspn(got, "\n"), got);
	ok(b->stream_read(s, got, sizeof(got), 100, &err) < 0 && err.code == SG_E_TIMEOUT,
	   "stream_read with nothing to read: timeout");
	b->stream_close(s, &code);
	ok(code == 0, "stream_close: stdin EOF ends cat, exit 0 (%d)", code);

	rq.command = "read x; echo got:$x; exec sleep 100";
	s = NULL;
	ok(b->stream_open(m, &rq, &s, &err) == 0, "stream_open a shell that ignores EOF");
	if (!s)
		return;
	b->stream_write(s, "abc\n", 4, &err);
	read_until(s, "got:abc\n", got, sizeof(got));
	ok(strcmp(got, "got:abc\n") == 0, "it read its input: '%.*s'", (int)strcspn(got, "\n"), got);
	code = 0;
	b->stream_close(s, &code);
	ok(code == -1, "stream_close kills what ignores EOF: exit -1 (%d)", code);
}

static void code(struct sg_machine *m)
{
	struct sg_err err = { 0 };
	struct sg_code_result res = { 0 };
	struct sg_code_req rq = { .language = "python", .code = "print(2 + 2)\n'x' * 3", .timeout_ms = 20000 };

	ok(b->run_code(m, &rq, NULL, &res, &err) == 0 && res.out.len == 2 && !memcmp(res.out.data, "4\n", 2) &&
	   json_array_size(res.results) == 1, "run_code: stdout and one result");
	sg_buf_release(&res.out);
	sg_buf_release(&res.err);
	json_decref(res.results);
	json_decref(res.error);
}

int main(void)
{
	struct sg_err err = { 0 };
	struct sg_machine m, m2;
	struct sg_create_req cr = { .lifetime_s = 60, .owner = "testhost:1:2", .session_hash = "abcdef0123456789" };
	struct sg_machine_entry *list = NULL;
	size_t n = 0;
	void *priv = NULL;
	bool found = false;

	if (b->init(&host, &priv, &err) < 0) {
		printf("Bail out! init: %s\n", err.msg);
		return 1;
	}
	fakehost_machine(&m, b, priv);
	if (b->machine_create(priv, &cr, NULL, &m, &err) < 0) {
		printf("Bail out! create: %s\n", err.msg);
		return 1;
	}
	ok(strncmp(m.id, "sbx-", 4) == 0 && strcmp(m.workspace, "/home/user") == 0, "create: %s", m.id);
	ok(b->machine_list(priv, NULL, &list, &n, &err) == 0, "list");
	for (size_t i = 0; i < n; i++)
		if (!strcmp(list[i].id, m.id))
			found = !strcmp(list[i].owner, "testhost:1:2") && !strcmp(list[i].session_hash, "abcdef0123456789") &&
				list[i].lifetime_s == 60 && list[i].running && !list[i].persistent && list[i].created > 0;
	free(list);
	ok(found, "list: the sandbox with its owner, session, lifetime and creation time");
	fakehost_machine(&m2, b, priv);
	ok(b->machine_attach(priv, m.id, NULL, &m2, &err) == 0 && !strcmp(m2.id, m.id), "attach by id");
	b->machine_release(&m2);
	fakehost_machine(&m2, b, priv);
	ok(b->machine_attach(priv, "sbx-nope", NULL, &m2, &err) < 0 && err.code == SG_E_NOTFOUND,
	   "attach of an unknown id: not found");
	ok(b->machine_keepalive(&m, 60, &err) == 0 && b->machine_keepalive(&m, 60, &err) == 0, "keepalive queues");
	files(&m);
	execs(&m);
	streams(&m);
	code(&m);
	ok(b->machine_destroy(&m, NULL, &err) == 0, "destroy");
	ok(b->machine_destroy(&m, NULL, &err) == 0, "destroy again: already gone is success");
	{
		struct sg_exec_result res = { 0 };
		struct sg_exec_req rq = { .command = "true" };

		ok(b->exec(&m, &rq, NULL, &res, &err) < 0 && err.code == SG_E_GONE,
		   "exec on a destroyed sandbox: gone (%s)", err.msg);
		sg_buf_release(&res.out);
		sg_buf_release(&res.err);
	}
	b->machine_release(&m);
	b->fini(priv);
	return fakehost_done();
}
