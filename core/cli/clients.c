/* The table of MCP clients (core/cli/clients.h). */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/cli/clients.h"
#include "core/base/err.h"
#include "core/base/util.h"

static const struct sg_client clients[] = {
	{ "cursor", "Cursor", SG_CLIENT_JSON, SG_BASE_HOME, ".cursor/mcp.json", "mcpServers",
	  false, false },
	{ "claude", "Claude Desktop", SG_CLIENT_JSON, SG_BASE_CLAUDE, "claude_desktop_config.json",
	  "mcpServers", false, false },
	{ "vscode", "VS Code", SG_CLIENT_JSON, SG_BASE_WORKSPACE, ".vscode/mcp.json", "servers",
	  true, true },
	{ "claude-code", "Claude Code", SG_CLIENT_JSON, SG_BASE_WORKSPACE, ".mcp.json", "mcpServers",
	  true, true },
	{ "windsurf", "Windsurf", SG_CLIENT_JSON, SG_BASE_HOME, ".codeium/windsurf/mcp_config.json",
	  "mcpServers", false, false },
	{ "gemini", "Gemini CLI", SG_CLIENT_JSON, SG_BASE_HOME, ".gemini/settings.json", "mcpServers",
	  false, false },
	{ "codex", "Codex", SG_CLIENT_TOML, SG_BASE_CODEX, "config.toml", "mcp_servers", false, false },
	{ "hermes", "Hermes Agent", SG_CLIENT_YAML, SG_BASE_HERMES, "config.yaml", "mcp_servers",
	  false, false },
};

#define N_CLIENTS (sizeof(clients) / sizeof(clients[0]))

const struct sg_client *sg_client_find(const char *target)
{
	for (size_t i = 0; i < N_CLIENTS; i++)
		if (!strcmp(clients[i].target, target))
			return &clients[i];
	return NULL;
}

const struct sg_client *sg_clients(size_t *n)
{
	*n = N_CLIENTS;
	return clients;
}

const char *sg_client_targets(void)
{
	return "cursor, claude, vscode, claude-code, windsurf, gemini, codex, hermes";
}

static const char *home_or_err(struct sg_err *err)
{
	const char *home = getenv("HOME");

	if (!home || home[0] != '/') {
		sg_errf(err, SG_E_INVAL, "HOME is not set to an absolute path: cannot find the client's configuration file");
		return NULL;
	}
	return home;
}

/* An absolute folder from the environment variable env, else HOME/dflt. */
static char *env_dir(const char *env, const char *dflt, struct sg_err *err)
{
	const char *v = getenv(env), *home;

	if (v && v[0] == '/')
		return sg_xstrdup(v);
	if (!(home = home_or_err(err)))
		return NULL;
	return sg_xasprintf("%s/%s", home, dflt);
}

/* Claude Desktop keeps its file in the platform's per-user application
 * folder: ~/Library/Application Support/Claude on macOS, the XDG
 * configuration folder elsewhere (the Linux builds follow XDG). */
static char *claude_dir(struct sg_err *err)
{
#ifdef __APPLE__
	const char *home = home_or_err(err);

	return home ? sg_xasprintf("%s/Library/Application Support/Claude", home) : NULL;
#else
	const char *xdg = getenv("XDG_CONFIG_HOME"), *home;

	if (xdg && xdg[0] == '/')
		return sg_xasprintf("%s/Claude", xdg);
	home = home_or_err(err);
	return home ? sg_xasprintf("%s/.config/Claude", home) : NULL;
#endif
}

char *sg_client_path(const struct sg_client *c, const char *workspace, struct sg_err *err)
{
	char cwd[PATH_MAX];
	char *dir = NULL, *path;
	const char *home;

	switch (c->base) {
	case SG_BASE_HOME:
		if (!(home = home_or_err(err)))
			return NULL;
		dir = sg_xstrdup(home);
		break;
	case SG_BASE_WORKSPACE:
		if (workspace && workspace[0] == '/') {
			dir = sg_xstrdup(workspace);
		} else if (!getcwd(cwd, sizeof(cwd))) {
			sg_errf(err, SG_E_IO, "cannot find the current directory: %s", strerror(errno));
			return NULL;
		} else {
			dir = workspace ? sg_xasprintf("%s/%s", cwd, workspace) : sg_xstrdup(cwd);
		}
		break;
	case SG_BASE_CLAUDE:
		dir = claude_dir(err);
		break;
	case SG_BASE_CODEX:
		dir = env_dir("CODEX_HOME", ".codex", err);
		break;
	case SG_BASE_HERMES:
		dir = env_dir("HERMES_HOME", ".hermes", err);
		break;
	}
	if (!dir)
		return NULL;
	path = sg_xasprintf("%s/%s", dir, c->relpath);
	free(dir);
	return path;
}
