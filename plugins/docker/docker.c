/*
 * docker.so: sandgate's Docker backend.  This file holds the descriptor the
 * core reads (the single exported symbol `sg_backend`), init/fini and the
 * configuration; the slots live in machine.c, exec.c, stream.c and files.c.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/docker/docker.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>

#ifndef PACKAGE_VERSION
#define PACKAGE_VERSION "0.0.0"
#endif

#define DOCKER_DEFAULT_HOST     "unix:///var/run/docker.sock"
#define DOCKER_DEFAULT_TEMPLATE "base"
#define DOCKER_BASE_IMAGE       "sandgate/base:1"
#define DOCKER_API_TIMEOUT_S    60u
#define DOCKER_FILE_CAP         (64u * 1024u * 1024u)

/* ---- configuration ------------------------------------------------------------ */

static unsigned long docker_config_uint(const struct sg_host_api *host,
					const char *key, unsigned long def)
{
	const char *v = host->config_get("docker", key);
	unsigned long n;
	char *end;

	if (!v || !*v)
		return def;
	errno = 0;
	n = strtoul(v, &end, 10);
	if (errno || *end || n == 0 || v[0] == '-') {
		/* The core validates "uint" keys; this only guards a bad core. */
		host->log(SG_LOG_WARNING, DOCKER_PLUGIN,
			  "[docker] %s = %s is not a positive number: using %lu", key,
			  v, def);
		return def;
	}
	return n;
}

struct docker_template_find {
	const char *name;
	char *image;
	size_t size;
	bool found;
};

static void docker_template_cb(const char *key, const char *value, void *ud)
{
	struct docker_template_find *f = ud;
	const char *name = key;

	/* Accept the key with or without its "template." prefix. */
	if (strncmp(name, "template.", 9) == 0)
		name += 9;
	if (strcmp(name, f->name) != 0 || !value || !*value)
		return;
	if (strlen(value) < f->size) {
		strcpy(f->image, value);
		f->found = true; /* the last one in file order wins */
	}
}

int docker_template_image(struct docker_ctx *ctx, const char *name, char *image,
			  size_t size)
{
	struct docker_template_find f = { .name = name, .image = image, .size = size };

	ctx->host->config_each("docker", "template.", docker_template_cb, &f);
	if (f.found)
		return 0;
	if (strcmp(name, DOCKER_DEFAULT_TEMPLATE) == 0 &&
	    strlen(DOCKER_BASE_IMAGE) < size) {
		strcpy(image, DOCKER_BASE_IMAGE);
		return 0;
	}
	return -1;
}

/* A reference as the engine names it (its reference.ParseNormalizedNamed):
 * Docker Hub's domain (docker.io, index.docker.io) and a one-name
 * repository's "library/" dropped, ":latest" when there is no tag, a
 * digest as it is: "docker.io/library/python" is "python:latest". */
static void docker_ref_norm(const char *ref, char *out, size_t size)
{
	static const char *const hub[] = { "docker.io/", "index.docker.io/", NULL };
	const char *slash, *last;

	for (int i = 0; hub[i]; i++)
		if (!strncmp(ref, hub[i], strlen(hub[i]))) {
			ref += strlen(hub[i]);
			break;
		}
	if (!strncmp(ref, "library/", 8) && !strchr(ref + 8, '/'))
		ref += 8;
	slash = strrchr(ref, '/');
	last = slash ? slash + 1 : ref;
	snprintf(out, size, "%s%s", ref, strchr(last, ':') || strchr(ref, '@') ? "" : ":latest");
}

struct docker_reserved_find {
	char want[512];
	char what[160];
};

static void docker_reserved_cb(const char *key, const char *value, void *ud)
{
	struct docker_reserved_find *f = ud;
	char have[512];

	if (!value || !*value || f->what[0])
		return;
	docker_ref_norm(value, have, sizeof(have));
	if (strcmp(have, f->want) == 0)
		snprintf(f->what, sizeof(f->what), "the image of [docker] %s", key);
}

int docker_tag_reserved(struct docker_ctx *ctx, const char *ref, struct sg_err *err)
{
	struct docker_reserved_find f = { .what = "" };
	char base[512];

	docker_ref_norm(ref, f.want, sizeof(f.want));
	ctx->host->config_each("docker", "template.", docker_reserved_cb, &f);
	if (!f.what[0] && *ctx->default_image)
		docker_reserved_cb("default_image", ctx->default_image, &f);
	docker_ref_norm(DOCKER_BASE_IMAGE, base, sizeof(base));
	if (!f.what[0] && (strcmp(f.want, base) == 0 || strncmp(f.want, "sandgate/", 9) == 0))
		snprintf(f.what, sizeof(f.what), "in sandgate's own repository (sandgate/)");
	if (!f.what[0])
		return 0;
	return ctx->host->errf(err, SG_E_PERM, "image_tag '%.200s' is %s: new sandboxes and "
			       "machines start from it, so no machine may replace it; choose another "
			       "tag", ref, f.what);
}

/* ---- shared helpers ------------------------------------------------------------- */

struct docker_ctx *docker_ctx_of(const struct sg_machine *m, struct sg_err *err)
{
	const struct docker_machine *dm = m ? m->handle : NULL;

	if (dm && dm->ctx)
		return dm->ctx;
	/* A machine the core made but never created/attached here still
	 * carries our priv (destroy of a listed id). */
	if (m && m->backend_priv && m->id[0])
		return m->backend_priv;
	if (err) {
		/* No host to word it with: fill err by hand. */
		err->code = SG_E_INTERNAL;
		err->sys_errno = 0;
		snprintf(err->msg, sizeof(err->msg), "docker: this machine has no "
			 "docker handle (it was not created or attached by docker.so)");
	}
	return NULL;
}

void docker_first_line(const char *msg, size_t len, char *out, size_t size)
{
	size_t n = 0;

	if (size == 0)
		return;
	while (len > 0 && (*msg == '\n' || *msg == ' ')) {
		msg++;
		len--;
	}
	while (n < len && n + 1 < size && n < 200 && msg[n] != '\n')
		n++;
	memcpy(out, msg, n);
	out[n] = '\0';
}

/* ---- init / fini ---------------------------------------------------------------- */

/* A switch as the docker CLI reads DOCKER_TLS_VERIFY: set and not a "no". */
static bool docker_config_on(const char *v)
{
	static const char *const off[] = { "0", "false", "no", "off" };

	if (!v || !*v)
		return false;
	for (size_t i = 0; i < sizeof(off) / sizeof(off[0]); i++)
		if (!strcasecmp(v, off[i]))
			return false;
	return true;
}

/* Reads the configuration and prepares the engine client; never touches the
 * network (the API version is negotiated on the first call). */
static int docker_init(const struct sg_host_api *host, void **priv,
		       struct sg_err *err)
{
	struct docker_engine_opts opts;
	struct docker_ctx *ctx;
	const char *url;

	ctx = calloc(1, sizeof(*ctx)); /* freed by docker_fini() */
	if (!ctx)
		return host->errf(err, SG_E_NOMEM, "docker: out of memory");
	ctx->host = host;
	docker_killer_init(&ctx->killer);
	ctx->default_template = host->config_get("docker", "default_template");
	if (!ctx->default_template || !*ctx->default_template)
		ctx->default_template = DOCKER_DEFAULT_TEMPLATE;
	ctx->api_timeout_s = (unsigned)docker_config_uint(host, "api_timeout",
							 DOCKER_API_TIMEOUT_S);
	ctx->file_cap = docker_config_uint(host, "file_cap", DOCKER_FILE_CAP);
	docker_runner_setup(ctx);
	if (docker_settings_load(ctx, err) < 0 || docker_limits_load(ctx, err) < 0) {
		docker_runner_teardown(ctx);
		docker_settings_free(ctx);
		docker_killer_stop(ctx);
		free(ctx);
		curl_global_cleanup();
		return -1;
	}
	url = host->config_get("docker", "host");
	opts = (struct docker_engine_opts){
		.url = url ? url : DOCKER_DEFAULT_HOST, .timeout_s = ctx->api_timeout_s,
		.tls_verify = docker_config_on(host->config_get("docker", "tls_verify")),
		.cert_path = host->config_get("docker", "cert_path"),
		.allow_plain_tcp = docker_config_on(host->config_get("docker", "allow_plain_tcp")),
		.ssh_key = host->config_get("docker", "ssh_key"),
		.ssh_known_hosts = host->config_get("docker", "ssh_known_hosts"),
		.ssh_policy = host->config_get("docker", "ssh_host_key_policy"),
	};
	ctx->engine = docker_engine_new(host, &opts, err);
	if (!ctx->engine || docker_pool_start(ctx, err) < 0) {
		docker_engine_free(ctx->engine);
		docker_runner_teardown(ctx);
		docker_settings_free(ctx);
		docker_killer_stop(ctx);
		free(ctx);
		return -1;
	}
	*priv = ctx;
	return 0;
}

/* Usable when the engine answers GET /version in time. */
int docker_probe(void *priv, unsigned timeout_ms, struct sg_probe *out, struct sg_err *err)
{
	struct docker_ctx *ctx = priv;
	json_t *v = NULL;
	int rc;

	out->preference = 40;
	rc = docker_engine_probe(ctx->engine, timeout_ms, &v, err);
	if (rc < 0 && err && strncmp(err->msg, "docker", 6) != 0) {
		/* Say whose answer it is in a list of several backends. */
		char msg[sizeof(err->msg)];

		snprintf(msg, sizeof(msg), "docker: %.*s", (int)sizeof(msg) - 9, err->msg);
		memcpy(err->msg, msg, sizeof(msg));
	}
	out->details = json_pack("{s:s, s:s?, s:s?, s:s}", "endpoint",
				 docker_engine_socket(ctx->engine),
				 "engine_version", json_string_value(json_object_get(v, "Version")),
				 "api_version", json_string_value(json_object_get(v, "ApiVersion")),
				 "default_template", ctx->default_template);
	if (out->details && rc == 0)
		json_object_set_new(out->details, "pool", docker_pool_facts(ctx));
	json_decref(v);
	return rc;
}

static void docker_fini(void *priv)
{
	struct docker_ctx *ctx = priv;

	if (!ctx)
		return;
	docker_pool_stop(ctx); /* uses the engine; its execs may queue kills */
	docker_killer_stop(ctx); /* uses the engine */
	docker_engine_free(ctx->engine);
	docker_runner_teardown(ctx);
	docker_settings_free(ctx);
	free(ctx);
}

/* ---- the descriptor ------------------------------------------------------------- */

static const struct sg_config_key docker_config_keys[] = {
	{ .key = "host", .def = DOCKER_DEFAULT_HOST,
	  .help = "Docker Engine: unix:///path, tcp://HOST:PORT (TLS with tls_verify; "
		  "plain only to loopback unless allow_plain_tcp) or ssh://USER@HOST[:PORT] "
		  "(runs docker system dial-stdio there)",
	  .env = "DOCKER_HOST" },
	{ .key = "tls_verify", .def = "false",
	  .help = "tcp:// engines: TLS, the engine's certificate checked against "
		  "cert_path/ca.pem, cert.pem and key.pem sent when present",
	  .env = "DOCKER_TLS_VERIFY" },
	{ .key = "cert_path",
	  .help = "directory of ca.pem, cert.pem and key.pem (default ~/.docker)",
	  .env = "DOCKER_CERT_PATH" },
	{ .key = "allow_plain_tcp", .def = "false", .accepts = "bool",
	  .help = "allow tcp:// without TLS to a host that is not loopback (anyone on "
		  "the network can then run containers there)" },
	{ .key = "ssh_key",
	  .help = "ssh:// engines: identity file; unset: ssh-agent, then ~/.ssh/id_ed25519, "
		  "id_ecdsa, id_rsa (SANDGATE_SSH_PASSPHRASE for an encrypted one)" },
	{ .key = "ssh_known_hosts", .def = "~/.ssh/known_hosts",
	  .help = "ssh:// engines: the known_hosts file the host key is checked against" },
	{ .key = "ssh_host_key_policy", .def = "strict", .accepts = "strict|accept-new|off",
	  .help = "ssh:// engines: an unknown host key is refused (strict), recorded "
		  "(accept-new) or not checked (off)" },
	{ .key = "default_template", .def = DOCKER_DEFAULT_TEMPLATE,
	  .help = "template used when a call names none" },
	{ .key = "template.*",
	  .help = "template.<name> = <local image>; base = sandgate/base:1 is built "
		  "in (make image builds it); images are never pulled; "
		  "template.<name>.<limit> overrides pids_limit, memory_mb, cpus, "
		  "no_new_privileges, cap_drop or cap_add for that template" },
	{ .key = "pool", .accepts = "uint",
	  .help = "containers of the default template made and started ahead, their "
		  "runner running, so create_sandbox takes one at once (0: none; unset: "
		  "1 in an HTTP server, 0 under stdio); only servers fill a pool" },
	{ .key = "pool.*", .accepts = "uint",
	  .help = "pool.<template> = N: the same for another template (it overrides "
		  "pool for the default template)" },
	{ .key = "api_timeout", .def = "60", .accepts = "uint",
	  .help = "seconds one Docker API call may take" },
	{ .key = "pids_limit", .def = "512", .accepts = "uint",
	  .help = "most processes a container may hold (a fork bomb stops there); 0: no "
		  "limit; template.<name>.pids_limit overrides it for a template" },
	{ .key = "memory_mb", .def = "2048", .accepts = "uint",
	  .help = "memory of a container in MiB, swap included (at least 6); a hog is killed "
		  "by the kernel inside it; 0: no limit" },
	{ .key = "cpus", .def = "2",
	  .help = "CPUs a container may use, such as 2 or 1.5 (at most the host's; on a "
		  "smaller host the default is all of them); 0: no limit" },
	{ .key = "no_new_privileges", .def = "true", .accepts = "bool",
	  .help = "no process in a container gains privileges (setuid, file capabilities)" },
	{ .key = "cap_drop", .def = "NET_RAW,MKNOD,SYS_CHROOT,AUDIT_WRITE,SETFCAP",
	  .help = "capabilities taken from a container's default set, comma separated; "
		  "\"\" keeps them all" },
	{ .key = "cap_add", .def = "",
	  .help = "capabilities added to a container's set, comma separated" },
	{ .key = "file_cap", .def = "67108864", .accepts = "uint",
	  .help = "largest file in bytes that file read/write moves" },
	{ .key = "runner", .def = "true", .accepts = "bool",
	  .help = "run commands through sandgate-runner inside each container "
		  "(about 1 ms a command); false: plain docker exec (about 60 ms)" },
	{ .key = "runner_channel", .def = "auto", .accepts = "auto|true|false",
	  .help = "the runner speaks on a Unix socket bind-mounted read-only into each new "
		  "sandbox instead of through the engine's relay (about 10 times faster); "
		  "auto: when the engine runs on this host and sees sandgate's state "
		  "directory; false: always through the engine" },
	{ .key = "runner_path",
	  .help = "the sandgate-runner binary on this host; default: next to "
		  "docker.so, else the installed libexec/sandgate/sandgate-runner",
	  .env = "SANDGATE_RUNNER" },
	{ .key = "container_name_prefix", .def = "sandgate-",
	  .help = "a named machine's container is called this + its name" },
	{ .key = "default_image",
	  .help = "image of docker_run and machine_create when the call names none; unset: "
		  "the default template's" },
	{ .key = "admin_machine", .def = "admin",
	  .help = "the named machine that also gets work_home (its credential's part) at "
		  "/host instead of /share; \"\" for none" },
	{ .key = "auto_network", .def = "sandgate",
	  .help = "network of the named machines (made on first use, removed with the last "
		  "machine; one per credential when there are several); \"\" for none" },
	{ .key = "restart_policy_name", .def = "on-failure",
	  .accepts = "no|on-failure|always|unless-stopped",
	  .help = "restart policy of named machines" },
	{ .key = "restart_max_retry_count", .def = "3", .accepts = "uint",
	  .help = "restarts on-failure allows" },
	{ .key = "build_timeout", .def = "3600", .accepts = "uint",
	  .help = "seconds docker_build may take" },
	{ .key = "build_context_max", .def = "268435456", .accepts = "uint",
	  .help = "largest build context in bytes docker_build sends" },
	{ .key = NULL }
};

static const struct sg_config_key docker_storage_keys[] = {
	{ .key = "work_home",
	  .help = "absolute host directory of the named machines' workspaces and share "
		  "(default <state dir>/work)" },
	{ .key = "share_subdir", .def = "_share",
	  .help = "directory under work_home mounted read-only at /share (each machine's "
		  "own subdirectory writable); \"\" for none" },
	{ .key = NULL }
};

static const struct sg_config_section docker_config_sections[] = {
	{ .section = "storage", .keys = docker_storage_keys },
	{ .section = NULL }
};

SG_EXPORT const struct sg_backend sg_backend = {
	SG_BACKEND_HEADER,
	.name = "docker",
	.version = PACKAGE_VERSION,
	.summary = "containers on a Docker engine (local, tcp with TLS, or ssh)",
	.help = docker_help_text,
	.config_keys = docker_config_keys,
	.init = docker_init,
	.fini = docker_fini,
	.probe = docker_probe,
	.machine_create = docker_machine_create,
	.machine_attach = docker_machine_attach,
	.machine_destroy = docker_machine_destroy,
	.machine_release = docker_machine_release,
	.machine_list = docker_machine_list,
	/* no expiry group: containers have no backend-side expiry */
	.exec = docker_exec,
	.run_code = docker_run_code,
	.stream_open = docker_stream_open,
	.stream_write = docker_stream_write,
	.stream_read = docker_stream_read,
	.stream_close = docker_stream_close,
	.stream_open_status = docker_stream_open_status,
	.stream_read_ch = docker_stream_read_ch,
	.file_read = docker_file_read,
	.file_write = docker_file_write,
	.file_list = docker_file_list,
	.file_stat = docker_file_stat,
	.file_remove = docker_file_remove,
	.config_sections = docker_config_sections,
	.actions = docker_actions,
	.n_actions = DOCKER_N_ACTIONS,
	.file_read_at = docker_file_read_at,
};
