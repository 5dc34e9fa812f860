/*
 * The platform (control-plane) API, ref. 2: create, get, list, kill and set
 * timeout, with the key headers of ref. 2.1 and the error shape of ref. 2.2.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/fc/fc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugins/fc/http.h"

/* A malloc'd "<base_url><path>", or NULL. */
static char *fc_api_url(struct fc_ctx *ctx, const char *path)
{
	char *u = NULL;

	return asprintf(&u, "%s%s", ctx->base_url, path) < 0 ? NULL : u;
}

/* One platform call to <base_url><path>: rq holds what, method,
 * idempotent/once, timeout_ms, call and tick (the rest is filled here).
 * *out gets the parsed JSON of a 2xx body (NULL when empty).  Returns the
 * HTTP status (>= 100), or -1 with err filled. */
static long fc_api_call(struct fc_ctx *ctx, struct fc_req *rq, const char *path,
			const json_t *body, json_t **out, struct fc_resp *rp, struct sg_err *err)
{
	char *text = NULL, *url = fc_api_url(ctx, path);
	long ret = -1;

	*out = NULL;
	rq->abort_fd = -1;
	rq->url = url;
	rq->headers = fc_platform_headers(ctx, body != NULL, err);
	if (!url || !rq->headers) {
		if (!url)
			ctx->host->errf(err, SG_E_NOMEM, "fc: out of memory");
		goto out;
	}
	if (body) {
		text = json_dumps(body, JSON_COMPACT);
		if (!text) {
			ctx->host->errf(err, SG_E_NOMEM, "fc: out of memory");
			goto out;
		}
		rq->body = text;
		rq->body_len = strlen(text);
	}
	if (fc_http_request(ctx, rq, rp, err) < 0)
		goto out;
	if (rp->status >= 200 && rp->status < 300 && rp->body.len > 0) {
		json_error_t je;

		*out = json_loadb(rp->body.data, rp->body.len, 0, &je);
		if (!*out) {
			ctx->host->errf(err, SG_E_PROTO, "fc: %s: the answer is not JSON: %s", rq->what,
					je.text);
			goto out;
		}
	}
	ret = rp->status;
out:
	if (text) {
		explicit_bzero(text, strlen(text)); /* env values may be secrets */
		free(text);
	}
	free(url);
	curl_slist_free_all(rq->headers);
	rq->headers = NULL;
	return ret;
}

/* The fields of a platform request every call sets. */
#define FC_API_REQ(w, m, idem, tmo_ms, c) \
	((struct fc_req){ .what = (w), .method = (m), .idempotent = (idem), \
			  .timeout_ms = (tmo_ms), .call = (c), .abort_fd = -1 })

static void fc_copy_str(const json_t *o, const char *key, char *dst, size_t size)
{
	const char *v = json_string_value(json_object_get(o, key));

	if (v && strlen(v) < size)
		memcpy(dst, v, strlen(v) + 1);
}

/* Fills info from a create or get answer (ref. 2.3, 2.4). */
static int fc_parse_info(struct fc_ctx *ctx, const json_t *o, struct fc_sandbox_info *info,
			 const char *what, struct sg_err *err)
{
	memset(info, 0, sizeof(*info));
	if (!json_is_object(o))
		return ctx->host->errf(err, SG_E_PROTO, "fc: %s: the answer is not a JSON object",
				       what);
	fc_copy_str(o, "sandboxID", info->id, sizeof(info->id));
	if (!fc_id_valid(info->id))
		return ctx->host->errf(err, SG_E_PROTO, "fc: %s: the answer has no valid sandboxID",
				       what);
	fc_copy_str(o, "envdAccessToken", info->token, sizeof(info->token));
	fc_copy_str(o, "envdVersion", info->envd_version, sizeof(info->envd_version));
	/* FC's answer has no domain (ref. 2.3): the configured one is used. */
	fc_copy_str(o, "domain", info->domain, sizeof(info->domain));
	fc_copy_str(o, "templateID", info->template_name, sizeof(info->template_name));
	fc_copy_str(o, "alias", info->template_name, sizeof(info->template_name));
	fc_copy_str(o, "state", info->state, sizeof(info->state));
	return 0;
}

/* ---- create ------------------------------------------------------------------------ */

struct fc_create_tick {
	struct fc_ctx *ctx;
	struct sg_call *call;
	const char *template_name;
};

/* Cold starts take 60 to 90 s (ref. 2.3): tell a client that asked for
 * progress that the call is alive, once a second, counting seconds. */
static void fc_create_progress(void *ud, double elapsed_s)
{
	struct fc_create_tick *t = ud;
	char msg[160];

	snprintf(msg, sizeof(msg), "creating an FC sandbox from template %s: %.0f s",
		 t->template_name, elapsed_s);
	t->ctx->host->progress(t->call, elapsed_s, (double)t->ctx->create_timeout_s, msg);
}

int fc_api_create(struct fc_ctx *ctx, const json_t *body, struct sg_call *call,
		  struct fc_sandbox_info *info, json_t **metadata, struct sg_err *err)
{
	struct fc_create_tick tick = { ctx, call,
				       json_string_value(json_object_get(body, "templateID")) };
	struct fc_req rq = FC_API_REQ("create sandbox", "POST", false,
				      ctx->create_timeout_s * 1000u, call);
	struct fc_resp rp = { 0 };
	json_t *out = NULL;
	long st;
	int ret = -1;

	if (call)
		ctx->host->progress(call, 0, (double)ctx->create_timeout_s,
				    "creating an FC sandbox");
	rq.tick = fc_create_progress;
	rq.ud = &tick;
	/* ref. 10 #2: /sandboxes is what FC verified (E2B 2.51 uses /v2). */
	st = fc_api_call(ctx, &rq, "/sandboxes", body, &out, &rp, err);
	if (st < 0)
		goto out;
	if (st < 200 || st >= 300) {
		fc_http_fail(ctx, err, "create sandbox", &rp, NULL);
		if (st == 404)
			err->code = SG_E_NOTFOUND; /* unknown template */
		goto out;
	}
	if (fc_parse_info(ctx, out, info, "create sandbox", err) < 0)
		goto out;
	if (metadata)
		*metadata = json_incref(json_object_get(out, "metadata"));
	ret = 0;
out:
	json_decref(out);
	fc_resp_free(ctx, &rp);
	return ret;
}

/* ---- get, list, kill, timeout ---------------------------------------------------------- */

int fc_api_get(struct fc_ctx *ctx, const char *id, struct sg_call *call,
	       struct fc_sandbox_info *info, struct sg_err *err)
{
	struct fc_req rq = FC_API_REQ("get sandbox", "GET", true, ctx->request_timeout_s * 1000u,
				      call);
	struct fc_resp rp = { 0 };
	char path[FC_ID_MAX + 16];
	json_t *out = NULL;
	long st;
	int ret = -1;

	if (!fc_id_valid(id))
		return ctx->host->errf(err, SG_E_NOTFOUND,
				       "fc: '%s' is not a sandbox id (letters, digits, '-', '_', '.')",
				       id);
	snprintf(path, sizeof(path), "/sandboxes/%s", id);
	st = fc_api_call(ctx, &rq, path, NULL, &out, &rp, err);
	if (st < 0)
		goto out;
	if (st == 404) {
		ctx->host->errf(err, SG_E_NOTFOUND, "fc: sandbox '%s' does not exist (expired or killed)",
				id);
		goto out;
	}
	if (st < 200 || st >= 300) {
		fc_http_fail(ctx, err, "get sandbox", &rp, NULL);
		goto out;
	}
	ret = fc_parse_info(ctx, out, info, "get sandbox", err);
out:
	json_decref(out);
	fc_resp_free(ctx, &rp);
	return ret;
}

int fc_api_list(struct fc_ctx *ctx, struct sg_call *call, json_t **out, struct sg_err *err)
{
	struct fc_req rq = FC_API_REQ("list sandboxes", "GET", true,
				      ctx->request_timeout_s * 1000u, call);
	struct fc_resp rp = { 0 };
	long st;
	int ret = -1;

	st = fc_api_call(ctx, &rq, "/sandboxes", NULL, out, &rp, err);
	if (st < 0)
		goto out;
	if (st < 200 || st >= 300) {
		fc_http_fail(ctx, err, "list sandboxes", &rp, NULL);
		goto out;
	}
	if (!json_is_array(*out)) {
		ctx->host->errf(err, SG_E_PROTO, "fc: list sandboxes: the answer is not a JSON array");
		goto out;
	}
	ret = 0;
out:
	if (ret < 0) {
		json_decref(*out);
		*out = NULL;
	}
	fc_resp_free(ctx, &rp);
	return ret;
}

int fc_api_kill(struct fc_ctx *ctx, const char *id, struct sg_call *call, struct sg_err *err)
{
	struct fc_req rq = FC_API_REQ("kill sandbox", "DELETE", true,
				      ctx->request_timeout_s * 1000u, call);
	struct fc_resp rp = { 0 };
	char path[FC_ID_MAX + 16];
	json_t *out = NULL;
	long st;
	int ret = -1;

	if (!fc_id_valid(id))
		return 0; /* never a sandbox of ours: nothing to kill */
	snprintf(path, sizeof(path), "/sandboxes/%s", id);
	st = fc_api_call(ctx, &rq, path, NULL, &out, &rp, err);
	if (st < 0)
		goto out;
	/* ref. 2.6: 404 means it is already gone, which is what was asked. */
	if ((st < 200 || st >= 300) && st != 404) {
		fc_http_fail(ctx, err, "kill sandbox", &rp, NULL);
		goto out;
	}
	ret = 0;
out:
	json_decref(out);
	fc_resp_free(ctx, &rp);
	return ret;
}

int fc_api_set_timeout(struct fc_ctx *ctx, const char *id, unsigned timeout_s,
		       struct sg_err *err)
{
	struct fc_req rq = FC_API_REQ("set sandbox timeout", "POST", true,
				      ctx->request_timeout_s * 1000u, NULL);
	struct fc_resp rp = { 0 };
	char path[FC_ID_MAX + 24];
	json_t *body, *out = NULL;
	long st;
	int ret = -1;

	if (!fc_id_valid(id))
		return ctx->host->errf(err, SG_E_INVAL,
				       "fc: '%s' is not a sandbox id (letters, digits, '-', '_', '.')",
				       id);
	if (timeout_s > 86400)
		timeout_s = 86400; /* ref. 1: at most 24 h */
	body = json_pack("{s:i}", "timeout", (int)timeout_s);
	snprintf(path, sizeof(path), "/sandboxes/%s/timeout", id);
	st = fc_api_call(ctx, &rq, path, body, &out, &rp, err);
	if (st < 0)
		goto out;
	if (st == 404) {
		fc_gone(ctx, err, id);
		goto out;
	}
	if (st < 200 || st >= 300) {
		fc_http_fail(ctx, err, "set sandbox timeout", &rp, NULL);
		goto out;
	}
	ret = 0;
out:
	json_decref(body);
	json_decref(out);
	fc_resp_free(ctx, &rp);
	return ret;
}

/* ---- probe ------------------------------------------------------------------------------ */

/* What a probe's answer says about fc being usable: 0 when the platform
 * took the key and answered with its JSON array. */
static int fc_probe_answer(struct fc_ctx *ctx, const char *url, const struct fc_resp *rp,
			   const json_t *out, struct sg_err *err)
{
	char msg[256];

	if (rp->status >= 200 && rp->status < 300) {
		if (json_is_array(out))
			return 0;
		return ctx->host->errf(err, SG_E_UNAVAILABLE,
				       "fc: %s answered HTTP %ld, but not with the platform's JSON list "
				       "of sandboxes: check [fc] base_url", url, rp->status);
	}
	fc_http_message(rp, msg, sizeof(msg));
	fc_scrub(ctx, msg, sizeof(msg), NULL);
	if (rp->status == 401 || rp->status == 403)
		return ctx->host->errf(err, SG_E_INVAL,
				       "fc: the platform API at %s refused the API key (HTTP %ld: %s): "
				       "set a valid [fc] api_key or ABX_SANDBOX_API_KEY",
				       url, rp->status, msg);
	return ctx->host->errf(err, SG_E_UNAVAILABLE,
			       "fc: the platform API at %s answered HTTP %ld (%s): check [fc] base_url "
			       "or region, or try again later", url, rp->status, msg);
}

int fc_api_probe(struct fc_ctx *ctx, unsigned timeout_ms, struct sg_err *err)
{
	/* ref. 2.5: the cheapest authenticated request; FC takes limit. */
	struct fc_req rq = FC_API_REQ("probe", "GET", true, timeout_ms, NULL);
	struct fc_resp rp = { 0 };
	struct sg_err e = { 0 };
	json_t *out = NULL;
	char *url;
	long st;
	int ret;

	if (!ctx->api_key)
		return ctx->host->errf(err, SG_E_INVAL,
				       "fc: no API key: set [fc] api_key, or ABX_SANDBOX_API_KEY "
				       "(or E2B_API_KEY) in sandgate's environment");
	url = fc_api_url(ctx, "/sandboxes");
	if (!url)
		return ctx->host->errf(err, SG_E_NOMEM, "fc: out of memory");
	rq.once = true; /* within timeout_ms: no retry, no backoff */
	st = fc_api_call(ctx, &rq, "/sandboxes?limit=1", NULL, &out, &rp, &e);
	if (st >= 0 || (e.code == SG_E_PROTO && rp.status))
		ret = fc_probe_answer(ctx, url, &rp, out, err);
	else if (e.code == SG_E_TIMEOUT)
		ret = ctx->host->errf(err, SG_E_UNAVAILABLE,
				      "fc: the platform API at %s did not answer within %u ms: check "
				      "[fc] base_url or region and the network", url, timeout_ms);
	else
		ret = ctx->host->errf(err, e.code == SG_E_NOMEM ? SG_E_NOMEM : SG_E_UNAVAILABLE,
				      "fc: the platform API at %s does not answer (%s): check "
				      "[fc] base_url or region and the network", url,
				      strncmp(e.msg, "fc: probe: ", 11) ? e.msg : e.msg + 11);
	json_decref(out);
	fc_resp_free(ctx, &rp);
	free(url);
	return ret;
}

int fc_api_gone(struct fc_ctx *ctx, const char *id)
{
	struct fc_sandbox_info info;
	struct sg_err err;

	if (fc_api_get(ctx, id, NULL, &info, &err) < 0)
		return err.code == SG_E_NOTFOUND ? 1 : -1;
	/* A paused sandbox does not answer on the data plane either. */
	return info.state[0] && strcmp(info.state, "running") != 0 ? 1 : 0;
}

int fc_gone(struct fc_ctx *ctx, struct sg_err *err, const char *id)
{
	return ctx->host->errf(err, SG_E_GONE,
			       "fc: sandbox '%s' expired or was killed (the platform no longer has it running)",
			       id);
}
