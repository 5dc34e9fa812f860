/* The plugin loader: dlopen, descriptor checks, init, lookup by name. */
#ifndef SG_CORE_PLUGIN_H
#define SG_CORE_PLUGIN_H

#include <sandgate/plugin.h>

struct sg_plugin {
	const struct sg_backend *b; /* the descriptor inside the .so */
	void *priv;                 /* what b->init() returned */
	void *dl;                   /* dlopen handle; never closed while running */
	char *path;
	struct sg_plugin *next;
};

/* Loads `<dir>/<name>.so`, checks its descriptor before running any of its
 * code, registers its config keys and calls its init().  Rejections, each
 * with its own message: file missing or not a regular file, writable by
 * group or others, dlopen failure (with dlerror), no `sg_backend` symbol,
 * wrong magic, ABI major mismatch, newer minor than the core, descriptor too
 * small, name different from the file stem, missing required slot, duplicate
 * name, init failure.  Returns the plugin (owned by the loader's list) or
 * NULL with err. */
struct sg_plugin *sg_plugin_load(const char *dir, const char *name, struct sg_err *err);

/* Loads every plugin of the comma-separated list `names` from `dir`.
 * Returns 0, or -1 with err at the first failure. */
int sg_plugin_load_list(const char *dir, const char *names, struct sg_err *err);

/* The loaded plugin called name, or NULL.  Borrowed. */
struct sg_plugin *sg_plugin_find(const char *name);

/* The first loaded plugin, the list head, for iteration (->next).  Borrowed. */
struct sg_plugin *sg_plugin_first(void);

/* Calls every plugin's fini() and forgets them; dlclose()s unless built with
 * sanitizers (so leak reports keep their symbols). */
void sg_plugin_unload_all(void);

#endif
