/*
 * ssh.so's sandbox_env actions: persistent SSH machines on the targets the
 * operator configured (ssh_connect), and what an agent does with them
 * (ssh_disconnect, ssh_reconnect, ssh_remove).  The machine registry, the
 * shells and the record are the core's: these reach them through the host
 * API (machine_create, machine_remove, shells_close).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/ssh/ssh.h"

#include <string.h>

extern const struct sg_backend sg_backend;

static const char *ssh_param(const json_t *params, const char *key)
{
	const char *v = json_string_value(json_object_get(params, key));

	return v && *v ? v : NULL;
}

static const char *ssh_label(const struct sg_machine *m)
{
	return m->name && *m->name ? m->name : m->id;
}

/* ssh.so reaches the hosts the operator configured ([ssh.target.NAME] with
 * host, user, key): a persistent SSH machine names one with `target`.  An
 * ad-hoc host from the client is refused rather than passed on: a key path
 * would name a file on the sandgate host. */
static int ssh_act_connect(void *priv, struct sg_machine *machine, const json_t *params,
			   struct sg_call *call, json_t **result, struct sg_err *err)
{
	struct ssh_ctx *ctx = priv;
	const char *target = ssh_param(params, "target");
	struct sg_create_req req = { 0 };
	json_t *opts;
	int rc;

	(void)machine;
	if (ssh_param(params, "host"))
		return ctx->host->errf(err, SG_E_NOTSUP,
				       "ssh_connect takes a configured target, not a host: the operator defines [ssh.target.NAME] "
				       "(host, user, port, key) and you pass target=NAME; omit target for [ssh] default_host");
	if (target && !ssh_target_exists(ctx, target))
		return ctx->host->errf(err, SG_E_NOTFOUND,
				       "ssh_connect: no target '%s': the operator defines [ssh.target.%s] with host = HOST; "
				       "omit target for [ssh] default_host",
				       target, target);
	opts = json_object();
	if (!opts)
		return ctx->host->errf(err, SG_E_NOMEM, "ssh: out of memory");
	if (target)
		json_object_set_new(opts, "target", json_string(target));
	req.name = ssh_param(params, "name");
	req.options = opts;
	rc = ctx->host->machine_create(call, &sg_backend, &req, ssh_param(params, "purpose"), result,
				       err);
	if (rc == 0)
		json_object_set_new(*result, "target", json_string(target ? target : "default"));
	json_decref(opts);
	return rc;
}

/* Ends the machine's shells; idle connections close by themselves. */
static int ssh_act_disconnect(void *priv, struct sg_machine *machine, const json_t *params,
			      struct sg_call *call, json_t **result, struct sg_err *err)
{
	struct ssh_ctx *ctx = priv;

	(void)params, (void)call;
	ctx->host->shells_close(machine);
	ssh_code_end(machine);
	*result = json_pack("{s:s, s:s}", "machine", ssh_label(machine), "status", "stopped");
	return *result ? 0 : ctx->host->errf(err, SG_E_NOMEM, "ssh: out of memory");
}

/* Checks the machine answers (a new connection when the old one is gone). */
static int ssh_act_reconnect(void *priv, struct sg_machine *machine, const json_t *params,
			     struct sg_call *call, json_t **result, struct sg_err *err)
{
	struct ssh_ctx *ctx = priv;
	const char *argv[] = { "true", NULL };
	struct sg_exec_req req = { .argv = argv, .timeout_ms = 30000 };
	struct sg_exec_result res = { 0 };
	int rc;

	(void)params;
	rc = ssh_exec(machine, &req, call, &res, err);
	ctx->host->buf_release(&res.out);
	ctx->host->buf_release(&res.err);
	if (rc < 0)
		return -1;
	*result = json_pack("{s:s, s:s, s:s}", "machine", ssh_label(machine), "status", "running",
			    "target", machine->template_name);
	return *result ? 0 : ctx->host->errf(err, SG_E_NOMEM, "ssh: out of memory");
}

/* Removes the machine: its shells end and its directory is deleted. */
static int ssh_act_remove(void *priv, struct sg_machine *machine, const json_t *params,
			  struct sg_call *call, json_t **result, struct sg_err *err)
{
	struct ssh_ctx *ctx = priv;
	json_t *r = json_pack("{s:s, s:s, s:s}", "machine", ssh_label(machine), "status", "removed",
			      "target", machine->template_name);

	(void)params;
	if (!r)
		return ctx->host->errf(err, SG_E_NOMEM, "ssh: out of memory");
	if (ctx->host->machine_remove(call, machine, err) < 0) {
		json_decref(r);
		return -1;
	}
	*result = r;
	return 0;
}

#define SSH_MACHINE_SCHEMA                                                                          \
	"{\"type\": \"object\", \"properties\": {\"machine\": {\"type\": \"string\", \"description\": " \
	"\"the SSH machine's name or sandbox_id\"}}, \"required\": [\"machine\"], "                    \
	"\"additionalProperties\": false}"

const struct sg_action ssh_actions[SSH_N_ACTIONS] = {
	{ .name = "ssh_connect",
	  .summary = "a persistent SSH machine on a host the operator configured ([ssh.target.NAME]): "
		     "kept after the session, reachable only with your credential",
	  .params_schema = "{\"type\": \"object\", \"properties\": {"
			   "\"name\": {\"type\": \"string\", \"description\": \"the machine's name\"},"
			   "\"target\": {\"type\": \"string\", \"description\": \"a configured [ssh.target.NAME]; omitted: [ssh] default_host\"},"
			   "\"purpose\": {\"type\": \"string\", \"description\": \"what the machine is for\"},"
			   "\"host\": {\"type\": \"string\", \"description\": \"refused: name a configured target instead\"}"
			   "}, \"required\": [\"name\"], \"additionalProperties\": false}",
	  .example = "{\"name\": \"lab\", \"target\": \"lab\"}",
	  .needs_machine = false,
	  .handler = ssh_act_connect },
	{ .name = "ssh_disconnect",
	  .summary = "end an SSH machine's shells and code kernels (the machine and its files stay)",
	  .params_schema = SSH_MACHINE_SCHEMA,
	  .example = "{\"machine\": \"lab\"}",
	  .needs_machine = true,
	  .handler = ssh_act_disconnect },
	{ .name = "ssh_reconnect",
	  .summary = "check an SSH machine answers again (a fresh connection when the old one is gone)",
	  .params_schema = SSH_MACHINE_SCHEMA,
	  .example = "{\"machine\": \"lab\"}",
	  .needs_machine = true,
	  .handler = ssh_act_reconnect },
	{ .name = "ssh_remove",
	  .summary = "remove an SSH machine: its shells end, its directory is deleted",
	  .params_schema = SSH_MACHINE_SCHEMA,
	  .example = "{\"machine\": \"lab\"}",
	  .needs_machine = true,
	  .handler = ssh_act_remove },
};
