/*
 * The machine slots on top of the platform API (api.c): create with
 * sandgate's metadata (its owner tag, so a sandbox whose record was lost is
 * still found), attach, destroy, list, keepalive.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/fc/fc.h"

#include <curl/curl.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Metadata keys on every sandbox sandgate makes (ref. 2.3 `metadata`):
 * machine_list() reads back managed, owner, persistent, created and lifetime;
 * the rest tells a
 * person looking at the platform's console what the sandbox is. */
#define FC_META_MANAGED    "sandgate.managed"
#define FC_META_OWNER      "sandgate.owner"
#define FC_META_SESSION    "sandgate.session"
#define FC_META_CREATED    "sandgate.created"
#define FC_META_LIFETIME   "sandgate.lifetime"
#define FC_META_PERSISTENT "sandgate.persistent"
#define FC_META_NAME       "sandgate.name"

#define FC_DEFAULT_LIFETIME 300u

static json_t *fc_create_metadata(const struct sg_create_req *req, unsigned lifetime)
{
	json_t *md = json_object();
	char num[32];

	json_object_set_new(md, FC_META_MANAGED, json_string("1"));
	if (req->owner)
		json_object_set_new(md, FC_META_OWNER, json_string(req->owner));
	if (req->session_hash)
		json_object_set_new(md, FC_META_SESSION, json_string(req->session_hash));
	snprintf(num, sizeof(num), "%lld", (long long)time(NULL));
	json_object_set_new(md, FC_META_CREATED, json_string(num));
	snprintf(num, sizeof(num), "%u", lifetime);
	json_object_set_new(md, FC_META_LIFETIME, json_string(num));
	json_object_set_new(md, FC_META_PERSISTENT, json_string(req->persistent ? "1" : "0"));
	if (req->name)
		json_object_set_new(md, FC_META_NAME, json_string(req->name));
	return md;
}

/* ref. 7.1: {"templateID","timeout","autoPause":false,"metadata","envVars"}. */
static json_t *fc_create_body(const struct sg_create_req *req, const char *tpl,
			      unsigned lifetime)
{
	json_t *body = json_pack("{s:s, s:i, s:b, s:o, s:o}", "templateID", tpl, "timeout",
				 (int)lifetime, "autoPause", 0, "metadata",
				 fc_create_metadata(req, lifetime), "envVars",
				 fc_env_json(req->env));
	const char *k;
	json_t *v;

	/* Backend options pass sizing fields FC may accept (ref. 2.3). */
	json_object_foreach((json_t *)req->options, k, v) {
		if (!strcmp(k, "cpuCount") || !strcmp(k, "memoryMB") || !strcmp(k, "diskSizeMB") ||
		    !strcmp(k, "allow_internet_access"))
			json_object_set(body, k, v);
	}
	return body;
}

/* Why host->machine_set() refused a value (its errno). */
static const char *fc_set_why(int e)
{
	return e == E2BIG ? "longer than " FC_STR(SG_MACHINE_FIELD_MAX) " bytes"
			  : "empty or with a control character";
}

/* Sets the strings of m from fm (id, url, template) and the configured
 * workspace.  Returns 0 or -1 with err naming the value refused (the
 * reason first: a long value is cut by the message's size). */
static int fc_set_strings(struct fc_ctx *ctx, const struct fc_machine *fm, const char *tpl,
			  struct sg_machine *m, struct sg_err *err)
{
	const struct sg_host_api *h = ctx->host;

	if (h->machine_set(m, SG_MACHINE_ID, "%s", fm->id) < 0)
		return h->errf(err, SG_E_PROTO, "fc: the platform's sandbox id is %s: '%s'",
			       fc_set_why(errno), fm->id);
	if (h->machine_set(m, SG_MACHINE_WORKSPACE, "%s", ctx->workspace) < 0)
		return h->errf(err, SG_E_INVAL, "fc: [fc] workspace is %s: set a shorter path ('%s')",
			       fc_set_why(errno), ctx->workspace);
	if ((ctx->sandbox_url ? h->machine_set(m, SG_MACHINE_URL, "%s", ctx->sandbox_url)
			      : h->machine_set(m, SG_MACHINE_URL, "https://%d-%s.%s", FC_ENVD_PORT,
					       fm->id, fm->domain)) < 0)
		return h->errf(err, SG_E_INVAL,
			       "fc: the sandbox's URL is %s: check [fc] domain and sandbox_url",
			       fc_set_why(errno));
	if (tpl && *tpl && h->machine_set(m, SG_MACHINE_TEMPLATE, "%s", tpl) < 0)
		return h->errf(err, SG_E_INVAL, "fc: the template name is %s: '%s'", fc_set_why(errno),
			       tpl);
	return 0;
}

/* Fills m and a new handle from info; tpl is the template asked for, or
 * NULL.  Returns 0 or -1 with err (m->handle then stays NULL). */
static int fc_bind(struct fc_ctx *ctx, const struct fc_sandbox_info *info, const char *tpl,
		   struct sg_machine *m, struct sg_err *err)
{
	struct fc_machine *fm = calloc(1, sizeof(*fm)); /* freed by fc_machine_release() */

	if (!fm)
		return ctx->host->errf(err, SG_E_NOMEM, "fc: out of memory");
	fm->ctx = ctx;
	pthread_mutex_init(&fm->start_lock, NULL);
	pthread_mutex_init(&fm->kern_lock, NULL);
	snprintf(fm->id, sizeof(fm->id), "%s", info->id);
	snprintf(fm->token, sizeof(fm->token), "%s", info->token);
	snprintf(fm->envd_version, sizeof(fm->envd_version), "%s", info->envd_version);
	fm->domain = strdup(info->domain[0] ? info->domain : ctx->domain);
	if (info->template_name[0])
		tpl = info->template_name;
	atomic_store(&fm->last_keepalive_ms, fc_now_ms());
	/* ref. 1: base has no interpreter service; code-interpreter-v1 has one. */
	atomic_store(&fm->interp, tpl && strcmp(tpl, "base") == 0 ? 0 : -1);
	m->handle = fm;
	if (!fm->domain) {
		ctx->host->errf(err, SG_E_NOMEM, "fc: out of memory");
		goto fail;
	}
	if (fc_set_strings(ctx, fm, tpl, m, err) < 0)
		goto fail;
	return 0;
fail:
	fc_machine_release(m);
	return -1;
}

int fc_machine_create(void *priv, const struct sg_create_req *req, struct sg_call *call,
		      struct sg_machine *m, struct sg_err *err)
{
	struct fc_ctx *ctx = priv;
	const char *tpl = req->template_name && *req->template_name ? req->template_name
								     : ctx->default_template;
	unsigned lifetime = req->lifetime_s ? req->lifetime_s : FC_DEFAULT_LIFETIME;
	struct fc_sandbox_info info;
	json_t *body;
	int ret;

	if (lifetime > 86400)
		lifetime = 86400; /* ref. 1: FC's limit */
	body = fc_create_body(req, tpl, lifetime);
	if (!body)
		return ctx->host->errf(err, SG_E_NOMEM, "fc: out of memory");
	ret = fc_api_create(ctx, body, call, &info, NULL, err);
	json_decref(body);
	if (ret < 0) {
		if (err && err->code == SG_E_NOTFOUND)
			ctx->host->errf(err, SG_E_NOTFOUND,
					"fc: template '%s' does not exist on the platform (FC has code-interpreter-v1 and base, plus your own)",
					tpl);
		return -1;
	}
	if (fc_bind(ctx, &info, tpl, m, err) < 0) {
		struct sg_err kerr;

		fc_api_kill(ctx, info.id, NULL, &kerr); /* do not leak it in the cloud */
		return -1;
	}
	explicit_bzero(&info, sizeof(info));
	ctx->host->log(SG_LOG_INFO, FC_PLUGIN, "created sandbox %s (template %s, envd %s)", m->id,
		       m->template_name, ((struct fc_machine *)m->handle)->envd_version);
	return 0;
}

/* The E2B sandbox id is all fc needs to find a sandbox again (GET gives
 * its token): it keeps nothing in the record, so `kept` is unused. */
int fc_machine_attach(void *priv, const char *id, const json_t *kept, struct sg_call *call,
		      struct sg_machine *m, struct sg_err *err)
{
	struct fc_ctx *ctx = priv;
	struct fc_sandbox_info info;
	int ret;

	(void)kept;
	if (fc_api_get(ctx, id, call, &info, err) < 0)
		return -1;
	if (info.state[0] && strcmp(info.state, "running") != 0) {
		ret = ctx->host->errf(err, SG_E_NOTFOUND, "fc: sandbox '%s' is %s, not running", id,
				      info.state);
		explicit_bzero(&info, sizeof(info));
		return ret;
	}
	ret = fc_bind(ctx, &info, NULL, m, err);
	explicit_bzero(&info, sizeof(info));
	return ret;
}

int fc_machine_destroy(struct sg_machine *m, struct sg_call *call, struct sg_err *err)
{
	struct fc_machine *fm = m ? m->handle : NULL;
	struct fc_ctx *ctx = fm ? fm->ctx : m ? m->backend_priv : NULL;

	if (!ctx || !m->id[0])
		return fc_machine_of(m, err) ? 0 : -1;
	if (fc_api_kill(ctx, m->id, call, err) < 0)
		return -1;
	/* No keepalive for it any more: a queued one, and the one the end of
	 * this call would push, could only fail. */
	if (fm)
		atomic_store(&fm->last_keepalive_ms, INT64_MAX);
	fc_keepalive_forget(ctx->ka, m->id);
	return 0;
}

void fc_machine_release(struct sg_machine *m)
{
	struct fc_machine *fm = m ? m->handle : NULL;

	if (!fm)
		return;
	explicit_bzero(fm->token, sizeof(fm->token));
	free(fm->domain);
	for (struct curl_slist *h = fm->start_headers; h; h = h->next)
		explicit_bzero(h->data, strlen(h->data)); /* the token is in one */
	curl_slist_free_all(fm->start_headers);
	free(fm->start_url);
	pthread_mutex_destroy(&fm->start_lock);
	pthread_mutex_destroy(&fm->kern_lock);
	free(fm);
	m->handle = NULL;
}

static const char *fc_meta(const json_t *md, const char *key)
{
	const char *v = json_string_value(json_object_get(md, key));

	return v ? v : "";
}

/* One listed sandbox as {"id", "owner", "persistent", "created",
 * "lifetime"}, or NULL when it is not sandgate's. */
static json_t *fc_list_entry(const json_t *item)
{
	const json_t *md = json_object_get(item, "metadata");
	const char *id = json_string_value(json_object_get(item, "sandboxID"));

	if (!id || !fc_id_valid(id) || strcmp(fc_meta(md, FC_META_MANAGED), "1") != 0)
		return NULL;
	return json_pack("{s:s, s:s, s:b, s:I, s:I}", "id", id, "owner", fc_meta(md, FC_META_OWNER),
			 "persistent", strcmp(fc_meta(md, FC_META_PERSISTENT), "1") == 0,
			 "created", (json_int_t)strtoll(fc_meta(md, FC_META_CREATED), NULL, 10),
			 "lifetime", (json_int_t)strtoll(fc_meta(md, FC_META_LIFETIME), NULL, 10));
}

int fc_machine_list(void *priv, struct sg_call *call, json_t **machines, struct sg_err *err)
{
	struct fc_ctx *ctx = priv;
	json_t *arr = NULL, *item, *list;
	size_t i;

	*machines = NULL;
	if (!ctx->api_key)
		return ctx->host->errf(err, SG_E_INVAL,
				       "fc: no API key: cannot list sandboxes; set [fc] api_key or "
				       "ABX_SANDBOX_API_KEY");
	if (fc_api_list(ctx, call, &arr, err) < 0)
		return -1;
	list = json_array(); /* the caller's reference */
	json_array_foreach(arr, i, item) {
		json_t *e = fc_list_entry(item);

		if (e && json_array_append_new(list, e) < 0) {
			json_decref(list);
			list = NULL;
			break;
		}
	}
	json_decref(arr);
	if (!list)
		return ctx->host->errf(err, SG_E_NOMEM, "fc: out of memory");
	*machines = list;
	return 0;
}

/* ref. 2.7: the expiry moves to now + lifetime.  Sent beside the call, never
 * before it: this only queues work for the keepalive thread, and at most
 * once per keepalive_interval per sandbox. */
int fc_machine_keepalive(struct sg_machine *m, unsigned lifetime_s, struct sg_err *err)
{
	struct fc_machine *fm = fc_machine_of(m, err);
	int64_t now = fc_now_ms(), last;

	if (!fm)
		return -1;
	last = atomic_load(&fm->last_keepalive_ms);
	if (now - last < (int64_t)fm->ctx->keepalive_interval_s * 1000)
		return 0;
	if (!atomic_compare_exchange_strong(&fm->last_keepalive_ms, &last, now))
		return 0; /* another thread just queued it */
	fc_keepalive_push(fm->ctx->ka, fm->id, lifetime_s);
	return 0;
}
