#include "config.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/base/conf.h"
#include "core/base/err.h"
#include "core/registry/hostapi.h"
#include "core/base/log.h"
#include "core/registry/plugin.h"
#include "core/base/util.h"

#ifndef PLUGINDIR
#define PLUGINDIR "/usr/local/lib/sandgate"
#endif

static struct sg_plugin *plugins, *plugins_tail;

struct sg_plugin *sg_plugin_find(const char *name)
{
	for (struct sg_plugin *p = plugins; p; p = p->next)
		if (strcmp(p->b->name, name) == 0)
			return p;
	return NULL;
}

struct sg_plugin *sg_plugin_first(void)
{
	return plugins;
}

char *sg_plugin_names(void)
{
	struct sg_buf b = { 0 };

	for (struct sg_plugin *p = plugins; p; p = p->next) {
		if (b.len)
			sg_buf_append(&b, ", ", 2);
		sg_buf_append(&b, p->b->name, strlen(p->b->name));
	}
	return b.len ? b.data : sg_xstrdup("(none)");
}

/* ---- the file ------------------------------------------------------------------ */

/* Loading code is a trust decision: a regular file (or a symlink to one)
 * that only root or we own and nobody else can rewrite, in a directory
 * nobody else can change (so the file cannot be swapped between the check
 * and the load).  `real` is the resolved path that is then loaded. */
static int check_owned(const struct stat *st, const char *name, const char *what,
		       const char *path, const char *link, struct sg_err *err)
{
	const char *a = link ? " (the target of '" : "", *b = link ? link : "", *c = link ? "')" : "";

	if (st->st_uid != 0 && st->st_uid != geteuid())
		return sg_errf(err, SG_E_PERM,
			       "plugin '%s': %s '%s'%s%s%s belongs to uid %ld, neither root nor this user: chown it or take it off the plugin path",
			       name, what, path, a, b, c, (long)st->st_uid);
	if (st->st_mode & (S_IWGRP | S_IWOTH))
		return sg_errf(err, SG_E_PERM,
			       "plugin '%s': %s '%s'%s%s%s is writable by group or others: run chmod go-w on it",
			       name, what, path, a, b, c);
	return 0;
}

/* The file and every directory above it, up to /: as sshd's StrictModes,
 * a directory others may write (and that is not sticky) would let them
 * swap the file between this check and the load. */
static int check_file(const char *path, const char *real, const char *name, struct sg_err *err)
{
	const char *link = strcmp(path, real) ? path : NULL;
	char *dir = sg_xstrdup(real), *slash;
	struct stat st;
	int ret = 0;

	if (stat(real, &st) < 0 || !S_ISREG(st.st_mode))
		ret = sg_errf(err, SG_E_PERM, "plugin '%s': '%s' is not a regular file%s%s%s", name, path,
			      link ? " (a link to '" : "", link ? real : "", link ? "')" : "");
	else
		ret = check_owned(&st, name, "file", real, link, err);
	while (ret == 0 && (slash = strrchr(dir, '/')) != NULL) {
		slash[slash == dir] = '\0'; /* "/x" leaves "/" */
		if (stat(dir, &st) == 0 && !(st.st_mode & S_ISVTX))
			ret = check_owned(&st, name, "directory", dir, NULL, err);
		if (!strcmp(dir, "/"))
			break;
	}
	free(dir);
	return ret;
}

/* ---- the descriptor ------------------------------------------------------------- */

#define SLOT(f) { #f, offsetof(struct sg_backend, f) }

struct slot {
	const char *name;
	size_t off;
};

struct group {
	const char *name;
	bool required;
	const char *needs; /* a group that must be there too, or NULL */
	struct slot slots[6];
};

/* The slot groups of plugin.h, in its order. */
static const struct group groups[] = {
	{ "probe", true, NULL, { SLOT(probe) } },
	{ "lifecycle", true, NULL,
	  { SLOT(machine_create), SLOT(machine_attach), SLOT(machine_destroy), SLOT(machine_release),
	    SLOT(machine_list) } },
	{ "expiry", false, NULL, { SLOT(machine_keepalive) } },
	{ "exec", true, NULL, { SLOT(exec) } },
	{ "code", false, NULL, { SLOT(run_code) } },
	{ "stream", false, NULL,
	  { SLOT(stream_open), SLOT(stream_write), SLOT(stream_read), SLOT(stream_close) } },
	{ "status", false, "stream", { SLOT(stream_open_status), SLOT(stream_read_ch) } },
	{ "files", true, NULL,
	  { SLOT(file_read), SLOT(file_write), SLOT(file_list), SLOT(file_stat), SLOT(file_remove) } },
	{ "range", false, "files", { SLOT(file_read_at) } },
};

static bool slot_set(const struct sg_backend *b, size_t off)
{
	void (*fp)(void);

	/* A slot appended after the plugin was built is not there. */
	if (off + sizeof(fp) > b->size)
		return false;
	memcpy(&fp, (const char *)b + off, sizeof(fp));
	return fp != NULL;
}

static const struct group *group_named(const char *name)
{
	for (size_t i = 0; i < sizeof(groups) / sizeof(groups[0]); i++)
		if (!strcmp(groups[i].name, name))
			return &groups[i];
	return NULL;
}

/* How many slots of g b fills; *missing names the first empty one. */
static int group_count(const struct sg_backend *b, const struct group *g, const char **missing,
		       int *total)
{
	int set = 0;

	*missing = NULL;
	*total = 0;
	for (const struct slot *s = g->slots; s < g->slots + 6 && s->name; s++, (*total)++) {
		if (slot_set(b, s->off))
			set++;
		else if (!*missing)
			*missing = s->name;
	}
	return set;
}

static int check_groups(const struct sg_backend *b, const char *name, struct sg_err *err)
{
	for (size_t i = 0; i < sizeof(groups) / sizeof(groups[0]); i++) {
		const struct group *g = &groups[i];
		const char *missing, *m2;
		int total, t2, set = group_count(b, g, &missing, &total);

		if (set == 0 && !g->required)
			continue;
		if (set < total)
			return sg_errf(err, SG_E_PROTO,
				       "plugin '%s': slot '%s' of the %s group is missing: a group is complete or absent (%s)",
				       name, missing, g->name,
				       g->required ? "and this one is required" : "see plugin.h");
		if (g->needs && group_count(b, group_named(g->needs), &m2, &t2) < t2)
			return sg_errf(err, SG_E_PROTO,
				       "plugin '%s': the %s group needs the %s group: slot '%s' is missing",
				       name, g->name, g->needs, m2);
	}
	if ((b->actions == NULL) != (b->n_actions == 0))
		return sg_errf(err, SG_E_PROTO,
			       "plugin '%s': actions and n_actions disagree (%s with %zu): set both or neither",
			       name, b->actions ? "a table" : "no table", b->n_actions);
	for (size_t i = 0; i < b->n_actions; i++) {
		const struct sg_action *a = &b->actions[i];
		json_t *schema;

		if (!a->name || !*a->name || !a->summary || !a->params_schema || !a->handler)
			return sg_errf(err, SG_E_PROTO,
				       "plugin '%s': action %zu ('%s') lacks its %s", name, i,
				       a->name ? a->name : "",
				       !a->name || !*a->name ? "name" : !a->summary ? "summary"
				       : !a->params_schema ? "params_schema" : "handler");
		schema = json_loads(a->params_schema, 0, NULL);
		if (!json_is_object(schema)) {
			json_decref(schema);
			return sg_errf(err, SG_E_PROTO,
				       "plugin '%s': action '%s': params_schema is not a JSON object", name,
				       a->name);
		}
		json_decref(schema);
		for (struct sg_plugin *p = plugins; p; p = p->next)
			for (size_t k = 0; k < p->b->n_actions; k++)
				if (!strcmp(p->b->actions[k].name, a->name))
					return sg_errf(err, SG_E_EXISTS,
						       "plugin '%s': action '%s' is already offered by plugin '%s'",
						       name, a->name, p->b->name);
	}
	return 0;
}

static int check_descriptor(const struct sg_backend *b, const char *name,
			    struct sg_err *err)
{
	if (b->magic != SG_PLUGIN_MAGIC)
		return sg_errf(err, SG_E_PROTO,
			       "plugin '%s': bad magic 0x%08x (expected 0x%08x): not a sandgate plugin",
			       name, b->magic, SG_PLUGIN_MAGIC);
	if (b->abi_major != SG_PLUGIN_ABI_MAJOR)
		return sg_errf(err, SG_E_PROTO,
			       "plugin '%s': ABI %u.%u, sandgate supports %u.x: rebuild the plugin against this sandgate",
			       name, b->abi_major, b->abi_minor, SG_PLUGIN_ABI_MAJOR);
	if (b->abi_minor > SG_PLUGIN_ABI_MINOR)
		return sg_errf(err, SG_E_PROTO,
			       "plugin '%s': ABI %u.%u is newer than sandgate's %u.%u: upgrade sandgate",
			       name, b->abi_major, b->abi_minor, SG_PLUGIN_ABI_MAJOR,
			       SG_PLUGIN_ABI_MINOR);
	if (b->size < SG_BACKEND_SIZE_2_0)
		return sg_errf(err, SG_E_PROTO,
			       "plugin '%s': descriptor is %u bytes, smaller than the ABI 2.0 layout (%zu)",
			       name, b->size, (size_t)SG_BACKEND_SIZE_2_0);
	if (!b->name || strcmp(b->name, name) != 0)
		return sg_errf(err, SG_E_PROTO,
			       "plugin '%s': descriptor names itself '%s': the name must equal the file stem",
			       name, b->name ? b->name : "(null)");
	if (!b->init || !b->fini)
		return sg_errf(err, SG_E_PROTO, "plugin '%s': required slot '%s' is missing", name,
			       b->init ? "fini" : "init");
	if (check_groups(b, name, err) < 0)
		return -1;
	if (sg_plugin_find(name))
		return sg_errf(err, SG_E_EXISTS, "plugin '%s': a plugin of that name is already loaded",
			       name);
	return 0;
}

static bool valid_name(const char *name)
{
	if (!*name || strlen(name) > 32)
		return false;
	for (const char *c = name; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_'))
			return false;
	return true;
}

struct sg_plugin *sg_plugin_load(const char *dir, const char *name, struct sg_err *err)
{
	char *path = NULL, *real = NULL;
	void *dl = NULL;
	const struct sg_backend *b;
	struct sg_plugin *p = NULL;
	void *priv = NULL;

	if (!valid_name(name)) {
		sg_errf(err, SG_E_INVAL,
			"plugin name '%s' is not valid: use 1 to 32 lower-case letters, digits and '_'",
			name);
		return NULL;
	}
	path = sg_xasprintf("%s/%s.so", dir, name);
	real = realpath(path, NULL);
	if (!real) {
		sg_errf(err, errno == ENOENT ? SG_E_NOTFOUND : SG_E_IO,
			"plugin '%s': cannot find '%s': %s (set [plugin] path or SANDGATE_PLUGIN_PATH)",
			name, path, strerror(errno));
		goto fail;
	}
	if (check_file(path, real, name, err) < 0)
		goto fail;
	dl = dlopen(real, RTLD_NOW | RTLD_LOCAL);
	if (!dl) {
		sg_errf(err, SG_E_IO, "plugin '%s': dlopen failed: %s (check its libraries with ldd '%s')",
			name, dlerror(), real);
		goto fail;
	}
	b = dlsym(dl, "sg_backend");
	if (!b) {
		sg_errf(err, SG_E_PROTO, "plugin '%s': no 'sg_backend' symbol in '%s'", name, path);
		goto fail;
	}
	if (check_descriptor(b, name, err) < 0)
		goto fail;
	if (b->config_keys)
		sg_config_register(b->name, b->config_keys);
	for (const struct sg_config_section *cs = b->config_sections; cs && cs->section; cs++)
		sg_config_register(cs->section, cs->keys);
	if (b->init(sg_host_api_get(), &priv, err) < 0) {
		char prefix[96];

		snprintf(prefix, sizeof(prefix), "plugin '%s': init failed: ", name);
		sg_err_prefix(err, prefix);
		/* Its config keys are registered and point into the object, so it
		 * stays mapped: a failed plugin costs its mapping, not a crash. */
		dl = NULL;
		goto fail;
	}
	p = sg_xcalloc(1, sizeof(*p));
	p->b = b;
	p->priv = priv;
	p->dl = dl;
	p->path = path;
	/* Load order is kept: it is the order of help topics and reports. */
	if (plugins_tail)
		plugins_tail->next = p;
	else
		plugins = p;
	plugins_tail = p;
	SG_DEBUG("loaded plugin '%s' %s (ABI %u.%u) from %s%s%s", name, b->version ? b->version : "",
		 b->abi_major, b->abi_minor, path, strcmp(path, real) ? " -> " : "",
		 strcmp(path, real) ? real : "");
	free(real);
	return p;
fail:
	if (dl)
		dlclose(dl);
	free(real);
	free(path);
	return NULL;
}

/* ---- the path ------------------------------------------------------------------- */

static void path_add(char ***v, size_t *n, const char *dir, size_t len)
{
	char *d;

	if (!len)
		return;
	d = strndup(dir, len);
	if (!d)
		abort();
	for (size_t i = 0; i < *n; i++) {
		if (!strcmp((*v)[i], d)) {
			free(d);
			return;
		}
	}
	*v = sg_xrealloc(*v, (*n + 2) * sizeof(**v));
	(*v)[(*n)++] = d;
	(*v)[*n] = NULL;
}

char **sg_plugin_path(void)
{
	const char *dir = sg_config_get("plugin", "dir");
	const char *path = sg_config_get("plugin", "path");
	char **v = sg_xcalloc(1, sizeof(*v));
	size_t n = 0;

	if (dir)
		path_add(&v, &n, dir, strlen(dir));
	for (const char *p = path; p && *p;) {
		size_t len = strcspn(p, ":");

		path_add(&v, &n, p, len);
		p += len;
		p += *p == ':';
	}
	path_add(&v, &n, PLUGINDIR, strlen(PLUGINDIR));
	return v;
}

/* The first directory of the path that has NAME.so, or NULL.  Later ones
 * that have it too are logged: a name found twice loads from the first. */
static const char *find_in_path(char *const *path, const char *name)
{
	const char *found = NULL;

	for (char *const *d = path; *d; d++) {
		char *f = sg_xasprintf("%s/%s.so", *d, name);
		bool there = access(f, F_OK) == 0;

		free(f);
		if (!there)
			continue;
		if (!found)
			found = *d;
		else
			SG_INFO("plugin '%s' is in %s and in %s: loading the one in %s", name, found, *d,
				found);
	}
	return found;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The plugin names of one directory (NAME.so with a valid NAME), sorted. */
static size_t names_in(const char *dir, char ***out)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	size_t n = 0;

	*out = NULL;
	if (!d)
		return 0;
	while ((de = readdir(d))) {
		size_t len = strlen(de->d_name);
		char *stem;

		if (len < 4 || strcmp(de->d_name + len - 3, ".so"))
			continue;
		stem = strndup(de->d_name, len - 3);
		if (!stem)
			abort();
		if (!valid_name(stem)) {
			free(stem);
			continue;
		}
		*out = sg_xrealloc(*out, (n + 1) * sizeof(**out));
		(*out)[n++] = stem;
	}
	closedir(d);
	if (n)
		qsort(*out, n, sizeof(**out), cmp_str);
	return n;
}

static int load_named(char *const *path, const char *names, struct sg_err *err)
{
	char *copy = sg_xstrdup(names), *save = NULL, *tok;
	int ret = 0;

	for (tok = strtok_r(copy, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
		const char *dir = find_in_path(path, tok);

		if (!dir) {
			char *all = NULL;

			for (char *const *d = path; *d; d++) {
				char *prev = all;

				all = prev ? sg_xasprintf("%s:%s", prev, *d) : sg_xstrdup(*d);
				free(prev);
			}
			sg_errf(err, SG_E_NOTFOUND,
				"plugin '%s' ([plugin] load) is not on the plugin path %s: build or install it, or add its directory to [plugin] path",
				tok, all);
			free(all);
			ret = -1;
			break;
		}
		if (!sg_plugin_load(dir, tok, err)) {
			ret = -1;
			break;
		}
	}
	free(copy);
	return ret;
}

/* Every name of the path, each from the first directory that has it (a
 * copy there that fails the checks is skipped, not replaced by a later
 * one: the path's order is the operator's choice). */
static int load_found(char *const *path)
{
	char **tried = NULL;
	size_t n_tried = 0;

	for (char *const *d = path; *d; d++) {
		char **names;
		size_t n = names_in(*d, &names);

		for (size_t i = 0; i < n; i++) {
			const char *first = NULL;
			struct sg_err err;

			for (size_t k = 0; k < n_tried && !first; k++)
				if (!strcmp(tried[k] + strlen(tried[k]) + 1, names[i]))
					first = tried[k];
			if (first) {
				SG_INFO("plugin '%s' is in %s too: the one in %s counts", names[i], *d, first);
				free(names[i]);
				continue;
			}
			tried = sg_xrealloc(tried, (n_tried + 1) * sizeof(*tried));
			/* "dir\0name": the directory for the message, the name to match */
			tried[n_tried] = sg_xmalloc(strlen(*d) + strlen(names[i]) + 2);
			strcpy(tried[n_tried], *d);
			strcpy(tried[n_tried] + strlen(*d) + 1, names[i]);
			n_tried++;
			if (!sg_plugin_load(*d, names[i], &err))
				SG_WARN("skipping %s/%s.so: %s", *d, names[i], err.msg);
			free(names[i]);
		}
		free(names);
	}
	for (size_t k = 0; k < n_tried; k++)
		free(tried[k]);
	free(tried);
	return 0;
}

int sg_plugin_load_configured(struct sg_err *err)
{
	const char *names = sg_config_get("plugin", "load");
	char **path = sg_plugin_path();
	int ret;

	ret = names && *names ? load_named(path, names, err) : load_found(path);
	sg_strv_free(path);
	return ret;
}

/* ---- probes and the default ------------------------------------------------------ */

struct probe_job {
	struct sg_plugin *p;
	unsigned timeout_ms;
	int rc;
	struct sg_probe out;
	struct sg_err err;
	pthread_t th;
	bool started;
};

static void *probe_main(void *arg)
{
	struct probe_job *j = arg;

	sg_err_clear(&j->err);
	j->rc = j->p->b->probe(j->p->priv, j->timeout_ms, &j->out, &j->err);
	if (j->rc < 0 && j->err.code == SG_E_OK)
		sg_errf(&j->err, SG_E_UNAVAILABLE, "%s: not usable (the plugin gave no reason)",
			j->p->b->name);
	return NULL;
}

/* Probes every plugin at once.  Returns the jobs (free with free() after
 * json_decref of each out.details) and their count. */
static struct probe_job *probe_run(unsigned timeout_ms, size_t *count)
{
	size_t n = 0, i = 0;
	struct probe_job *jobs;

	for (struct sg_plugin *p = plugins; p; p = p->next)
		n++;
	jobs = sg_xcalloc(n ? n : 1, sizeof(*jobs));
	for (struct sg_plugin *p = plugins; p; p = p->next, i++) {
		jobs[i].p = p;
		jobs[i].timeout_ms = timeout_ms;
		jobs[i].started = pthread_create(&jobs[i].th, NULL, probe_main, &jobs[i]) == 0;
		if (!jobs[i].started)
			probe_main(&jobs[i]);
	}
	for (i = 0; i < n; i++)
		if (jobs[i].started)
			pthread_join(jobs[i].th, NULL);
	*count = n;
	return jobs;
}

static json_t *job_json(const struct probe_job *j)
{
	char abi[32];
	json_t *o;

	snprintf(abi, sizeof(abi), "%u.%u", j->p->b->abi_major, j->p->b->abi_minor);
	o = json_pack("{s:s, s:s, s:s, s:s, s:b, s:i}", "backend", j->p->b->name, "version",
		      j->p->b->version ? j->p->b->version : "", "abi", abi, "path", j->p->path,
		      "usable", j->rc == 0, "preference", j->out.preference);
	if (j->rc < 0)
		json_object_set_new(o, "why", json_string(j->err.msg));
	if (j->out.details)
		json_object_set(o, "details", j->out.details);
	return o;
}

json_t *sg_plugin_probe_all(unsigned timeout_ms)
{
	size_t n;
	struct probe_job *jobs = probe_run(timeout_ms, &n);
	json_t *arr = json_array();

	for (size_t i = 0; i < n; i++) {
		json_array_append_new(arr, job_json(&jobs[i]));
		json_decref(jobs[i].out.details);
	}
	free(jobs);
	return arr;
}

/* Long enough for an engine that is only slow (a loaded machine): the
 * choice holds for the process. */
#define DEFAULT_PROBE_MS 5000

static pthread_mutex_t default_lock = PTHREAD_MUTEX_INITIALIZER;
static bool default_done;
static struct sg_plugin *default_plugin;
static char *default_why; /* why this default, or why none */

/* Called with default_lock held. */
static void choose_default(void)
{
	const char *conf = sg_config_get("sandbox", "default_backend");
	struct probe_job *jobs, *best = NULL;
	struct sg_buf why = { 0 };
	size_t n;

	default_done = true;
	free(default_why);
	if (conf && *conf) {
		default_plugin = sg_plugin_find(conf);
		default_why = default_plugin ? sg_xstrdup("[sandbox] default_backend")
			      : sg_xasprintf("[sandbox] default_backend = '%s' names no loaded plugin: set it to one, or unset it",
					     conf);
		return;
	}
	jobs = probe_run(DEFAULT_PROBE_MS, &n);
	for (size_t i = 0; i < n; i++)
		if (jobs[i].rc == 0 && (!best || jobs[i].out.preference > best->out.preference))
			best = &jobs[i];
	for (size_t i = 0; i < n; i++) {
		if (jobs[i].rc == 0)
			continue;
		if (why.len)
			sg_buf_append(&why, "; ", 2);
		sg_buf_append(&why, jobs[i].err.msg, strlen(jobs[i].err.msg));
	}
	if (best) {
		default_plugin = best->p;
		default_why = sg_xasprintf("chosen by probe: the usable backend with the highest preference (%d)%s%s",
					   best->out.preference, why.len ? "; not usable: " : "",
					   why.len ? why.data : "");
		SG_INFO("default backend: %s (%s)", best->p->b->name, default_why);
	} else {
		default_why = sg_xasprintf("no backend is usable: name one with 'backend', or set [sandbox] default_backend; %s",
					   why.len ? why.data : "no plugin is loaded (see [plugin] path)");
		SG_WARN("%s", default_why);
	}
	sg_buf_release(&why);
	for (size_t i = 0; i < n; i++)
		json_decref(jobs[i].out.details);
	free(jobs);
}

struct sg_plugin *sg_plugin_default(struct sg_err *err)
{
	struct sg_plugin *p;

	pthread_mutex_lock(&default_lock);
	if (!default_done)
		choose_default();
	p = default_plugin;
	if (!p)
		sg_errf(err, SG_E_UNAVAILABLE, "%s", default_why);
	pthread_mutex_unlock(&default_lock);
	return p;
}

json_t *sg_plugin_default_report(void)
{
	const char *conf = sg_config_get("sandbox", "default_backend");
	json_t *o;

	pthread_mutex_lock(&default_lock);
	if (!default_done)
		choose_default();
	o = json_pack("{s:s?, s:s, s:s}", "backend", default_plugin ? default_plugin->b->name : NULL,
		      "source", conf && *conf ? "configured" : "probe", "why", default_why);
	pthread_mutex_unlock(&default_lock);
	return o;
}

/* ---- loading beside the first requests --------------------------------------------- */

static pthread_mutex_t bg_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t bg_cond = PTHREAD_COND_INITIALIZER;
static bool bg_running, bg_started;
static struct sg_err bg_err;
static pthread_t bg_thread;
static int (*bg_load)(struct sg_err *err);

static void *bg_main(void *arg)
{
	struct sg_err err = { 0 };

	(void)arg;
	if (bg_load(&err) < 0 && err.code == SG_E_OK)
		sg_errf(&err, SG_E_INTERNAL, "loading the backends failed");
	pthread_mutex_lock(&bg_lock);
	bg_err = err;
	bg_running = false;
	pthread_cond_broadcast(&bg_cond);
	pthread_mutex_unlock(&bg_lock);
	return NULL;
}

int sg_plugin_load_async(int (*load)(struct sg_err *err))
{
	bg_load = load;
	sg_err_clear(&bg_err);
	bg_running = true;
	if (pthread_create(&bg_thread, NULL, bg_main, NULL) != 0) {
		bg_running = false;
		return -1;
	}
	bg_started = true;
	return 0;
}

int sg_plugin_ready(struct sg_err *err)
{
	int rc;

	pthread_mutex_lock(&bg_lock);
	while (bg_running)
		pthread_cond_wait(&bg_cond, &bg_lock);
	rc = bg_err.code == SG_E_OK ? 0 : -1;
	if (rc < 0 && err)
		*err = bg_err;
	pthread_mutex_unlock(&bg_lock);
	return rc;
}

void sg_plugin_load_join(void)
{
	if (bg_started) {
		pthread_join(bg_thread, NULL);
		bg_started = false;
	}
}

void sg_plugin_unload_all(void)
{
	while (plugins) {
		struct sg_plugin *p = plugins;

		plugins = p->next;
		p->b->fini(p->priv);
#ifndef SG_SANITIZED
		dlclose(p->dl);
#endif
		free(p->path);
		free(p);
	}
	plugins_tail = NULL;
	pthread_mutex_lock(&default_lock);
	default_done = false;
	default_plugin = NULL;
	free(default_why);
	default_why = NULL;
	pthread_mutex_unlock(&default_lock);
}
