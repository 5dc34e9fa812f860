/* The new commands' dispatch, option parser and start-up (core/cli/cli.h). */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/cli/cli.h"
#include "core/cli/commands.h"
#include "core/base/conf.h"
#include "core/base/err.h"
#include "core/base/keys.h"
#include "core/base/log.h"
#include "core/registry/plugin.h"
#include "core/base/util.h"

static const struct {
	const char *name;
	int (*run)(int argc, char **argv, const char *config, bool json);
} commands[] = {
	{ "install", sg_cmd_install },
	{ "uninstall", sg_cmd_uninstall },
	{ "status", sg_cmd_status },
	{ "deploy", sg_cmd_deploy },
};

bool sg_cli_is_command(const char *name)
{
	if (!strcmp(name, "mcp"))
		return true;
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(name, commands[i].name))
			return true;
	return false;
}

int sg_cli_run(const char *name, int argc, char **argv, const char *config, bool json)
{
	/* `sandgate mcp install ...`: the seed's spelling of the same commands;
	 * global options may still come between "mcp" and the command. */
	if (!strcmp(name, "mcp")) {
		int i = 0;

		while (i < argc && argv[i][0] == '-') {
			if (!strcmp(argv[i], "--json")) {
				json = true;
				i++;
			} else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
				fputs("usage: sandgate mcp install|uninstall|status|deploy [OPTIONS]\n"
				      "The same as 'sandgate install', 'sandgate uninstall', "
				      "'sandgate status' and 'sandgate deploy'.\n", stdout);
				return SG_CLI_OK;
			} else if ((!strcmp(argv[i], "--config") || !strcmp(argv[i], "--set")) &&
				   i + 1 < argc) {
				struct sg_err err;

				if (!strcmp(argv[i], "--config"))
					config = argv[i + 1];
				else if (sg_config_set_override(argv[i + 1], &err) < 0)
					return sg_cli_usage("mcp", "%s", err.msg);
				i += 2;
			} else {
				return sg_cli_usage("mcp", "unknown option '%s'", argv[i]);
			}
		}
		if (i >= argc)
			return sg_cli_usage("mcp", "%s", "mcp needs a command: install, uninstall, status or deploy");
		if (!strcmp(argv[i], "mcp") || !sg_cli_is_command(argv[i]))
			return sg_cli_usage("mcp",
					    "unknown mcp command '%s': use install, uninstall, status or deploy "
					    "(the server itself is 'sandgate stdio')", argv[i]);
		name = argv[i];
		argc -= i + 1;
		argv += i + 1;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(name, commands[i].name))
			return commands[i].run(argc, argv, config, json);
	return sg_cli_usage(name, "unknown command '%s'", name);
}

int sg_cli_usage(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	fputs("sandgate: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nrun 'sandgate %s --help' for usage\n", cmd);
	return SG_CLI_USAGE;
}

static const struct sg_cli_opt *find_opt(const struct sg_cli_opt *opts, const char *name)
{
	for (; opts && opts->name; opts++)
		if (!strcmp(opts->name, name))
			return opts;
	return NULL;
}

int sg_cli_parse(const char *cmd, int argc, char **argv, const struct sg_cli_opt *opts,
		 const char *help, struct sg_cli_common *common)
{
	struct sg_err err;

	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];
		const struct sg_cli_opt *o;
		const char *val = NULL;
		char name[64];
		const char *eq = strchr(a, '=');

		if (!strcmp(a, "--")) {
			common->rest = json_array();
			for (i++; i < argc; i++)
				json_array_append_new(common->rest, json_string(argv[i]));
			break;
		}
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			fputs(help, stdout);
			exit(0);
		}
		if (a[0] != '-' || a[1] != '-')
			return sg_cli_usage(cmd, "unexpected argument '%s'", a);
		/* "--name=value" is accepted as well as "--name value" */
		snprintf(name, sizeof(name), "%.*s", eq ? (int)(eq - a) : (int)strlen(a), a);
		if (eq)
			val = eq + 1;
		if (!strcmp(name, "--json") && !eq) {
			common->json = true;
			continue;
		}
		o = find_opt(opts, name);
		if (!o && strcmp(name, "--config") && strcmp(name, "--set"))
			return sg_cli_usage(cmd, "unknown option '%s'", name);
		if (o && o->flag) {
			if (eq)
				return sg_cli_usage(cmd, "option '%s' takes no value", name);
			*o->flag = true;
			continue;
		}
		if (!val) {
			if (i + 1 >= argc)
				return sg_cli_usage(cmd, "option '%s' needs a value", name);
			val = argv[++i];
		}
		if (!o && !strcmp(name, "--config")) {
			common->config = val;
		} else if (!o) {
			if (sg_config_set_override(val, &err) < 0)
				return sg_cli_usage(cmd, "%s", err.msg);
		} else if (o->str) {
			*o->str = val;
		} else {
			if (!*o->list)
				*o->list = json_array();
			json_array_append_new(*o->list, json_string(val));
		}
	}
	return 0;
}

int sg_cli_load_config(const char *config)
{
	struct sg_err err;
	const char *file;
	int lvl;

	sg_core_keys_register();
	if (sg_config_load(config, &err) < 0) {
		fprintf(stderr, "sandgate: %s\n", err.msg);
		return SG_CLI_CONFIG;
	}
	lvl = sg_log_level_parse(sg_config_get("log", "level"));
	/* A command's own output says what happened: only warnings go to the
	 * log, unless a level was asked for. */
	if (!strcmp(sg_config_source("log", "level"), "default"))
		lvl = SG_LOG_WARNING;
	if (lvl >= 0)
		sg_log_set_level(lvl);
	file = sg_config_get("log", "file");
	if (file && *file && sg_log_open_file(file) < 0)
		fprintf(stderr, "sandgate: cannot open log file '%s', logging to stderr\n", file);
	return 0;
}

/* True when every backend of the list `names` has its NAME.so in dir. */
/* Whether dir holds at least one NAME.so. */
static bool dir_has_plugins(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	bool any = false;

	while (d && !any && (de = readdir(d)))
		any = strlen(de->d_name) > 3 && !strcmp(de->d_name + strlen(de->d_name) - 3, ".so");
	if (d)
		closedir(d);
	return any;
}

int sg_cli_load_plugins(bool find_build, struct sg_err *err)
{
	const char *dir = sg_config_get("plugin", "dir");
	char *exe, *alt, *set;
	struct stat st;

	/* An uninstalled build: its plugins are in .libs beside the binary. */
	if (find_build && (!dir || !*dir) && (exe = sg_cli_self_exe())) {
		*strrchr(exe, '/') = '\0';
		alt = sg_xasprintf("%s/.libs", exe);
		if (stat(alt, &st) == 0 && S_ISDIR(st.st_mode) && dir_has_plugins(alt)) {
			set = sg_xasprintf("plugin.dir=%s", alt);
			sg_config_set_override(set, err);
			free(set);
		}
		free(alt);
		free(exe);
	}
	return sg_plugin_load_configured(err);
}

const char *sg_cli_plugin_dir(void)
{
	static __thread char buf[PATH_MAX];
	struct sg_plugin *p = sg_plugin_first();
	char *slash;

	if (!p || !realpath(p->path, buf))
		return NULL;
	slash = strrchr(buf, '/');
	if (slash)
		*slash = '\0';
	return buf;
}

char *sg_cli_self_exe(void)
{
	char buf[PATH_MAX];

	if (!realpath("/proc/self/exe", buf))
		return NULL;
	return sg_xstrdup(buf);
}

char *sg_cli_realpath(const char *path)
{
	char buf[PATH_MAX];

	return sg_xstrdup(realpath(path, buf) ? buf : path);
}

const char *sg_cli_pretty_path(const char *path)
{
	static __thread char buf[PATH_MAX + 2];
	const char *home = getenv("HOME");
	size_t n = home ? strlen(home) : 0;

	if (n > 1 && !strncmp(path, home, n) && path[n] == '/') {
		snprintf(buf, sizeof(buf), "~%s", path + n);
		return buf;
	}
	return path;
}
