/*
 * docker.so's sandbox_env actions: the table the core lists under
 * docker_help (each with its exact parameter schema: the core refuses any
 * other parameter by name) and what the handlers share.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/docker/docker.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MACHINE_P "\"machine\": {\"type\": \"string\", \"description\": \"the machine's name (or id)\"}"
#define OBJ(props, req) "{\"type\": \"object\", \"properties\": {" props "}" req \
	", \"additionalProperties\": false}"
#define REQ(list) ", \"required\": [" list "]"

const char docker_help_text[] =
	"Docker backend.  Sandboxes (create_sandbox, the lazy default) are containers of a "
	"template's local image kept alive by sandgate, with no host mount, gone with their "
	"session.  Named machines (docker_run, or machine_create with backend docker) are "
	"containers called [docker] container_name_prefix + name (sandgate-<name>): they run "
	"their image's own CMD and ENTRYPOINT, survive sandgate's restarts (docker_ps and "
	"docker_run find them again), reach each other by name on a shared network ([docker] "
	"auto_network), and see exactly these host directories: work_home/<name> at "
	"/workspace, the share root read-only at /share with their own /share/<name> "
	"writable, and, for the admin machine ([docker] admin_machine), every workspace at "
	"/host.  No other host path is ever mounted: volume and bind options are refused.  "
	"With several credentials (HTTP tokens) each has its own directories and network, "
	"and sees only its own machines.  Images are never pulled: build them (docker_build, "
	"from a Dockerfile under /workspace) or load them.  Commands run through "
	"sandgate-runner in each container (about 1 ms a command), else plain docker exec; "
	"run_code's python and javascript kernels live in that runner, one per container and "
	"language (none without it).  "
	"Long actions (docker_build, docker_commit) send progress notifications and stop "
	"when the call is cancelled.";

const struct sg_action docker_actions[DOCKER_N_ACTIONS] = {
	{ .name = "docker_run",
	  .summary = "run a named machine from an image (its own CMD/ENTRYPOINT); an existing "
		     "one of that name is re-attached (started if stopped) with a note",
	  .params_schema = OBJ(
		"\"name\": {\"type\": \"string\", \"description\": \"machine name; the container is "
		"[docker] container_name_prefix + name\"},"
		"\"image\": {\"type\": \"string\", \"description\": \"a local image; default [docker] "
		"default_image, else the default template's\"},"
		"\"purpose\": {\"type\": \"string\"},"
		"\"env\": {\"type\": \"object\", \"additionalProperties\": {\"type\": \"string\"}, "
		"\"description\": \"environment of the container (values never shown again)\"},"
		"\"ports\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}, \"description\": "
		"\"host:container[/udp] on 127.0.0.1, ip:host:container, or container (a free "
		"host port)\"},"
		"\"workdir\": {\"type\": \"string\", \"description\": \"the container's working "
		"directory (default /workspace)\"},"
		"\"shell\": {\"type\": \"string\", \"description\": \"the shell for commands and "
		"files in an image without /bin/sh or bash, e.g. /bin/busybox\"},"
		"\"command\": {\"type\": [\"string\", \"array\"], \"items\": {\"type\": \"string\"}, "
		"\"description\": \"instead of the image's CMD: a string (run by the shell) or an "
		"argument vector\"}", REQ("\"name\"")),
	  .example = "{\"name\": \"db\", \"image\": \"postgres:16\", \"env\": {\"POSTGRES_PASSWORD\": \"x\"}}",
	  .handler = docker_act_run },
	{ .name = "docker_ps",
	  .summary = "your named machines on this engine (newest first), from sandgate's record; "
		     "labelled containers it lacks (after a crash) are adopted",
	  .params_schema = OBJ("\"all\": {\"type\": \"boolean\", \"default\": false, "
			       "\"description\": \"stopped ones too\"}", ""),
	  .example = "{\"all\": true}",
	  .handler = docker_act_ps },
	{ .name = "docker_images",
	  .summary = "the engine's images: tag, image_id, created, size_mb (one row per tag)",
	  .params_schema = OBJ("", ""),
	  .example = "{}",
	  .handler = docker_act_images },
	{ .name = "docker_image_history",
	  .summary = "an image's layers: id, created, created_by, size_bytes, tags",
	  .params_schema = OBJ("\"image\": {\"type\": \"string\"}", REQ("\"image\"")),
	  .example = "{\"image\": \"sandgate/base:1\"}",
	  .handler = docker_act_history },
	{ .name = "docker_build",
	  .summary = "build an image from a Dockerfile and context under the machine's "
		     "/workspace; build output as progress; failures say error_kind (bad_path, "
		     "dockerfile_missing, base_image_not_found, build_failed) with the log's end",
	  .params_schema = OBJ(MACHINE_P ","
		"\"image_tag\": {\"type\": \"string\", \"description\": \"repo[:tag]\"},"
		"\"dockerfile\": {\"type\": \"string\", \"default\": \"/workspace/Dockerfile\"},"
		"\"context_dir\": {\"type\": \"string\", \"default\": \"/workspace\"}",
		REQ("\"machine\", \"image_tag\"")),
	  .example = "{\"machine\": \"dev\", \"image_tag\": \"myapp:v1\"}",
	  .needs_machine = true,
	  .handler = docker_act_build },
	{ .name = "docker_commit",
	  .summary = "save a machine's container as an image repo:tag",
	  .params_schema = OBJ(MACHINE_P ","
		"\"image_tag\": {\"type\": \"string\", \"description\": \"repo:tag\"},"
		"\"comment\": {\"type\": \"string\"}", REQ("\"machine\", \"image_tag\"")),
	  .example = "{\"machine\": \"dev\", \"image_tag\": \"dev-snapshot:1\"}",
	  .needs_machine = true,
	  .handler = docker_act_commit },
	{ .name = "docker_stop",
	  .summary = "stop a machine (its shells end); it stays stopped until docker_start",
	  .params_schema = OBJ(MACHINE_P ", \"timeout\": {\"type\": \"integer\", \"minimum\": 0, "
			       "\"maximum\": 600, \"default\": 10}", REQ("\"machine\"")),
	  .example = "{\"machine\": \"db\"}",
	  .needs_machine = true,
	  .handler = docker_act_stop },
	{ .name = "docker_start",
	  .summary = "start a stopped machine; a command that exits at once is reported",
	  .params_schema = OBJ(MACHINE_P, REQ("\"machine\"")),
	  .example = "{\"machine\": \"db\"}",
	  .needs_machine = true,
	  .handler = docker_act_start },
	{ .name = "docker_restart",
	  .summary = "restart a machine (its shells end)",
	  .params_schema = OBJ(MACHINE_P ", \"timeout\": {\"type\": \"integer\", \"minimum\": 0, "
			       "\"maximum\": 600, \"default\": 10}", REQ("\"machine\"")),
	  .example = "{\"machine\": \"db\"}",
	  .needs_machine = true,
	  .handler = docker_act_restart },
	{ .name = "docker_remove",
	  .summary = "remove a machine: its container and anonymous volumes; purge also its "
		     "/share directory (the workspace stays)",
	  .params_schema = OBJ(MACHINE_P ", \"purge\": {\"type\": \"boolean\", \"default\": false}",
			       REQ("\"machine\"")),
	  .example = "{\"machine\": \"db\", \"purge\": true}",
	  .needs_machine = true,
	  .handler = docker_act_remove },
	{ .name = "docker_inspect",
	  .summary = "a machine's container (state, cmd, mounts, labels, restart policy; "
		     "environment keys only, never values), or with kind image an image",
	  .params_schema = OBJ(MACHINE_P " ,"
		"\"kind\": {\"type\": \"string\", \"enum\": [\"container\", \"image\"], \"default\": "
		"\"container\"},"
		"\"image\": {\"type\": \"string\", \"description\": \"kind image: the image "
		"reference (machine is taken as one when this is absent)\"}", ""),
	  .example = "{\"machine\": \"db\"}",
	  .handler = docker_act_inspect },
	{ .name = "docker_logs",
	  .summary = "a machine's output (stdout and stderr in order), also when stopped",
	  .params_schema = OBJ(MACHINE_P ","
		"\"tail\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 10000, \"default\": 200},"
		"\"since\": {\"type\": \"string\", \"description\": \"RFC 3339 or relative (10m, 2h)\"},"
		"\"until\": {\"type\": \"string\", \"description\": \"RFC 3339 or relative\"},"
		"\"timestamps\": {\"type\": \"boolean\", \"default\": false}", REQ("\"machine\"")),
	  .example = "{\"machine\": \"db\", \"tail\": 50}",
	  .needs_machine = true,
	  .handler = docker_act_logs },
	{ .name = "docker_diff",
	  .summary = "files a machine added (A), changed (C) or deleted (D) against its image",
	  .params_schema = OBJ(MACHINE_P, REQ("\"machine\"")),
	  .example = "{\"machine\": \"dev\"}",
	  .needs_machine = true,
	  .handler = docker_act_diff },
	{ .name = "docker_stats",
	  .summary = "one sample of a machine's CPU %, memory, network, block I/O and pids",
	  .params_schema = OBJ(MACHINE_P, REQ("\"machine\"")),
	  .example = "{\"machine\": \"db\"}",
	  .needs_machine = true,
	  .handler = docker_act_stats },
	{ .name = "docker_runner",
	  .summary = "the state of a container's sandgate-runner: active, fallback "
		     "(and why), off; pid, build, restarts",
	  .params_schema = "{\"type\": \"object\", \"properties\": {}}",
	  .example = "{}",
	  .needs_machine = true,
	  .handler = docker_action_runner },
};

_Static_assert(sizeof(docker_actions) / sizeof(docker_actions[0]) == DOCKER_N_ACTIONS,
	       "DOCKER_N_ACTIONS counts the table");

/* ---- shared by the handlers ------------------------------------------------------------ */

json_t *docker_find_machine(struct docker_ctx *ctx, struct sg_call *call, const char *key,
			    struct sg_err *err)
{
	const struct sg_host_api *h = ctx->host;
	json_t *list = SG_HOST_HAS(h, call_machines) ? h->call_machines(call, &sg_backend) : NULL;
	json_t *e, *found = NULL;
	size_t i, n = key ? strlen(key) : 0;

	json_array_foreach(list, i, e) {
		const char *name = json_string_value(json_object_get(e, "name"));
		const char *id = json_string_value(json_object_get(e, "id"));

		if (n && ((name && !strcmp(name, key)) || (id && (!strcmp(id, key) ||
		    (n >= 12 && !strncmp(id, key, n)))))) {
			found = json_incref(e);
			break;
		}
	}
	json_decref(list);
	if (!found)
		h->errf(err, SG_E_NOTFOUND, "machine '%.64s' not found: docker_ps lists yours",
			key ? key : "");
	return found;
}

void docker_note(json_t *r, const char *more)
{
	const char *old = json_string_value(json_object_get(r, "note"));
	char *both = NULL;

	if (!more || !*more)
		return;
	if (old && *old && asprintf(&both, "%s; %s", old, more) >= 0) {
		json_object_set_new(r, "note", json_string(both));
		free(both);
	} else {
		json_object_set_new(r, "note", json_string(more));
	}
}

void docker_iso_time(long long t, char *out, size_t size)
{
	time_t tt = (time_t)t;
	struct tm tm;

	if (gmtime_r(&tt, &tm))
		strftime(out, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
	else
		snprintf(out, size, "%lld", t);
}

/* The length of the valid UTF-8 character at p (n bytes left), 0 if none. */
static size_t docker_utf8_char(const unsigned char *p, size_t n)
{
	size_t len = p[0] < 0x80 ? 1 : (p[0] & 0xE0) == 0xC0 && p[0] >= 0xC2 ? 2 :
		     (p[0] & 0xF0) == 0xE0 ? 3 : (p[0] & 0xF8) == 0xF0 && p[0] <= 0xF4 ? 4 : 0;

	if (!len || len > n)
		return 0;
	for (size_t i = 1; i < len; i++)
		if ((p[i] & 0xC0) != 0x80)
			return 0;
	if (len == 3 && ((p[0] == 0xE0 && p[1] < 0xA0) || (p[0] == 0xED && p[1] >= 0xA0)))
		return 0;
	if (len == 4 && ((p[0] == 0xF0 && p[1] < 0x90) || (p[0] == 0xF4 && p[1] >= 0x90)))
		return 0;
	return len;
}

json_t *docker_json_text(const char *p, size_t n)
{
	const unsigned char *u = (const unsigned char *)(p ? p : "");
	char *clean = malloc(n * 3 + 1);
	size_t o = 0;
	json_t *j;

	if (!clean)
		return NULL;
	for (size_t i = 0; i < n;) {
		size_t len = u[i] ? docker_utf8_char(u + i, n - i) : 0;

		if (len) {
			memcpy(clean + o, u + i, len);
			o += len;
			i += len;
		} else {
			memcpy(clean + o, "\xEF\xBF\xBD", 3); /* U+FFFD, also for NUL */
			o += 3;
			i++;
		}
	}
	j = json_stringn(clean, o);
	free(clean);
	return j;
}
