/*
 * fc-slots: drives every slot of fc.so's code (linked in, with a fake host
 * API) against the FC emulator, printing TAP.  t/e2e/t6006-fc-slots.mjs
 * starts the emulator, runs this under valgrind when it is installed, and
 * relays the TAP lines: the slots the MCP tools do not reach (probe,
 * streams, stat, remove, attach, list, keepalive) are covered here, and the
 * plugin is checked for leaks.
 *
 * Environment: FCT_BASE_URL (the emulator), FCT_API_KEY.
 */
#include "config.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <sandgate/plugin.h>

#include "t/lib/fakehost.h"

extern const struct sg_backend sg_backend;

#define ok fakehost_ok /* one TAP line (t/lib/fakehost.c) */

/* ---- a fake host ------------------------------------------------------------- */

/* What the next init() reads in place of the emulator's settings: another
 * base_url, another key, no key, another workspace. */
static struct {
	const char *base_url, *api_key, *workspace;
	bool no_key;
} cfg;

static const char *h_config_get(const char *section, const char *key)
{
	if (strcmp(section, "fc") != 0)
		return NULL;
	if (!strcmp(key, "base_url"))
		return cfg.base_url ? cfg.base_url : getenv("FCT_BASE_URL");
	if (!strcmp(key, "sandbox_url"))
		return getenv("FCT_BASE_URL");
	if (!strcmp(key, "api_key"))
		return cfg.no_key ? NULL : cfg.api_key ? cfg.api_key : getenv("FCT_API_KEY");
	if (!strcmp(key, "workspace"))
		return cfg.workspace;
	if (!strcmp(key, "keepalive_interval"))
		return "0";
	return NULL;
}

static const char *h_state_dir(void) { return "/tmp"; }

/* machine_set with the limits plugin.h promises (the core's, which
 * fakehost does not check), so fc's handling of a refusal is tested. */
static int h_machine_set(struct sg_machine *m, enum sg_machine_field field, const char *fmt, ...)
	SG_PRINTF(3, 4);
static int h_machine_set(struct sg_machine *m, enum sg_machine_field field, const char *fmt, ...)
{
	char *v;
	va_list ap;
	int n, r;

	va_start(ap, fmt);
	n = vasprintf(&v, fmt, ap);
	va_end(ap);
	if (n < 0)
		abort();
	if ((size_t)n > SG_MACHINE_FIELD_MAX || (field == SG_MACHINE_ID && n == 0)) {
		free(v);
		errno = n ? E2BIG : EINVAL;
		return -1;
	}
	r = fakehost_machine_set(m, field, "%s", v);
	free(v);
	return r;
}

static struct sg_host_api host = FAKEHOST_API(fakehost_log, h_config_get, h_state_dir);

/* ---- steps ------------------------------------------------------------------------ */

static const struct sg_backend *b = &sg_backend;

static void files(struct sg_machine *m)
{
	struct sg_err err = { 0 };
	struct sg_stat st;
	struct sg_buf buf = { 0 };
	struct sg_write_opts wo = { 0 };

	ok(b->file_stat(m, "/home/user/d", NULL, &st, &err) < 0 && err.code == SG_E_NOTFOUND,
	   "stat of a missing path: not found (%s)", err.msg);
	ok(b->file_write(m, "/home/user/d/e/f.txt", "hello", 5, &wo, NULL, &err) == 0,
	   "write makes the missing parent directories");
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
	const char *env[] = { "FOO=create-time", "FOO=bar baz", NULL };
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
	   res.err_truncated && !res.out_truncated && res.out.len == 7 && !memcmp(res.out.data, "bar baz", 7),
	   "exec: env (a later NAME= wins), exit 4, stderr capped at 10");
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
	json_decref(res.output_files);

	/* ref. 6: the environment goes to /execute as env_vars */
	const char *env[] = { "FC_T=create-time", "FC_T=from env", NULL };

	int r;

	memset(&res, 0, sizeof(res));
	rq.code = "import os\nprint(os.environ['FC_T'])";
	rq.env = env;
	r = b->run_code(m, &rq, NULL, &res, &err);
	ok(r == 0 && res.out.len == 9 && !memcmp(res.out.data, "from env\n", 9),
	   "run_code: env reaches the interpreter (%s)", r == 0 ? res.out.data : err.msg);
	sg_buf_release(&res.out);
	sg_buf_release(&res.err);
	json_decref(res.results);
	json_decref(res.error);
	json_decref(res.output_files);
}

/* ---- probe ------------------------------------------------------------------------ */

/* init() with cfg, probe within timeout_ms, fini(); *details (may be NULL)
 * gets the details as JSON text (caller frees).  Returns probe's result. */
static int probe_with(unsigned timeout_ms, struct sg_probe *pr, char **details,
		      struct sg_err *err)
{
	void *priv = NULL;
	int r;

	memset(pr, 0, sizeof(*pr));
	pr->preference = -1;
	if (b->init(&host, &priv, err) < 0)
		return -2;
	r = b->probe(priv, timeout_ms, pr, err);
	if (details)
		*details = pr->details ? json_dumps(pr->details, JSON_SORT_KEYS) : NULL;
	json_decref(pr->details);
	b->fini(priv);
	memset(&cfg, 0, sizeof(cfg));
	return r;
}

/* A server on listening socket fd that answers every request 503 (which
 * fc retries when it may) and counts the connections, until stop. */
struct busy {
	int fd, connections;
	atomic_bool stop;
};

static void *busy_main(void *arg)
{
	static const char reply[] = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
				    "Content-Length: 25\r\nConnection: close\r\n\r\n"
				    "{\"message\":\"maintenance\"}";
	struct busy *bz = arg;
	struct pollfd p = { .fd = bz->fd, .events = POLLIN };
	char req[4096];

	while (!atomic_load(&bz->stop)) {
		int c;

		if (poll(&p, 1, 50) <= 0 || (c = accept(bz->fd, NULL, NULL)) < 0)
			continue;
		bz->connections++;
		if (read(c, req, sizeof(req)) > 0 && write(c, reply, sizeof(reply) - 1) < 0)
			perror("busy server");
		close(c);
	}
	return NULL;
}

/* A loopback TCP socket, listening (connections are queued, never
 * answered) or closed (connections are refused); its URL in url. */
static int loopback(bool listening, char *url, size_t size)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &al) < 0 || (listening && listen(fd, 8) < 0)) {
		printf("Bail out! loopback socket: %s\n", strerror(errno));
		exit(1);
	}
	snprintf(url, size, "http://127.0.0.1:%d", ntohs(a.sin_port));
	if (!listening) {
		close(fd);
		return -1;
	}
	return fd;
}

static void probes(void)
{
	const char *key = getenv("FCT_API_KEY"), *base = getenv("FCT_BASE_URL");
	struct sg_err err = { 0 };
	struct sg_probe pr;
	char *d = NULL, url[64], want[160];
	struct busy bz = { 0 };
	pthread_t th;
	int fd;

	ok(probe_with(5000, &pr, &d, &err) == 0 && pr.preference == 10, "probe: the emulator takes the key (%s)",
	   err.msg);
	snprintf(want, sizeof(want), "\"base_url\": \"%s\"", base);
	ok(d && strstr(d, want) && strstr(d, "\"region\": \"cn-hangzhou\"") &&
	   strstr(d, "\"default_template\": \"code-interpreter-v1\"") && strstr(d, "\"api_key_set\": true") &&
	   !strstr(d, key), "probe details: base URL, region, template, key set, never the key: %s", d);
	free(d);

	cfg.no_key = true;
	ok(probe_with(5000, &pr, &d, &err) < 0 && err.code == SG_E_INVAL && pr.preference == 10 &&
	   strstr(err.msg, "[fc] api_key") && strstr(err.msg, "ABX_SANDBOX_API_KEY") &&
	   d && strstr(d, "\"api_key_set\": false"), "probe without a key: says to set it (%s)", err.msg);
	free(d);

	cfg.api_key = "sk-wrong-key-0123456789";
	ok(probe_with(5000, &pr, NULL, &err) < 0 && err.code == SG_E_INVAL &&
	   strstr(err.msg, "refused the API key") && strstr(err.msg, "HTTP 401") &&
	   !strstr(err.msg, "sk-wrong-key"), "probe with a wrong key: refused, the key not quoted (%s)",
	   err.msg);

	loopback(false, url, sizeof(url));
	cfg.base_url = url;
	snprintf(want, sizeof(want), "%s/sandboxes", url);
	ok(probe_with(5000, &pr, NULL, &err) < 0 && err.code == SG_E_UNAVAILABLE && strstr(err.msg, want) &&
	   strstr(err.msg, "onnect"), "probe of a closed port: unavailable, names the URL and why (%s)",
	   err.msg);

	fd = loopback(true, url, sizeof(url));
	cfg.base_url = url;
	snprintf(want, sizeof(want), "%s/sandboxes did not answer within 300 ms", url);
	ok(probe_with(300, &pr, NULL, &err) < 0 && err.code == SG_E_UNAVAILABLE && strstr(err.msg, want),
	   "probe of an endpoint that never answers: unavailable (%s)", err.msg);
	close(fd);

	/* within timeout_ms means one attempt: a 503 is not retried */
	bz.fd = loopback(true, url, sizeof(url));
	cfg.base_url = url;
	if (pthread_create(&th, NULL, busy_main, &bz) != 0) {
		printf("Bail out! pthread_create\n");
		exit(1);
	}
	snprintf(want, sizeof(want), "%s/sandboxes answered HTTP 503 (maintenance)", url);
	ok(probe_with(5000, &pr, NULL, &err) < 0 && err.code == SG_E_UNAVAILABLE && strstr(err.msg, want),
	   "probe of a busy platform: unavailable, with its message (%s)", err.msg);
	atomic_store(&bz.stop, true);
	pthread_join(th, NULL);
	close(bz.fd);
	ok(bz.connections == 1, "probe asked once, no retry (%d connections)", bz.connections);
}

/* ---- lifecycle --------------------------------------------------------------------- */

/* The string at key in o, or "". */
static const char *str_at(const json_t *o, const char *key)
{
	const char *v = json_string_value(json_object_get(o, key));

	return v ? v : "";
}

/* The entry of id in a machine_list answer, or NULL. */
static json_t *listed(json_t *list, const char *id)
{
	size_t i;
	json_t *e;

	json_array_foreach(list, i, e)
		if (!strcmp(str_at(e, "id"), id))
			return e;
	return NULL;
}

/* A workspace the core refuses (longer than SG_MACHINE_FIELD_MAX): create
 * fails naming the key, and the sandbox made for it is not left behind. */
static void refused_strings(const struct sg_create_req *cr)
{
	static char ws[SG_MACHINE_FIELD_MAX + 16];
	struct sg_err err = { 0 };
	struct sg_machine m;
	json_t *before = NULL, *after = NULL;
	void *priv = NULL;

	memset(ws, 'w', sizeof(ws) - 1);
	ws[0] = '/';
	cfg.workspace = ws;
	if (b->init(&host, &priv, &err) < 0) {
		ok(0, "init with a long workspace: %s", err.msg);
		return;
	}
	b->machine_list(priv, NULL, &before, &err);
	fakehost_machine(&m, b, priv);
	ok(b->machine_create(priv, cr, NULL, &m, &err) < 0 && err.code == SG_E_INVAL &&
	   !strncmp(err.msg, "fc: [fc] workspace is longer than 4096 bytes: set a shorter path", 64) &&
	   !m.handle, "create with a workspace machine_set refuses: fails naming it");
	b->machine_list(priv, NULL, &after, &err);
	ok(before && after && json_array_size(after) == json_array_size(before),
	   "the sandbox made for it was killed (%zu before, %zu after)", json_array_size(before),
	   json_array_size(after));
	json_decref(before);
	json_decref(after);
	b->fini(priv);
	memset(&cfg, 0, sizeof(cfg));
}

int main(void)
{
	struct sg_err err = { 0 };
	struct sg_machine m, m2;
	struct sg_create_req cr = { .lifetime_s = 60, .owner = "testhost:1:2", .session_hash = "abcdef0123456789" };
	const char *base = getenv("FCT_BASE_URL");
	json_t *list = NULL, *e;
	void *priv = NULL;

	if (!base || !getenv("FCT_API_KEY")) {
		printf("Bail out! FCT_BASE_URL and FCT_API_KEY must name the FC emulator\n");
		return 1;
	}
	host.machine_set = h_machine_set;
	probes();
	refused_strings(&cr);
	if (b->init(&host, &priv, &err) < 0) {
		printf("Bail out! init: %s\n", err.msg);
		return 1;
	}
	fakehost_machine(&m, b, priv);
	if (b->machine_create(priv, &cr, NULL, &m, &err) < 0) {
		printf("Bail out! create: %s\n", err.msg);
		return 1;
	}
	ok(strncmp(m.id, "sbx-", 4) == 0 && strcmp(m.workspace, "/home/user") == 0 &&
	   strcmp(m.url, base) == 0 && strcmp(m.template_name, "code-interpreter-v1") == 0,
	   "create sets id, workspace, url and template: %s %s %s %s", m.id, m.workspace, m.url,
	   m.template_name);
	ok(b->machine_list(priv, NULL, &list, &err) == 0 && json_is_array(list), "list (%s)", err.msg);
	e = listed(list, m.id);
	ok(e && json_object_size(e) == 5 &&
	   !strcmp(str_at(e, "owner"), "testhost:1:2") &&
	   json_is_false(json_object_get(e, "persistent")) &&
	   json_integer_value(json_object_get(e, "created")) > 1700000000 &&
	   json_integer_value(json_object_get(e, "lifetime")) > 0,
	   "list: the sandbox as {id, owner, persistent: false, created, lifetime}");
	json_decref(list);
	fakehost_machine(&m2, b, priv);
	ok(b->machine_attach(priv, m.id, NULL, NULL, &m2, &err) == 0 && !strcmp(m2.id, m.id) &&
	   !strcmp(m2.workspace, "/home/user") && !strcmp(m2.url, base) &&
	   !strcmp(m2.template_name, "code-interpreter-v1") && fakehost_kept(&m2) == NULL,
	   "attach by id: id, workspace, url and template set, nothing kept");
	b->machine_release(&m2);
	fakehost_machine(&m2, b, priv);
	ok(b->machine_attach(priv, "sbx-nope", NULL, NULL, &m2, &err) < 0 && err.code == SG_E_NOTFOUND &&
	   !m2.handle, "attach of an unknown id: not found (%s)", err.msg);
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
