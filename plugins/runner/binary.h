/*
 * The sandgate-runner binary on this host, as a plugin finds and reads it
 * before putting it into a machine.  Shared by docker.so and (later) ssh.so:
 * compiled into each plugin, it looks next to that plugin's own .so.
 *
 * Where, in order: the configured path (a plugin's runner_path key or
 * SANDGATE_RUNNER), next to the plugin's .so, one level up from a libtool
 * .libs directory (the build tree), and RUNNERDIR ($(pkglibexecdir)).
 */
#ifndef SG_RUNNER_BINARY_H
#define SG_RUNNER_BINARY_H

#include <stddef.h>

#include "plugins/runner/proto.h"

#define RN_BINARY_NAME "sandgate-runner"
#define RN_BINARY_MAX  (16u * 1024u * 1024u) /* larger is not ours */

/* The whole file and its build id.  data is malloc'd and freed by
 * rn_binary_free(); the struct itself belongs to the caller. */
struct rn_binary {
	unsigned char *data;
	size_t len;
	char id[RN_BUILD_ID_LEN + 1];
	char path[4096];
};

/* Finds (configured may be NULL or "") and reads the binary.  Returns 0, or
 * -1 with why (which names the path and the config key `key_hint`). */
int rn_binary_load(struct rn_binary *b, const char *configured, const char *key_hint,
		   char *why, size_t size);
void rn_binary_free(struct rn_binary *b);

#endif /* SG_RUNNER_BINARY_H */
