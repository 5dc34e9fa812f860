/*
 * The sandbox_env tool family, in four files: env.c (the table of tools,
 * and what they share), env_shells.c (sandbox_shell_exec, _read),
 * env_files.c (sandbox_file_read, _write, _patch, _search) and
 * env_manage.c (the sandbox_env dispatcher: management actions, help, and
 * the plugins' own actions).  This header is theirs only.
 *
 * Machines: `machine` takes a sandbox id from create_sandbox or a
 * persistent machine's name; without it the session's default machine is
 * used, created lazily exactly as the cloud tools do (one registry, one
 * default).
 */
#ifndef SG_CORE_TOOLS_ENV_H
#define SG_CORE_TOOLS_ENV_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "core/tools/registry.h"

struct sg_entry;

/* Bytes a file tool moves: [files] max_file_size, else [sandbox]
 * max_file_bytes; sg_env_file_cap_key() names the one that applies (for
 * an error message). */
size_t sg_env_file_cap(void);
const char *sg_env_file_cap_key(void);

/* A [files] limit (lines, results) `key`, def when unset, clamped to
 * 1..1000000. */
unsigned sg_env_files_limit(const char *key, long long def);

/* Bytes of output a shell command returns by default: [shell] max_output,
 * else the seed's [shell] default_max_output. */
size_t sg_env_default_max_output(void);

/* The machine a call names in `key` (an id or a persistent name), else the
 * session's default (created lazily).  Returns 0 and a reference in *out
 * (sg_machine_put()), with *created when this call made it; or -1 with
 * err naming what the caller gave. */
int sg_env_machine(struct sg_tool_ctx *t, json_t *args, const char *key, struct sg_entry **out,
		   bool *created, struct sg_err *err);

/* The shell a call means: shell_id, else the default shell of `machine`
 * (or of the session's default machine).  A reference in *sh
 * (sg_shell_put()). */
struct sg_shell;
int sg_env_shell(struct sg_tool_ctx *t, json_t *args, struct sg_shell **sh, bool *created,
		 struct sg_err *err);

/* Adds sandbox_id, sandbox_created and machine (its name, else its id). */
void sg_env_add_machine(json_t *result, const struct sg_entry *e, bool created);

/* The handlers (sg_tool_fn). */
sg_tool_fn sg_tool_shell_exec, sg_tool_shell_read;
sg_tool_fn sg_tool_file_read, sg_tool_file_write, sg_tool_file_patch, sg_tool_file_search;
sg_tool_fn sg_tool_env;

#endif
