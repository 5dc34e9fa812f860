/*
 * The MCP clients sandgate installs itself into: where each keeps its
 * server list, in what format, and whether that file is private to the user
 * (a secret may go into it) or belongs to a workspace that is shared
 * (committed, synced): never a secret there.
 */
#ifndef SG_CORE_CLI_CLIENTS_H
#define SG_CORE_CLI_CLIENTS_H

#include <stdbool.h>

#include <sandgate/plugin.h>

enum sg_client_format {
	SG_CLIENT_JSON, /* merged by install */
	SG_CLIENT_TOML, /* printed only (--print) */
	SG_CLIENT_YAML, /* printed only (--print) */
};

enum sg_client_base {
	SG_BASE_HOME,      /* relpath under $HOME */
	SG_BASE_WORKSPACE, /* relpath under the workspace (--workspace, else the current directory) */
	SG_BASE_CLAUDE,    /* Claude Desktop's per-OS folder */
	SG_BASE_CODEX,     /* $CODEX_HOME, else ~/.codex */
	SG_BASE_HERMES,    /* $HERMES_HOME, else ~/.hermes */
};

struct sg_client {
	const char *target;   /* --target value: "cursor" */
	const char *title;    /* "Cursor", for messages */
	enum sg_client_format format;
	enum sg_client_base base;
	const char *relpath;  /* the file under its base */
	const char *servers;  /* the key holding the servers: "mcpServers" */
	bool workspace;       /* a shared file: no secret goes into it */
	bool type_stdio;      /* entries carry "type": "stdio" */
};

/* The client called target, or NULL. */
const struct sg_client *sg_client_find(const char *target);

/* Every client, in the order of the documentation; *n gets the count. */
const struct sg_client *sg_clients(size_t *n);

/* "cursor, claude, ..." for messages.  Static. */
const char *sg_client_targets(void);

/* The absolute path of c's configuration file.  workspace: the --workspace
 * folder or NULL for the current directory.  Caller frees; NULL with err
 * when the place is unknown ($HOME unset, no current directory). */
char *sg_client_path(const struct sg_client *c, const char *workspace, struct sg_err *err);

#endif
