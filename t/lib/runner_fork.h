/*
 * The built runner for compiled tests: forked on a socketpair (its stdin
 * and stdout), as local.so starts it without the jail, and greeted through
 * the one runner client.  With the rnc_ops start and kill_group of a test
 * site built on them.
 */
#ifndef SG_T_RUNNER_FORK_H
#define SG_T_RUNNER_FORK_H

#include <stddef.h>
#include <sys/types.h>

#include "plugins/runner/rclient.h"
#include "t/lib/fakehost.h"

/* The runner's path: $SG_RUNNER, else $SG_TEST_BUILDDIR/sandgate-runner,
 * else ./sandgate-runner (a static buffer). */
const char *tl_runner_path(void);

/* A host for a test site: fakehost's, no configuration, state in /tmp. */
const char *tl_config_none(const char *section, const char *key);
const char *tl_state_tmp(void);
#define TL_RUNNER_HOST FAKEHOST_API(fakehost_log, tl_config_none, tl_state_tmp)

/* The pid of the last runner tl_runner_start() forked, or 0. */
extern pid_t tl_runner_pid;

/* An rnc_ops start: forks tl_runner_path() with arg, HELLO within 5 s.
 * Returns 0 with the opener's reference in *out and the path in path[size];
 * -1 with err (SG_E_IO) when it did not start.  ud is unused. */
int tl_runner_start(void *ud, const char *arg, struct rn_conn **out, char *path, size_t size,
		    struct sg_err *err);

/* An rnc_ops kill_group: SIGKILL to the group.  ud is unused. */
void tl_runner_kill_group(void *ud, long pgid);

#endif
