/* sandbox_shell_exec and sandbox_shell_read (core/tools/env.h). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/conf.h"
#include "core/base/err.h"
#include "core/registry/machine.h"
#include "core/shell/shell.h"
#include "core/tools/env.h"

/* ---- shells ------------------------------------------------------------------------ */

/* The shell a call means: shell_id, else the default shell of `machine`
 * (or of the session's default machine). */
int sg_env_shell(struct sg_tool_ctx *t, json_t *args, struct sg_shell **sh, bool *created,
		     struct sg_err *err)
{
	const char *id;
	struct sg_entry *e = NULL;

	*created = false;
	if (sg_arg_str(args, "shell_id", false, &id, err) < 0)
		return -1;
	if (id && *id) {
		*sh = sg_shell_get(t->s, id, err);
		return *sh ? 0 : -1;
	}
	if (sg_env_machine(t, args, "machine", &e, created, err) < 0)
		return -1;
	*sh = sg_shell_default(e, t->call, err);
	sg_machine_put(e);
	return *sh ? 0 : -1;
}

int sg_tool_shell_exec(struct sg_tool_ctx *t, json_t *args, json_t **result, struct sg_err *err)
{
	struct sg_shell_exec req = { 0 };
	struct sg_shell *sh = NULL;
	unsigned timeout, max_output;
	bool created;
	int ret = -1;

	if (sg_arg_str(args, "command", true, &req.command, err) < 0 ||
	    sg_arg_bool(args, "wait", true, &req.wait, err) < 0 ||
	    sg_arg_uint(args, "timeout", (unsigned)sg_config_int("shell", "timeout", 30), 0, 86400, &timeout,
			err) < 0 ||
	    sg_arg_uint(args, "max_output", (unsigned)sg_env_default_max_output(), 1, 16u << 20, &max_output, err) < 0)
		return -1;
	if (!*req.command)
		return sg_errf(err, SG_E_INVAL, "argument 'command' is empty: pass a shell command such as \"ls -la\"");
	if (sg_env_shell(t, args, &sh, &created, err) < 0)
		return -1;
	req.timeout_ms = timeout * 1000;
	req.max_output = max_output;
	if (sg_shell_exec(sh, &req, t->call, result, err) < 0)
		goto out;
	sg_env_add_machine(*result, sg_shell_machine(sh), created);
	ret = 0;
out:
	sg_shell_put(sh);
	return ret;
}

int sg_tool_shell_read(struct sg_tool_ctx *t, json_t *args, json_t **result, struct sg_err *err)
{
	struct sg_shell *sh = NULL;
	unsigned max_output;
	bool created;
	int ret;

	if (sg_arg_uint(args, "max_output", 0, 0, 16u << 20, &max_output, err) < 0)
		return -1;
	if (sg_env_shell(t, args, &sh, &created, err) < 0)
		return -1;
	ret = sg_shell_read(sh, max_output, result, err);
	if (ret == 0)
		sg_env_add_machine(*result, sg_shell_machine(sh), created);
	sg_shell_put(sh);
	return ret;
}

