/*
 * Connect envelope framing and proto3-JSON helpers (ref. 5.1); see connect.h.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/fc/connect.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

unsigned char *fc_envelope(uint8_t flags, const void *payload, size_t n)
{
	unsigned char *b;

	if (n > 0xffffffffu)
		return NULL;
	b = malloc(n + 5); /* caller frees */
	if (!b)
		return NULL;
	b[0] = flags;
	b[1] = (unsigned char)(n >> 24);
	b[2] = (unsigned char)(n >> 16);
	b[3] = (unsigned char)(n >> 8);
	b[4] = (unsigned char)n;
	if (n)
		memcpy(b + 5, payload, n);
	return b;
}

void fc_env_init(struct fc_env_dec *d, size_t max)
{
	memset(d, 0, sizeof(*d));
	d->max = max;
}

void fc_env_free(struct fc_env_dec *d)
{
	free(d->msg);
	d->msg = NULL;
}

bool fc_env_idle(const struct fc_env_dec *d)
{
	return d->hlen == 0;
}

static int fc_env_fail(struct fc_env_dec *d, const char *why)
{
	d->failed = true;
	snprintf(d->why, sizeof(d->why), "%s", why);
	return -1;
}

/* The header is complete: check it and size the payload buffer. */
static int fc_env_header(struct fc_env_dec *d)
{
	char *m;

	d->need = (uint32_t)d->hdr[1] << 24 | (uint32_t)d->hdr[2] << 16 |
		  (uint32_t)d->hdr[3] << 8 | (uint32_t)d->hdr[4];
	if (d->hdr[0] & FC_ENV_COMPRESSED)
		return fc_env_fail(d, "a compressed envelope (compression was never negotiated)");
	if (d->hdr[0] & ~(FC_ENV_END | FC_ENV_COMPRESSED))
		return fc_env_fail(d, "an envelope with unknown flags");
	if (d->need > d->max) {
		char why[96];

		snprintf(why, sizeof(why), "an envelope of %u bytes, more than the %zu allowed",
			 d->need, d->max);
		return fc_env_fail(d, why);
	}
	m = realloc(d->msg, (size_t)d->need + 1); /* owned by d */
	if (!m)
		return fc_env_fail(d, "out of memory");
	d->msg = m;
	d->have = 0;
	return 0;
}

int fc_env_feed(struct fc_env_dec *d, const char *p, size_t n, fc_env_fn *fn, void *ud)
{
	if (d->failed)
		return -1;
	while (n > 0) {
		size_t take;

		if (d->hlen < 5) {
			d->hdr[d->hlen++] = (unsigned char)*p++;
			n--;
			if (d->hlen == 5 && fc_env_header(d) < 0)
				return -1;
			if (d->hlen < 5 || d->need > 0)
				continue;
		}
		take = d->need - d->have;
		if (take > n)
			take = n;
		memcpy(d->msg + d->have, p, take);
		d->have += take;
		p += take;
		n -= take;
		if (d->have < d->need)
			continue;
		d->msg[d->need] = '\0';
		d->hlen = 0;
		if (fn(ud, d->hdr[0], d->msg, d->need) < 0)
			return fc_env_fail(d, "stopped by the reader");
	}
	return 0;
}

/* ---- proto3 JSON ------------------------------------------------------------- */

int64_t fc_json_int64(const json_t *v, int64_t def)
{
	const char *s;
	char *end;
	long long n;
	double d;

	if (json_is_integer(v))
		return (int64_t)json_integer_value(v);
	if (json_is_real(v)) {
		/* Converting a double outside int64's range is undefined:
		 * 2^63 is the first value past it, -2^63 the last in it. */
		d = json_real_value(v);
		return d >= -9223372036854775808.0 && d < 9223372036854775808.0 ? (int64_t)d : def;
	}
	if (!json_is_string(v))
		return def;
	s = json_string_value(v);
	errno = 0;
	n = strtoll(s, &end, 10);
	return (end != s && *end == '\0' && errno == 0) ? (int64_t)n : def;
}

int fc_json_enum(const json_t *v, const char *prefix, const char *const *names, int n)
{
	size_t pl = prefix ? strlen(prefix) : 0;
	const char *s;

	if (json_is_integer(v)) {
		json_int_t i = json_integer_value(v);

		return i >= 0 && i < n ? (int)i : -1;
	}
	if (!json_is_string(v))
		return -1;
	s = json_string_value(v);
	if (pl && strncmp(s, prefix, pl) == 0)
		s += pl;
	for (int i = 0; i < n; i++)
		if (names[i] && strcasecmp(s, names[i]) == 0)
			return i;
	return -1;
}

/* ---- base64 ------------------------------------------------------------------- */

char *fc_b64_encode(const void *p, size_t n)
{
	static const char a[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	const unsigned char *s = p;
	char *out = malloc(4 * ((n + 2) / 3) + 1), *o = out; /* caller frees */
	size_t i;

	if (!out)
		return NULL;
	for (i = 0; i + 2 < n; i += 3) {
		*o++ = a[s[i] >> 2];
		*o++ = a[(s[i] & 3) << 4 | s[i + 1] >> 4];
		*o++ = a[(s[i + 1] & 15) << 2 | s[i + 2] >> 6];
		*o++ = a[s[i + 2] & 63];
	}
	if (i < n) {
		*o++ = a[s[i] >> 2];
		if (i + 1 < n) {
			*o++ = a[(s[i] & 3) << 4 | s[i + 1] >> 4];
			*o++ = a[(s[i + 1] & 15) << 2];
		} else {
			*o++ = a[(s[i] & 3) << 4];
			*o++ = '=';
		}
		*o++ = '=';
	}
	*o = '\0';
	return out;
}

static int fc_b64_val(unsigned char c)
{
	if (c >= 'A' && c <= 'Z') return c - 'A';
	if (c >= 'a' && c <= 'z') return c - 'a' + 26;
	if (c >= '0' && c <= '9') return c - '0' + 52;
	if (c == '+' || c == '-') return 62;
	if (c == '/' || c == '_') return 63;
	return -1;
}

unsigned char *fc_b64_decode(const char *s, size_t len, size_t *n)
{
	unsigned char *out = malloc(len / 4 * 3 + 4), *o = out; /* caller frees */
	unsigned acc = 0;
	int bits = 0;
	bool pad = false;

	if (!out)
		return NULL;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		int v;

		if (isspace(c))
			continue;
		if (c == '=') {
			pad = true;
			continue;
		}
		v = fc_b64_val(c);
		if (v < 0 || pad) {
			free(out);
			return NULL;
		}
		acc = (acc << 6) | (unsigned)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			*o++ = (unsigned char)(acc >> bits);
			acc &= (1u << bits) - 1;
		}
	}
	if (bits >= 6) { /* a lone sixth of a byte is not base64 */
		free(out);
		return NULL;
	}
	*o = '\0';
	*n = (size_t)(o - out);
	return out;
}

int64_t fc_rfc3339(const char *s)
{
	struct tm tm = { 0 };
	int y, mo, d, h, mi, sec, n = 0;
	const char *p;
	int64_t t;

	if (!s || sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &sec, &n) < 6)
		return 0;
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = sec;
	t = (int64_t)timegm(&tm);
	p = s + n;
	if (*p == '.')
		for (p++; isdigit((unsigned char)*p); p++)
			;
	if ((*p == '+' || *p == '-') && isdigit((unsigned char)p[1])) {
		int oh = 0, om = 0;

		if (sscanf(p + 1, "%2d:%2d", &oh, &om) >= 1)
			t -= (*p == '+' ? 1 : -1) * (int64_t)(oh * 3600 + om * 60);
	}
	return t;
}
