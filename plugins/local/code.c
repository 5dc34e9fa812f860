/*
 * run_code on a sandbox's runner, the jail's first process: one kernel per
 * sandbox and language, started by the first call inside the jail (with the
 * host's interpreters the jail shows read-only) with the create-time
 * environment the core passes and /workspace as start directory, kept until
 * the jail ends with the sandbox.  The runner is the sandbox's own, so its
 * kernels need no scope.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/local/local.h"

int local_run_code(struct sg_machine *m, const struct sg_code_req *req, struct sg_call *call,
		   struct sg_code_result *res, struct sg_err *err)
{
	struct local_machine *lm = local_machine_of(m, err);
	struct rn_conn *c;
	int rc;

	if (!lm)
		return -1;
	if (!rnc_language(req->language))
		return lm->ctx->host->errf(err, SG_E_NOTSUP, "local: no %s kernel", req->language);
	rc = rnc_site_get(&lm->site, &c, err);
	if (rc < 0)
		return -1;
	if (rc > 0) /* never so today: a local sandbox is its runner */
		return lm->ctx->host->errf(err, SG_E_NOTSUP, "local: sandbox %s has no runner, "
					   "so no kernels", m->id);
	rc = rnc_run(lm->ctx->host, LOCAL_PLUGIN, c, rnc_site_restarts(&lm->site), &lm->code,
		     NULL, m, req, call, res, err);
	rn_conn_put(c);
	return rc;
}
