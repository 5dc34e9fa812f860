#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/conf.h"
#include "core/err.h"
#include "core/hostapi.h"
#include "core/log.h"
#include "core/plugin.h"
#include "core/util.h"

static struct sg_plugin *plugins;

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

/* Loading code is a trust decision: only a regular file nobody else can
 * rewrite. */
static int check_file(const char *path, const char *name, struct sg_err *err)
{
	struct stat st;

	if (lstat(path, &st) < 0)
		return sg_errf(err, errno == ENOENT ? SG_E_NOTFOUND : SG_E_IO,
			       "plugin '%s': cannot find '%s': %s (set [plugin] dir or SANDGATE_PLUGIN_DIR)",
			       name, path, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return sg_errf(err, SG_E_PERM, "plugin '%s': '%s' is not a regular file", name, path);
	if (st.st_mode & (S_IWGRP | S_IWOTH))
		return sg_errf(err, SG_E_PERM,
			       "plugin '%s': '%s' is writable by group or others: run chmod go-w '%s'",
			       name, path, path);
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
	if (b->size < SG_BACKEND_SIZE_1_0)
		return sg_errf(err, SG_E_PROTO,
			       "plugin '%s': descriptor is %u bytes, smaller than the ABI 1.0 layout (%zu)",
			       name, b->size, (size_t)SG_BACKEND_SIZE_1_0);
	if (!b->name || strcmp(b->name, name) != 0)
		return sg_errf(err, SG_E_PROTO,
			       "plugin '%s': descriptor names itself '%s': the name must equal the file stem",
			       name, b->name ? b->name : "(null)");
#define REQUIRE(slot)                                                                  \
	if (!b->slot)                                                                  \
		return sg_errf(err, SG_E_PROTO, "plugin '%s': required slot '%s' is missing", \
			       name, #slot)
	REQUIRE(init);
	REQUIRE(fini);
	REQUIRE(machine_create);
	REQUIRE(machine_destroy);
	REQUIRE(machine_release);
	REQUIRE(exec);
	REQUIRE(file_read);
	REQUIRE(file_write);
	REQUIRE(file_list);
#undef REQUIRE
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
	char *path = NULL;
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
	if (check_file(path, name, err) < 0)
		goto fail;
	dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!dl) {
		sg_errf(err, SG_E_IO, "plugin '%s': dlopen failed: %s (check its libraries with ldd '%s')",
			name, dlerror(), path);
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
	if (SG_HAS(b, config_sections))
		for (const struct sg_config_section *cs = b->config_sections; cs->section; cs++)
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
	p->next = plugins;
	plugins = p;
	SG_DEBUG("loaded plugin '%s' %s (ABI %u.%u) from %s", name, b->version ? b->version : "",
		 b->abi_major, b->abi_minor, path);
	return p;
fail:
	if (dl)
		dlclose(dl);
	free(path);
	return NULL;
}

int sg_plugin_load_list(const char *dir, const char *names, struct sg_err *err)
{
	char *copy = sg_xstrdup(names), *save = NULL, *tok;
	int ret = 0;

	for (tok = strtok_r(copy, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
		if (!sg_plugin_load(dir, tok, err)) {
			ret = -1;
			break;
		}
	}
	free(copy);
	return ret;
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
}
