/*
 * Fuzz target: the Streamable HTTP request checks (transports/http_check.c).
 * The input is a request head: "METHOD PATH" on the first line, then
 * "Name: value" lines, then (after an empty line) a body.  The head goes
 * through the checks transports/http.c runs, against the default
 * allowed_hosts (localhost, 127.0.0.1, [::1]) and one bearer token; every
 * value also goes through each parser on its own.
 *
 * Oracles, written apart from the parsers: an accepted Host is one of the
 * three loopback names (or an IPv6 form of ::1), in any case, with at most a
 * port of 1 to 5 digits; an accepted Origin is a scheme, "://" and such a
 * host, nothing after; an accepted request had no single-valued header
 * twice, a Content-Length of digits only and not beside Transfer-Encoding,
 * and the token; a parsed event id prints back to its numbers.
 */
#include "config.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <string.h>
#include <strings.h>

#include <openssl/sha.h>

#include "transports/http_check.h"
#include "t/fuzz/fuzz.h"

#define TOKEN "tok-fuzz"

static struct sg_http_allow allow;
static unsigned char digest[SG_HTTP_DIGEST];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	if (sg_http_allow_parse("localhost,127.0.0.1,[::1]", &allow, NULL) < 0)
		abort();
	SHA256((const unsigned char *)TOKEN, strlen(TOKEN), digest);
	return 0;
}

/* host[:port], written without the parser: is it a loopback host? */
static bool oracle_loopback(const char *s, size_t len)
{
	char h[300];
	size_t hl = len;
	const char *colon;

	if (len >= sizeof(h))
		return false;
	/* a port: ':' then 1 to 5 digits up to 65535, at the very end */
	colon = NULL;
	for (size_t i = len; i > 0; i--) {
		if (s[i - 1] == ':') {
			colon = s + i - 1;
			break;
		}
		if (!isdigit((unsigned char)s[i - 1]))
			break;
	}
	if (colon) {
		size_t digits = len - (size_t)(colon - s) - 1;
		char num[8];

		if (digits >= 1 && digits <= 5) {
			memcpy(num, colon + 1, digits);
			num[digits] = '\0';
			if (atoi(num) <= 65535)
				hl = (size_t)(colon - s);
		}
	}
	memcpy(h, s, hl);
	h[hl] = '\0';
	if (!strcasecmp(h, "localhost") || !strcmp(h, "127.0.0.1"))
		return true;
	if (hl > 2 && h[0] == '[' && h[hl - 1] == ']') {
		unsigned char a[16];
		static const unsigned char one[16] = { [15] = 1 };

		h[hl - 1] = '\0';
		return inet_pton(AF_INET6, h + 1, a) == 1 && memcmp(a, one, 16) == 0;
	}
	return false;
}

static bool oracle_origin(const char *s)
{
	const char *p = s;

	if (!isalpha((unsigned char)*p))
		return false;
	while (isalnum((unsigned char)*p) || *p == '+' || *p == '-' || *p == '.')
		p++;
	if (strncmp(p, "://", 3) != 0)
		return false;
	return oracle_loopback(p + 3, strlen(p + 3));
}

static bool all_digits(const char *s)
{
	if (!*s)
		return false;
	while (isdigit((unsigned char)*s))
		s++;
	return !*s;
}

static void parsers(const char *v)
{
	struct sg_http_host h;
	unsigned a, b;
	char back[32];

	if (sg_http_parse_host(v, strlen(v), &h) == 0) {
		FUZZ_ASSERT(h.port >= -1 && h.port <= 65535);
		FUZZ_ASSERT(strlen(h.name) > 0 && strlen(h.name) <= SG_HTTP_HOST_MAX);
		FUZZ_ASSERT(sg_http_allowed(&allow, &h) == oracle_loopback(v, strlen(v)));
	}
	if (sg_http_parse_origin(v, &h) == 0)
		FUZZ_ASSERT(sg_http_allowed(&allow, &h) == oracle_origin(v));
	if (!sg_http_check_host_origin(&allow, v, NULL))
		FUZZ_ASSERT(oracle_loopback(v, strlen(v)));
	if (!sg_http_check_host_origin(&allow, NULL, v))
		FUZZ_ASSERT(oracle_origin(v));
	if (sg_http_event_id_parse(v, &a, &b) == 0) {
		snprintf(back, sizeof(back), "%u-%u", a, b);
		/* leading zeros are the only other spelling */
		FUZZ_ASSERT(strlen(v) >= strlen(back));
	}
	if (sg_http_session_id_valid(v))
		FUZZ_ASSERT(strlen(v) == SG_HTTP_SESSION_ID_LEN);
}

/* Splits the input into NUL-terminated lines in buf. */
static size_t split(const uint8_t *data, size_t size, char *buf, char **lines, size_t max,
		    const char **body, size_t *body_len)
{
	size_t n = 0, i = 0;

	memcpy(buf, data, size);
	buf[size] = '\0';
	*body = NULL;
	*body_len = 0;
	while (i <= size && n < max) {
		char *start = buf + i, *nl = memchr(start, '\n', size - i);

		if (!nl) {
			lines[n++] = start;
			break;
		}
		*nl = '\0';
		if (nl > start && nl[-1] == '\r')
			nl[-1] = '\0';
		if (!*start && n > 0) {
			*body = nl + 1;
			*body_len = size - (size_t)(nl + 1 - buf);
			break;
		}
		lines[n++] = start;
		i = (size_t)(nl - buf) + 1;
	}
	return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *buf = malloc(size + 1), *lines[64], *sp;
	size_t n, body_len;
	const char *body;
	struct sg_http_req r = { 0 };
	struct sg_http_policy p = { .allow = &allow, .local_owner = "local:0", .max_body = 4096 };
	struct sg_http_verdict v = { 0 };
	int rc;

	n = split(data, size, buf, lines, 64, &body, &body_len);
	if (n == 0)
		goto out;
	if (size > 0 && (data[0] & 1)) {
		p.tokens = (const unsigned char (*)[SG_HTTP_DIGEST])digest;
		p.n_tokens = 1;
	}
	p.stopping = size > 0 && (data[0] & 2);
	r.method = lines[0];
	if ((sp = strchr(lines[0], ' '))) {
		*sp = '\0';
		r.path = sp + 1;
	}
	for (size_t i = 1; i < n; i++) {
		char *colon = strchr(lines[i], ':'), *val;

		if (!colon)
			continue;
		*colon = '\0';
		for (val = colon + 1; *val == ' ' || *val == '\t'; val++)
			;
		sg_http_req_header(&r, lines[i], val);
		parsers(val);
	}
	rc = sg_http_check_access(&p, &r, &v);
	if (rc == 0) {
		bool bad;
		char owner[96];

		FUZZ_ASSERT(v.status == 0);
		FUZZ_ASSERT(!r.repeated);
		FUZZ_ASSERT(!r.host || oracle_loopback(r.host, strlen(r.host)));
		FUZZ_ASSERT(!r.origin || oracle_origin(r.origin));
		FUZZ_ASSERT(!r.content_length || (all_digits(r.content_length) && !r.transfer_encoding));
		FUZZ_ASSERT(!p.stopping);
		FUZZ_ASSERT(sg_http_authenticate(&p, r.authorization, owner, &bad) == 0 && !bad);
		FUZZ_ASSERT(!strcmp(owner, v.owner));
		if (p.n_tokens)
			FUZZ_ASSERT(!strncmp(v.owner, "token:", 6) && strlen(v.owner) == 22);
		rc = sg_http_check_message(&p, &r, &v);
		if (rc == 0)
			FUZZ_ASSERT(v.want_json || v.want_sse);
	}
	if (rc < 0)
		FUZZ_ASSERT(v.status >= 400 && v.status < 600 && v.why[0]);
	if (body)
		(void)sg_http_body_is_initialize(body, body_len);
out:
	free(buf);
	return 0;
}
