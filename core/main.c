/* sandgate: the command line. */
#include "config.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/protocol/call.h"
#include "core/registry/audit.h"
#include "core/cli/cli.h"
#include "core/cli/progress.h"
#include "core/base/conf.h"
#include "core/base/mem.h"
#include "core/base/err.h"
#include "core/base/keys.h"
#include "core/base/log.h"
#include "core/registry/hostapi.h"
#include "core/registry/machine.h"
#include "core/server/mcp.h"
#include "core/server/stop.h"
#include "core/registry/plugin.h"
#include "core/registry/provision.h"
#include "core/registry/reaper.h"
#include "core/protocol/session.h"
#include "core/registry/record.h"
#include "core/tools/registry.h"
#include "core/base/util.h"
#include "transports/transport.h"
#ifdef SG_TEST_FIXTURES
#include "t/conformance/fixtures.h"
#endif

enum {
	EXIT_TOOL_ERROR = 1,
	EXIT_USAGE = 2,
	EXIT_CONFIG = 3,
	EXIT_PLUGIN = 4,
};

static const char usage_text[] =
	"usage: sandgate [--config PATH] [--set SECTION.KEY=VALUE]... COMMAND [ARGS]\n"
	"\n"
	"Sandbox gateway for AI agents: MCP tools on Docker, SSH and cloud sandboxes.\n"
	"\n"
	"Commands:\n"
	"  stdio                   serve one MCP session on stdin/stdout (for IDEs)\n"
	"  call TOOL [JSON]        run one tool in a fresh session, print its result as JSON\n"
	"      --keep              keep the sandbox the call created (its id is in the result)\n"
	"      --sandbox-id ID     run the tool on an existing sandbox\n"
	"  http                    serve MCP Streamable HTTP on [server] host:port, path /mcp\n"
	"  tools                   print the tool list (the tools/list result) as JSON\n"
	"  config                  print every configuration key, its value and where it\n"
	"                          comes from (secrets are shown only as set)\n"
	"  install --target CLIENT add a sandgate entry to an MCP client's configuration\n"
	"                          (cursor, claude, vscode, claude-code, windsurf, gemini;\n"
	"                          codex and hermes with --print)\n"
	"  uninstall --target CLIENT  remove that entry\n"
	"  status [--json]         configuration, plugins, tools, backends and clients\n"
	"  deploy --target fc      write a Function Compute artifact (sandgate http)\n"
	"  mcp COMMAND             the same four commands: sandgate mcp install ...\n"
	"                          ('sandgate COMMAND --help' for each command's options)\n"
	"\n"
	"Options:\n"
	"  --config PATH           configuration file (default: $SANDGATE_CONFIG,\n"
	"                          ~/.config/sandgate/sandgate.ini, /etc/sandgate/sandgate.ini)\n"
	"  --set SECTION.KEY=VALUE override one configuration key (repeatable)\n"	"  --tools all|cloud|env   tool families served (the same as --set server.tools=...)\n"
	"  --version               print the version\n"
	"  --help                  print this help\n"
	"\n"
	"Configuration precedence: --set, then SANDGATE_<SECTION>_<KEY>, then a backend's\n"
	"own variables (DOCKER_HOST, ABX_*), then the file, then the built-in default.\n"
	"\n"
	"Exit status:\n"
	"  0  success\n"
	"  1  the tool reported an error (call), the server failed at run time, or a\n"
	"     command could not do its job (install, status, deploy: see their --help)\n"
	"  2  usage error\n"
	"  3  configuration error\n"
	"  4  a backend plugin could not be loaded\n";

struct cli {
	const char *config;
	const char *command;
	const char *tool;
	const char *json;
	const char *sandbox_id;
	bool keep;
	bool json_out; /* --json */
	int rest;      /* where a core/cli command's own arguments start */
};

static int usage_error(const char *fmt, ...) SG_PRINTF(1, 2);

static int usage_error(const char *fmt, ...)
{
	va_list ap;

	fputs("sandgate: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\nrun 'sandgate --help' for usage\n", stderr);
	return EXIT_USAGE;
}

static int parse_cli(int argc, char **argv, struct cli *c)
{
	struct sg_err err;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			fputs(usage_text, stdout);
			exit(0);
		} else if (!strcmp(a, "--version") || !strcmp(a, "-V")) {
			printf("sandgate %s (plugin ABI %u.%u)\n", PACKAGE_VERSION,
			       SG_PLUGIN_ABI_MAJOR, SG_PLUGIN_ABI_MINOR);
			exit(0);
		} else if (!strcmp(a, "--config") || !strcmp(a, "--set") ||
			   !strcmp(a, "--sandbox-id")) {
			if (i + 1 >= argc)
				return usage_error("option '%s' needs a value", a);
			if (!strcmp(a, "--config"))
				c->config = argv[++i];
			else if (!strcmp(a, "--sandbox-id"))
				c->sandbox_id = argv[++i];
			else if (sg_config_set_override(argv[++i], &err) < 0)
				return usage_error("%s", err.msg);
		} else if (!strcmp(a, "--tools")) {
			char set[64];

			if (i + 1 >= argc)
				return usage_error("option '%s' needs a value (all, cloud or env)", a);
			snprintf(set, sizeof(set), "server.tools=%.40s", argv[++i]);
			if (sg_config_set_override(set, &err) < 0)
				return usage_error("%s", err.msg);
		} else if (!strcmp(a, "--keep")) {
			c->keep = true;
		} else if (!strcmp(a, "--json")) {
			c->json_out = true;
		} else if (a[0] == '-' && a[1]) {
			return usage_error("unknown option '%s'", a);
		} else if (!c->command) {
			c->command = a;
			if (sg_cli_is_command(a)) {
				c->rest = i + 1; /* it parses the rest itself */
				return 0;
			}
		} else if (!strcmp(c->command, "call") && !c->tool) {
			c->tool = a;
		} else if (!strcmp(c->command, "call") && !c->json) {
			c->json = a;
		} else {
			return usage_error("unexpected argument '%s'", a);
		}
	}
	if (!c->command)
		return usage_error("%s", "no command given: use stdio, http, call, tools, config, install, status or deploy");
	if (strcmp(c->command, "stdio") && strcmp(c->command, "http") &&
	    strcmp(c->command, "call") && strcmp(c->command, "tools") &&
	    strcmp(c->command, "config"))
		return usage_error("unknown command '%s': use stdio, http, call, tools, config, install, "
				   "uninstall, status, deploy or mcp",
				   c->command);
	if (!strcmp(c->command, "call") && !c->tool)
		return usage_error("%s", "call needs a tool name, e.g. sandgate call run_code '{\"code\":\"print(6*7)\"}'");
	return 0;
}

/* Loads the backends and checks the whole configuration.  Returns 0, or
 * an exit status with err filled. */
static int load_all(struct sg_err *err)
{
	const char *def;
	int lvl;

	if (sg_plugin_load_configured(err) < 0)
		return EXIT_PLUGIN;
	if (sg_config_validate(err) < 0)
		return EXIT_CONFIG;
	def = sg_config_get("sandbox", "default_backend");
	if (def && *def && !sg_plugin_find(def)) {
		char *names = sg_plugin_names();

		sg_errf(err, SG_E_INVAL,
			"[sandbox] default_backend = '%s' is not a loaded plugin (loaded: %s): set it to one of them, or unset it to let sandgate choose",
			def, names);
		free(names);
		return EXIT_CONFIG;
	}
	lvl = sg_log_level_parse(sg_config_get("log", "level"));
	if (lvl >= 0)
		sg_log_set_level(lvl);
	return 0;
}

static int load_backends(void)
{
	struct sg_err err;
	int rc = load_all(&err);

	if (rc)
		SG_ERROR("%s", err.msg);
	return rc;
}

/* A server's backends loading beside the first messages: a failure then
 * (found after initialize was answered) does not end the server; every
 * tools/list and tools/call answers with it (sg_plugin_ready()). */
static int load_in_background(struct sg_err *err)
{
	if (load_all(err)) {
		SG_ERROR("%s (every tool call will say so: fix the configuration and restart)", err->msg);
		return -1;
	}
	if (sg_machine_sweep_async() < 0)
		SG_WARN("cannot start the sweep of lost machines: they stay until the next start");
	return 0;
}

static bool config_set(const char *section, const char *key)
{
	const char *v = sg_config_get(section, key);

	return v && *v;
}

static int setup(const struct cli *c, bool server)
{
	struct sg_err err;
	const char *file;
	int lvl, rc;

	sg_core_keys_register();
	sg_mem_init();
	if (sg_config_load(c->config, &err) < 0) {
		fprintf(stderr, "sandgate: %s\n", err.msg);
		return EXIT_CONFIG;
	}
	if (server)
		sg_config_freeze(); /* a server: the sources stay as they are */
	lvl = sg_log_level_parse(sg_config_get("log", "level"));
	if (lvl >= 0)
		sg_log_set_level(lvl);
	file = sg_config_get("log", "file");
	if (file && *file && sg_log_open_file(file) < 0)
		fprintf(stderr, "sandgate: cannot open log file '%s', logging to stderr\n", file);
	sg_machine_init();
	sg_tools_init();
#ifdef SG_TEST_FIXTURES
	sg_fixtures_register(); /* t/conformance/sandgate-conformance only */
#endif
	/* Every configuration error is found before anything is served.
	 * dlopen() of the backends and their libraries (some forty) takes
	 * longer than all the rest of a start, so a server loads them beside
	 * the first messages when nothing in the configuration waits for them
	 * to be checked (the usual case: an IDE's stdio server); the router
	 * holds tools/list and tools/call until they are in.  Otherwise they
	 * load first, and a bad value stops the start before initialize (so
	 * does a [default_machine], made before anything is served). */
	if (server && !sg_config_sets_unregistered() && !config_set("plugin", "load") &&
	    !config_set("sandbox", "default_backend") &&
	    !sg_config_bool("default_machine", "enabled", false)) {
		/* Nothing set is a plugin's: every value set is the core's, and
		 * checked now, before anything listens or answers. */
		if (sg_config_validate(&err) < 0) {
			SG_ERROR("%s", err.msg);
			return EXIT_CONFIG;
		}
		return sg_plugin_load_async(load_in_background) < 0 ? EXIT_PLUGIN : 0;
	}
	rc = load_backends();
	if (rc == 0 && server && sg_machine_sweep_async() < 0)
		SG_WARN("cannot start the sweep of lost machines: they stay until the next start");
	return rc;
}

static void print_key(const char *section, const struct sg_config_key *k, const char *value,
		      const char *source, void *ud)
{
	const char **last = ud;

	if (!*last || strcmp(*last, section)) {
		printf("%s[%s]\n", *last ? "\n" : "", section);
		*last = section;
	}
	printf("%s = %s", k->key, value ? value : "");
	if (*source)
		printf("\t; %s", source);
	putchar('\n');
}

/* After the keys: which plugins are loaded, whether each can make a
 * machine now, and the default backend that follows. */
static void print_backends(void)
{
	json_t *all = sg_plugin_probe_all(2000), *b, *def = sg_plugin_default_report();
	size_t i;

	printf("\n; plugins (from the plugin path)\n");
	json_array_foreach(all, i, b) {
		const char *why = json_string_value(json_object_get(b, "why"));

		printf("; %s %s (ABI %s) from %s: ", json_string_value(json_object_get(b, "backend")),
		       json_string_value(json_object_get(b, "version")),
		       json_string_value(json_object_get(b, "abi")),
		       json_string_value(json_object_get(b, "path")));
		if (why)
			printf("not usable: %s\n", why);
		else
			printf("usable, preference %lld\n",
			       (long long)json_integer_value(json_object_get(b, "preference")));
	}
	if (!json_array_size(all))
		printf("; none found: set [plugin] path or SANDGATE_PLUGIN_PATH\n");
	printf("; default backend: %s (%s)\n",
	       json_string_value(json_object_get(def, "backend")) ?: "none",
	       json_string_value(json_object_get(def, "why")));
	json_decref(all);
	json_decref(def);
}

/* Whether the session's default sandbox can be reached by id from a later
 * process (`--keep`): only through its record. */
static bool kept(struct sg_session *s)
{
	char id[SG_ID_MAX];
	struct sg_entry *e;
	bool ok;

	if (!sg_session_default_get(s, id))
		return true; /* nothing to keep */
	e = sg_machine_get(s, id, NULL);
	ok = e && sg_machine_recorded(e);
	sg_machine_put(e);
	return ok;
}

static int run_call(const struct cli *c)
{
	const struct sg_tool *tool = sg_tool_find(c->tool);
	json_t *args, *res, *token, *id;
	json_error_t jerr;
	struct sg_session *s;
	struct sg_call *call;
	struct sg_tool_ctx t;
	char owner[64];
	int64_t t0;
	int rc;

	if (!tool && sg_tool_unserved_family(c->tool)) {
		fprintf(stderr, "sandgate: tool '%s' is in the %s family, not served: [server] tools = %s; use --tools all\n",
			c->tool, sg_tool_unserved_family(c->tool), sg_config_get("server", "tools"));
		return EXIT_USAGE;
	}
	if (!tool) {
		fprintf(stderr, "sandgate: unknown tool '%s': run 'sandgate tools' for the list\n", c->tool);
		return EXIT_USAGE;
	}
	args = c->json ? json_loads(c->json, 0, &jerr) : json_object();
	if (!json_is_object(args)) {
		fprintf(stderr, "sandgate: the arguments must be a JSON object: %s\n",
			args ? "got another JSON value" : jerr.text);
		json_decref(args);
		return EXIT_USAGE;
	}
	if (c->sandbox_id)
		json_object_set_new(args, "sandbox_id", json_string(c->sandbox_id));
	snprintf(owner, sizeof(owner), "local:%ld", (long)getuid());
	/* progress notifications become a line on the terminal, if there is one */
	s = sg_session_new(sg_cli_progress_ops(), NULL, owner);
	token = sg_cli_progress_token();
	id = json_integer(0);
	call = sg_call_new(s, id, token, "tools/call");
	json_decref(id); /* sg_call_new took its own copies */
	json_decref(token);
	t.s = s;
	t.call = call;
	t0 = sg_now_ms();
	res = sg_tool_call(&t, tool, args);
	sg_cli_progress_end();
	/* A row like a session's (the audit writer is stopped, and the row
	 * written, by sg_tools_fini()). */
	sg_audit_tool_call(s, tool->name, args, NULL, res, sg_now_ms() - t0, false);
	args = NULL; /* the row's now */
	if (json_is_true(json_object_get(res, "isError"))) {
		fprintf(stderr, "sandgate: %s: %s\n", c->tool,
			json_string_value(json_object_get(
				json_array_get(json_object_get(res, "content"), 0), "text")));
		rc = EXIT_TOOL_ERROR;
	} else {
		json_dumpf(json_object_get(res, "structuredContent"), stdout, JSON_INDENT(2));
		fputc('\n', stdout);
		rc = 0;
	}
	json_decref(res);
	json_decref(args);
	sg_call_free(call);
	if (c->keep && !kept(s))
		fprintf(stderr, "sandgate: the sandbox cannot be kept: it has no record in the state database (see the log); it was destroyed\n");
	else if (c->keep && s->default_id[0])
		fprintf(stderr, "sandgate: kept sandbox %s (use --sandbox-id %s)\n", s->default_id,
			s->default_id);
	if (!c->keep || !kept(s))
		sg_session_close(s, 0);
	sg_session_unref(s);
	return rc;
}

int main(int argc, char **argv)
{
	struct cli c = { 0 };
	bool server;
	int rc;

	signal(SIGPIPE, SIG_IGN);
	rc = parse_cli(argc, argv, &c);
	if (rc)
		return rc;
	if (sg_cli_is_command(c.command)) {
		rc = sg_cli_run(c.command, argc - c.rest, argv + c.rest, c.config, c.json_out);
		goto out;
	}
	server = !strcmp(c.command, "stdio") || !strcmp(c.command, "http");
	if (server)
		sg_stop_block_signals(); /* before any thread starts: read by one thread */
	sg_host_set_server(!server ? NULL : !strcmp(c.command, "http") ? "http" : "stdio");
	rc = setup(&c, server);
	if (rc)
		goto out;
	if (!strcmp(c.command, "tools")) {
		json_dumpf(sg_tools_list(), stdout, JSON_INDENT(2));
		fputc('\n', stdout);
	} else if (!strcmp(c.command, "config")) {
		const char *last = NULL;

		sg_config_each_key(print_key, &last);
		print_backends();
	} else if (!strcmp(c.command, "call")) {
		rc = run_call(&c);
	} else {
		sg_reaper_start();
		if (!strcmp(c.command, "http"))
			rc = sg_http_run(); /* provisions after it knows its credentials */
		else
			rc = sg_default_machine_provision() < 0 ? EXIT_TOOL_ERROR : sg_stdio_run();
		/* A thread stuck in a plugin: no teardown (it would unload the
		 * plugin under it); the audit batch is written on the way out. */
		sg_stop_exit_if_abandoned(rc);
		sg_reaper_stop();
	}
	if (server) {
		sg_plugin_load_join();
		sg_machine_sweep_join();
	}
out:
	sg_machine_release_all();
	sg_tools_fini();
	sg_plugin_unload_all();
	sg_record_close();
	sg_config_reset();
	return rc;
}
