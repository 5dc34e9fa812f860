/*
 * docker_run's parameters, which are also sandbox_env machine_create's
 * create options on docker: image, purpose, env, ports, workdir, shell,
 * command.  Everything else is refused by name, and whatever would reach
 * the host (a volume, a bind, a device, privileges) with the reason: the
 * only host paths a machine ever sees are the ones mounts.c makes.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/docker/docker.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DOCKER_OPTS_LIST "image, env, ports, workdir, shell, command, purpose"

/* Option names that would give a machine the host: refused with why. */
static const char *const docker_host_reaching[] = {
	"volumes", "volume", "volumes_from", "binds", "bind", "mounts", "mount", "v",
	"tmpfs", "devices", "device", "privileged", "cap_add", "capabilities",
	"security_opt", "network_mode", "network", "pid", "pid_mode", "ipc", "ipc_mode",
	"userns_mode", "host_config", "hostconfig", NULL
};

static bool docker_reaches_host(const char *key)
{
	char low[64];
	size_t i;

	for (i = 0; key[i] && i + 1 < sizeof(low); i++)
		low[i] = (char)tolower((unsigned char)key[i]);
	low[i] = '\0';
	for (i = 0; docker_host_reaching[i]; i++)
		if (!strcmp(low, docker_host_reaching[i]))
			return true;
	return false;
}

static int docker_opt_str(struct docker_ctx *ctx, const json_t *o, const char *what,
			  const char *key, const char **out, struct sg_err *err)
{
	const json_t *v = json_object_get(o, key);

	*out = NULL;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_string(v))
		return ctx->host->errf(err, SG_E_INVAL, "%s: '%s' must be a string", what, key);
	*out = json_string_value(v);
	return 0;
}

/* No control characters, no blanks, not empty, not an option ("-x"). */
static bool docker_word_ok(const char *s, size_t max)
{
	size_t n = strlen(s);

	if (!n || n > max || s[0] == '-')
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] <= ' ' || s[i] == 0x7f)
			return false;
	return true;
}

static bool docker_env_name_ok(const char *k)
{
	if (!*k || !(isalpha((unsigned char)*k) || *k == '_'))
		return false;
	for (; *k; k++)
		if (!isalnum((unsigned char)*k) && *k != '_')
			return false;
	return true;
}

static int docker_opt_env(struct docker_ctx *ctx, const json_t *v, const char *what,
			  struct docker_opts *o, struct sg_err *err)
{
	const char *k;
	json_t *x;

	if (!json_is_object(v))
		return ctx->host->errf(err, SG_E_INVAL, "%s: 'env' must be an object of string "
				       "values, e.g. {\"DEBUG\": \"1\"}", what);
	o->env = json_array();
	json_object_foreach((json_t *)v, k, x) {
		char *kv;

		if (!docker_env_name_ok(k))
			return ctx->host->errf(err, SG_E_INVAL, "%s: env name '%.64s' is not valid: "
					       "letters, digits and '_', not starting with a digit",
					       what, k);
		/* The value is never echoed: it may be a secret. */
		if (!json_is_string(x))
			return ctx->host->errf(err, SG_E_INVAL, "%s: the value of env %s must be a "
					       "string", what, k);
		if (asprintf(&kv, "%s=%s", k, json_string_value(x)) < 0)
			return ctx->host->errf(err, SG_E_NOMEM, "docker: out of memory");
		json_array_append_new(o->env, json_string(kv));
		free(kv);
	}
	return 0;
}

static bool docker_digits(const char *s, size_t n, unsigned long max)
{
	unsigned long v = 0;

	if (!n || n > 5)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (!isdigit((unsigned char)s[i]))
			return false;
		v = v * 10 + (unsigned long)(s[i] - '0');
	}
	return v >= 1 && v <= max;
}

/* "container", "host:container" or "ip:host:container", each with an
 * optional "/tcp", "/udp" or "/sctp".  A binding without ip listens on the
 * loopback only; "container" alone gets a free host port. */
static int docker_opt_port(struct docker_ctx *ctx, const char *spec, const char *what,
			   struct docker_opts *o, struct sg_err *err)
{
	char buf[96], key[32], *parts[3], *proto, *c;
	int n = 0;
	json_t *b;

	if (strlen(spec) >= sizeof(buf))
		goto bad;
	snprintf(buf, sizeof(buf), "%s", spec);
	proto = strchr(buf, '/');
	if (proto) {
		*proto++ = '\0';
		if (strcmp(proto, "tcp") && strcmp(proto, "udp") && strcmp(proto, "sctp"))
			goto bad;
	}
	/* From the right: container, host, ip. */
	while ((c = strrchr(buf, ':')) && n < 2) {
		*c = '\0';
		parts[n++] = c + 1;
	}
	if (strchr(buf, ':'))
		goto bad;
	parts[n++] = buf;
	if (!docker_digits(parts[0], strlen(parts[0]), 65535) ||
	    (n > 1 && !docker_digits(parts[1], strlen(parts[1]), 65535)) ||
	    (n > 2 && (!*parts[2] || strspn(parts[2], "0123456789.") != strlen(parts[2]))))
		goto bad;
	snprintf(key, sizeof(key), "%s/%s", parts[0], proto ? proto : "tcp");
	if (!o->exposed)
		o->exposed = json_object();
	if (!o->bindings)
		o->bindings = json_object();
	json_object_set_new(o->exposed, key, json_object());
	b = json_object_get(o->bindings, key);
	if (!b) {
		b = json_array();
		json_object_set_new(o->bindings, key, b);
	}
	json_array_append_new(b, json_pack("{s:s, s:s}", "HostIp", n > 2 ? parts[2] : "127.0.0.1",
					   "HostPort", n > 1 ? parts[1] : ""));
	return 0;
bad:
	return ctx->host->errf(err, SG_E_INVAL, "%s: port '%.64s' is not valid: use \"8080:80\" "
			       "(host:container, on 127.0.0.1), \"0.0.0.0:8080:80\", \"80\" (a "
			       "free host port) or any of them with /udp", what, spec);
}

static int docker_opt_ports(struct docker_ctx *ctx, const json_t *v, const char *what,
			    struct docker_opts *o, struct sg_err *err)
{
	const json_t *x;
	size_t i;

	if (!json_is_array(v))
		return ctx->host->errf(err, SG_E_INVAL, "%s: 'ports' must be an array of strings "
				       "such as [\"8080:80\"]", what);
	json_array_foreach(v, i, x) {
		if (!json_is_string(x))
			return ctx->host->errf(err, SG_E_INVAL, "%s: ports[%zu] must be a string "
					       "such as \"8080:80\"", what, i);
		if (docker_opt_port(ctx, json_string_value(x), what, o, err) < 0)
			return -1;
	}
	return 0;
}

/* A string runs in the machine's shell; an array is the Cmd itself. */
static int docker_opt_command(struct docker_ctx *ctx, const json_t *v, const char *what,
			      struct docker_opts *o, struct sg_err *err)
{
	const json_t *x;
	size_t i;

	if (json_is_string(v)) {
		o->cmd = json_pack("[s, s, s]", o->shell ? o->shell : "/bin/sh", "-c",
				   json_string_value(v));
		return o->cmd ? 0 : ctx->host->errf(err, SG_E_NOMEM, "docker: out of memory");
	}
	if (!json_is_array(v) || !json_array_size(v))
		return ctx->host->errf(err, SG_E_INVAL, "%s: 'command' must be a string (run by "
				       "the shell) or a non-empty array of strings", what);
	json_array_foreach(v, i, x)
		if (!json_is_string(x))
			return ctx->host->errf(err, SG_E_INVAL, "%s: command[%zu] must be a "
					       "string", what, i);
	o->cmd = json_deep_copy(v);
	return 0;
}

static int docker_opts_check_names(struct docker_ctx *ctx, const json_t *o, const char *what,
				   struct sg_err *err)
{
	static const char *const known[] = { "image", "env", "ports", "workdir", "shell",
					     "command", "purpose", NULL };
	const char *k;
	json_t *v;

	json_object_foreach((json_t *)o, k, v) {
		bool ok = false;

		for (size_t i = 0; known[i]; i++)
			ok |= !strcmp(k, known[i]);
		if (ok)
			continue;
		if (docker_reaches_host(k))
			return ctx->host->errf(err, SG_E_INVAL, "%s: '%.64s' is refused: sandgate "
					       "mounts no host path into a machine but its "
					       "workspace (/workspace), the share (/share) and, for "
					       "the admin machine, /host, and takes no option that "
					       "reaches the host", what, k);
		return ctx->host->errf(err, SG_E_INVAL, "%s has no parameter '%.64s': it takes "
				       DOCKER_OPTS_LIST, what, k);
	}
	return 0;
}

int docker_opts_parse(struct docker_ctx *ctx, const json_t *o, const char *what,
		      struct docker_opts *out, struct sg_err *err)
{
	const json_t *v;

	memset(out, 0, sizeof(*out));
	if (!o)
		return 0;
	if (!json_is_object(o))
		return ctx->host->errf(err, SG_E_INVAL, "%s: the options must be an object", what);
	if (docker_opts_check_names(ctx, o, what, err) < 0 ||
	    docker_opt_str(ctx, o, what, "image", &out->image, err) < 0 ||
	    docker_opt_str(ctx, o, what, "purpose", &out->purpose, err) < 0 ||
	    docker_opt_str(ctx, o, what, "workdir", &out->workdir, err) < 0 ||
	    docker_opt_str(ctx, o, what, "shell", &out->shell, err) < 0)
		goto fail;
	if (out->image && !docker_word_ok(out->image, 255)) {
		ctx->host->errf(err, SG_E_INVAL, "%s: image '%.64s' is not an image reference "
				"(name[:tag] or an id)", what, out->image);
		goto fail;
	}
	if (out->workdir && (out->workdir[0] != '/' || !docker_word_ok(out->workdir, 1024))) {
		ctx->host->errf(err, SG_E_INVAL, "%s: workdir '%.64s' must be an absolute path in "
				"the machine", what, out->workdir);
		goto fail;
	}
	if (out->shell && !docker_word_ok(out->shell, 127)) {
		ctx->host->errf(err, SG_E_INVAL, "%s: shell '%.64s' must be a program such as "
				"/bin/ash (no blanks)", what, out->shell);
		goto fail;
	}
	if ((v = json_object_get(o, "env")) && !json_is_null(v) &&
	    docker_opt_env(ctx, v, what, out, err) < 0)
		goto fail;
	if ((v = json_object_get(o, "ports")) && !json_is_null(v) &&
	    docker_opt_ports(ctx, v, what, out, err) < 0)
		goto fail;
	if ((v = json_object_get(o, "command")) && !json_is_null(v) &&
	    docker_opt_command(ctx, v, what, out, err) < 0)
		goto fail;
	return 0;
fail:
	docker_opts_free(out);
	return -1;
}

void docker_opts_free(struct docker_opts *o)
{
	json_decref(o->env);
	json_decref(o->cmd);
	json_decref(o->exposed);
	json_decref(o->bindings);
	memset(o, 0, sizeof(*o));
}
