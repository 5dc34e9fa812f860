/*
 * The code interpreter's kernels (ref. 6): E2B keeps one Jupyter kernel per
 * language (a "context", its id the Jupyter kernel id) and lists them with
 * GET /contexts.  A restart (POST /contexts/<id>/restart) is run_code's
 * reset.  An interrupt is Jupyter's own (POST /api/kernels/<id>/interrupt
 * on the Jupyter server's port behind the code interpreter, reached through
 * the same gateway): the code interpreter has none, and a client that goes
 * away does not stop the execution, so a timeout or a cancel sends one.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/fc/fc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugins/fc/http.h"

#define FCK_CONTEXTS_MS  10000
#define FCK_INTERRUPT_MS 5000
#define FCK_RESTART_MS   60000

/* One small request to the data plane.  Returns the HTTP status (rp filled),
 * or -1 with err. */
static long fck_request(struct fc_machine *fm, const char *what, const char *method, int port,
			const char *path, unsigned timeout_ms, struct sg_call *call,
			struct fc_resp *rp, struct sg_err *err)
{
	struct fc_ctx *ctx = fm->ctx;
	struct fc_req rq = { .what = what, .method = method, .idempotent = true, .call = call,
			     .abort_fd = -1, .secret = fm->token, .gone_id = fm->id,
			     .timeout_ms = timeout_ms };
	long status = -1;

	rq.url = fc_data_url(fm, port, path);
	rq.headers = fc_envd_headers(fm, port, strcmp(method, "POST") ? NULL : "application/json",
				     err);
	if (!rq.url)
		ctx->host->errf(err, SG_E_NOMEM, "fc: out of memory");
	if (rq.url && rq.headers) {
		if (!strcmp(method, "POST")) {
			rq.body = "";
			rq.body_len = 0;
		}
		if (fc_http_request(ctx, &rq, rp, err) == 0)
			status = rp->status;
	}
	free((char *)rq.url); /* ours: made above */
	curl_slist_free_all(rq.headers);
	return status;
}

/* The id of the context of `language` into id[size].  Returns 0, 1 when
 * there is none, -1 with err. */
static int fck_context(struct fc_machine *fm, const char *language, struct sg_call *call,
		       char *id, size_t size, struct sg_err *err)
{
	struct fc_resp rp = { 0 };
	json_t *list, *c;
	size_t i;
	long st = fck_request(fm, "list kernels", "GET", FC_CI_PORT, "/contexts", FCK_CONTEXTS_MS,
			      call, &rp, err);
	int rc = 1;

	if (st < 0) {
		fc_resp_free(fm->ctx, &rp);
		return -1;
	}
	if (st != 200) {
		fc_http_fail(fm->ctx, err, "list kernels", &rp, fm->token);
		fc_resp_free(fm->ctx, &rp);
		return -1;
	}
	list = json_loadb(rp.body.data ? rp.body.data : "", rp.body.len, 0, NULL);
	json_array_foreach(list, i, c) {
		const char *lang = json_string_value(json_object_get(c, "language"));
		const char *cid = json_string_value(json_object_get(c, "id"));

		if (lang && cid && !strcmp(lang, language) && fc_id_valid(cid)) {
			snprintf(id, size, "%s", cid);
			rc = 0;
			break;
		}
	}
	json_decref(list);
	fc_resp_free(fm->ctx, &rp);
	return rc;
}

int fc_kernel_interrupt(struct fc_machine *fm, const char *language, struct sg_err *err)
{
	struct fc_resp rp = { 0 };
	char id[FC_ID_MAX], path[FC_ID_MAX + 40];
	long st;
	int rc = fck_context(fm, language, NULL, id, sizeof(id), err);

	if (rc != 0)
		return rc < 0 ? -1 : fm->ctx->host->errf(err, SG_E_NOTFOUND, "fc: no %s kernel "
							 "to interrupt", language);
	snprintf(path, sizeof(path), "/api/kernels/%s/interrupt", id);
	st = fck_request(fm, "interrupt the kernel", "POST", FC_JUPYTER_PORT, path,
			 FCK_INTERRUPT_MS, NULL, &rp, err);
	if (st >= 0 && st != 204 && st != 200)
		fc_http_fail(fm->ctx, err, "interrupt the kernel", &rp, fm->token);
	fc_resp_free(fm->ctx, &rp);
	return st == 204 || st == 200 ? 0 : -1;
}

int fc_kernel_restart(struct fc_machine *fm, const char *language, struct sg_call *call,
		      struct sg_err *err)
{
	struct fc_resp rp = { 0 };
	char id[FC_ID_MAX], path[FC_ID_MAX + 40];
	long st;
	int rc = fck_context(fm, language, call, id, sizeof(id), err);

	if (rc != 0)
		return rc < 0 ? -1 : 0;
	snprintf(path, sizeof(path), "/contexts/%s/restart", id);
	st = fck_request(fm, "restart the kernel", "POST", FC_CI_PORT, path, FCK_RESTART_MS, call,
			 &rp, err);
	if (st >= 0 && (st < 200 || st > 299))
		fc_http_fail(fm->ctx, err, "restart the kernel", &rp, fm->token);
	fc_resp_free(fm->ctx, &rp);
	return st >= 200 && st <= 299 ? 0 : -1;
}
