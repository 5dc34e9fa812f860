/*
 * fc.so: sandgate's backend for Alibaba Cloud FC agent sandboxes, which speak
 * the E2B protocol (shared/reference/fc-protocol.md, cited as "ref.").  This
 * file holds the descriptor the core reads (the single exported symbol
 * `sg_backend`), init/fini, the configuration and small shared helpers.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/fc/fc.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "plugins/fc/connect.h"
#include "plugins/fc/http.h"

#ifndef PACKAGE_VERSION
#define PACKAGE_VERSION "0.0.0"
#endif

/* ---- helpers -------------------------------------------------------------------- */

int64_t fc_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

bool fc_id_valid(const char *s)
{
	size_t n = 0;

	for (; s && s[n]; n++)
		if (!(isalnum((unsigned char)s[n]) || s[n] == '-' || s[n] == '_' || s[n] == '.'))
			return false;
	return n > 0 && n < FC_ID_MAX && s[0] != '.';
}

json_t *fc_env_json(const char *const *env)
{
	json_t *o = json_object();

	for (; o && env && *env; env++) {
		const char *eq = strchr(*env, '=');
		char *k;

		if (!eq || eq == *env)
			continue;
		k = strndup(*env, (size_t)(eq - *env));
		if (!k || json_object_set_new(o, k, json_string(eq + 1)) < 0) {
			free(k);
			json_decref(o);
			return NULL;
		}
		free(k);
	}
	return o;
}

void fc_random_hex(char *out, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char b[64];
	size_t got = 0;
	int fd;

	if (n > sizeof(b))
		n = sizeof(b);
	fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		ssize_t r = read(fd, b, n);

		got = r > 0 ? (size_t)r : 0;
		close(fd);
	}
	for (size_t i = got; i < n; i++) /* no urandom: still unique enough per process */
		b[i] = (unsigned char)((uint64_t)fc_now_ms() * 2654435761u >> (i % 24));
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = hex[b[i] >> 4];
		out[2 * i + 1] = hex[b[i] & 15];
	}
	out[2 * n] = '\0';
}

struct fc_machine *fc_machine_of(struct sg_machine *m, struct sg_err *err)
{
	struct fc_machine *fm = m ? m->handle : NULL;

	if (fm && fm->ctx)
		return fm;
	if (err) {
		/* No host to word it with: fill err by hand. */
		err->code = SG_E_INTERNAL;
		err->sys_errno = 0;
		snprintf(err->msg, sizeof(err->msg),
			 "fc: this machine has no fc handle (it was not created or attached by fc.so)");
	}
	return NULL;
}

/* ---- configuration ------------------------------------------------------------------ */

/* Configuration precedence is the core's (sg_config_get): --set fc.KEY=V,
 * then SANDGATE_FC_<KEY>, then the seed's variables in `env` order (ABX_*
 * before E2B_*), then [fc] in the file, then `def`. */
static const struct sg_config_key fc_config_keys[] = {
	{ .key = "api_key", .secret = true, .env = "ABX_SANDBOX_API_KEY:E2B_API_KEY",
	  .help = "platform API key, sent as X-API-Key and Authorization: Bearer; never logged" },
	{ .key = "base_url", .env = "ABX_SANDBOX_BASE_URL:E2B_API_URL",
	  .help = "platform API base URL (http or https); unset: https://api.<region>.e2b.fc.aliyuncs.com" },
	{ .key = "region", .def = FC_DEFAULT_REGION,
	  .help = "FC region (cn-hangzhou, cn-shanghai, ap-southeast-1, ...) for the default base_url and domain" },
	{ .key = "domain", .env = "ABX_SANDBOX_DOMAIN:E2B_DOMAIN",
	  .help = "data-plane domain: envd is https://49983-<sandboxID>.<domain>; unset: <region>.e2b.fc.aliyuncs.com" },
	{ .key = "sandbox_url", .env = "E2B_SANDBOX_URL",
	  .help = "send every data-plane request to this base URL instead, routed by the "
		  "E2b-Sandbox-Id/-Port headers (a gateway, or the test emulator)" },
	{ .key = "default_template", .def = FC_DEFAULT_TEMPLATE, .env = "ABX_DEFAULT_TEMPLATE",
	  .help = "template used when a call names none (code-interpreter-v1 or base on FC)" },
	{ .key = "workspace", .def = FC_DEFAULT_WORKSPACE,
	  .help = "default working directory and list path inside a sandbox" },
	{ .key = "envd_user",
	  .help = "user for envd's Authorization: Basic header; unset: none (envd >= 0.4 picks its default)" },
	{ .key = "create_timeout", .def = "180", .accepts = "uint",
	  .help = "seconds a sandbox creation may take (at least 120: FC cold starts take 60-90 s)" },
	{ .key = "request_timeout", .def = "60", .accepts = "uint",
	  .help = "seconds any other API or file request may take" },
	{ .key = "keepalive_interval", .def = "10", .accepts = "uint",
	  .help = "seconds between two set-timeout keepalives of one sandbox (sent in the background)" },
	{ .key = "retries", .def = "3", .accepts = "uint",
	  .help = "extra attempts of an idempotent request after 429, 502, 503 or a broken connection" },
	{ .key = "retry_after_max", .def = "30", .accepts = "uint",
	  .help = "longest Retry-After in seconds a 429 is waited out; longer ones fail at once" },
	{ .key = NULL }
};

static unsigned fc_config_uint(const struct sg_host_api *host, const char *key, unsigned def)
{
	const char *v = host->config_get(FC_PLUGIN, key);
	unsigned long n;
	char *end;

	if (!v || !*v)
		return def;
	errno = 0;
	n = strtoul(v, &end, 10);
	if (errno || *end || v[0] == '-' || n > 86400UL * 7) {
		/* The core validates "uint" keys; this only guards a bad core. */
		host->log(SG_LOG_WARNING, FC_PLUGIN, "[fc] %s = %s is not valid: using %u", key, v,
			  def);
		return def;
	}
	return (unsigned)n;
}

/* A malloc'd copy of s without trailing '/', or NULL when out of memory. */
static char *fc_trimmed(const char *s)
{
	size_t n = strlen(s);

	while (n > 0 && s[n - 1] == '/')
		n--;
	return strndup(s, n);
}

static bool fc_region_valid(const char *r)
{
	for (const char *p = r; *p; p++)
		if (!(islower((unsigned char)*p) || isdigit((unsigned char)*p) || *p == '-'))
			return false;
	return *r != '\0';
}

static bool fc_url_ok(const char *u)
{
	return u && (strncmp(u, "https://", 8) == 0 || strncmp(u, "http://", 7) == 0);
}

static const char *fc_cfg(const struct sg_host_api *host, const char *key)
{
	const char *v = host->config_get(FC_PLUGIN, key);

	return v && *v ? v : NULL;
}

/* The endpoints: base_url or the region's, domain or the region's. */
static int fc_config_endpoints(struct fc_ctx *ctx, struct sg_err *err)
{
	const struct sg_host_api *host = ctx->host;
	const char *region = fc_cfg(host, "region"), *base = fc_cfg(host, "base_url");
	const char *domain = fc_cfg(host, "domain"), *surl = fc_cfg(host, "sandbox_url");

	if (!region)
		region = FC_DEFAULT_REGION;
	if (!fc_region_valid(region))
		return host->errf(err, SG_E_INVAL,
				  "[fc] region = '%s' is not a region name such as cn-hangzhou", region);
	if (base && !fc_url_ok(base))
		return host->errf(err, SG_E_INVAL,
				  "[fc] base_url = '%s' must start with https:// or http://", base);
	if (surl && !fc_url_ok(surl))
		return host->errf(err, SG_E_INVAL,
				  "[fc] sandbox_url = '%s' must start with https:// or http://", surl);
	ctx->region = strdup(region);
	if (base)
		ctx->base_url = fc_trimmed(base);
	else if (asprintf(&ctx->base_url, "https://api.%s.e2b.fc.aliyuncs.com", region) < 0)
		ctx->base_url = NULL;
	if (domain)
		ctx->domain = strdup(domain);
	else if (asprintf(&ctx->domain, "%s.e2b.fc.aliyuncs.com", region) < 0)
		ctx->domain = NULL;
	ctx->sandbox_url = surl ? fc_trimmed(surl) : NULL;
	if (!ctx->region || !ctx->base_url || !ctx->domain || (surl && !ctx->sandbox_url))
		return host->errf(err, SG_E_NOMEM, "fc: out of memory");
	return 0;
}

static int fc_config_rest(struct fc_ctx *ctx, struct sg_err *err)
{
	const struct sg_host_api *host = ctx->host;
	const char *key = fc_cfg(host, "api_key"), *tpl = fc_cfg(host, "default_template");
	const char *ws = fc_cfg(host, "workspace"), *user = fc_cfg(host, "envd_user");

	ctx->api_key = key ? strdup(key) : NULL;
	ctx->default_template = strdup(tpl ? tpl : FC_DEFAULT_TEMPLATE);
	ctx->workspace = fc_trimmed(ws && ws[0] == '/' ? ws : FC_DEFAULT_WORKSPACE);
	if (ctx->workspace && !ctx->workspace[0]) {
		free(ctx->workspace);
		ctx->workspace = strdup("/");
	}
	if (user) {
		char *pair = NULL;

		/* ref. 3.1: Basic base64("<user>:") */
		ctx->envd_user = strdup(user);
		if (asprintf(&pair, "%s:", user) >= 0) {
			ctx->envd_basic = fc_b64_encode(pair, strlen(pair));
			free(pair);
		}
		if (!ctx->envd_user || !ctx->envd_basic)
			return host->errf(err, SG_E_NOMEM, "fc: out of memory");
	}
	if ((key && !ctx->api_key) || !ctx->default_template || !ctx->workspace)
		return host->errf(err, SG_E_NOMEM, "fc: out of memory");
	ctx->create_timeout_s = fc_config_uint(host, "create_timeout", 180);
	if (ctx->create_timeout_s < 120)
		ctx->create_timeout_s = 120; /* ref. 2.3: cold starts take 60-90 s */
	ctx->request_timeout_s = fc_config_uint(host, "request_timeout", 60);
	if (ctx->request_timeout_s == 0)
		ctx->request_timeout_s = 60;
	ctx->keepalive_interval_s = fc_config_uint(host, "keepalive_interval", 10);
	ctx->retries = fc_config_uint(host, "retries", 3);
	if (ctx->retries > 10)
		ctx->retries = 10;
	ctx->retry_after_max_s = fc_config_uint(host, "retry_after_max", 30);
	return 0;
}

/* ---- init / fini ------------------------------------------------------------------- */

static void fc_fini(void *priv)
{
	struct fc_ctx *ctx = priv;

	if (!ctx)
		return;
	fc_keepalive_free(ctx->ka); /* first: its thread uses the rest */
	fc_http_free(ctx->http);
	if (ctx->api_key) {
		explicit_bzero(ctx->api_key, strlen(ctx->api_key));
		free(ctx->api_key);
	}
	free(ctx->base_url);
	free(ctx->region);
	free(ctx->domain);
	free(ctx->sandbox_url);
	free(ctx->default_template);
	free(ctx->workspace);
	free(ctx->envd_user);
	free(ctx->envd_basic);
	free(ctx);
}

/* Reads the configuration; never touches the network (cold start stays fast,
 * and a missing key only fails the calls that need it). */
static int fc_init(const struct sg_host_api *host, void **priv, struct sg_err *err)
{
	struct fc_ctx *ctx;

	ctx = calloc(1, sizeof(*ctx)); /* freed by fc_fini() */
	if (!ctx)
		return host->errf(err, SG_E_NOMEM, "fc: out of memory");
	ctx->host = host;
	if (fc_config_endpoints(ctx, err) < 0 || fc_config_rest(ctx, err) < 0)
		goto fail;
	ctx->http = fc_http_new(host);
	ctx->ka = fc_keepalive_new(ctx);
	if (!ctx->http || !ctx->ka) {
		host->errf(err, SG_E_NOMEM, "fc: out of memory");
		goto fail;
	}
	host->log(SG_LOG_DEBUG, FC_PLUGIN, "platform %s, data plane %s, template %s%s",
		  ctx->base_url, ctx->sandbox_url ? ctx->sandbox_url : ctx->domain,
		  ctx->default_template, ctx->api_key ? "" : " (no API key set)");
	*priv = ctx;
	return 0;
fail:
	fc_fini(ctx);
	return -1;
}

/* ---- probe ------------------------------------------------------------------------- */

/* Facts for `sandgate status`: where fc goes and with what, never the key. */
static json_t *fc_probe_details(const struct fc_ctx *ctx)
{
	return json_pack("{s:s, s:s, s:s, s:s?, s:s, s:b}", "base_url", ctx->base_url, "region",
			 ctx->region, "domain", ctx->domain, "sandbox_url", ctx->sandbox_url,
			 "default_template", ctx->default_template, "api_key_set",
			 ctx->api_key != NULL);
}

int fc_probe(void *priv, unsigned timeout_ms, struct sg_probe *out, struct sg_err *err)
{
	struct fc_ctx *ctx = priv;

	out->preference = FC_PREFERENCE;
	out->details = fc_probe_details(ctx); /* the core's reference */
	return fc_api_probe(ctx, timeout_ms ? timeout_ms : ctx->request_timeout_s * 1000u, err);
}

/* ---- the descriptor ---------------------------------------------------------------- */

static const char fc_help[] =
	"FC backend: Alibaba Cloud FC agent sandboxes through their E2B-compatible API. "
	"A machine is a cloud sandbox made from a template (code-interpreter-v1 keeps a "
	"kernel per language for run_code: python, javascript, typescript; base has envd "
	"only, so run_code runs an interpreter once per call there).  Commands run as "
	"`/bin/bash -l -c` in [fc] workspace (/home/user); files move through envd; "
	"each use pushes the sandbox's expiry in the background, at most every "
	"[fc] keepalive_interval seconds.  Keys: [fc] api_key (ABX_SANDBOX_API_KEY, "
	"E2B_API_KEY), base_url or region, domain, default_template.";

SG_EXPORT const struct sg_backend sg_backend = {
	SG_BACKEND_HEADER,
	.name = "fc",
	.version = PACKAGE_VERSION,
	.summary = "Alibaba Cloud FC agent sandboxes (E2B-compatible API)",
	.help = fc_help,
	.config_keys = fc_config_keys,
	.config_sections = NULL,
	.init = fc_init,
	.fini = fc_fini,
	/* probe */
	.probe = fc_probe,
	/* lifecycle */
	.machine_create = fc_machine_create,
	.machine_attach = fc_machine_attach,
	.machine_destroy = fc_machine_destroy,
	.machine_release = fc_machine_release,
	.machine_list = fc_machine_list,
	/* expiry */
	.machine_keepalive = fc_machine_keepalive,
	/* exec */
	.exec = fc_exec,
	/* code */
	.run_code = fc_run_code,
	/* stream (no status group: envd gives a process no extra descriptor) */
	.stream_open = fc_stream_open,
	.stream_write = fc_stream_write,
	.stream_read = fc_stream_read,
	.stream_close = fc_stream_close,
	/* files */
	.file_read = fc_file_read,
	.file_write = fc_file_write,
	.file_list = fc_file_list,
	.file_stat = fc_file_stat,
	.file_remove = fc_file_remove,
	/* no actions */
	.actions = NULL,
	.n_actions = 0,
};
