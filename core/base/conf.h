/*
 * Configuration: one INI file (inih) plus environment and command line.
 *
 * Precedence, highest first (doc/configuration.md):
 *   1. --set SECTION.KEY=VALUE on the command line
 *   2. SANDGATE_<SECTION>_<KEY> (upper-cased, '.' and '-' written as "__")
 *   3. a seed's own variables declared for the key (DOCKER_HOST, ABX_*, E2B_*)
 *   4. the file: --config PATH, else $SANDGATE_CONFIG, else
 *      ~/.config/sandgate/sandgate.ini, else /etc/sandgate/sandgate.ini
 *   5. the built-in default
 *
 * The store is filled once at startup (sg_config_load) and read-only after:
 * sg_config_get() is safe from any thread and returns borrowed strings that
 * live as long as the process.
 */
#ifndef SG_CORE_CONF_H
#define SG_CORE_CONF_H

#include <stdbool.h>
#include <stdint.h>

#include <sandgate/plugin.h>

/* Adds a --set override "section.key=value" (the section may hold dots:
 * "x.target.lab.host=..." means section "x.target.lab", key "host").
 * Returns 0, or -1 with err when the text has no '.' or '='. */
int sg_config_set_override(const char *assignment, struct sg_err *err);

/* Finds and parses the file.  `path` is --config (NULL when not given); an
 * explicit path that cannot be read is an error, the default places are
 * skipped when absent.  Returns 0 or -1 with err ("FILE:LINE: ..."). */
int sg_config_load(const char *path, struct sg_err *err);

/* Registers the keys of one section (the core's own and each plugin's),
 * used for defaults, seed variables and validation.  `keys` is borrowed and
 * must live as long as the process (plugins are never unloaded). */
void sg_config_register(const char *section, const struct sg_config_key *keys);

/* Checks every value from the file, environment and command line against
 * the registered keys: unknown sections and keys are logged as warnings with
 * their file and line; a value outside the accepted set is an error naming
 * file, line, key and the accepted values.  Also refuses secrets stored in a
 * file readable by group or others.  Returns 0 or -1 with err. */
int sg_config_validate(struct sg_err *err);

/* The effective value (see precedence), or NULL.  Borrowed. */
const char *sg_config_get(const char *section, const char *key);

/* Where the effective value came from: "default", "FILE:LINE",
 * "environment VAR", "--set".  Borrowed, for messages. */
const char *sg_config_source(const char *section, const char *key);

/* Typed getters: return `def` when unset; on a malformed value they return
 * def too (sg_config_validate() already refused those). */
long long sg_config_int(const char *section, const char *key, long long def);
bool sg_config_bool(const char *section, const char *key, bool def);

/* Calls fn for every key of `section` starting with `prefix`, from the file,
 * the environment and --set (each key once, with its effective value). */
void sg_config_each(const char *section, const char *prefix,
		    void (*fn)(const char *key, const char *value, void *ud), void *ud);

/* Calls fn for every registered key, section by section in registration
 * order: its section, its declaration, its effective value (NULL when unset;
 * a secret's value is never passed, only whether it is set) and the source
 * of that value (see sg_config_source).  Wildcard keys ("template.*") and
 * wildcard sections ("x.target.*") are passed as declared, value NULL. */
void sg_config_each_key(void (*fn)(const char *section, const struct sg_config_key *k,
				   const char *value, const char *source, void *ud),
			void *ud);

/* The path of the file that was loaded, or NULL. */
const char *sg_config_file(void);

/* Declares the sources fixed (a server runs: nothing calls setenv or
 * loads a file any more), so that sg_config_get() may remember what it
 * resolved for registered keys.  Undone by sg_config_reset(). */
void sg_config_freeze(void);

/* True when a value is set (file, --set, SANDGATE_* variable) in a section
 * nobody has registered yet: only a plugin's keys can make it valid or not,
 * so a server has to load its plugins before it answers anyone. */
bool sg_config_sets_unregistered(void);

/* Frees everything (tests and clean shutdown). */
void sg_config_reset(void);

/* The environment variable name for section/key into out (size n). */
void sg_config_env_name(const char *section, const char *key, char *out, size_t n);

#endif
