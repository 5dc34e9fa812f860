/* Whether each backend is usable now, for `sandgate status`. */
#ifndef SG_CORE_CLI_BACKENDS_H
#define SG_CORE_CLI_BACKENDS_H

#include <jansson.h>

/* Fills *out with a new array (the caller's reference), one object per
 * loaded backend, in load order, from the plugin's probe slot:
 *   {"name": NAME, "usable": true | false, "why": "...", "preference": 40,
 *    "version", "abi", "path", "details": {...}}
 * "why" says what failed and how to fix it, or that the probe succeeded;
 * "details" what the plugin checked (its endpoint and version, whether a
 * key is set), never a secret.
 * Returns 0. */
int sg_status_backends(json_t **out);

#endif
