/*
 * The plugin loader: the plugin path, dlopen, descriptor checks, init,
 * lookup by name, and the choice of the default backend from the plugins'
 * own probes.  The core names no backend: everything here is driven by
 * what is found on the path and what the plugins say.
 */
#ifndef SG_CORE_PLUGIN_H
#define SG_CORE_PLUGIN_H

#include <stdbool.h>

#include <jansson.h>

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
 * with its own message: file missing, not a regular file (or a symlink to
 * one), the file or its directory owned by another user than root or us or
 * writable by group or others (a sticky directory is fine),
 * dlopen failure (with dlerror), no `sg_backend` symbol, wrong magic, ABI
 * major mismatch, newer minor than the core, descriptor too small, name
 * different from the file stem, a slot group partly filled (naming the
 * missing slot) or a required group missing, an action without name,
 * summary, schema or handler, duplicate name, init failure.  Returns the
 * plugin (owned by the loader's list) or NULL with err. */
struct sg_plugin *sg_plugin_load(const char *dir, const char *name, struct sg_err *err);

/* The plugin path: [plugin] dir (SANDGATE_PLUGIN_DIR) first, then the
 * ':'-separated [plugin] path (SANDGATE_PLUGIN_PATH), then the installed
 * directory.  A new NULL-terminated vector (sg_strv_free()). */
char **sg_plugin_path(void);

/* Loads the plugins of [plugin] load (comma-separated names), each from the
 * first directory of the plugin path that has it, or, when the key is
 * unset, every plugin found on the path (a name found twice loads from the
 * first directory, logged; a file there that fails the checks is skipped
 * with a warning).  A named plugin that cannot load is an error.  Returns
 * 0, or -1 with err. */
int sg_plugin_load_configured(struct sg_err *err);

/* The loaded plugin called name, or NULL.  Borrowed. */
struct sg_plugin *sg_plugin_find(const char *name);

/* The first loaded plugin, the list head, for iteration (->next), in load
 * order.  Borrowed. */
struct sg_plugin *sg_plugin_first(void);

/* "a, b, c" (the loaded names, or "(none)").  Caller frees. */
char *sg_plugin_names(void);

/* The backend of a machine made without naming one: [sandbox]
 * default_backend when set, else the usable plugin with the highest
 * preference, probed once per process (lazily, at the first call that
 * needs it; the plugins are probed at once, each within a short timeout).
 * Returns the plugin, or NULL with err saying why each one is unusable. */
struct sg_plugin *sg_plugin_default(struct sg_err *err);

/* Probes every loaded plugin (at once, each within timeout_ms) and returns
 * a new array of {backend, version, abi, usable, preference, why (when
 * not usable), details (when given)}, in load order. */
json_t *sg_plugin_probe_all(unsigned timeout_ms);

/* The outcome of the default choice for reports (`sandgate config`,
 * status): {backend, source: "configured"|"probe", why} or, when nothing is
 * usable, {backend: null, why}.  Probes when that was not done yet.  New
 * reference. */
json_t *sg_plugin_default_report(void);

/* Runs load(err) (loading the backends) on a thread of its own, for a
 * server whose configuration sets nothing a plugin must check first
 * (sg_config_sets_unregistered() is false): it answers initialize at once.
 * sg_plugin_ready() waits for that thread (at once when none runs) and
 * returns 0, or -1 with the error load() gave; sg_plugin_load_join() joins
 * it.  Returns 0, or -1 when no thread could start. */
int sg_plugin_load_async(int (*load)(struct sg_err *err));
int sg_plugin_ready(struct sg_err *err);
void sg_plugin_load_join(void);

/* Calls every plugin's fini() and forgets them; dlclose()s unless built with
 * sanitizers (so leak reports keep their symbols). */
void sg_plugin_unload_all(void);

#endif
