/*
 * docker_build: an image from a Dockerfile and a context under a named
 * machine's /workspace, which is work_home/<name> on the host (mounts.c):
 * both paths are resolved beneath that directory without following a link
 * (a path outside /workspace, with "..", or through a link is bad_path),
 * the context is packed in memory (context.c) and sent to POST /build.
 * When work_home is only on the engine's host (workhome.c), both are read
 * from the machine through the archive API instead.
 * The daemon's output streams back while it builds: each line goes to the
 * client as a progress notification, and the end of it is kept for the
 * answer.  Cancelling the call closes the connection, and the daemon stops
 * the build.  A failure is a result with status "error" and an error_kind:
 * bad_path, dockerfile_missing, base_image_not_found (the FROM step
 * failed) or build_failed, with the end of the build log.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/docker/docker.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define BUILD_DOCKERFILE_MAX (1024u * 1024u)
#define BUILD_DF_NAME        ".sandgate.Dockerfile"
#define BUILD_LOG_KEEP       8192          /* bytes of log kept for the answer */
#define BUILD_LINE_MAX       (1024u * 1024u)
#define BUILD_PROGRESS_MS    100

/* What the build's output said so far. */
struct build_run {
	struct docker_ctx *ctx;
	struct sg_call *call;
	struct sg_buf line;       /* an answer line not complete yet */
	struct sg_buf log;        /* the end of the build log */
	char step[200];           /* the current "Step N/M : INSTRUCTION ..." */
	int step_n, step_m;
	char error[512];          /* the daemon's error, "" none */
	char image_id[80];
	double progress;
	long long last_ms;
	bool oom;
};

static long long build_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void build_log(struct build_run *b, const char *p, size_t n)
{
	if (b->ctx->host->buf_append(&b->log, p, n) < 0) {
		b->oom = true;
		return;
	}
	if (b->log.len > 2 * BUILD_LOG_KEEP) {
		memmove(b->log.data, b->log.data + b->log.len - BUILD_LOG_KEEP, BUILD_LOG_KEEP);
		b->log.len = BUILD_LOG_KEEP;
		b->log.data[b->log.len] = '\0';
	}
}

/* One line of build output: a Step line moves the progress to N of M. */
static void build_say(struct build_run *b, const char *text, size_t n)
{
	char msg[200];
	int sn, sm;
	bool step;

	while (n && (text[n - 1] == '\n' || text[n - 1] == '\r'))
		n--;
	if (!n)
		return;
	snprintf(msg, sizeof(msg), "%.*s", (int)(n < sizeof(msg) - 1 ? n : sizeof(msg) - 1), text);
	step = sscanf(msg, "Step %d/%d :", &sn, &sm) == 2;
	if (step) {
		b->step_n = sn;
		b->step_m = sm;
		snprintf(b->step, sizeof(b->step), "%s", msg);
	}
	b->progress += 1;
	/* Every step, and other lines at most ten a second. */
	if (!step && build_now_ms() - b->last_ms < BUILD_PROGRESS_MS)
		return;
	b->last_ms = build_now_ms();
	b->ctx->host->progress(b->call, b->progress, 0, msg);
}

static void build_stream_text(struct build_run *b, const char *s)
{
	build_log(b, s, strlen(s));
	for (const char *nl; *s; s = nl + 1) {
		nl = strchr(s, '\n');
		if (!nl) {
			build_say(b, s, strlen(s));
			break;
		}
		build_say(b, s, (size_t)(nl - s));
	}
}

static void build_answer_line(struct build_run *b, const char *p, size_t n)
{
	json_t *j = json_loadb(p, n, 0, NULL);
	const char *s;

	if (!j)
		return;
	if ((s = json_string_value(json_object_get(j, "stream"))))
		build_stream_text(b, s);
	if ((s = json_string_value(json_object_get(j, "error"))) && !b->error[0]) {
		snprintf(b->error, sizeof(b->error), "%s", s);
		build_log(b, s, strlen(s));
		build_log(b, "\n", 1);
	}
	if ((s = json_string_value(json_object_get(json_object_get(j, "aux"), "ID"))))
		snprintf(b->image_id, sizeof(b->image_id), "%s", s);
	json_decref(j);
}

/* The daemon's answer as it arrives: JSON objects, one a line. */
static int build_on_body(const char *p, size_t n, void *ud)
{
	struct build_run *b = ud;
	const struct sg_host_api *h = b->ctx->host;

	for (size_t i = 0; i < n; i++) {
		if (p[i] != '\n') {
			if (b->line.len < BUILD_LINE_MAX && h->buf_append(&b->line, p + i, 1) < 0)
				b->oom = true;
			continue;
		}
		if (b->line.len)
			build_answer_line(b, b->line.data, b->line.len);
		b->line.len = 0;
	}
	return b->oom ? 1 : 0;
}

/* ---- paths ------------------------------------------------------------------------------ */

/* "/workspace[/rel]" -> rel ("" for the workspace), components checked. */
static int build_rel(const char *path, char *rel, size_t size)
{
	const char *p;
	size_t o = 0;

	if (strncmp(path, DOCKER_WORKSPACE, strlen(DOCKER_WORKSPACE)) ||
	    (path[strlen(DOCKER_WORKSPACE)] && path[strlen(DOCKER_WORKSPACE)] != '/'))
		return -1;
	rel[0] = '\0';
	for (p = path + strlen(DOCKER_WORKSPACE); *p;) {
		size_t n;

		while (*p == '/')
			p++;
		n = strcspn(p, "/");
		if (!n)
			break;
		if (n == 2 && !strncmp(p, "..", 2))
			return -1;
		if (!(n == 1 && *p == '.')) {
			if (o + n + 2 >= size)
				return -1;
			o += (size_t)snprintf(rel + o, size - o, "%s%.*s", o ? "/" : "", (int)n, p);
		}
		p += n;
	}
	return 0;
}

/* Opens dir `rel` beneath the workspace fd ws (O_PATH), no link followed. */
static int build_open_dir(int ws, const char *rel)
{
	char buf[DOCKER_PATH_MAX], *save = NULL, *c;
	int fd = dup(ws), next;

	snprintf(buf, sizeof(buf), "%s", rel);
	for (c = strtok_r(buf, "/", &save); c && fd >= 0; c = strtok_r(NULL, "/", &save)) {
		next = openat(fd, c, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		close(fd);
		fd = next;
	}
	return fd;
}

/* Reads the Dockerfile at rel beneath ws into *out (capped).  Returns 0,
 * -1 when it is missing (errno ENOENT) or not readable. */
static int build_read_df(struct docker_ctx *ctx, int ws, const char *rel, struct sg_buf *out)
{
	char dir[DOCKER_PATH_MAX], chunk[8192];
	const char *leaf = strrchr(rel, '/');
	int dfd, fd;
	ssize_t r;

	snprintf(dir, sizeof(dir), "%.*s", leaf ? (int)(leaf - rel) : 0, rel);
	leaf = leaf ? leaf + 1 : rel;
	dfd = build_open_dir(ws, dir);
	if (dfd < 0)
		return -1;
	fd = docker_open_regular(dfd, leaf, NULL);
	close(dfd);
	if (fd < 0)
		return -1;
	while ((r = read(fd, chunk, sizeof(chunk))) > 0)
		if (out->len + (size_t)r > BUILD_DOCKERFILE_MAX ||
		    ctx->host->buf_append(out, chunk, (size_t)r) < 0) {
			r = -1;
			errno = EFBIG;
			break;
		}
	close(fd);
	return r < 0 ? -1 : 0;
}

/* A build's RUN steps run in containers of the builder's own, which got
 * none of a sandbox's limits: a fork bomb or a memory hog in a Dockerfile
 * reached the host.  The default template's memory and CPU limits go on
 * the query (Engine API /build: memory, memswap (equal: no swap),
 * cpuperiod and cpuquota).  No pids limit: /build has none. */
static void build_limits(struct docker_ctx *ctx, char *path, size_t size)
{
	struct docker_limits lim;
	size_t n = strlen(path);

	docker_limits_for(ctx, ctx->default_template, &lim);
	if (lim.memory > 0 && n < size)
		n += (size_t)snprintf(path + n, size - n, "&memory=%lld&memswap=%lld", lim.memory,
				      lim.memory);
	if (lim.nano_cpus > 0 && n < size)
		snprintf(path + n, size - n, "&cpuperiod=100000&cpuquota=%lld",
			 lim.nano_cpus / 10000 > 1000 ? lim.nano_cpus / 10000 : 1000);
}

static json_t *build_error(const char *kind, const char *tag, const char *msg, const struct sg_buf *log)
{
	json_t *r = json_pack("{s:s, s:s, s:s, s:o}", "status", "error", "error_kind", kind,
			      "image_tag", tag, "error", docker_json_text(msg, strlen(msg)));

	if (log && log->len)
		json_object_set_new(r, "log_tail", docker_json_text(log->data, log->len));
	return r;
}

/* ---- the action --------------------------------------------------------------------------- */

/* build_prepare() when work_home is only on the engine's host: the
 * Dockerfile and the context are read from the machine itself (its
 * /workspace is work_home/<name> there) through the archive API; links are
 * the container's, resolved in its own view. */
static int build_prepare_engine(struct docker_ctx *ctx, struct sg_machine *m, const char *tag,
				const char *dfp, const char *df_rel, const char *cdp, const char *cd_rel,
				struct sg_buf *df, struct sg_buf *tar, json_t **fail, struct sg_err *err)
{
	char path[DOCKER_PATH_MAX + 16], msg[600];

	snprintf(path, sizeof(path), DOCKER_WORKSPACE "/%s", df_rel);
	if (docker_file_read(m, path, BUILD_DOCKERFILE_MAX, NULL, df, err) < 0) {
		bool missing = err->code == SG_E_NOTFOUND;

		if (err->code == SG_E_NOMEM)
			return -1;
		snprintf(msg, sizeof(msg), missing ? "Dockerfile not found: %.200s (write it with "
			 "sandbox_file_write first)" : "cannot read the Dockerfile %.200s: %.300s", dfp,
			 err->msg);
		*fail = build_error(missing ? "dockerfile_missing" : "bad_path", tag, msg, NULL);
		return 0;
	}
	snprintf(path, sizeof(path), DOCKER_WORKSPACE "%s%s", *cd_rel ? "/" : "", cd_rel);
	if (docker_context_fetch(ctx, m->id, path, BUILD_DF_NAME, df->data, df->len,
				 ctx->build_context_max, tar, err) == 0)
		return 0;
	if (err->code == SG_E_NOMEM)
		return -1;
	if (err->code == SG_E_NOTFOUND || err->code == SG_E_INVAL) {
		snprintf(msg, sizeof(msg), "context_dir %.200s is not a directory under /workspace "
			 "(%.300s)", cdp, err->msg);
		*fail = build_error("bad_path", tag, msg, NULL);
	} else {
		*fail = build_error("build_failed", tag, err->msg, NULL);
	}
	return 0;
}

/* Everything before the daemon: paths, the Dockerfile, the context.  NULL
 * and *fail set to a result, or 0. */
static int build_prepare(struct docker_ctx *ctx, struct sg_machine *m, const json_t *params,
			 struct sg_buf *df, struct sg_buf *tar, json_t **fail, struct sg_err *err)
{
	const char *tag = json_string_value(json_object_get(params, "image_tag"));
	const char *dfp = json_string_value(json_object_get(params, "dockerfile")) ?: DOCKER_WORKSPACE "/Dockerfile";
	const char *cdp = json_string_value(json_object_get(params, "context_dir")) ?: DOCKER_WORKSPACE;
	char df_rel[DOCKER_PATH_MAX], cd_rel[DOCKER_PATH_MAX], ws_rel[DOCKER_PATH_MAX], name[DOCKER_ID_MAX];
	struct docker_scope sc;
	char msg[600];
	json_t *info = NULL;
	const json_t *labels;
	int ws = -1, cd = -1, rc = -1;

	*fail = NULL;
	if (build_rel(dfp, df_rel, sizeof(df_rel)) < 0 || !*df_rel || build_rel(cdp, cd_rel, sizeof(cd_rel)) < 0) {
		snprintf(msg, sizeof(msg), "path must be under /workspace (sandbox boundary): '%.200s'",
			 build_rel(dfp, df_rel, sizeof(df_rel)) < 0 || !*df_rel ? dfp : cdp);
		*fail = build_error("bad_path", tag, msg, NULL);
		return 0;
	}
	if (docker_container_inspect(ctx, m->id, &info, err) < 0)
		return -1;
	labels = json_object_get(json_object_get(info, "Config"), "Labels");
	docker_scope_labels(ctx, labels, &sc);
	snprintf(name, sizeof(name), "%s", json_string_value(json_object_get(labels, DOCKER_LABEL_NAME)) ?: "");
	json_decref(info);
	if (!*name) {
		*fail = build_error("bad_path", tag, "this machine is a sandbox: its /workspace is not on "
				    "the host; build from a named machine (docker_run)", NULL);
		return 0;
	}
	rc = docker_wh_remote(ctx, err);
	if (rc != 0)
		return rc < 0 ? -1 : build_prepare_engine(ctx, m, tag, dfp, df_rel, cdp, cd_rel, df, tar,
							  fail, err);
	rc = -1;
	docker_workspace_rel(&sc, name, ws_rel, sizeof(ws_rel));
	ws = docker_dir_open(ctx, ws_rel, err);
	if (ws < 0)
		return -1;
	cd = build_open_dir(ws, cd_rel);
	if (cd < 0) {
		snprintf(msg, sizeof(msg), "context_dir %.200s is not a directory under /workspace "
			 "reached without a symbolic link (%s)", cdp, strerror(errno));
		*fail = build_error("bad_path", tag, msg, NULL);
		rc = 0;
		goto out;
	}
	if (build_read_df(ctx, ws, df_rel, df) < 0) {
		int e = errno;

		if (e == EINVAL)
			snprintf(msg, sizeof(msg), "the Dockerfile %.200s is not a regular file (a FIFO, a "
				 "device, a directory): write the Dockerfile there", dfp);
		else
			snprintf(msg, sizeof(msg), e == ENOENT ? "Dockerfile not found: %.200s (write it "
				 "with sandbox_file_write first)" : "cannot read the Dockerfile %.200s: %s",
				 dfp, strerror(e));
		*fail = build_error(e == ENOENT ? "dockerfile_missing" : "bad_path", tag, msg, NULL);
		rc = 0;
		goto out;
	}
	rc = docker_context_pack(ctx, cd, BUILD_DF_NAME, df->data, df->len, ctx->build_context_max,
				 tar, err);
	if (rc < 0 && err && err->code != SG_E_NOMEM) {
		*fail = build_error("build_failed", tag, err->msg, NULL);
		rc = 0;
	}
out:
	if (cd >= 0)
		close(cd);
	close(ws);
	return rc;
}

/* What kind of failure the daemon's error is: FROM failing means the base
 * image is not there (nothing is pulled). */
static const char *build_kind(const struct build_run *b)
{
	const char *instr = strstr(b->step, " : ");

	if (instr && !strncasecmp(instr + 3, "FROM ", 5))
		return "base_image_not_found";
	if (!b->step[0] && (strstr(b->error, "pull access denied") || strstr(b->error, "manifest") ||
			    strstr(b->error, "No such image") || strstr(b->error, "not found")))
		return "base_image_not_found";
	return "build_failed";
}

static int build_send(struct docker_ctx *ctx, struct sg_machine *m, const char *tag,
		      const struct sg_buf *tar, struct sg_call *call, json_t **result,
		      struct sg_err *err)
{
	char path[1200], *et = docker_engine_escape(tag);
	struct build_run b = { .ctx = ctx, .call = call };
	struct docker_http rq = { .method = "POST", .path = path, .body = tar->data,
				  .body_len = tar->len, .content_type = "application/x-tar",
				  .timeout_ms = ctx->build_timeout_s * 1000u, .on_body = build_on_body,
				  .ud = &b, .call = call };
	struct docker_reply rp;
	json_t *j;
	int rc = -1;

	memset(&rp, 0, sizeof(rp));
	if (!et)
		return ctx->host->errf(err, SG_E_NOMEM, "docker: out of memory");
	snprintf(path, sizeof(path), "/build?t=%s&dockerfile=%s&rm=1&forcerm=1", et, BUILD_DF_NAME);
	free(et);
	build_limits(ctx, path, sizeof(path));
	b.progress = 1;
	ctx->host->progress(call, b.progress, 0, "sending the build context");
	if (docker_engine_call(ctx->engine, &rq, &rp, err) < 0) {
		if (err && err->code == SG_E_TIMEOUT)
			snprintf(err->msg + strlen(err->msg), sizeof(err->msg) - strlen(err->msg),
				 " ([docker] build_timeout)");
		goto out;
	}
	if (b.line.len)
		build_answer_line(&b, b.line.data, b.line.len);
	if (rp.status != 200) {
		j = json_loadb(rp.body.data ? rp.body.data : "", rp.body.len, 0, NULL);
		snprintf(b.error, sizeof(b.error), "%s", docker_reply_message(j));
		json_decref(j);
	}
	if (b.error[0] || rp.status != 200) {
		*result = build_error(build_kind(&b), tag, b.error[0] ? b.error : "the build failed", &b.log);
	} else {
		*result = json_pack("{s:s, s:s, s:s, s:i, s:o}", "status", "built", "image_tag", tag,
				    "image_id", b.image_id, "steps", b.step_m,
				    "log_tail", docker_json_text(b.log.data, b.log.len));
		ctx->host->log(SG_LOG_INFO, DOCKER_PLUGIN, "built %s from the workspace of %s", tag, m->id);
	}
	rc = 0;
out:
	docker_reply_free(ctx->engine, &rp);
	ctx->host->buf_release(&b.line);
	ctx->host->buf_release(&b.log);
	return rc;
}

/* A Dockerfile read as the builder reads it (Dockerfile reference,
 * "Parser directives" and "Format"): an optional byte-order mark; parser
 * directives ("# escape=`") only in the leading run of comment lines that
 * are directives; then instructions, a line ending with the escape
 * character going on to the next, comment lines and empty lines inside
 * such a run left out; a comment line (leading blanks allowed) never an
 * instruction, whatever it ends with. */
struct df_scan {
	const char *p, *end;
	char esc;
	unsigned line;               /* of the next physical line, from 1 */
};

/* The next physical line: [*b, *e) without its newline.  false at the end. */
static bool df_line(struct df_scan *d, const char **b, const char **e)
{
	const char *nl;

	if (d->p >= d->end)
		return false;
	nl = memchr(d->p, '\n', (size_t)(d->end - d->p));
	*b = d->p;
	*e = nl ? nl : d->end;
	d->p = nl ? nl + 1 : d->end;
	d->line++;
	while (*e > *b && ((*e)[-1] == '\r' || (*e)[-1] == ' ' || (*e)[-1] == '\t'))
		(*e)--;
	while (*b < *e && (**b == ' ' || **b == '\t'))
		(*b)++;
	return true;
}

/* "# key=value" at [b, e): the value of key "escape", 0 for another
 * directive, -1 for a line that is no directive. */
static int df_directive(const char *b, const char *e)
{
	const char *k, *v;

	if (b >= e || *b != '#')
		return -1;
	for (b++; b < e && (*b == ' ' || *b == '\t'); b++)
		;
	for (k = b; b < e && (isalnum((unsigned char)*b) || *b == '_' || *b == '-'); b++)
		;
	v = b;
	while (v < e && (*v == ' ' || *v == '\t'))
		v++;
	if (b == k || v >= e || *v != '=')
		return -1;
	for (v++; v < e && (*v == ' ' || *v == '\t'); v++)
		;
	if (b - k == 6 && !strncasecmp(k, "escape", 6))
		return v < e && *v == '`' ? '`' : '\\';
	return 0;
}

static void df_scan_init(struct df_scan *d, const char *df, size_t len)
{
	const char *b, *e;
	struct df_scan look;
	int dir;

	*d = (struct df_scan){ .p = df, .end = df + len, .esc = '\\' };
	if (len >= 3 && !memcmp(df, "\xef\xbb\xbf", 3))
		d->p += 3;
	for (look = *d; df_line(&look, &b, &e) && (dir = df_directive(b, e)) >= 0; *d = look)
		if (dir > 0)
			look.esc = (char)dir;
}

/* The next instruction, its continuation lines joined with a blank into
 * buf (cut at size: then *cut).  *first: its first line.  false at the
 * end. */
static bool df_instruction(struct df_scan *d, char *buf, size_t size, unsigned *first, bool *cut)
{
	const char *b, *e;
	size_t n = 0;
	bool more = false;

	*cut = false;
	while (df_line(d, &b, &e)) {
		if (b == e || *b == '#')
			continue; /* left out, inside an instruction too */
		if (!more)
			*first = d->line;
		more = e[-1] == d->esc;
		if (more)
			e--;
		if (n + (size_t)(e - b) + 2 > size) {
			*cut = true;
			e = b + (size - n > 2 ? size - n - 2 : 0);
		}
		memcpy(buf + n, b, (size_t)(e - b));
		n += (size_t)(e - b);
		buf[n++] = ' ';
		buf[n] = '\0';
		if (!more)
			return true;
	}
	return n > 0;
}

/* Whether an ADD's arguments (after "ADD") may fetch: a URL, a git
 * repository (user@host:path), or a variable the builder expands (ARG and
 * ENV reach ADD), which could be either. */
static bool df_add_fetches(const char *args)
{
	const char *at;

	if (strchr(args, '$') || strstr(args, "://"))
		return true;
	for (at = strchr(args, '@'); at; at = strchr(at + 1, '@')) {
		size_t word = strcspn(at, " \t");
		const char *colon = memchr(at, ':', word);

		if (colon && !memchr(at, '/', (size_t)(colon - at)))
			return true;
	}
	return false;
}

/* The keyword at *s (then *s past it and its blanks), compared case aside. */
static bool df_keyword(const char **s, const char *kw)
{
	size_t n = strlen(kw);

	if (strncasecmp(*s, kw, n) || ((*s)[n] != ' ' && (*s)[n] != '\t'))
		return false;
	for (*s += n; **s == ' ' || **s == '\t'; (*s)++)
		;
	return true;
}

/* Whether the Dockerfile (len bytes) has an ADD (ONBUILD ADD too: it runs
 * in an image built from this one) that fetches: the engine's builder
 * fetches those itself, from the host's network (its loopback, a cloud's
 * metadata address), which no sandbox reaches.  *line: the instruction's
 * first line.  An instruction too long to look at whole counts as one. */
static bool df_fetches(const char *df, size_t len, unsigned *line)
{
	struct df_scan d;
	char buf[16384];
	bool cut;

	df_scan_init(&d, df, len);
	while (df_instruction(&d, buf, sizeof(buf), line, &cut)) {
		const char *s = buf;

		df_keyword(&s, "ONBUILD");
		if (df_keyword(&s, "ADD") && (cut || df_add_fetches(s)))
			return true;
	}
	return false;
}

int docker_act_build(void *priv, struct sg_machine *m, const json_t *params, struct sg_call *call,
		     json_t **result, struct sg_err *err)
{
	struct docker_ctx *ctx = priv;
	const char *tag = json_string_value(json_object_get(params, "image_tag"));
	struct sg_buf df = { 0 }, tar = { 0 };
	json_t *fail = NULL;
	unsigned line = 0;
	int rc;

	if (!tag || !*tag || strchr(tag, ' ') || tag[0] == '-')
		return ctx->host->errf(err, SG_E_INVAL, "docker_build needs image_tag: repo[:tag]");
	if (docker_tag_reserved(ctx, tag, err) < 0)
		return -1;
	rc = build_prepare(ctx, m, params, &df, &tar, &fail, err);
	if (rc == 0 && !fail && df_fetches(df.data ? df.data : "", df.len, &line)) {
		char msg[200];

		snprintf(msg, sizeof(msg), "the Dockerfile's ADD on line %u may fetch a URL or a git "
			 "repository (or names a variable), which the engine would do from the host's "
			 "network: fetch it in a RUN step, or put it in the context", line);
		fail = build_error("remote_source", tag, msg, NULL);
	}
	if (rc == 0 && fail) {
		json_object_set_new(fail, "machine", json_string(m->name));
		*result = fail;
	} else if (rc == 0) {
		rc = build_send(ctx, m, tag, &tar, call, result, err);
	}
	ctx->host->buf_release(&df);
	ctx->host->buf_release(&tar);
	return rc;
}
