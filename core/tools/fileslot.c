/*
 * sandbox_file_read through the backend's file slots (stat, then read):
 * the bytes come over the runner's file operations where the backend has
 * them, as read_file's do, and sandgate computes what fileops.c's read
 * script would print.  Only for a regular file up to SLOT_READ_MAX; the
 * rest (missing, a directory, a link, unreadable, larger) keeps the script,
 * which says why.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "core/base/err.h"
#include "core/base/buf.h"
#include "core/tools/fileops.h"
#include "core/registry/machine.h"

#define SLOT_READ_MAX (8u << 20)  /* bytes held whole; larger files go the script way */
#define SNIFF         8192        /* bytes looked at for NULs and control bytes */

/* Bytes the script's `tr -d '\011-\015\033\040-\176\200-\377'` keeps. */
static bool is_ctl(unsigned char c)
{
	return c < 011 || (c > 015 && c < 040 && c != 033) || c == 0177;
}

/* The script's "OK size nul ctl lines endsnl" line and the path. */
static void header(struct sg_buf *out, const char *path, const char *p, size_t n)
{
	unsigned long long nul = 0, ctl = 0, lines = 0;
	char line[160];

	for (size_t i = 0; i < n && i < SNIFF; i++) {
		nul += p[i] == '\0';
		ctl += is_ctl((unsigned char)p[i]);
	}
	for (const char *q = p; (q = memchr(q, '\n', (size_t)(p + n - q))); q++)
		lines++;
	snprintf(line, sizeof(line), "OK %zu %llu %llu %llu %d\n", n, nul, ctl, lines,
		 n && p[n - 1] == '\n');
	sg_buf_append(out, line, strlen(line));
	sg_buf_append(out, path, strlen(path));
	sg_buf_append(out, "\n", 1);
}

/* Lines first..last, each ' ' (whole) or 'T' (cut at line_max bytes). */
static void body(struct sg_buf *out, const char *p, size_t n, unsigned first,
		 unsigned long long last, size_t line_max)
{
	const char *end = p + n;
	unsigned long long no = 1;

	while (p < end && no <= last) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);

		if (no >= first) {
			sg_buf_append(out, len > line_max ? "T" : " ", 1);
			sg_buf_append(out, p, len > line_max ? line_max : len);
			sg_buf_append(out, "\n", 1);
		}
		p = nl ? nl + 1 : end;
		no++;
	}
}

int sg_fileops_slot_read(struct sg_entry *e, const char *path, unsigned first,
			 unsigned long long last, size_t line_max, struct sg_call *call,
			 struct sg_buf *out)
{
	struct sg_buf data = { 0 };
	struct sg_stat st;
	struct sg_err err;
	const char *d;

	if (sg_m_file_stat(e, path, call, &st, &err) < 0 || st.type != SG_FT_FILE ||
	    st.size > SLOT_READ_MAX ||
	    sg_m_file_read(e, path, SLOT_READ_MAX, call, &data, &err) < 0) {
		sg_buf_release(&data);
		return -1;
	}
	d = data.data ? data.data : "";
	header(out, path, d, data.len);
	if (!memchr(d, '\0', data.len < SNIFF ? data.len : SNIFF))
		body(out, d, data.len, first, last, line_max);
	sg_buf_release(&data);
	return 0;
}
