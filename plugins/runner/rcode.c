/* run_code through a runner's kernels: see rcode.h. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/runner/rcode.h"

#include <stdio.h>
#include <string.h>

#include "plugins/runner/kernel_client.h"

static const char *const rnc_names[RNC_LANGS] = { "python", "javascript" };

void rnc_kstate_init(struct rnc_kstate *st)
{
	memset(st, 0, sizeof(*st));
	pthread_mutex_init(&st->lock, NULL);
}

void rnc_kstate_fini(struct rnc_kstate *st)
{
	pthread_mutex_destroy(&st->lock);
}

static int rnc_index(const char *language)
{
	for (int i = 0; i < RNC_LANGS; i++)
		if (language && strcmp(language, rnc_names[i]) == 0)
			return i;
	return -1;
}

bool rnc_language(const char *language)
{
	return rnc_index(language) >= 0;
}

/* One kernel result as every backend gives it: the formats it has, a png
 * moved into an MCP image block ("_content", which the core lifts out) and
 * named in "formats" rather than repeated. */
static json_t *rnc_result(json_t *k)
{
	static const char *const keep[] = { "text", "html" };
	json_t *o = json_object(), *formats = json_array(), *v;

	for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++) {
		if (json_is_string(v = json_object_get(k, keep[i]))) {
			json_object_set(o, keep[i], v);
			json_array_append_new(formats, json_string(keep[i]));
		}
	}
	if (json_is_string(v = json_object_get(k, "png"))) {
		json_object_set_new(o, "_content", json_pack("[{s:s, s:O, s:s}]", "type", "image",
							     "data", v, "mimeType", "image/png"));
		json_array_append_new(formats, json_string("png"));
		if ((v = json_object_get(k, "width")))
			json_object_set(o, "width", v);
		if ((v = json_object_get(k, "height")))
			json_object_set(o, "height", v);
	}
	if ((v = json_object_get(k, "omitted")))
		json_object_set(o, "omitted", v);
	json_object_set_new(o, "is_main_result",
			    json_boolean(json_is_true(json_object_get(k, "is_main_result"))));
	json_object_set_new(o, "formats", formats);
	return o;
}

static void rnc_fill(const struct sg_host_api *host, struct rn_kernel_result *kr,
		     struct sg_code_result *res)
{
	size_t i;
	json_t *item;

	host->buf_append(&res->out, kr->out, kr->out_len);
	host->buf_append(&res->err, kr->err, kr->err_len);
	res->out_truncated = kr->out_trunc;
	res->err_truncated = kr->err_trunc;
	res->results = json_array();
	json_array_foreach(kr->results, i, item)
		json_array_append_new(res->results, rnc_result(item));
	res->output_files = kr->output_files;
	kr->output_files = NULL;
	res->timed_out = kr->timed_out;
	res->kernel_restarted = kr->kernel_restarted;
	snprintf(res->restart_reason, sizeof(res->restart_reason), "%s", kr->restart_reason);
	res->kernel_died = kr->kernel_died;
	snprintf(res->died_reason, sizeof(res->died_reason), "%s", kr->died_reason);
	snprintf(res->interpreter, sizeof(res->interpreter), "%s", kr->interpreter);
	if (kr->error) {
		res->error = kr->error;
		kr->error = NULL;
	} else if (kr->kernel_died) {
		res->error = json_pack("{s:s, s:s, s:s}", "name", "KernelDied", "value",
				       kr->died_reason, "traceback", "");
	}
	res->exit_code = res->timed_out ? 124 : res->error ? 1 : 0;
}

/* A kernel lost with its runner is a restart the runner cannot see. */
static void rnc_track(struct rnc_kstate *st, int idx, unsigned long gen, bool reset,
		      struct sg_code_result *res)
{
	unsigned long before;

	pthread_mutex_lock(&st->lock);
	before = st->gen[idx];
	st->gen[idx] = gen + 1;
	pthread_mutex_unlock(&st->lock);
	if (before && before != gen + 1 && !reset && !res->kernel_restarted) {
		res->kernel_restarted = true;
		snprintf(res->restart_reason, sizeof(res->restart_reason), "the runner in the "
			 "sandbox ended and was started again, and its kernels with it");
	}
}

static int rnc_failed(const struct sg_host_api *host, const char *plugin, struct rn_conn *c,
		      const struct sg_machine *m, const char *lang, int rc, const char *why,
		      struct sg_err *err)
{
	char dead[200];

	if (rc == 1)
		return host->errf(err, SG_E_NOTFOUND, "run_code: %s in %s sandbox '%s': use a "
				  "template whose image has one, or install it with run_command",
				  why, plugin, m->id);
	if (!rn_conn_alive(c, dead, sizeof(dead)))
		return host->errf(err, SG_E_IO, "run_code: the runner in %s sandbox '%s' went "
				  "away (%s): the %s kernel went with it, the next call starts a "
				  "new one", plugin, m->id, dead, lang);
	if (strstr(why, " busy"))
		return host->errf(err, SG_E_BUSY, "run_code: %s (sandbox '%s'): wait for the "
				  "calls before, or interrupt them", why, m->id);
	return host->errf(err, SG_E_BACKEND, "run_code on %s sandbox '%s': %s", plugin, m->id,
			  why);
}

int rnc_run(const struct sg_host_api *host, const char *plugin, struct rn_conn *c,
	    unsigned long gen, struct rnc_kstate *st, const char *scope,
	    const struct sg_machine *m, const struct sg_code_req *req,
	    struct sg_call *call, struct sg_code_result *res, struct sg_err *err)
{
	int idx = rnc_index(req->language);
	struct rn_kernel_call kc = {
		.language = req->language, .scope = scope, .code = req->code, .env = req->env,
		.cwd = req->cwd && *req->cwd ? req->cwd : m->workspace,
		.timeout_ms = req->timeout_ms, .output_cap = req->output_cap,
		.reset = req->reset, .cancel_fd = host->cancel_fd(call),
	};
	struct rn_kernel_result kr;
	char why[256] = "";
	int rc;

	if (idx < 0)
		return host->errf(err, SG_E_NOTSUP, "run_code: the %s kernels run python and "
				  "javascript, not %s", plugin, req->language);
	rc = rn_kernel_run(c, &kc, &kr, why, sizeof(why));
	if (rc != 0) {
		rn_kernel_result_free(&kr);
		return rnc_failed(host, plugin, c, m, req->language, rc, why, err);
	}
	if (kr.cancelled) {
		rn_kernel_result_free(&kr);
		return host->errf(err, SG_E_CANCELLED, "cancelled: the code was interrupted "
				  "(the %s kernel keeps its state)", req->language);
	}
	rnc_fill(host, &kr, res);
	rn_kernel_result_free(&kr);
	rnc_track(st, idx, gen, req->reset, res);
	return 0;
}
