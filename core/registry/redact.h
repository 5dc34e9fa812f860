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

/* True when `key` names a secret (a content field such as "content" does
 * not): password, passphrase, secret, token, api_key, "key" or any name
 * ending in it, ... with case, '-' and '_' ignored. */
bool sg_redact_key_names_secret(const char *key);

/* ---- results ----
 * A tool's result never holds a secret the caller passed: every string of
 * at least SG_REDACT_MIN_SECRET bytes found under a key that names a
 * secret, at any depth of the arguments (envs' names included), is
 * replaced by SG_REDACTED wherever it appears in the result's strings
 * (structured fields, texts and error messages).  Shorter values are not
 * looked for: replacing every "ab" of a command's output would hide more
 * than it protects (they are still hashed in audit rows). */
#define SG_REDACT_MIN_SECRET 4
#define SG_REDACTED "[redacted]"

/* The secret strings of args: a new array of borrowed-value references, or
 * NULL when there are none (the common case: nothing to scrub). */
json_t *sg_redact_secrets(json_t *args);

/* Replaces, in place, every occurrence of each of secrets (from
 * sg_redact_secrets(); NULL does nothing) in v's strings. */
void sg_redact_scrub(json_t *v, json_t *secrets);

/* s[0..n) with every occurrence of each of secrets replaced: a new string
 * (the caller frees) and its length in *out_len, or NULL when it holds
 * none (or secrets is NULL). */
char *sg_redact_text(const char *s, size_t n, json_t *secrets, size_t *out_len);

#endif
