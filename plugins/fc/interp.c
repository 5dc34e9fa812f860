/*
 * run_code through the template's code interpreter (ref. 6, 7.3): POST
 * /execute on port 49999 answers with NDJSON lines (stdout, stderr, result,
 * error, end_of_execution).  A template without that service (base, or a
 * 404/502 or no connection there) falls back to writing the code to a file
 * and running an interpreter on it with exec, as ref. 7.3 describes.
 *
 * Rich results: each `result` line becomes one object in res->results with
 * the formats the server sent (text, html, markdown, svg, latex, json,
 * javascript, pdf, data, chart, extra) and "is_main_result"; png and jpeg
 * become MCP image content blocks in the object's "_content" array,
 * {"type":"image","data":"<base64>","mimeType":"image/png"}, and are
 * named in its "formats" list but not repeated as fields.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/fc/fc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugins/fc/connect.h"
#include "plugins/fc/http.h"

/* The languages each built-in FC template runs (ref. 1, 6): anything else
 * there is refused before a request is made.  Other templates are asked. */
static const struct {
	const char *template_name;
	const char *languages; /* space-separated MCP names */
} fc_builtin[] = {
	{ "code-interpreter-v1", "python javascript typescript shell" },
};

/* ---- language checks ---------------------------------------------------------------- */

static bool fc_word_in(const char *word, const char *list)
{
	size_t n = strlen(word);

	for (const char *p = list; *p;) {
		size_t len = strcspn(p, " ");

		if (len == n && strncmp(p, word, n) == 0)
			return true;
		p += len + (p[len] ? 1 : 0);
	}
	return false;
}

/* -1 (err filled) when m's template is known not to run lang. */
static int fc_check_language(const struct sg_machine *m, const struct fc_machine *fm,
			     const char *lang, struct sg_err *err)
{
	for (size_t i = 0; i < sizeof(fc_builtin) / sizeof(fc_builtin[0]); i++) {
		if (strcmp(m->template_name, fc_builtin[i].template_name) != 0)
			continue;
		if (fc_word_in(lang, fc_builtin[i].languages))
			return 0;
		return fm->ctx->host->errf(err, SG_E_NOTSUP,
					   "run_code: language '%s' is not available on template %s "
					   "(it runs %s); create a sandbox from a template that has it",
					   lang, m->template_name, fc_builtin[i].languages);
	}
	return 0;
}

/* ---- the NDJSON stream ---------------------------------------------------------------- */

static void fc_append_capped(struct fc_run *r, struct sg_buf *b, const char *p, size_t n)
{
	size_t room = b->len < r->cap ? r->cap - b->len : 0;

	r->host->buf_append(b, p, n < room ? n : room);
}

static json_t *fc_image_block(const char *b64, const char *mime)
{
	return json_pack("{s:s, s:s, s:s}", "type", "image", "data", b64, "mimeType", mime);
}

/* One `result` line into an entry of res->results. */
static void fc_run_result(struct fc_run *r, json_t *line, size_t bytes)
{
	static const char *const keep[] = { "text", "html", "markdown", "svg", "latex", "json",
					    "javascript", "pdf", "data", "chart", "extra" };
	json_t *o = json_object(), *formats = json_array(), *content = json_array(), *v;

	if (r->results_bytes + bytes > FC_MAX_RESULTS) {
		json_object_set_new(o, "omitted", json_string("the run's rich results passed their size cap"));
	} else {
		r->results_bytes += bytes;
		for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++) {
			if ((v = json_object_get(line, keep[i])) != NULL && !json_is_null(v)) {
				json_object_set(o, keep[i], v);
				json_array_append_new(formats, json_string(keep[i]));
			}
		}
		if (json_is_string(v = json_object_get(line, "png"))) {
			json_array_append_new(content, fc_image_block(json_string_value(v), "image/png"));
			json_array_append_new(formats, json_string("png"));
		}
		if (json_is_string(v = json_object_get(line, "jpeg"))) {
			json_array_append_new(content, fc_image_block(json_string_value(v), "image/jpeg"));
			json_array_append_new(formats, json_string("jpeg"));
		}
	}
	json_object_set_new(o, "is_main_result",
			    json_boolean(json_is_true(json_object_get(line, "is_main_result"))));
	json_object_set_new(o, "formats", formats);
	if (json_array_size(content))
		json_object_set_new(o, "_content", content);
	else
		json_decref(content);
	if (!r->res->results)
		r->res->results = json_array();
	json_array_append_new(r->res->results, o);
}

static void fc_run_line(struct fc_run *r, const char *p, size_t n)
{
	json_t *j = json_loadb(p, n, 0, NULL);
	const char *type = json_string_value(json_object_get(j, "type"));
	const char *text = json_string_value(json_object_get(j, "text"));

	if (!type) {
		if (n > 0)
			snprintf(r->perr, sizeof(r->perr), "a line that is not a typed JSON object");
	} else if (!strcmp(type, "stdout") && text) {
		fc_append_capped(r, &r->res->out, text, strlen(text));
	} else if (!strcmp(type, "stderr") && text) {
		fc_append_capped(r, &r->res->err, text, strlen(text));
	} else if (!strcmp(type, "result")) {
		fc_run_result(r, j, n);
	} else if (!strcmp(type, "error")) {
		json_decref(r->res->error);
		r->res->error = json_pack("{s:O?, s:O?, s:O?}", "name", json_object_get(j, "name"),
					  "value", json_object_get(j, "value"), "traceback",
					  json_object_get(j, "traceback"));
		r->res->exit_code = 1;
	} else if (!strcmp(type, "end_of_execution")) {
		r->ended = true;
	} /* number_of_executions and unknown types are ignored (ref. 6) */
	json_decref(j);
}

int fc_run_data(void *ud, const char *p, size_t n)
{
	struct fc_run *r = ud;

	while (n > 0) {
		const char *nl = memchr(p, '\n', n);
		size_t k = nl ? (size_t)(nl - p) : n;

		if (r->line.len + k > FC_MAX_NDJSON_LINE) {
			snprintf(r->perr, sizeof(r->perr), "a line longer than %u bytes",
				 FC_MAX_NDJSON_LINE);
			return -1;
		}
		if (!nl) {
			r->host->buf_append(&r->line, p, k);
			return 0;
		}
		if (r->line.len) {
			r->host->buf_append(&r->line, p, k);
			fc_run_line(r, r->line.data, r->line.len);
			r->line.len = 0;
		} else {
			fc_run_line(r, p, k);
		}
		p += k + 1;
		n -= k + 1;
	}
	return 0;
}

/* ---- /execute ------------------------------------------------------------------------- */

static const char *fc_ci_language(const char *lang)
{
	return strcmp(lang, "shell") == 0 ? "bash" : lang; /* ref. 6 */
}

/* 1: no interpreter service here (fall back); 0: ran (r filled); -1: error. */
static int fc_execute(struct fc_machine *fm, const struct sg_code_req *req,
		      struct sg_call *call, struct fc_run *r, struct sg_err *err)
{
	struct fc_ctx *ctx = fm->ctx;
	struct fc_req rq = { .what = "run code", .method = "POST", .idempotent = false,
			     .call = call, .abort_fd = -1, .secret = fm->token,
			     .on_data = fc_run_data, .ud = r, .timeout_ms = req->timeout_ms };
	struct fc_resp rp = { 0 };
	/* ref. 6: env_vars apply to this execution only */
	json_t *body = json_pack("{s:s, s:s, s:o}", "code", req->code, "language",
				 fc_ci_language(req->language), "env_vars", fc_env_json(req->env));
	char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
	int ret = -1;

	rq.url = fc_data_url(fm, FC_CI_PORT, "/execute");
	rq.headers = fc_envd_headers(fm, FC_CI_PORT, "application/json", err);
	if (!text || !rq.url || !rq.headers) {
		if (!text || !rq.url)
			ctx->host->errf(err, SG_E_NOMEM, "fc: out of memory");
		goto out;
	}
	rq.body = text;
	rq.body_len = strlen(text);
	if (fc_http_request(ctx, &rq, &rp, err) < 0) {
		if (err && err->code == SG_E_TIMEOUT && rp.status == 200) {
			r->res->timed_out = true; /* the partial output stays */
			ret = 0;
		} else if (err && err->code == SG_E_UNAVAILABLE) {
			ret = 1; /* nothing listens on 49999 */
		} else if (err && err->code == SG_E_IO && rp.status == 200) {
			r->ended = false; /* the stream broke: reported below */
			goto ended;
		}
		goto out;
	}
	if (rp.status == 404 || rp.status == 502) {
		/* ref. 7.3: no interpreter service; a 502 may also be an
		 * expired sandbox, which the platform tells apart. */
		ret = rp.status == 502 && fc_api_gone(ctx, fm->id) == 1 ? fc_gone(ctx, err, fm->id) : 1;
		goto out;
	}
	if (rp.status != 200) {
		fc_http_fail(ctx, err, "run code", &rp, fm->token);
		goto out;
	}
	if (r->perr[0]) {
		ctx->host->errf(err, SG_E_PROTO, "fc: run code: the interpreter sent %s", r->perr);
		goto out;
	}
ended:
	if (!r->ended) {
		if (fc_api_gone(ctx, fm->id) == 1)
			ret = fc_gone(ctx, err, fm->id);
		else
			ctx->host->errf(err, SG_E_IO, "fc: run code: the interpreter's stream ended "
					"before end_of_execution (connection dropped)");
		goto out;
	}
	ret = 0;
out:
	json_decref(body);
	if (text) {
		explicit_bzero(text, strlen(text)); /* env values may be secrets */
		free(text);
	}
	free((char *)rq.url); /* ours: made above */
	curl_slist_free_all(rq.headers);
	fc_resp_free(ctx, &rp);
	return ret;
}

/* ---- fallback: a file and an interpreter ------------------------------------------------ */

static const struct {
	const char *lang, *ext, *interp;
} fc_interps[] = {
	{ "python", "py", "python3" },
	{ "javascript", "js", "node" },
	{ "typescript", "ts", "tsx" },
	{ "shell", "sh", "bash" },
	{ "r", "R", "Rscript" },
};

/* The script run with argv: $1 interpreter, $2 file.  A missing
 * interpreter says so on stderr with a marker and exits 127. */
static const char fc_fallback_script[] =
	"command -v \"$1\" >/dev/null 2>&1 || { rm -f \"$2\"; echo \"sandgate-no-interpreter\" >&2; exit 127; }\n"
	"\"$1\" \"$2\"; rc=$?; rm -f \"$2\"; exit $rc\n";

static int fc_fallback(struct sg_machine *m, const struct sg_code_req *req, struct sg_call *call,
		       struct sg_code_result *res, struct sg_err *err)
{
	struct fc_machine *fm = m->handle;
	const struct sg_host_api *host = fm->ctx->host;
	struct sg_exec_result er = { 0 };
	struct sg_write_opts wo = { .mode = 0 };
	const char *ext = "txt", *interp = NULL;
	char rnd[17], file[96];
	int ret = -1;

	for (size_t i = 0; i < sizeof(fc_interps) / sizeof(fc_interps[0]); i++)
		if (!strcmp(req->language, fc_interps[i].lang)) {
			ext = fc_interps[i].ext;
			interp = fc_interps[i].interp;
		}
	if (!interp)
		return host->errf(err, SG_E_INVAL, "run_code: unknown language '%s'", req->language);
	fc_random_hex(rnd, 8);
	snprintf(file, sizeof(file), "/tmp/.sandgate-code-%s.%s", rnd, ext);
	if (fc_file_write(m, file, req->code, strlen(req->code), &wo, call, err) < 0)
		return -1;
	{
		const char *argv[] = { "/bin/bash", "-c", fc_fallback_script, "sandgate-run-code",
				       interp, file, NULL };
		struct sg_exec_req xr = { .argv = argv, .cwd = req->cwd, .env = req->env,
					  .timeout_ms = req->timeout_ms, .output_cap = req->output_cap };

		if (fc_exec(m, &xr, call, &er, err) < 0)
			goto out;
	}
	if (er.exit_code == 127 && er.err.data && strstr(er.err.data, "sandgate-no-interpreter")) {
		host->errf(err, SG_E_NOTFOUND,
			   "run_code: no %s interpreter (%s) in sandbox %s (template %s); use a template that has one, or install it with run_command",
			   req->language, interp, fm->id, m->template_name);
		goto out;
	}
	/* the buffers move to the caller's result */
	res->out = er.out;
	res->err = er.err;
	memset(&er.out, 0, sizeof(er.out));
	memset(&er.err, 0, sizeof(er.err));
	res->exit_code = er.timed_out ? 124 : er.signal ? 128 + er.signal : er.exit_code;
	res->timed_out = er.timed_out;
	snprintf(res->interpreter, sizeof(res->interpreter), "%s", interp);
	ret = 0;
out:
	host->buf_release(&er.out);
	host->buf_release(&er.err);
	return ret;
}

/* ---- the slot ------------------------------------------------------------------------ */

int fc_run_code(struct sg_machine *m, const struct sg_code_req *req, struct sg_call *call,
		struct sg_code_result *res, struct sg_err *err)
{
	struct fc_machine *fm = fc_machine_of(m, err);
	struct fc_run r = { 0 };
	int rc;

	if (!fm)
		return -1;
	if (!req->language || !req->code)
		return fm->ctx->host->errf(err, SG_E_INVAL, "run_code: language and code are required");
	if (fc_check_language(m, fm, req->language, err) < 0)
		return -1;
	if (atomic_load(&fm->interp) == 0)
		return fc_fallback(m, req, call, res, err);
	r = (struct fc_run){ .fm = fm, .host = fm->ctx->host, .res = res,
			     .cap = req->output_cap ? req->output_cap : SG_OUTPUT_CAP_DEFAULT };
	rc = fc_execute(fm, req, call, &r, err);
	r.host->buf_release(&r.line);
	if (rc == 1) {
		/* the template has no interpreter service: remember it */
		atomic_store(&fm->interp, 0);
		json_decref(res->results);
		res->results = NULL;
		json_decref(res->error);
		res->error = NULL;
		return fc_fallback(m, req, call, res, err);
	}
	if (rc < 0)
		return -1;
	atomic_store(&fm->interp, 1);
	if (res->timed_out)
		res->exit_code = 124; /* as run_command reports a timeout */
	snprintf(res->interpreter, sizeof(res->interpreter), "code interpreter (%s)",
		 fc_ci_language(req->language));
	return 0;
}
