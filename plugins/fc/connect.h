/*
 * Connect protocol pieces for envd (ref. 5.1), free of libcurl and of the
 * host API so a unit test links this file alone:
 *
 *  - envelopes: 1 flag byte (0x00 data, 0x01 compressed, 0x02 end of stream),
 *    a 4-byte big-endian length, the JSON message.  Streaming requests are
 *    enveloped too (ref. 5.4: FC fails an un-enveloped Start).
 *  - the incremental decoder reads envelopes split anywhere across network
 *    chunks; a message longer than its cap, or a compressed one (sandgate
 *    never negotiates compression), is a protocol error.
 *  - proto3-JSON quirks: int64 as string or number, enums as names or
 *    numbers, defaults omitted (ref. 5.1).
 *  - base64: standard or URL-safe, padding optional.
 */
#ifndef SG_FC_CONNECT_H
#define SG_FC_CONNECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#define FC_ENV_DATA 0x00
#define FC_ENV_COMPRESSED 0x01
#define FC_ENV_END 0x02

/* Encodes one envelope of payload[0..n).  Returns a malloc'd buffer of
 * n + 5 bytes (caller frees), or NULL when out of memory or n > 4 GiB. */
unsigned char *fc_envelope(uint8_t flags, const void *payload, size_t n);

/* Called for each complete envelope; p[n] is a NUL the decoder adds.
 * Return 0 to go on, -1 to stop (fc_env_feed then returns -1). */
typedef int fc_env_fn(void *ud, uint8_t flags, const char *p, size_t n);

/* Decoder state.  Initialise with fc_env_init(); free with fc_env_free(). */
struct fc_env_dec {
	unsigned char hdr[5];
	size_t hlen;          /* header bytes seen of the current envelope */
	uint32_t need;        /* payload length of the current envelope */
	char *msg;            /* owned: the payload so far */
	size_t have;
	size_t max;           /* cap on one payload */
	bool failed;
	char why[128];        /* what went wrong, when failed */
};

void fc_env_init(struct fc_env_dec *d, size_t max);
void fc_env_free(struct fc_env_dec *d);

/* Feeds n bytes.  Returns 0, or -1 when a frame broke the rules (d->why says
 * which) or fn stopped. */
int fc_env_feed(struct fc_env_dec *d, const char *p, size_t n, fc_env_fn *fn, void *ud);

/* True between envelopes (no partial frame pending). */
bool fc_env_idle(const struct fc_env_dec *d);

/* An int64 field: JSON integer, real or decimal string.  def when absent,
 * unparsable or outside int64's range. */
int64_t fc_json_int64(const json_t *v, int64_t def);

/* An enum field given as its name or number: returns the number, matching
 * names[i] (with or without prefix) to i; -1 when unknown. */
int fc_json_enum(const json_t *v, const char *prefix, const char *const *names, int n);

/* Base64 (RFC 4648 standard alphabet, padded) of p[0..n): malloc'd string. */
char *fc_b64_encode(const void *p, size_t n);

/* Decodes standard or URL-safe base64, padding optional, whitespace ignored.
 * Returns a malloc'd buffer (NUL-terminated, *n excludes it), or NULL on bad
 * input or no memory. */
unsigned char *fc_b64_decode(const char *s, size_t len, size_t *n);

/* RFC 3339 timestamp to unix seconds; 0 when unparsable. */
int64_t fc_rfc3339(const char *s);

#endif /* SG_FC_CONNECT_H */
