/* Whether each backend is usable now, for `sandgate status`. */
#ifndef SG_CORE_CLI_BACKENDS_H
#define SG_CORE_CLI_BACKENDS_H

#include <jansson.h>

/* Fills *out with a new array (the caller's reference), one object per
 * loaded backend, in load order:
 *   {"name": "docker", "usable": true | false | null, "why": "..."}
 * "usable" is null when it cannot be told; "why" says what was checked or
 * what failed (engine version and endpoint, SSH targets and host keys, the
 * FC endpoint and whether the key was accepted), never a secret.  Returns 0,
 * or -1 with *out NULL.
 *
 * Until the plugins have a probe slot (ABI 2.0), every loaded backend is
 * reported as {"usable": null, "why": "probe not available"}. */
int sg_status_backends(json_t **out);

#endif
