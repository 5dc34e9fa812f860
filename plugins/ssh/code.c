/*
 * run_code on a target's runner (runner.c starts it): the runner is shared
 * by every sandbox on the target, so each sandbox's kernels are its own
 * scope there (its id): one kernel per sandbox and language, started by the
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
	struct ssh_rlink l;
	int rc;

	if (!sm)
		return -1;
	if (!rnc_language(req->language))
		return sm->ctx->host->errf(err, SG_E_NOTSUP, "ssh: no %s kernel", req->language);
	rc = ssh_runner_get(sm->pool, &l, err);
	if (rc < 0)
		return -1;
	if (rc > 0)
		return sm->ctx->host->errf(err, SG_E_NOTSUP, "ssh: no runner on %s, so no kernels",
					   sm->pool->target.host);
	rc = rnc_run(sm->ctx->host, SSH_PLUGIN, l.rc, ssh_runner_generation(sm->pool), &sm->code,
		     m->id, m, req, call, res, err);
	ssh_runner_put(&l);
	return rc;
}

void ssh_code_end(struct sg_machine *m)
{
	struct ssh_machine *sm = m->handle;
	struct ssh_rlink l;
	char why[256];

	if (!sm || ssh_runner_peek(sm->pool, &l) != 0)
		return;
	if (rn_kernel_end(l.rc, m->id, NULL, why, sizeof(why)) < 0)
		ssh_log(sm->ctx, SG_LOG_DEBUG, "ending the kernels of %s: %s", m->id, why);
	ssh_runner_put(&l);
}
