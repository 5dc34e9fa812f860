/*
 * The commands that fit sandgate into the places users meet it: install and
 * uninstall (an MCP client's configuration file), status, deploy (the
 * Function Compute artifact), and `mcp`, which takes any of them as its first
 * argument (`sandgate mcp install`, as the seed's users type it).
 *
 * Shared here: the dispatch, the option parser every command uses, and the
 * start-up a command needs (configuration, plugins).
 */
#ifndef SG_CORE_CLI_CLI_H
#define SG_CORE_CLI_CLI_H

#include <stdbool.h>

#include <jansson.h>

#include <sandgate/plugin.h>

/* Exit statuses, the same as the server's (sandgate --help). */
enum {
	SG_CLI_OK = 0,
	SG_CLI_FAIL = 1,   /* the command could not do its job (said why) */
	SG_CLI_USAGE = 2,
	SG_CLI_CONFIG = 3,
	SG_CLI_PLUGIN = 4,
};

/* True when name is one of these commands: install, uninstall, status,
 * deploy, mcp. */
bool sg_cli_is_command(const char *name);

/* Runs command `name` with the arguments that follow it, argv[0..argc).
 * config: the global --config given before the command, or NULL; the global
 * --set options before it were already applied.  json: the global --json.
 * Returns the process exit status. */
int sg_cli_run(const char *name, int argc, char **argv, const char *config, bool json);

/* ---- for the commands ------------------------------------------------------- */

/* One option of a command.  Exactly one of str (an option with a value:
 * *str is set to the borrowed argv string), flag (no value) or list (an
 * option with a value that may repeat: each value is appended to the array
 * *list, created on first use and owned by the caller) is non-NULL. */
struct sg_cli_opt {
	const char *name; /* "--target" */
	const char **str;
	bool *flag;
	json_t **list;
};

/* What every command accepts besides its own options. */
struct sg_cli_common {
	const char *config; /* --config PATH (before or after the command) */
	bool json;          /* --json */
	json_t *rest;       /* the arguments after "--", or NULL; caller's reference */
};

/* Parses argv[0..argc) of command `cmd` against opts (terminated by a NULL
 * name).  Also takes --config, --set (applied at once), --json, --help
 * (prints `help` and exits 0) and "--" (the rest goes to common->rest).
 * Positional arguments are refused.  Returns 0 or SG_CLI_USAGE after
 * printing the error. */
int sg_cli_parse(const char *cmd, int argc, char **argv, const struct sg_cli_opt *opts,
		 const char *help, struct sg_cli_common *common);

/* Prints "sandgate: MESSAGE" and a hint to run `sandgate CMD --help` to
 * stderr.  Returns SG_CLI_USAGE. */
int sg_cli_usage(const char *cmd, const char *fmt, ...) SG_PRINTF(2, 3);

/* Registers the core's keys, reads the configuration file (config: the
 * --config path or NULL) and applies [log].  Returns 0 or SG_CLI_CONFIG
 * after printing why. */
int sg_cli_load_config(const char *config);

/* Loads the backends of [plugin] load from [plugin] dir.  With find_build,
 * an uninstalled build whose [plugin] dir is the built-in default finds
 * them next to the binary (its .libs folder, where libtool puts them) when
 * they are not installed.  Returns 0 or -1 with err. */
int sg_cli_load_plugins(bool find_build, struct sg_err *err);

/* The directory the backends were loaded from (absolute, symlinks
 * resolved), or NULL when none is loaded.  Borrowed, valid until the
 * plugins are unloaded. */
const char *sg_cli_plugin_dir(void);

/* The running binary: /proc/self/exe with symlinks resolved.  Caller frees;
 * NULL when /proc is not mounted. */
char *sg_cli_self_exe(void);

/* realpath() of path, or a copy of path when it cannot be resolved (it
 * does not exist yet).  Caller frees. */
char *sg_cli_realpath(const char *path);

/* "~/..." for a path under $HOME, else the path, for messages.  Returns a
 * thread-local buffer. */
const char *sg_cli_pretty_path(const char *path);

#endif
