/*
 * What an audit row may not hold in clear: file contents, code, patches,
 * every value of envs/env, and any value under a key that names a secret
 * (password, token, private_key, api_key, ...).  Each becomes
 * {"hmac_sha256": HEX, "len": N}: HMAC-SHA256 under a key of this install
 * (<state dir>/audit.key, 32 random bytes, mode 0600, made by the first
 * sandgate that needs it), so a weak value cannot be found by hashing
 * guesses without that key, while whoever holds it can still check whether
 * a row holds a given value.  Strings are hashed as their bytes, other
 * values as their compact JSON.
 */
#ifndef SG_CORE_REDACT_H
#define SG_CORE_REDACT_H

#include <stdbool.h>

#include <jansson.h>

/* A copy of args with every such value replaced.  New reference; args is
 * borrowed (NULL gives an empty object). */
json_t *sg_redact(json_t *args);

/* {"hmac_sha256": ..., "len": len} of the bytes p[0..len).  New reference. */
json_t *sg_redact_digest(const void *p, size_t len);

/* True when a value under `key` is a secret or a content (hashed whole). */
bool sg_redact_key_is_secret(const char *key);

#endif
