/*
 * Looking at machines and images: docker_inspect (a container view, or an
 * image view with kind image; environment variables by name only, never a
 * value), docker_diff (the container's changes against its image) and
 * docker_stats (one sample).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/docker/docker.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *docker_str(const json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

static json_t *docker_str_or_null(const json_t *o, const char *key)
{
	const char *s = docker_str(o, key);

	return s && *s ? json_string(s) : json_null();
}

/* A time, or null for docker's "never" (year 1). */
static json_t *docker_time_or_null(const json_t *o, const char *key)
{
	const char *s = docker_str(o, key);

	return s && *s && strncmp(s, "0001-", 5) ? json_string(s) : json_null();
}

/* The names of "K=V" entries, sorted; values are never read past '='. */
static json_t *docker_env_keys(const json_t *env)
{
	json_t *keys = json_array(), *v;
	const char **names;
	size_t i, n = 0;

	names = calloc(json_array_size(env) + 1, sizeof(*names));
	if (!names)
		return keys;
	json_array_foreach(env, i, v)
		if (json_is_string(v))
			names[n++] = json_string_value(v);
	for (i = 1; i < n; i++)
		for (size_t j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
			const char *t = names[j];

			names[j] = names[j - 1];
			names[j - 1] = t;
		}
	for (i = 0; i < n; i++) {
		const char *eq = strchr(names[i], '=');

		json_array_append_new(keys, json_stringn(names[i], eq ? (size_t)(eq - names[i])
							   : strlen(names[i])));
	}
	free(names);
	return keys;
}

static json_t *docker_view_container(const json_t *info)
{
	const json_t *cfg = json_object_get(info, "Config"), *st = json_object_get(info, "State");
	const json_t *hc = json_object_get(info, "HostConfig"), *m;
	const char *id = docker_str(info, "Id"), *name = docker_str(info, "Name");
	json_t *mounts = json_array(), *health;
	size_t i;

	json_array_foreach(json_object_get(info, "Mounts"), i, m)
		json_array_append_new(mounts, json_pack("{s:s, s:s, s:s, s:s}", "type",
			docker_str(m, "Type") ?: "", "source", docker_str(m, "Source") ?: "",
			"destination", docker_str(m, "Destination") ?: "", "mode",
			json_is_true(json_object_get(m, "RW")) ? "rw" : "ro"));
	health = json_object_get(json_object_get(st, "Health"), "Status") ?
		 json_incref(json_object_get(json_object_get(st, "Health"), "Status")) : json_null();
	return json_pack("{s:s%, s:s, s:s, s:s, s:o, s:o, s:{s:s, s:b, s:I, s:o, s:I, s:b, s:o}, "
			 "s:O, s:O, s:o, s:O, s:o, s:{s:s, s:I}, s:o}",
			 "id", id ? id : "", id ? (strlen(id) < 12 ? strlen(id) : 12) : 0,
			 "name", name && *name == '/' ? name + 1 : name ? name : "",
			 "image", docker_str(cfg, "Image") ?: "",
			 "created", docker_str(info, "Created") ?: "",
			 "started_at", docker_time_or_null(st, "StartedAt"),
			 "finished_at", docker_time_or_null(st, "FinishedAt"),
			 "state", "status", docker_str(st, "Status") ?: "", "running",
			 json_is_true(json_object_get(st, "Running")), "exit_code",
			 json_integer_value(json_object_get(st, "ExitCode")), "error",
			 docker_str_or_null(st, "Error"), "restart_count",
			 json_integer_value(json_object_get(info, "RestartCount")), "oom_killed",
			 json_is_true(json_object_get(st, "OOMKilled")), "health", health,
			 "cmd", json_object_get(cfg, "Cmd") ?: json_null(),
			 "entrypoint", json_object_get(cfg, "Entrypoint") ?: json_null(),
			 "env_keys", docker_env_keys(json_object_get(cfg, "Env")),
			 "labels", json_object_get(cfg, "Labels") ?: json_null(),
			 "mounts", mounts,
			 "restart_policy", "name", docker_str(json_object_get(hc, "RestartPolicy"), "Name") ?: "",
			 "max_retry", json_integer_value(json_object_get(json_object_get(hc, "RestartPolicy"),
									 "MaximumRetryCount")),
			 "working_dir", docker_str_or_null(cfg, "WorkingDir"));
}

static json_t *docker_keys_of(const json_t *o)
{
	json_t *a = json_array();
	const char *k;
	json_t *v;

	json_object_foreach((json_t *)o, k, v)
		json_array_append_new(a, json_string(k));
	return a;
}

static json_t *docker_view_image(const json_t *img)
{
	const json_t *cfg = json_object_get(img, "Config");

	return json_pack("{s:s, s:O, s:s, s:I, s:s, s:s, s:O, s:O, s:o, s:o, s:o, s:O, s:o, s:o}",
			 "id", docker_str(img, "Id") ?: "",
			 "tags", json_object_get(img, "RepoTags") ?: json_null(),
			 "created", docker_str(img, "Created") ?: "",
			 "size_bytes", json_integer_value(json_object_get(img, "Size")),
			 "architecture", docker_str(img, "Architecture") ?: "",
			 "os", docker_str(img, "Os") ?: "",
			 "cmd", json_object_get(cfg, "Cmd") ?: json_null(),
			 "entrypoint", json_object_get(cfg, "Entrypoint") ?: json_null(),
			 "env_keys", docker_env_keys(json_object_get(cfg, "Env")),
			 "exposed_ports", docker_keys_of(json_object_get(cfg, "ExposedPorts")),
			 "volumes", docker_keys_of(json_object_get(cfg, "Volumes")),
			 "labels", json_object_get(cfg, "Labels") ?: json_null(),
			 "working_dir", docker_str_or_null(cfg, "WorkingDir"),
			 "user", docker_str_or_null(cfg, "User"));
}

static int docker_inspect_image(struct docker_ctx *ctx, const char *ref, json_t **result,
				struct sg_err *err)
{
	char path[1024], *e = docker_engine_escape(ref);
	json_t *reply = NULL;
	long status;
	int rc = -1;

	if (!e)
		return ctx->host->errf(err, SG_E_NOMEM, "docker: out of memory");
	snprintf(path, sizeof(path), "/images/%s/json", e);
	free(e);
	if (docker_engine_json(ctx->engine, "GET", path, NULL, &status, &reply, err) < 0)
		return -1;
	if (status == 404)
		ctx->host->errf(err, SG_E_NOTFOUND, "no image %.200s on this docker daemon: "
				"docker_images lists them", ref);
	else if (status != 200)
		docker_engine_fail(ctx->engine, err, SG_E_BACKEND, "docker image inspect", status, reply);
	else if ((*result = docker_view_image(reply)))
		rc = 0;
	json_decref(reply);
	return rc;
}

int docker_act_inspect(void *priv, struct sg_machine *m, const json_t *params, struct sg_call *call,
		       json_t **result, struct sg_err *err)
{
	struct docker_ctx *ctx = priv;
	const char *kind = json_string_value(json_object_get(params, "kind")) ?: "container";
	const char *image = json_string_value(json_object_get(params, "image"));
	const char *machine = json_string_value(json_object_get(params, "machine"));
	json_t *rec, *info = NULL;
	const char *id;
	int rc;

	(void)m;
	if (!strcmp(kind, "image")) {
		if (!image)
			image = machine;
		if (!image || !*image)
			return ctx->host->errf(err, SG_E_INVAL, "docker_inspect kind image needs image: "
					       "an image reference such as sandgate/base:1");
		return docker_inspect_image(ctx, image, result, err);
	}
	if (!machine || !*machine)
		return ctx->host->errf(err, SG_E_INVAL, "docker_inspect needs machine: the machine's "
				       "name (or kind image with image)");
	rec = docker_find_machine(ctx, call, machine, err);
	if (!rec)
		return -1;
	id = json_string_value(json_object_get(rec, "id"));
	rc = docker_container_inspect(ctx, id, &info, err);
	if (rc == 0) {
		*result = docker_view_container(info);
		json_object_set_new(*result, "machine", json_incref(json_object_get(rec, "name")));
		rc = *result ? 0 : ctx->host->errf(err, SG_E_PROTO, "docker inspect of %s: an odd answer", machine);
	}
	json_decref(info);
	json_decref(rec);
	return rc;
}

/* ---- diff ------------------------------------------------------------------------------ */

static int docker_cmp_str(const void *a, const void *b)
{
	return strcmp(json_string_value(*(json_t *const *)a), json_string_value(*(json_t *const *)b));
}

static json_t *docker_sorted(json_t *a)
{
	size_t n = json_array_size(a), i;
	json_t **v = calloc(n + 1, sizeof(*v)), *out = json_array();

	if (!v)
		return a;
	for (i = 0; i < n; i++)
		v[i] = json_array_get(a, i);
	qsort(v, n, sizeof(*v), docker_cmp_str);
	for (i = 0; i < n; i++)
		json_array_append(out, v[i]);
	free(v);
	json_decref(a);
	return out;
}

int docker_act_diff(void *priv, struct sg_machine *m, const json_t *params, struct sg_call *call,
		    json_t **result, struct sg_err *err)
{
	struct docker_ctx *ctx = priv;
	char path[DOCKER_ID_MAX + 32];
	json_t *reply = NULL, *kinds[3], *c;
	long status;
	size_t i;

	(void)params;
	(void)call;
	snprintf(path, sizeof(path), "/containers/%s/changes", m->id);
	if (docker_engine_json(ctx->engine, "GET", path, NULL, &status, &reply, err) < 0)
		return -1;
	if (status != 200) {
		docker_engine_fail(ctx->engine, err, SG_E_BACKEND, "docker diff", status, reply);
		json_decref(reply);
		return -1;
	}
	for (i = 0; i < 3; i++)
		kinds[i] = json_array();
	/* Kind 0: changed, 1: added, 2: deleted. */
	json_array_foreach(reply, i, c) {
		json_int_t k = json_integer_value(json_object_get(c, "Kind"));
		const char *p = docker_str(c, "Path");

		if (p && k >= 0 && k <= 2)
			json_array_append_new(kinds[k], json_string(p));
	}
	json_decref(reply);
	for (i = 0; i < 3; i++)
		kinds[i] = docker_sorted(kinds[i]);
	*result = json_pack("{s:{s:o, s:o, s:o}, s:{s:I, s:I, s:I}}", "changes",
			    "A", json_incref(kinds[1]), "C", json_incref(kinds[0]), "D", json_incref(kinds[2]),
			    "summary", "added", (json_int_t)json_array_size(kinds[1]),
			    "changed", (json_int_t)json_array_size(kinds[0]),
			    "deleted", (json_int_t)json_array_size(kinds[2]));
	for (i = 0; i < 3; i++)
		json_decref(kinds[i]);
	return 0;
}

/* ---- stats ------------------------------------------------------------------------------ */

static json_int_t docker_int_at(const json_t *o, const char *a, const char *b)
{
	return json_integer_value(json_object_get(json_object_get(o, a), b));
}

static double docker_cpu_percent(const json_t *s)
{
	const json_t *cpu = json_object_get(s, "cpu_stats"), *pre = json_object_get(s, "precpu_stats");
	double dc = (double)docker_int_at(cpu, "cpu_usage", "total_usage") -
		    (double)docker_int_at(pre, "cpu_usage", "total_usage");
	double ds = (double)json_integer_value(json_object_get(cpu, "system_cpu_usage")) -
		    (double)json_integer_value(json_object_get(pre, "system_cpu_usage"));
	json_int_t n = json_integer_value(json_object_get(cpu, "online_cpus"));

	if (n <= 0)
		n = (json_int_t)json_array_size(json_object_get(json_object_get(cpu, "cpu_usage"),
								"percpu_usage"));
	if (ds <= 0 || dc < 0)
		return 0;
	return dc / ds * (double)(n > 0 ? n : 1) * 100.0;
}

static void docker_sum_io(const json_t *s, json_int_t *rd, json_int_t *wr)
{
	const json_t *e;
	size_t i;

	*rd = *wr = 0;
	json_array_foreach(json_object_get(json_object_get(s, "blkio_stats"), "io_service_bytes_recursive"), i, e) {
		const char *op = docker_str(e, "op") ?: "";

		if (!strcasecmp(op, "read"))
			*rd += json_integer_value(json_object_get(e, "value"));
		else if (!strcasecmp(op, "write"))
			*wr += json_integer_value(json_object_get(e, "value"));
	}
}

int docker_act_stats(void *priv, struct sg_machine *m, const json_t *params, struct sg_call *call,
		     json_t **result, struct sg_err *err)
{
	struct docker_ctx *ctx = priv;
	char path[DOCKER_ID_MAX + 48];
	json_t *s = NULL, *net;
	json_int_t rx = 0, tx = 0, rd, wr, usage, limit;
	const char *k;
	long status;

	(void)params;
	(void)call;
	/* stream=false: one sample, with the one before it for the CPU delta. */
	snprintf(path, sizeof(path), "/containers/%s/stats?stream=false", m->id);
	if (docker_engine_json(ctx->engine, "GET", path, NULL, &status, &s, err) < 0)
		return -1;
	if (status != 200) {
		docker_engine_fail(ctx->engine, err, SG_E_BACKEND, "docker stats", status, s);
		json_decref(s);
		return -1;
	}
	json_object_foreach(json_object_get(s, "networks"), k, net) {
		rx += json_integer_value(json_object_get(net, "rx_bytes"));
		tx += json_integer_value(json_object_get(net, "tx_bytes"));
	}
	docker_sum_io(s, &rd, &wr);
	usage = docker_int_at(s, "memory_stats", "usage");
	limit = docker_int_at(s, "memory_stats", "limit");
	*result = json_pack("{s:f, s:{s:I, s:I, s:f}, s:{s:I, s:I}, s:{s:I, s:I}, s:I}",
			    "cpu_percent", docker_cpu_percent(s),
			    "memory", "usage_bytes", usage, "limit_bytes", limit, "usage_percent",
			    limit > 0 ? (double)usage / (double)limit * 100.0 : 0.0,
			    "network", "rx_bytes", rx, "tx_bytes", tx,
			    "block_io", "read_bytes", rd, "write_bytes", wr,
			    "pids", docker_int_at(s, "pids_stats", "current"));
	json_decref(s);
	return 0;
}
