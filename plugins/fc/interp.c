/*
 * run_code through the template's code interpreter (ref. 6, 7.3): POST
 * /execute on port 49999 answers with NDJSON lines (stdout, stderr, result,
 * error, end_of_execution).  The interpreter keeps one kernel per language
 * (kernel.c), so names persist from call to call.  A template without that
 * service (base, or a 404/502 or no connection there) answers SG_E_NOTSUP:
 * the core then runs the code once with exec, as ref. 7.3 describes.
 *
 * Rich results: each `result` line becomes one object in res->results with
 * the formats the server sent (text, html, markdown, svg, latex, json,
 * javascript, pdf, data, chart, extra) and "is_main_result"; png and jpeg
 * become MCP image content blocks in the object's "_content" array,
 * {"type":"image","data":"<base64>","mimeType":"image/png"}, and are
 * named in its "formats" list but not repeated as fields.
 *
 * output_files: before its first Python call on a kernel, run_code gives
 * the kernel a small hook (files_hook_code): a Python audit hook notes the
 * files opened for writing under the workspace, and after each cell
 * IPython's post_run_cell displays them as one result of the mime type
 * FC_FILES_MIME, which E2B's server passes on in "extra"; that result
 * becomes res->output_files.  Never a scan of the workspace.
 *
 * Kernel life: a timeout or a cancel interrupts the kernel (Jupyter's
 * interrupt: KeyboardInterrupt, the state kept); reset restarts it; an
 * execution that ends with E2B's ContextRestarting error lost its kernel
 * (Jupyter started a new one): that call says kernel_died, the next one of
 * its language kernel_restarted.
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

#define FC_FILES_MIME "application/vnd.sandgate.files+json"

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

/* The hook's result: the files the cell wrote, into res->output_files.
 * True when the line was that (and nothing else). */
static bool fc_run_files(struct fc_run *r, json_t *line)
{
	json_t *extra = json_object_get(line, "extra");
	json_t *files = json_object_get(extra, FC_FILES_MIME);
	const char *key;
	json_t *v;

	if (!json_is_array(files))
		return false;
	json_decref(r->res->output_files);
	r->res->output_files = json_incref(files);
	json_object_del(extra, FC_FILES_MIME);
	json_object_foreach(line, key, v)
		if (strcmp(key, "type") && strcmp(key, "is_main_result") &&
		    (strcmp(key, "extra") || json_object_size(v)))
			return false;
	return true;
}

/* One `result` line into an entry of res->results. */
static void fc_run_result(struct fc_run *r, json_t *line, size_t bytes)
{
	static const char *const keep[] = { "text", "html", "markdown", "svg", "latex", "json",
					    "javascript", "pdf", "data", "chart", "extra" };
	json_t *o = json_object(), *formats = json_array(), *content = json_array(), *v;

	if (fc_run_files(r, line)) {
		json_decref(o);
		json_decref(formats);
		json_decref(content);
		return;
	}
	if (r->results_bytes + bytes > FC_MAX_RESULTS) {
		json_object_set_new(o, "omitted", json_string("the run's rich results passed their size cap"));
	} else {
		r->results_bytes += bytes;
		for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++) {
			if ((v = json_object_get(line, keep[i])) != NULL && !json_is_null(v) &&
		    !(json_is_object(v) && json_object_size(v) == 0)) {
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

static const char *fc_str(const json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
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
		if (fc_str(j, "name") && !strcmp(fc_str(j, "name"), "ContextRestarting"))
			r->restarting = true;
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

/* ---- the kernels ------------------------------------------------------------------------ */

/* The hook given to a Python kernel once (see the top): %s is the
 * workspace, as a Python string literal.  Idempotent: a kernel that has it
 * keeps its first. */
static const char files_hook_code[] =
	"def _sandgate_files_hook(root):\n"
	"    import builtins, os, sys\n"
	"    if getattr(builtins, '_sandgate_written', None) is not None:\n"
	"        return\n"
	"    writes = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC\n"
	"    skip = ('.cache', '.ipython', '.local', '.config', '__pycache__')\n"
	"    written = builtins._sandgate_written = {}\n"
	"    def audit(event, args):\n"
	"        if event != 'open':\n"
	"            return\n"
	"        try:\n"
	"            path, mode, flags = args\n"
	"            if not isinstance(path, int) and (flags or 0) & writes:\n"
	"                written[os.path.abspath(os.fsdecode(path))] = None\n"
	"        except Exception:\n"
	"            pass\n"
	"    def pre(*args):\n"
	"        written.clear()\n"
	"    def post(*args):\n"
	"        files = []\n"
	"        for path in list(written):\n"
	"            rel = os.path.relpath(path, root)\n"
	"            if rel.startswith('..') or os.path.isabs(rel) or rel.split(os.sep)[0] in skip \\\n"
	"                    or '__pycache__' in rel.split(os.sep):\n"
	"                continue\n"
	"            try:\n"
	"                st = os.stat(path)\n"
	"            except OSError:\n"
	"                continue\n"
	"            if st.st_mode & 0o170000 == 0o100000 and len(files) < 200:\n"
	"                files.append({'name': rel, 'path': path, 'size': st.st_size})\n"
	"        written.clear()\n"
	"        if files:\n"
	"            display({'" FC_FILES_MIME "': files}, raw=True)\n"
	"    sys.addaudithook(audit)\n"
	"    get_ipython().events.register('pre_run_cell', pre)\n"
	"    get_ipython().events.register('post_run_cell', post)\n"
	"_sandgate_files_hook(%s)\n"
	"del _sandgate_files_hook\n";

static int fc_lang_index(const char *lang)
{
	static const char *const names[FC_KERNEL_LANGS] = { "python", "javascript", "typescript" };

	for (int i = 0; i < FC_KERNEL_LANGS; i++)
		if (!strcmp(lang, names[i]))
			return i;
	return -1;
}

/* Gives the Python kernel its files hook when it has none yet.  Returns 1
 * when the template has no interpreter service, else 0: a failure only
 * costs output_files, so it is logged, not returned. */
static int fc_files_hook(struct sg_machine *m, struct fc_machine *fm, struct sg_call *call)
{
	struct sg_code_result res = { 0 };
	struct fc_run r = { .fm = fm, .host = fm->ctx->host, .res = &res, .cap = 4096 };
	struct sg_code_req req = { .language = "python", .timeout_ms = 30000 };
	json_t *root = json_string(m->workspace);
	char *lit = root ? json_dumps(root, JSON_ENCODE_ANY) : NULL, *code = NULL;
	struct sg_err err = { 0 };
	bool have;
	int rc = 0;

	pthread_mutex_lock(&fm->kern_lock);
	have = fm->files_hook;
	pthread_mutex_unlock(&fm->kern_lock);
	if (!have && lit && asprintf(&code, files_hook_code, lit) > 0) {
		req.code = code;
		rc = fc_execute(fm, &req, call, &r, &err);
		if (rc == 1) {
			/* nothing to hook: the caller learns there is no service */
		} else if (rc == 0 && !res.error && r.ended) {
			pthread_mutex_lock(&fm->kern_lock);
			fm->files_hook = true;
			pthread_mutex_unlock(&fm->kern_lock);
		} else {
			fm->ctx->host->log(SG_LOG_INFO, FC_PLUGIN, "sandbox %s: no output_files from "
					   "its Python kernel: %s", fm->id, res.error ?
					   "the hook raised" : err.msg);
		}
	}
	r.host->buf_release(&r.line);
	r.host->buf_release(&res.out);
	r.host->buf_release(&res.err);
	json_decref(res.results);
	json_decref(res.error);
	json_decref(res.output_files);
	json_decref(root);
	free(lit);
	free(code);
	return rc == 1 ? 1 : 0;
}

/* Before a call: a reset restarts the kernel; a death seen earlier is
 * this call's restart to report; a Python kernel gets its files hook.
 * Returns 0, 1 when there is no interpreter service, -1 with err. */
static int fc_kernel_before(struct sg_machine *m, struct fc_machine *fm,
			    const struct sg_code_req *req, struct sg_call *call,
			    struct sg_code_result *res, struct sg_err *err)
{
	int li = fc_lang_index(req->language);

	if (req->reset && fc_kernel_restart(fm, req->language, call, err) < 0)
		return -1;
	pthread_mutex_lock(&fm->kern_lock);
	if (li >= 0 && fm->died[li][0] && !req->reset) {
		res->kernel_restarted = true;
		snprintf(res->restart_reason, sizeof(res->restart_reason), "%s", fm->died[li]);
	}
	if (li >= 0)
		fm->died[li][0] = '\0';
	if (req->reset && li == 0)
		fm->files_hook = false;
	pthread_mutex_unlock(&fm->kern_lock);
	return li == 0 ? fc_files_hook(m, fm, call) : 0;
}

/* After a call: a kernel lost during it. */
static void fc_kernel_after(struct fc_machine *fm, const char *lang, const struct fc_run *r,
			    struct sg_code_result *res)
{
	int li = fc_lang_index(lang);

	if (!r->restarting)
		return;
	res->kernel_died = true;
	snprintf(res->died_reason, sizeof(res->died_reason), "the %s kernel ended during the "
		 "call (a crash, an exit, out of memory) and the code interpreter started a new "
		 "one, without the state", lang);
	pthread_mutex_lock(&fm->kern_lock);
	if (li >= 0)
		snprintf(fm->died[li], sizeof(fm->died[li]), "%s", res->died_reason);
	if (li == 0)
		fm->files_hook = false;
	pthread_mutex_unlock(&fm->kern_lock);
}

/* A timeout or a cancel left the code running in the kernel: stop it. */
static void fc_kernel_stop(struct fc_machine *fm, const char *lang)
{
	struct sg_err err = { 0 };

	if (fc_kernel_interrupt(fm, lang, &err) < 0)
		fm->ctx->host->log(SG_LOG_WARNING, FC_PLUGIN, "sandbox %s: could not interrupt "
				   "the %s kernel after a timeout or cancel: %s", fm->id, lang,
				   err.msg);
}

static void fc_run_reset(struct sg_code_result *res)
{
	json_decref(res->results);
	json_decref(res->error);
	json_decref(res->output_files);
	res->results = res->error = res->output_files = NULL;
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
		return fm->ctx->host->errf(err, SG_E_NOTSUP, "fc: template %s has no code "
					   "interpreter", m->template_name);
	rc = fc_kernel_before(m, fm, req, call, res, err);
	if (rc < 0)
		return -1;
	if (rc == 0) {
		r = (struct fc_run){ .fm = fm, .host = fm->ctx->host, .res = res,
				     .cap = req->output_cap ? req->output_cap : SG_OUTPUT_CAP_DEFAULT };
		rc = fc_execute(fm, req, call, &r, err);
		r.host->buf_release(&r.line);
	}
	if (rc == 1) {
		/* the template has no interpreter service: remember it */
		atomic_store(&fm->interp, 0);
		fc_run_reset(res);
		return fm->ctx->host->errf(err, SG_E_NOTSUP, "fc: template %s has no code "
					   "interpreter", m->template_name);
	}
	if (rc < 0 || res->timed_out) {
		if (res->timed_out || (err && err->code == SG_E_CANCELLED))
			fc_kernel_stop(fm, req->language);
		if (rc < 0)
			return -1;
	}
	atomic_store(&fm->interp, 1);
	fc_kernel_after(fm, req->language, &r, res);
	if (res->timed_out)
		res->exit_code = 124; /* as run_command reports a timeout */
	if (!res->output_files)
		res->output_files = json_array();
	snprintf(res->interpreter, sizeof(res->interpreter), "code interpreter (%s)",
		 fc_ci_language(req->language));
	return 0;
}
