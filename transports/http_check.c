/* Request checks of the Streamable HTTP transport: see http_check.h. */
#include "config.h"

#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>

#include "core/base/err.h"
#include "core/server/mcp.h"
#include "core/base/util.h"
#include "transports/http_check.h"

/* ---- hosts ----------------------------------------------------------------- */

/* ASCII only, whatever the locale says of other bytes. */
static bool ascii_alpha(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool ascii_alnum(unsigned char c)
{
	return ascii_alpha(c) || (c >= '0' && c <= '9');
}

/* RFC 3986 unreserved characters: what a DNS name or IPv4 address is made
 * of.  Percent-encoding and sub-delims name no host a client would use. */
static bool name_char(unsigned char c)
{
	return ascii_alnum(c) || c == '-' || c == '.' || c == '_' || c == '~';
}

/* ":" 1*5DIGIT up to 65535 at s[0..len) exactly.  Returns the port or -1. */
static int parse_port(const char *s, size_t len)
{
	int port = 0;

	if (len < 2 || len > 6 || s[0] != ':')
		return -1;
	for (size_t i = 1; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		port = port * 10 + (s[i] - '0');
	}
	return port <= 65535 ? port : -1;
}

/* "[" IPv6address "]" at the start of s[0..len).  Returns the bytes used
 * (brackets included), or 0 when it is not one. */
static size_t parse_v6(const char *s, size_t len, struct sg_http_host *out)
{
	char text[INET6_ADDRSTRLEN + 1];
	const char *end = memchr(s, ']', len);
	size_t n;

	if (!end)
		return 0;
	n = (size_t)(end - s) - 1;
	/* inet_pton reads up to a NUL: the address alone, no zone id ('%'). */
	if (n == 0 || n >= sizeof(text) || memchr(s + 1, '\0', n))
		return 0;
	memcpy(text, s + 1, n);
	text[n] = '\0';
	if (inet_pton(AF_INET6, text, out->v6) != 1)
		return 0;
	out->is_v6 = true;
	return n + 2;
}

int sg_http_parse_host(const char *s, size_t len, struct sg_http_host *out)
{
	size_t n = 0;

	memset(out, 0, sizeof(*out));
	out->port = -1;
	if (len > 0 && s[0] == '[') {
		n = parse_v6(s, len, out);
		if (n == 0)
			return -1;
	} else {
		while (n < len && name_char((unsigned char)s[n]))
			n++;
		if (n == 0)
			return -1;
	}
	if (n > SG_HTTP_HOST_MAX)
		return -1;
	for (size_t i = 0; i < n; i++)
		out->name[i] = (char)(s[i] >= 'A' && s[i] <= 'Z' ? s[i] + ('a' - 'A') : s[i]);
	out->name[n] = '\0';
	if (n < len && (out->port = parse_port(s + n, len - n)) < 0)
		return -1;
	return 0;
}

int sg_http_parse_origin(const char *s, struct sg_http_host *out)
{
	const char *p = s;

	if (!ascii_alpha((unsigned char)*p))
		return -1;
	while (ascii_alnum((unsigned char)*p) || *p == '+' || *p == '-' || *p == '.')
		p++;
	if (strncmp(p, "://", 3) != 0)
		return -1;
	p += 3;
	return sg_http_parse_host(p, strlen(p), out);
}

void sg_http_allow_free(struct sg_http_allow *a)
{
	free(a->hosts);
	memset(a, 0, sizeof(*a));
}

int sg_http_allow_parse(const char *list, struct sg_http_allow *out, struct sg_err *err)
{
	memset(out, 0, sizeof(*out));
	while (*list) {
		size_t len = strcspn(list, ",");
		const char *p = list, *e = list + len;
		struct sg_http_host h;

		list += len + (list[len] ? 1 : 0);
		while (p < e && (*p == ' ' || *p == '\t'))
			p++;
		while (e > p && (e[-1] == ' ' || e[-1] == '\t'))
			e--;
		if (e == p)
			continue;
		if (e - p == 1 && *p == '*') {
			sg_http_allow_free(out);
			out->any = true;
			return 0;
		}
		if (sg_http_parse_host(p, (size_t)(e - p), &h) < 0) {
			sg_errf(err, SG_E_INVAL,
				"[server] allowed_hosts: '%.*s' is not a host name: use names such as localhost, 127.0.0.1 or [::1] (a port is ignored), or '*'",
				(int)(e - p > 80 ? 80 : e - p), p);
			sg_http_allow_free(out);
			return -1;
		}
		out->hosts = sg_xrealloc(out->hosts, (out->n + 1) * sizeof(*out->hosts));
		out->hosts[out->n++] = h;
	}
	return 0;
}

static bool same_host(const struct sg_http_host *a, const struct sg_http_host *b)
{
	if (a->is_v6 || b->is_v6)
		return a->is_v6 && b->is_v6 && memcmp(a->v6, b->v6, sizeof(a->v6)) == 0;
	return strcmp(a->name, b->name) == 0;
}

bool sg_http_allowed(const struct sg_http_allow *a, const struct sg_http_host *h)
{
	if (a->any)
		return true;
	for (size_t i = 0; i < a->n; i++)
		if (same_host(&a->hosts[i], h))
			return true;
	return false;
}

const char *sg_http_check_host_origin(const struct sg_http_allow *a, const char *host,
				      const char *origin)
{
	struct sg_http_host h;

	/* "*" still wants well-formed values: a header that is not a host
	 * is refused whatever the list. */
	if (host && (sg_http_parse_host(host, strlen(host), &h) < 0 || !sg_http_allowed(a, &h)))
		return "forbidden: the Host header names a host that is not in [server] allowed_hosts";
	if (origin && (sg_http_parse_origin(origin, &h) < 0 || !sg_http_allowed(a, &h)))
		return "forbidden: the Origin header names a host that is not in [server] allowed_hosts";
	return NULL;
}

/* ---- headers ----------------------------------------------------------------- */

void sg_http_req_header(struct sg_http_req *r, const char *name, const char *value)
{
	static const struct {
		const char *name;
		size_t off;
		bool list;  /* a list-valued field may be repeated (RFC 9110 5.3) */
	} known[] = {
		{ "Host", offsetof(struct sg_http_req, host), false },
		{ "Origin", offsetof(struct sg_http_req, origin), false },
		{ "Authorization", offsetof(struct sg_http_req, authorization), false },
		{ "Mcp-Session-Id", offsetof(struct sg_http_req, session_id), false },
		{ "MCP-Protocol-Version", offsetof(struct sg_http_req, protocol_version), false },
		{ "Accept", offsetof(struct sg_http_req, accept), true },
		{ "Content-Type", offsetof(struct sg_http_req, content_type), false },
		{ "Content-Length", offsetof(struct sg_http_req, content_length), false },
		{ "Transfer-Encoding", offsetof(struct sg_http_req, transfer_encoding), true },
		{ "Last-Event-ID", offsetof(struct sg_http_req, last_event_id), false },
	};

	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
		const char **slot = (const char **)((char *)r + known[i].off);

		if (strcasecmp(name, known[i].name) != 0)
			continue;
		if (!*slot)
			*slot = value;
		else if (!known[i].list && !r->repeated)
			r->repeated = known[i].name;
		return;
	}
}

int sg_http_fail(struct sg_http_verdict *v, unsigned status, const char *fmt, ...)
{
	va_list ap;

	if (v->status)
		return -1;
	v->status = status;
	va_start(ap, fmt);
	vsnprintf(v->why, sizeof(v->why), fmt, ap);
	va_end(ap);
	return -1;
}

static bool all_digits(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (*s < '0' || *s > '9')
			return false;
	return true;
}

/* One reading of the body's length, or a 400 that ends the connection. */
static int check_framing(const struct sg_http_req *r, struct sg_http_verdict *v)
{
	if (r->repeated) {
		v->reply_now = true;
		return sg_http_fail(v, 400, "bad request: the %s header appears more than once",
				    r->repeated);
	}
	if (r->content_length && !all_digits(r->content_length)) {
		v->reply_now = true;
		return sg_http_fail(v, 400, "bad request: Content-Length must be a decimal number of bytes");
	}
	if (r->content_length && r->transfer_encoding) {
		v->reply_now = true;
		return sg_http_fail(v, 400,
				    "bad request: Content-Length and Transfer-Encoding together: send one of them");
	}
	return 0;
}

/* ---- authentication ------------------------------------------------------------ */

int sg_http_authenticate(const struct sg_http_policy *p, const char *authorization,
			 char owner[96], bool *bad_token)
{
	unsigned char md[SHA256_DIGEST_LENGTH];
	static const char digits[] = "0123456789abcdef";
	const char *tok;
	size_t len;
	int match = 0;

	*bad_token = false;
	if (p->n_tokens == 0) {
		snprintf(owner, 96, "%s", p->local_owner ? p->local_owner : "");
		return 0;
	}
	if (!authorization || strncasecmp(authorization, "Bearer ", 7) != 0)
		return -1;
	for (tok = authorization + 7; *tok == ' '; tok++)
		;
	len = strlen(tok);
	while (len && (tok[len - 1] == ' ' || tok[len - 1] == '\t'))
		len--;
	*bad_token = true;
	SHA256((const unsigned char *)tok, len, md);
	/* Every digest is compared, whatever matched before. */
	for (size_t i = 0; i < p->n_tokens; i++)
		match |= CRYPTO_memcmp(md, p->tokens[i], sizeof(md)) == 0;
	if (!match)
		return -1;
	*bad_token = false;
	if (p->tokens_local) {
		snprintf(owner, 96, "%s", p->local_owner ? p->local_owner : "");
		return 0;
	}
	memcpy(owner, "token:", 6);
	for (int i = 0; i < 8; i++) {
		owner[6 + 2 * i] = digits[md[i] >> 4];
		owner[7 + 2 * i] = digits[md[i] & 15];
	}
	owner[22] = '\0';
	return 0;
}

/* ---- the checks ------------------------------------------------------------------ */

int sg_http_check_access(const struct sg_http_policy *p, const struct sg_http_req *r,
			 struct sg_http_verdict *v)
{
	const char *bad;

	if (!r->path || strcmp(r->path, SG_HTTP_PATH) != 0)
		return sg_http_fail(v, 404, "not found: the MCP endpoint is " SG_HTTP_PATH);
	if (r->method && !strcmp(r->method, "POST"))
		v->kind = SG_HTTP_POST;
	else if (r->method && !strcmp(r->method, "GET"))
		v->kind = SG_HTTP_GET;
	else if (r->method && !strcmp(r->method, "DELETE"))
		v->kind = SG_HTTP_DELETE;
	else
		return sg_http_fail(v, 405, "method %.16s not allowed: use POST, GET or DELETE",
				    r->method ? r->method : "(none)");
	if (check_framing(r, v) < 0)
		return -1;
	if ((bad = sg_http_check_host_origin(p->allow, r->host, r->origin)))
		return sg_http_fail(v, 403, "%s", bad);
	if (sg_http_authenticate(p, r->authorization, v->owner, &v->bad_token) < 0)
		return sg_http_fail(v, 401, "%s",
				    v->bad_token ? "unauthorized: the bearer token is not valid"
						 : "unauthorized: send Authorization: Bearer <token>");
	if (p->stopping)
		return sg_http_fail(v, 503, "the server is shutting down");
	/* Any supported revision is accepted, not only the negotiated one: the
	 * SDK clients send 2025-03-26 on 2025-11-25 sessions at times. */
	if (r->protocol_version && !sg_mcp_version_supported(r->protocol_version))
		return sg_http_fail(v, 400,
				    "unsupported MCP-Protocol-Version '%.32s': use 2025-11-25, 2025-06-18, 2025-03-26 or 2024-11-05",
				    r->protocol_version);
	return 0;
}

/* Whether the media type at m (up to its ';' parameters, blanks around it
 * trimmed, n bytes at most) is `type` whole, case aside (RFC 9110 8.3.1). */
static bool media_is(const char *m, size_t n, const char *type)
{
	size_t len = strlen(type);

	while (n && (*m == ' ' || *m == '\t'))
		m++, n--;
	for (size_t i = 0; i < n; i++)
		if (m[i] == ';') {
			n = i;
			break;
		}
	while (n && (m[n - 1] == ' ' || m[n - 1] == '\t'))
		n--;
	return n == len && strncasecmp(m, type, len) == 0;
}

/* Whether the range's parameters say q=0 ("not acceptable", RFC 9110
 * 12.4.2). */
static bool quality_zero(const char *m, size_t n)
{
	for (const char *p = memchr(m, ';', n); p && p < m + n; p = memchr(p + 1, ';', (size_t)(m + n - p - 1))) {
		const char *q = p + 1;

		while (q < m + n && (*q == ' ' || *q == '\t'))
			q++;
		if (m + n - q >= 2 && (*q == 'q' || *q == 'Q') && q[1] == '=') {
			q += 2;
			while (q < m + n && (*q == '0' || *q == '.'))
				q++;
			return q == m + n || *q == ';' || *q == ' ' || *q == '\t';
		}
	}
	return false;
}

/* Accept (MCP basic/transports: clients list application/json and
 * text/event-stream), a comma-separated list of media ranges each compared
 * whole, q=0 meaning no.  Absent means anything. */
static void parse_accept(const char *a, struct sg_http_verdict *v)
{
	if (!a) {
		v->want_json = v->want_sse = true;
		return;
	}
	v->want_json = v->want_sse = false;
	while (*a) {
		size_t n = strcspn(a, ",");

		if (!quality_zero(a, n)) {
			bool any = media_is(a, n, "*/*");

			v->want_json |= any || media_is(a, n, "application/json") ||
					media_is(a, n, "application/*");
			v->want_sse |= any || media_is(a, n, "text/event-stream") ||
				       media_is(a, n, "text/*");
		}
		a += n + (a[n] ? 1 : 0);
	}
}

/* s is digits (check_framing): true when their number passes max.  Past 19
 * significant digits it passes any size_t. */
static bool content_length_over(const char *s, size_t max)
{
	while (*s == '0' && s[1])
		s++;
	return strlen(s) > 19 || strtoull(s, NULL, 10) > max;
}

int sg_http_check_message(const struct sg_http_policy *p, const struct sg_http_req *r,
			  struct sg_http_verdict *v)
{
	parse_accept(r->accept, v);
	if (!v->want_json && !v->want_sse)
		return sg_http_fail(v, 406, "not acceptable: accept application/json and text/event-stream");
	if (v->kind == SG_HTTP_GET && !v->want_sse)
		return sg_http_fail(v, 406, "not acceptable: GET serves text/event-stream");
	if (v->kind != SG_HTTP_POST)
		return 0;
	if (r->content_type &&
	    !media_is(r->content_type, strlen(r->content_type), "application/json"))
		return sg_http_fail(v, 415,
				    "unsupported media type: POST a JSON-RPC message as application/json");
	if (r->content_length && content_length_over(r->content_length, p->max_body)) {
		v->reply_now = true;
		return sg_http_fail(v, 413, "message larger than %zu bytes ([server] max_message_bytes)",
				    p->max_body);
	}
	return 0;
}

/* ---- ids and bodies ----------------------------------------------------------------- */

bool sg_http_session_id_valid(const char *id)
{
	size_t i;

	for (i = 0; id[i]; i++)
		if (i >= SG_HTTP_SESSION_ID_LEN ||
		    !((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f')))
			return false;
	return i == SG_HTTP_SESSION_ID_LEN;
}

/* A decimal u32 at *s (no sign, no blank); advances *s. */
static int parse_u32(const char **s, unsigned *out)
{
	unsigned long long n = 0;
	const char *p = *s;

	if (*p < '0' || *p > '9')
		return -1;
	while (*p >= '0' && *p <= '9') {
		n = n * 10 + (unsigned)(*p++ - '0');
		if (n > 0xffffffffull)
			return -1;
	}
	*out = (unsigned)n;
	*s = p;
	return 0;
}

int sg_http_event_id_parse(const char *s, unsigned *stream, unsigned *seq)
{
	if (parse_u32(&s, stream) < 0 || *s++ != '-' || parse_u32(&s, seq) < 0 || *s)
		return -1;
	return 0;
}

bool sg_http_body_is_initialize(const char *body, size_t len)
{
	json_t *msg = json_loadb(body ? body : "", len, 0, NULL);
	const char *method = json_string_value(json_object_get(msg, "method"));
	bool init = method && !strcmp(method, "initialize") && json_object_get(msg, "id");

	json_decref(msg);
	return init;
}
