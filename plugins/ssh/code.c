/*
 * run_code on a machine's runner (runner.c starts it): the target's, shared
 * by every unjailed sandbox there, or a jailed sandbox's own; each
 * sandbox's kernels are its own scope there (its id): one kernel per sandbox and language, started by the
 * first call with the sandbox's create-time environment in its directory,
 * kept until the sandbox is released (its end, the end of the session that
 * holds it) or ssh_disconnect.  Without a runner ([ssh] runner = false, or
 * it cannot run on that host) the slot answers SG_E_NOTSUP and the core runs
 * the code once with exec.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/ssh/ssh.h"

#include "plugins/runner/kernel_client.h"

int ssh_run_code(struct sg_machine *m, const struct sg_code_req *req, struct sg_call *call,
		 struct sg_code_result *res, struct sg_err *err)
{
	struct ssh_machine *sm = ssh_machine_of(m, err);
	struct rnc_site *site;
	struct rn_conn *c;
	int rc;

	if (!sm)
		return -1;
	if (!rnc_language(req->language))
		return sm->ctx->host->errf(err, SG_E_NOTSUP, "ssh: no %s kernel", req->language);
	site = ssh_site_of(sm);
	rc = rnc_site_get(site, &c, err);
	if (rc < 0)
		return -1;
	if (rc > 0)
		return sm->ctx->host->errf(err, SG_E_NOTSUP, "ssh: no runner on %s, so no kernels",
					   sm->pool->target.host);
	rc = rnc_run(sm->ctx->host, SSH_PLUGIN, c, rnc_site_restarts(site), &sm->code, m->id, m,
		     req, call, res, err);
	rn_conn_put(c);
	return rc;
}

void ssh_code_end(struct sg_machine *m)
{
	struct ssh_machine *sm = m->handle;
	struct rn_conn *c;
	char why[256];

	if (!sm || rnc_site_peek(ssh_site_of(sm), &c) != 0)
		return;
	if (rn_kernel_end(c, m->id, NULL, why, sizeof(why)) < 0)
		ssh_log(sm->ctx, SG_LOG_DEBUG, "ending the kernels of %s: %s", m->id, why);
	rn_conn_put(c);
}
