/*
 * run_code on a container's runner (runner.c starts it): one kernel per
 * container and language, started by the first call with the container's
 * create-time environment and its workspace as start directory, kept until
 * the container (and so its runner) ends.  The runner is the container's
 * own, so its kernels need no scope.  Without a runner ([docker] runner =
 * false, or it cannot run there) the slot answers SG_E_NOTSUP and the core
 * runs the code once with exec.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/docker/docker.h"

int docker_run_code(struct sg_machine *m, const struct sg_code_req *req, struct sg_call *call,
		    struct sg_code_result *res, struct sg_err *err)
{
	struct docker_ctx *ctx = docker_ctx_of(m, err);
	struct docker_machine *dm;
	struct rn_conn *c;
	int rc;

	if (!ctx)
		return -1;
	dm = m->handle;
	if (!rnc_language(req->language))
		return ctx->host->errf(err, SG_E_NOTSUP, "docker: no %s kernel",
				       req->language);
	rc = rnc_site_get(&dm->site, &c, err);
	if (rc < 0)
		return -1;
	if (rc > 0)
		return ctx->host->errf(err, SG_E_NOTSUP, "docker: container %s has no runner, "
				       "so no kernels", m->id);
	rc = rnc_run(ctx->host, DOCKER_PLUGIN, c, docker_runner_generation(m), &dm->code, NULL,
		     m, req, call, res, err);
	rn_conn_put(c);
	return rc;
}
