/*
 * What contains a container: its pids, memory and CPU limits, no new
 * privileges, and a capability set cut down to what package managers and
 * compilers need.  [docker] pids_limit, memory_mb, cpus, no_new_privileges,
 * cap_drop and cap_add give every container's values; template.<name>.<key>
 * overrides one for the sandboxes of that template.  Read and checked once
 * at init, so a bad value ends the start naming its key.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/docker/docker.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define DOCKER_PIDS_DEFAULT   512LL
#define DOCKER_MEMORY_DEFAULT (2048LL << 20)
#define DOCKER_MEMORY_MIN     (6LL << 20)  /* the engine's own minimum */
#define DOCKER_CPUS_DEFAULT   2LL
#define DOCKER_CAP_DROP_DEFAULT "NET_RAW,MKNOD,SYS_CHROOT,AUDIT_WRITE,SETFCAP"

static const char *const docker_limit_keys[] = {
	"pids_limit", "memory_mb", "cpus", "no_new_privileges", "cap_drop", "cap_add", NULL
};

/* ---- parsers: 0, or -1 with why[] filled ---------------------------------------- */

static int lim_uint(const char *v, long long *out)
{
	char *end;

	errno = 0;
	if (!isdigit((unsigned char)v[0]))
		return -1;
	*out = strtoll(v, &end, 10);
	return errno || *end ? -1 : 0;
}

/* MiB, as bytes; at least the engine's minimum. */
static int lim_mib(const char *v, long long *out)
{
	if (lim_uint(v, out) < 0 || *out > (1LL << 40))
		return -1;
	*out <<= 20;
	return *out && *out < DOCKER_MEMORY_MIN ? -1 : 0;
}

/* A decimal number of CPUs with at most 3 places, as nano CPUs. */
static int lim_cpus(const char *v, long long *out)
{
	long long whole = 0, frac = 0, scale = 1000000000LL;
	const char *p = v;

	if (!isdigit((unsigned char)*p))
		return -1;
	for (; isdigit((unsigned char)*p); p++)
		if ((whole = whole * 10 + (*p - '0')) > 4096)
			return -1;
	if (*p == '.') {
		int places = 0;

		for (p++; isdigit((unsigned char)*p); p++, places++) {
			if (places == 3)
				return -1;
			scale /= 10;
			frac += (*p - '0') * scale;
		}
		if (!places)
			return -1;
	}
	if (*p)
		return -1;
	*out = whole * 1000000000LL + frac;
	return 0;
}

static int lim_bool(const char *v, bool *out)
{
	if (!strcmp(v, "true") || !strcmp(v, "1") || !strcmp(v, "yes") || !strcmp(v, "on"))
		*out = true;
	else if (!strcmp(v, "false") || !strcmp(v, "0") || !strcmp(v, "no") || !strcmp(v, "off"))
		*out = false;
	else
		return -1;
	return 0;
}

/* Capability names, comma or space separated, "CAP_" optional: into the
 * engine's spelling (upper case, no prefix), comma separated. */
static int lim_caps(const char *v, char *out, size_t size)
{
	size_t n = 0;

	out[0] = '\0';
	while (*v) {
		size_t len;

		while (*v == ',' || *v == ' ')
			v++;
		if (!*v)
			break;
		if (!strncasecmp(v, "cap_", 4))
			v += 4;
		for (len = 0; v[len] && v[len] != ',' && v[len] != ' '; len++)
			if (!isalnum((unsigned char)v[len]) && v[len] != '_')
				return -1;
		if (!len || n + len + 2 > size)
			return -1;
		if (n)
			out[n++] = ',';
		for (size_t i = 0; i < len; i++)
			out[n++] = (char)toupper((unsigned char)v[i]);
		out[n] = '\0';
		v += len;
	}
	return 0;
}

/* ---- one key ---------------------------------------------------------------------- */

static const char *lim_expect(const char *key)
{
	if (!strcmp(key, "memory_mb"))
		return "a whole number of MiB, at least 6, 0 for no limit";
	if (!strcmp(key, "cpus"))
		return "a number of CPUs such as 2 or 1.5 (at most 3 decimals), 0 for no limit";
	if (!strcmp(key, "no_new_privileges"))
		return "true or false";
	if (!strcmp(key, "pids_limit"))
		return "a whole number of processes, 0 for no limit";
	return "capability names such as NET_RAW,MKNOD, comma separated";
}

/* Sets field `key` of l from v.  0, or -1 with err naming where it came from. */
static int lim_set(struct docker_ctx *ctx, struct docker_limits *l, const char *key,
		   const char *v, const char *where, struct sg_err *err)
{
	int rc;

	if (!strcmp(key, "pids_limit"))
		rc = lim_uint(v, &l->pids);
	else if (!strcmp(key, "memory_mb"))
		rc = lim_mib(v, &l->memory);
	else if (!strcmp(key, "cpus"))
		rc = lim_cpus(v, &l->nano_cpus);
	else if (!strcmp(key, "no_new_privileges"))
		rc = lim_bool(v, &l->no_new_privs);
	else if (!strcmp(key, "cap_drop"))
		rc = lim_caps(v, l->cap_drop, sizeof(l->cap_drop));
	else
		rc = lim_caps(v, l->cap_add, sizeof(l->cap_add));
	if (rc < 0)
		return ctx->host->errf(err, SG_E_INVAL, "[docker] %s = '%.100s' is not valid: "
				       "expected %s", where, v, lim_expect(key));
	return 0;
}

/* ---- the defaults and the templates' overrides ------------------------------------- */

struct lim_walk {
	struct docker_ctx *ctx;
	const char *tmpl;          /* NULL: check every override */
	struct docker_limits *l;   /* where a matching override goes */
	struct sg_err *err;
	int rc;
};

/* template.<name>.<limit key>: the name and the key, or false. */
static bool lim_split(const char *key, char *name, size_t size, const char **limit)
{
	const char *dot;

	if (!strncmp(key, "template.", 9))
		key += 9;
	dot = strrchr(key, '.');
	if (!dot || dot == key || (size_t)(dot - key) >= size)
		return false;
	for (size_t i = 0; docker_limit_keys[i]; i++)
		if (!strcmp(dot + 1, docker_limit_keys[i])) {
			memcpy(name, key, (size_t)(dot - key));
			name[dot - key] = '\0';
			*limit = dot + 1;
			return true;
		}
	return false;
}

static void lim_walk_cb(const char *key, const char *value, void *ud)
{
	struct lim_walk *w = ud;
	struct docker_limits scratch = { 0 };
	const char *limit;
	char name[128], where[200];

	if (w->rc < 0 || !value || !lim_split(key, name, sizeof(name), &limit))
		return;
	if (w->tmpl && strcmp(name, w->tmpl))
		return;
	snprintf(where, sizeof(where), "template.%s.%s", name, limit);
	w->rc = lim_set(w->ctx, w->tmpl ? w->l : &scratch, limit, value, where, w->err);
}

int docker_limits_load(struct docker_ctx *ctx, struct sg_err *err)
{
	struct docker_limits *l = &ctx->limits;
	struct lim_walk w = { .ctx = ctx, .err = err };
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

	l->pids = DOCKER_PIDS_DEFAULT;
	l->memory = DOCKER_MEMORY_DEFAULT;
	/* The engine refuses more CPUs than the host has: a small host gets all. */
	l->nano_cpus = (ncpu > 0 && ncpu < DOCKER_CPUS_DEFAULT ? ncpu : DOCKER_CPUS_DEFAULT) *
		       1000000000LL;
	l->no_new_privs = true;
	snprintf(l->cap_drop, sizeof(l->cap_drop), "%s", DOCKER_CAP_DROP_DEFAULT);
	l->cap_add[0] = '\0';
	for (size_t i = 0; docker_limit_keys[i]; i++) {
		const char *v = ctx->host->config_get("docker", docker_limit_keys[i]);

		if (v && lim_set(ctx, l, docker_limit_keys[i], v, docker_limit_keys[i], err) < 0)
			return -1;
	}
	/* Every template's overrides are checked now, not at its first use. */
	ctx->host->config_each("docker", "template.", lim_walk_cb, &w);
	return w.rc;
}

void docker_limits_for(struct docker_ctx *ctx, const char *tmpl, struct docker_limits *out)
{
	struct sg_err ignore;
	struct lim_walk w = { .ctx = ctx, .tmpl = tmpl, .l = out, .err = &ignore };

	*out = ctx->limits;
	if (tmpl && *tmpl)
		ctx->host->config_each("docker", "template.", lim_walk_cb, &w);
}

/* Removes the comma-separated name cap from list, in place (whole names,
 * case aside). */
static void lim_cap_remove(char *list, const char *cap)
{
	size_t len = strlen(cap);

	for (char *p = list; *p;) {
		size_t n = strcspn(p, ",");

		if (n == len && !strncasecmp(p, cap, len)) {
			memmove(p, p + n + (p[n] ? 1 : 0), strlen(p + n + (p[n] ? 1 : 0)) + 1);
			if (!*p && p > list && p[-1] == ',')
				p[-1] = '\0';
			continue;
		}
		p += n + (p[n] ? 1 : 0);
	}
}

void docker_admin_caps(struct docker_limits *l)
{
	/* SETUID and SETGID too: else its root becomes the directories' owner */
	static const char *const drop[] = { "DAC_OVERRIDE", "FOWNER", "CHOWN", "SETUID", "SETGID",
					    NULL };

	for (int i = 0; drop[i]; i++) {
		size_t n = strlen(l->cap_drop);

		lim_cap_remove(l->cap_add, drop[i]); /* the engine keeps what CapAdd names */
		if (strcasecmp(l->cap_drop, "ALL") && !strcasestr(l->cap_drop, drop[i]))
			snprintf(l->cap_drop + n, sizeof(l->cap_drop) - n, "%s%s", n ? "," : "", drop[i]);
	}
	if (!strcasecmp(l->cap_add, "ALL"))
		l->cap_add[0] = '\0';
}

/* ---- into HostConfig, and back out ---------------------------------------------------- */

static json_t *lim_cap_array(const char *list)
{
	json_t *a = json_array();
	const char *p = list;

	while (a && *p) {
		size_t len = strcspn(p, ",");

		json_array_append_new(a, json_stringn(p, len));
		p += len + (p[len] == ',');
	}
	return a;
}

int docker_limits_apply(const struct docker_limits *l, json_t *hc)
{
	int bad = 0;

	if (l->pids)
		bad |= json_object_set_new(hc, "PidsLimit", json_integer(l->pids));
	if (l->memory) {
		bad |= json_object_set_new(hc, "Memory", json_integer(l->memory));
		/* Swap counts in: a hog meets the limit instead of the host's swap. */
		bad |= json_object_set_new(hc, "MemorySwap", json_integer(l->memory));
	}
	if (l->nano_cpus)
		bad |= json_object_set_new(hc, "NanoCpus", json_integer(l->nano_cpus));
	if (l->no_new_privs)
		bad |= json_object_set_new(hc, "SecurityOpt",
					   json_pack("[s]", "no-new-privileges:true"));
	if (l->cap_drop[0])
		bad |= json_object_set_new(hc, "CapDrop", lim_cap_array(l->cap_drop));
	if (l->cap_add[0])
		bad |= json_object_set_new(hc, "CapAdd", lim_cap_array(l->cap_add));
	return bad ? -1 : 0;
}

static bool lim_has_nnp(const json_t *opts)
{
	size_t i;
	json_t *o;

	json_array_foreach(opts, i, o) {
		const char *s = json_string_value(o);

		if (s && (!strcmp(s, "no-new-privileges") || !strcmp(s, "no-new-privileges:true") ||
			  !strcmp(s, "no-new-privileges=true")))
			return true;
	}
	return false;
}

json_t *docker_limits_facts(const json_t *info)
{
	const json_t *hc = json_object_get(info, "HostConfig");
	json_int_t nano = json_integer_value(json_object_get(hc, "NanoCpus"));
	const json_t *drop = json_object_get(hc, "CapDrop"), *add = json_object_get(hc, "CapAdd");

	/* What the engine holds, not what was asked: an older container keeps
	 * the values it was made with. */
	return json_pack("{s:s, s:I, s:I, s:f, s:b, s:o, s:o}",
			 "isolation", "container",
			 "pids_limit", json_integer_value(json_object_get(hc, "PidsLimit")),
			 "memory_bytes", json_integer_value(json_object_get(hc, "Memory")),
			 "cpus", (double)nano / 1e9,
			 "no_new_privileges", lim_has_nnp(json_object_get(hc, "SecurityOpt")),
			 "cap_drop", json_is_array(drop) ? json_deep_copy(drop) : json_array(),
			 "cap_add", json_is_array(add) ? json_deep_copy(add) : json_array());
}
