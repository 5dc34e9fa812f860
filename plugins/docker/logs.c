/*
 * A machine's output: GET /containers/{id}/logs, stdout and stderr
 * demultiplexed (the containers never have a TTY) and kept in order, for
 * docker_logs and for the last lines of a container that exited at once.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/docker/docker.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "plugins/docker/demux.h"

#define DOCKER_LOGS_MAX  (4u * 1024u * 1024u)   /* bytes docker_logs returns, the end kept */
#define DOCKER_LOGS_BODY (64u * 1024u * 1024u)  /* what the engine may send */

struct docker_logs_sink {
	const struct sg_host_api *host;
	struct sg_buf *out;
	bool oom;
};

static int docker_logs_piece(int stream, const void *data, size_t len, void *ud)
{
	struct docker_logs_sink *s = ud;

	(void)stream; /* stdout and stderr, merged in the order written */
	if (s->host->buf_append(s->out, data, len) < 0) {
		s->oom = true;
		return 1;
	}
	return 0;
}

/* Keeps the last `cap` bytes of b, from a line start when there is one. */
static bool docker_keep_end(struct sg_buf *b, size_t cap)
{
	size_t cut;
	const char *nl;

	if (b->len <= cap)
		return false;
	cut = b->len - cap;
	nl = memchr(b->data + cut, '\n', cap);
	if (nl && (size_t)(nl - b->data) + 1 < b->len)
		cut = (size_t)(nl - b->data) + 1;
	memmove(b->data, b->data + cut, b->len - cut);
	b->len -= cut;
	b->data[b->len] = '\0';
	return true;
}

/* GET the logs with query `q` into out (demultiplexed). */
static int docker_logs_get(struct docker_ctx *ctx, const char *id, const char *q,
			   struct sg_buf *out, struct sg_err *err)
{
	char path[1024];
	struct docker_http rq = { .method = "GET", .path = path, .max_body = DOCKER_LOGS_BODY };
	struct docker_reply rp;
	struct docker_demux d;
	struct docker_logs_sink s = { .host = ctx->host, .out = out };
	json_t *j;
	int rc = -1;

	snprintf(path, sizeof(path), "/containers/%s/logs?stdout=1&stderr=1%s", id, q);
	if (docker_engine_call(ctx->engine, &rq, &rp, err) < 0)
		goto out;
	if (rp.status == 404) {
		ctx->host->errf(err, SG_E_NOTFOUND, "container %s is gone", id);
		goto out;
	}
	if (rp.status != 200) {
		j = json_loadb(rp.body.data ? rp.body.data : "", rp.body.len, 0, NULL);
		docker_engine_fail(ctx->engine, err, SG_E_BACKEND, "docker logs", rp.status, j);
		json_decref(j);
		goto out;
	}
	docker_demux_init(&d);
	if (docker_demux_feed(&d, rp.body.data ? rp.body.data : "", rp.body.len,
			      docker_logs_piece, &s) != 0) {
		ctx->host->errf(err, s.oom ? SG_E_NOMEM : SG_E_PROTO, "docker logs of %s: %s", id,
				s.oom ? "out of memory" : "a malformed stream");
		goto out;
	}
	rc = 0;
out:
	docker_reply_free(ctx->engine, &rp);
	return rc;
}

int docker_logs_tail(struct docker_ctx *ctx, const char *id, unsigned lines, size_t cap,
		     struct sg_buf *out, struct sg_err *err)
{
	char q[64];

	snprintf(q, sizeof(q), "&tail=%u", lines);
	if (docker_logs_get(ctx, id, q, out, err) < 0)
		return -1;
	docker_keep_end(out, cap);
	return 0;
}

/* ---- times --------------------------------------------------------------------------- */

/* "10m", "2h", "30s", "1d" ago, unix seconds, or RFC 3339
 * ("2026-12-01T10:00:00Z", "...+02:00", fractions ignored).  Returns 0 and
 * unix seconds in *t, or -1. */
static int docker_parse_time(const char *s, long long *t)
{
	struct tm tm = { 0 };
	char *end;
	long long n;
	int off_h = 0, off_m = 0, used = 0;
	const char *p;

	n = strtoll(s, &end, 10);
	if (end != s && n >= 0 && end[0] && !end[1] && strchr("smhd", end[0])) {
		long long mul = end[0] == 's' ? 1 : end[0] == 'm' ? 60 : end[0] == 'h' ? 3600 : 86400;

		*t = (long long)time(NULL) - n * mul;
		return 0;
	}
	if (end != s && !*end && n >= 0) {
		*t = n;
		return 0;
	}
	if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
		   &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &used) != 6)
		return -1;
	p = s + used;
	if (*p == '.')
		for (p++; isdigit((unsigned char)*p); p++)
			;
	if ((*p == '+' || *p == '-') && sscanf(p + 1, "%2d:%2d", &off_h, &off_m) == 2) {
		if (*p == '-') {
			off_h = -off_h;
			off_m = -off_m;
		}
		p += 6;
	} else if (*p == 'Z' || *p == 'z') {
		p++;
	} else {
		return -1;
	}
	if (*p)
		return -1;
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	*t = (long long)timegm(&tm) - (off_h * 3600LL + off_m * 60LL);
	return 0;
}

static int docker_time_param(struct docker_ctx *ctx, const json_t *params, const char *key,
			     char *q, size_t size, struct sg_err *err)
{
	const json_t *v = json_object_get(params, key);
	long long t;

	if (!v || json_is_null(v))
		return 0;
	if (!json_is_string(v) || docker_parse_time(json_string_value(v), &t) < 0)
		return ctx->host->errf(err, SG_E_INVAL, "docker_logs: '%s' must be RFC 3339 "
				       "(2026-12-01T10:00:00Z) or relative (\"10m\", \"2h\", \"1d\")",
				       key);
	snprintf(q + strlen(q), size - strlen(q), "&%s=%lld", key, t);
	return 0;
}

int docker_act_logs(void *priv, struct sg_machine *m, const json_t *params, struct sg_call *call,
		    json_t **result, struct sg_err *err)
{
	struct docker_ctx *ctx = priv;
	const json_t *tv = json_object_get(params, "tail");
	struct sg_buf out = { 0 };
	json_int_t tail = 200;
	size_t lines = 0;
	bool cut;
	char q[256];

	(void)call;
	if (tv && !json_is_null(tv)) {
		if (!json_is_integer(tv) || json_integer_value(tv) < 1 || json_integer_value(tv) > 10000)
			return ctx->host->errf(err, SG_E_INVAL, "tail must be between 1 and 10000, "
					       "got %s", json_is_integer(tv) ? "a number out of range"
					       : "something that is not a whole number");
		tail = json_integer_value(tv);
	}
	snprintf(q, sizeof(q), "&tail=%lld%s", (long long)tail,
		 json_is_true(json_object_get(params, "timestamps")) ? "&timestamps=1" : "");
	if (docker_time_param(ctx, params, "since", q, sizeof(q), err) < 0 ||
	    docker_time_param(ctx, params, "until", q, sizeof(q), err) < 0 ||
	    docker_logs_get(ctx, m->id, q, &out, err) < 0) {
		ctx->host->buf_release(&out);
		return -1;
	}
	cut = docker_keep_end(&out, DOCKER_LOGS_MAX);
	for (size_t i = 0; i < out.len; i++)
		lines += out.data[i] == '\n';
	*result = json_pack("{s:o, s:b, s:I, s:b}", "logs", docker_json_text(out.data, out.len),
			    "truncated", cut || lines >= (size_t)tail, "lines", (json_int_t)lines,
			    "bytes_cut", cut);
	ctx->host->buf_release(&out);
	return *result ? 0 : ctx->host->errf(err, SG_E_NOMEM, "docker: out of memory");
}
