/*
 * Tool registry and the helpers every tool handler uses: argument checks
 * whose errors name the field and the fix, the session's default machine,
 * and the wrapping of a handler's result into an MCP CallToolResult
 * (MCP 2025-11-25 server/tools: content, structuredContent, isError).
 */
#ifndef SG_CORE_TOOLS_H
#define SG_CORE_TOOLS_H

#include <stdbool.h>

#include <jansson.h>

#include <sandgate/plugin.h>

#include "core/base/args.h"

struct sg_call;
struct sg_entry;
struct sg_session;

struct sg_bulk;

struct sg_tool_ctx {
	struct sg_session *s;
	struct sg_call *call;
	struct sg_bulk *bulk; /* the call's large argument, or NULL (core/protocol/bulk.h) */
};

/* A handler fills *result with a new JSON object (the structured result) and
 * returns 0, or returns -1 with err (becomes an isError result).  A result
 * may carry "_content": an array of extra MCP content blocks (images),
 * removed from the structured result. */
typedef int sg_tool_fn(struct sg_tool_ctx *t, json_t *args, json_t **result,
		       struct sg_err *err);

/* One tool as tools/list shows it (MCP 2025-11-25 server/tools "Tool").
 * The texts are JSON, parsed once at registration. */
struct sg_tool {
	const char *name;
	/* Its first sentence says what the tool is for: clients show it to the
	 * model on every turn, so every word is paid for (doc/tools.md). */
	const char *description;
	const char *input_schema; /* JSON Schema text, an object */
	sg_tool_fn *fn;
	/* Optional: completes the parsed schema (in place, idempotent) once the
	 * backends are loaded, when the tool list is built. */
	void (*schema_hook)(json_t *schema);
	/* Optional: the hints that differ from MCP's defaults (readOnlyHint
	 * false, destructiveHint true, idempotentHint false, openWorldHint
	 * true), a JSON object text. */
	const char *annotations;
	/* Optional: JSON Schema text of structuredContent (types of the fields
	 * every result has; more fields may come).  Clients validate results
	 * against it, so a field that can be null is not listed. */
	const char *output_schema;
	/* Optional: a string argument (a file's content) the handler reads
	 * with sg_tool_text_arg(), so that a large one reaches it decoded once
	 * and not copied (core/protocol/bulk.h).  Only a content-like name
	 * (hashed in audit rows). */
	const char *bulk_arg;
};

/* The families [server] tools (or --tools) chooses from. */
#define SG_TOOLS_CLOUD "cloud"
#define SG_TOOLS_ENV "env"

/* Registers a family of tools (static storage; family a static string,
 * SG_TOOLS_CLOUD or SG_TOOLS_ENV).  A tool of a family the server does not
 * serve is neither listed nor found.  Aborts when a JSON text of a tool is
 * not valid: that is a bug, caught by the first test run. */
void sg_tools_register_family(const char *family, const struct sg_tool *tools, size_t n);
/* The same for tools served whatever the profile (the conformance
 * fixtures). */
void sg_tools_register(const struct sg_tool *tools, size_t n);
/* Registers the built-in families (cloud tools, sandbox_env tools). */
void sg_tools_init(void);
void sg_tools_fini(void);

/* The sandbox_env family (core/tools/env.c): shells, files, sandbox_env,
 * and sandbox_audit_query when the audit log is file-backed.  fini closes
 * the shells and the audit database. */
void sg_tools_env_init(void);
void sg_tools_env_fini(void);

/* The served tool of that name, or NULL. */
const struct sg_tool *sg_tool_find(const char *name);
/* When name is a tool this server does not serve because of [server]
 * tools: the family it belongs to (static).  Else NULL. */
const char *sg_tool_unserved_family(const char *name);

/* The tools/list result, built once (after the backends loaded) and
 * cached.  Thread-safe.  Borrowed JSON. */
json_t *sg_tools_list(void);
/* The same, serialised compactly, and its length.  Thread-safe; borrowed,
 * valid until the next sg_tools_register() or sg_tools_fini(). */
const char *sg_tools_list_text(size_t *len);

/* Runs a tool and returns the CallToolResult (new reference).  args may be
 * NULL (no arguments).  Every secret args holds (a string under a key that
 * names one, core/registry/redact.h) is replaced by "[redacted]" wherever
 * the result would show it. */
json_t *sg_tool_call(struct sg_tool_ctx *t, const struct sg_tool *tool, json_t *args);

/* A string argument as bytes: the call's large argument of that name when
 * it came apart from the message, else the JSON string (its length, NULs
 * included).  Errors as sg_arg_str().  The bytes are borrowed for the
 * call. */
int sg_tool_text_arg(const struct sg_tool_ctx *t, json_t *args, const char *name, bool required,
		     const char **p, size_t *len, struct sg_err *err);

/* The large argument `name` as the tool's to change in place (a base64
 * content decoded where it lies, rather than into a second buffer of its
 * size), its audit digest taken first; its length in *len.  NULL when the
 * argument did not come apart from the message (use sg_tool_text_arg()).
 * The bytes are the call's, valid until it ends. */
char *sg_tool_take_bulk(struct sg_tool_ctx *t, const char *name, size_t *len);

/* ---- machines ------------------------------------------------------------ */
/* The machine a call addresses: args' sandbox_id when given (not changing
 * the default), else the session's default, created lazily (concurrent lazy
 * calls share one).  Returns 0 and a reference (sg_machine_put()), with
 * *created true when this call created it; or -1 with err. */
int sg_tool_machine(struct sg_tool_ctx *t, json_t *args, struct sg_entry **out,
		    bool *created, struct sg_err *err);

/* Adds sandbox_id (and sandbox_created) to a result object. */
void sg_tool_result_machine(json_t *result, const struct sg_entry *e, bool created);
/* After a failed call on e: when the machine vanished on its backend
 * (SG_E_GONE) and it was the session's default, it stops being the default
 * and err says that calling again creates a new one; a machine the caller
 * named gets the fix of creating one or omitting sandbox_id.  Returns -1
 * (core/tools/cloud.c). */
int sg_tool_machine_failed(struct sg_tool_ctx *t, struct sg_entry *e, struct sg_err *err);

/* The run_code tool (core/tools/code.c). */
int sg_tool_run_code(struct sg_tool_ctx *t, json_t *args, json_t **result, struct sg_err *err);

#endif
