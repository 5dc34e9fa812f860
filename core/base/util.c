#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include "core/base/buf.h"
#include "core/base/util.h"

static void oom(size_t n)
{
	fprintf(stderr, "sandgate: out of memory allocating %zu bytes\n", n);
	abort();
}

void *sg_xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (!p)
		oom(n);
	sg_buf_advise(p, n);
	return p;
}

void *sg_xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);

	if (!p)
		oom(n * size);
	return p;
}

void *sg_xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);

	if (!q)
		oom(n);
	return q;
}

char *sg_xstrdup(const char *s)
{
	char *p = strdup(s ? s : "");

	if (!p)
		oom(strlen(s));
	return p;
}

char *sg_xasprintf(const char *fmt, ...)
{
	va_list ap;
	char *p = NULL;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&p, fmt, ap);
	va_end(ap);
	if (n < 0)
		oom(0);
	return p;
}

static void hex32(const unsigned char md[SHA256_DIGEST_LENGTH], char hex[65])
{
	static const char digits[] = "0123456789abcdef";

	for (int i = 0; i < SHA256_DIGEST_LENGTH; i++) {
		hex[2 * i] = digits[md[i] >> 4];
		hex[2 * i + 1] = digits[md[i] & 15];
	}
	hex[64] = '\0';
}

void sg_sha256_hex(const void *data, size_t len, char hex[65])
{
	unsigned char md[SHA256_DIGEST_LENGTH];

	SHA256(data, len, md);
	hex32(md, hex);
}

void sg_hmac_sha256_hex(const void *key, size_t key_len, const void *data, size_t len,
			char hex[65])
{
	unsigned char md[SHA256_DIGEST_LENGTH];
	unsigned int n = sizeof(md);

	if (!HMAC(EVP_sha256(), key, (int)key_len, data, len, md, &n))
		abort(); /* only out of memory: the sg_xmalloc policy */
	hex32(md, hex);
}

int sg_file_open_private(const char *path, int flags, bool tighten)
{
	int fd = open(path, flags | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	struct stat st;

	if (fd < 0)
		return -1;
	if (tighten && fstat(fd, &st) == 0 && st.st_uid == geteuid() && (st.st_mode & 077) &&
	    fchmod(fd, st.st_mode & 0600) < 0) {
		int e = errno;

		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

int sg_random_bytes(void *p, size_t n)
{
	unsigned char *c = p;

	while (n > 0) {
		ssize_t r = getrandom(c, n, 0);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		c += r;
		n -= (size_t)r;
	}
	return 0;
}

int sg_random_hex(char *out, size_t n)
{
	unsigned char raw[64];
	static const char digits[] = "0123456789abcdef";

	if (n > sizeof(raw) || sg_random_bytes(raw, n) < 0)
		return -1;
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[raw[i] >> 4];
		out[2 * i + 1] = digits[raw[i] & 15];
	}
	out[2 * n] = '\0';
	return 0;
}

/* Length of the valid UTF-8 sequence at p (RFC 3629), or 0 when invalid. */
static size_t utf8_seq(const unsigned char *p, size_t n)
{
	unsigned char c = p[0];
	size_t len;
	uint32_t cp;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		len = 2, cp = c & 0x1f;
	else if (c >= 0xe0 && c <= 0xef)
		len = 3, cp = c & 0x0f;
	else if (c >= 0xf0 && c <= 0xf4)
		len = 4, cp = c & 0x07;
	else
		return 0;
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (p[i] & 0x3f);
	}
	if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

bool sg_utf8_valid(const char *p, size_t n)
{
	const unsigned char *u = (const unsigned char *)p;

	for (size_t i = 0; i < n;) {
		size_t l = utf8_seq(u + i, n - i);

		if (l == 0 || u[i] == 0)
			return false;
		i += l;
	}
	return true;
}

static char *sanitize(const char *p, size_t n, bool keep_nul, bool *replaced, size_t *outlen)
{
	const unsigned char *u = (const unsigned char *)p;
	char *out, *o;

	if (n > (SIZE_MAX - 1) / 3)
		oom(n);
	out = o = sg_xmalloc(3 * n + 1);
	if (replaced)
		*replaced = false;
	for (size_t i = 0; i < n;) {
		size_t l = utf8_seq(u + i, n - i);

		if (l == 0 || (u[i] == 0 && !keep_nul)) {
			/* NUL would cut strings short downstream; replace it too. */
			memcpy(o, "\xef\xbf\xbd", 3);
			o += 3;
			i++;
			if (replaced)
				*replaced = true;
			continue;
		}
		memcpy(o, u + i, l);
		o += l;
		i += l;
	}
	*o = '\0';
	if (outlen)
		*outlen = (size_t)(o - out);
	return out;
}

char *sg_utf8_sanitize(const char *p, size_t n, bool *replaced)
{
	return sanitize(p, n, false, replaced, NULL);
}

char *sg_utf8_sanitize_keep_nul(const char *p, size_t n, size_t *outlen)
{
	return sanitize(p, n, true, NULL, outlen);
}

/* The word tests are the classic ones ("determine if a word has a byte
 * less than n", Bit Twiddling Hacks): each is nonzero exactly when some
 * byte of the word matches; the byte loop then finds which. */
size_t sg_json_plain(const char *s, size_t n, bool ascii)
{
	const uint64_t ones = 0x0101010101010101u, high = 0x8080808080808080u;
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		uint64_t x, q, b;

		memcpy(&x, s + i, 8);
		q = x ^ (ones * '"');
		b = x ^ (ones * '\\');
		if ((((x - ones * 0x20) & ~x) | ((q - ones) & ~q) | ((b - ones) & ~b) |
		     (ascii ? x : 0)) & high)
			break;
	}
	for (; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c < 0x20 || c == '"' || c == '\\' || (ascii && c >= 0x80))
			break;
	}
	return i;
}

char *sg_base64_encode(const void *p, size_t n)
{
	char *out;

	if (n > (SIZE_MAX / 4) * 3 - 3)
		oom(n);
	out = sg_xmalloc(4 * ((n + 2) / 3) + 1);
	out[sg_base64_encode_to(out, p, n)] = '\0';
	return out;
}

/* RFC 4648 section 4, table 1. */
static const char b64_chars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* Each byte's value in the alphabet plus one; 0 for a byte outside it. */
static unsigned char b64_value[256];
/* The two characters of each 12-bit value: a file's read whole is tens of
 * megabytes of base64, and two lookups per three bytes take half the time
 * of four. */
static char b64_pair[4096][2];
static pthread_once_t b64_once = PTHREAD_ONCE_INIT;

static void b64_init(void)
{
	for (int i = 0; b64_chars[i]; i++)
		b64_value[(unsigned char)b64_chars[i]] = (unsigned char)(i + 1);
	for (int i = 0; i < 4096; i++) {
		b64_pair[i][0] = b64_chars[i >> 6];
		b64_pair[i][1] = b64_chars[i & 63];
	}
}

size_t sg_base64_encode_to(char *dst, const void *src, size_t n)
{
	const char *a = b64_chars;
	const unsigned char *p = src;
	char *o = dst;
	size_t i = 0;

	pthread_once(&b64_once, b64_init);
	/* six bytes read, then their eight characters written: in place, the
	 * writing stays behind the reading as it does group by group */
	for (; i + 6 <= n; i += 6) {
		uint64_t v = (uint64_t)p[i] << 40 | (uint64_t)p[i + 1] << 32 |
			     (uint64_t)p[i + 2] << 24 | (uint64_t)p[i + 3] << 16 |
			     (uint64_t)p[i + 4] << 8 | p[i + 5];

		memcpy(o, b64_pair[v >> 36], 2);
		memcpy(o + 2, b64_pair[(v >> 24) & 4095], 2);
		memcpy(o + 4, b64_pair[(v >> 12) & 4095], 2);
		memcpy(o + 6, b64_pair[v & 4095], 2);
		o += 8;
	}
	if (i + 3 <= n) {
		uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];

		memcpy(o, b64_pair[v >> 12], 2);
		memcpy(o + 2, b64_pair[v & 4095], 2);
		o += 4;
		i += 3;
	}
	if (i < n) {
		uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0);

		o[0] = a[v >> 18];
		o[1] = a[(v >> 12) & 63];
		o[2] = i + 1 < n ? a[(v >> 6) & 63] : '=';
		o[3] = '=';
		o += 4;
	}
	return (size_t)(o - dst);
}

size_t sg_base64_decode_to(void *dst, const char *s, size_t n)
{
	const unsigned char *in = (const unsigned char *)s;
	unsigned char *o = dst;
	size_t pad = 0, body, i;

	if (n % 4 != 0)
		return (size_t)-1;
	pthread_once(&b64_once, b64_init);
	/* Up to two '=' end it; every other byte is of the alphabet. */
	while (pad < 2 && pad < n && s[n - 1 - pad] == '=')
		pad++;
	body = n - pad;
	for (i = 0; i + 4 <= body; i += 4) {
		unsigned a = b64_value[in[i]], b = b64_value[in[i + 1]];
		unsigned c = b64_value[in[i + 2]], d = b64_value[in[i + 3]];

		if (!a || !b || !c || !d)
			return (size_t)-1;
		a = (a - 1) << 18 | (b - 1) << 12 | (c - 1) << 6 | (d - 1);
		o[0] = (unsigned char)(a >> 16);
		o[1] = (unsigned char)(a >> 8);
		o[2] = (unsigned char)a;
		o += 3;
	}
	if (i < body) { /* the last group: two or three characters, then '=' */
		unsigned a = b64_value[in[i]], b = b64_value[in[i + 1]];
		unsigned c = body - i == 3 ? b64_value[in[i + 2]] : 1;

		if (!a || !b || !c)
			return (size_t)-1;
		a = (a - 1) << 18 | (b - 1) << 12 | (c - 1) << 6;
		*o++ = (unsigned char)(a >> 16);
		if (body - i == 3)
			*o++ = (unsigned char)(a >> 8);
	}
	return (size_t)(o - (unsigned char *)dst);
}

void *sg_base64_decode(const char *s, size_t *len)
{
	size_t n = strlen(s);
	unsigned char *out = sg_xmalloc(n / 4 * 3 + 1);
	size_t k = sg_base64_decode_to(out, s, n);

	if (k == (size_t)-1) {
		free(out);
		return NULL;
	}
	*len = k;
	return out;
}

int64_t sg_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t sg_time_s(void)
{
	return (int64_t)time(NULL);
}

void sg_strv_free(char **v)
{
	if (!v)
		return;
	for (char **p = v; *p; p++)
		free(*p);
	free(v);
}
