/*
 * The server entry an MCP client runs to start this sandgate: the absolute
 * path of the running binary and what it needs to run from where it is.
 *
 * What it carries: the configuration file when it was given (--config or
 * SANDGATE_CONFIG), the plugin directory when this build is not the
 * installed one, and every other key this command took from its
 * environment or --set, since a client started from a desktop has neither:
 * plain keys as --set arguments, secrets in env, and secrets only for a
 * client whose file is private to the user.  A file in the default places
 * is read by the server itself.
 */
#ifndef SG_CORE_CLI_ENTRY_H
#define SG_CORE_CLI_ENTRY_H

#include <stdbool.h>

#include <jansson.h>

#include <sandgate/plugin.h>

struct sg_client;

struct sg_server_entry {
	char *command;   /* absolute path of the running binary */
	json_t *args;    /* array of strings */
	json_t *env;     /* object: variable name -> value */
	json_t *secrets; /* array: the names in env whose value is a secret */
	json_t *notes;   /* array of strings for the user: what was carried over or left out */
};

/* Builds the entry.  Call after the configuration and the backends are
 * loaded.  config: the --config path or NULL.  extra: array of further
 * server arguments (--args), borrowed, may be NULL.  with_secrets: the
 * client's file is private to the user.  Returns 0 or -1 with err (the
 * running binary cannot be found).  Every field is owned by e: free with
 * sg_server_entry_free(). */
int sg_server_entry_build(const char *config, const json_t *extra, bool with_secrets,
			  struct sg_server_entry *e, struct sg_err *err);

/* The object client c stores for e ({"type": "stdio",} "command", "args",
 * "env" when not empty).  masked: each secret reads "<NAME>" instead of its
 * value, for anything printed.  New reference. */
json_t *sg_server_entry_json(const struct sg_server_entry *e, const struct sg_client *c,
			     bool masked);

void sg_server_entry_free(struct sg_server_entry *e);

/* Whether this binary and its plugins are the installed ones (the binary
 * in the configured bindir and the backends loaded from the configured
 * plugin directory). */
bool sg_server_installed(void);

#endif
