/*
 * run_code through a runner's kernels (kernel_client.h), shared by the
 * plugins that start a runner (docker.so, ssh.so): the ABI's code group on
 * top of rn_kernel_run().  It turns an sg_code_req into a kernel call with
 * the machine's workspace as the kernel's start directory and the create-time
 * environment the core passes, and the kernel's answer into the
 * sg_code_result every backend fills alike (doc/kernel-protocol.md,
 * "run_code"): png results as MCP image blocks, a death or restart with its
 * reason, the files the code wrote.
 *
 * What differs by backend (getting the runner, whose kernel it is) stays in
 * each plugin.
 */
#ifndef SG_RUNNER_RCODE_H
#define SG_RUNNER_RCODE_H

#include <pthread.h>
#include <stdbool.h>

#include <sandgate/plugin.h>

#include "plugins/runner/client.h"

/* The languages the kernels run (others are SG_E_NOTSUP: the core's exec
 * path runs them once). */
#define RNC_LANGS 2

/* What a plugin keeps per machine: which runner each language's kernel was
 * started on, so that a kernel lost with its runner (the runner died and
 * was started again) is reported as a restart.  rnc_kstate_init() before
 * use, rnc_kstate_fini() when the machine is released. */
struct rnc_kstate {
	pthread_mutex_t lock;
	unsigned long gen[RNC_LANGS]; /* the runner's generation + 1; 0: never ran */
};

void rnc_kstate_init(struct rnc_kstate *st);
void rnc_kstate_fini(struct rnc_kstate *st);

/* True when the kernels run `language` ("python", "javascript"). */
bool rnc_language(const char *language);

/* One run_code on connection c (the caller's reference, kept).  gen counts
 * the runner's starts for this machine (a new number when the runner was
 * started again).  scope: whose kernel on a runner several machines share
 * (the machine id), or NULL for a runner of its own.  plugin names the
 * backend in messages.  Returns as the run_code slot: 0 with res filled
 * (also when the code raised, timed out, or its kernel died), -1 with err:
 * SG_E_NOTSUP (a language the kernels do not run), SG_E_NOTFOUND (no
 * interpreter in the machine), SG_E_CANCELLED (the call was cancelled: the
 * code was interrupted and the state kept), SG_E_IO (the runner connection
 * broke), SG_E_BACKEND (the runner refused the call: busy, too large). */
int rnc_run(const struct sg_host_api *host, const char *plugin, struct rn_conn *c,
	    unsigned long gen, struct rnc_kstate *st, const char *scope,
	    const struct sg_machine *m, const struct sg_code_req *req,
	    struct sg_call *call, struct sg_code_result *res, struct sg_err *err);

#endif /* SG_RUNNER_RCODE_H */
