/*
 * The edit engine behind sandbox_file_patch, pure and unit-tested: it works
 * on bytes in memory and never touches a machine.
 *
 *  - Replace: old_string is found exactly first; when it is not there, line
 *    by line ignoring trailing whitespace, then ignoring indentation and
 *    whitespace runs (the replacement is re-indented to the matched lines).
 *    More than one match without replace_all is an error that lists the
 *    candidate line numbers.
 *  - Unified diff: sandgate applies the hunks itself (no patch binary).  A
 *    hunk is looked for at its line number first, then ever further away
 *    (an offset), then with the same whitespace tolerance; a hunk that does
 *    not apply fails the whole file with the hunk's header and line.
 *
 * Line endings: a CRLF file gets CRLF in the replacement text.
 */
#ifndef SG_CORE_PATCH_H
#define SG_CORE_PATCH_H

#include <stdbool.h>
#include <stddef.h>

#include <sandgate/plugin.h>

/* The result of an edit.  text is the caller's (free()), NUL-terminated. */
struct sg_patch_out {
	char *text;
	size_t len;
	unsigned matches;     /* replacements made, or hunks applied */
	const char *strategy; /* "exact", "trailing-whitespace", "whitespace" */
	int max_offset;       /* largest hunk offset in lines (unified diff) */
	unsigned fuzzy_hunks; /* hunks that needed whitespace tolerance */
};

void sg_patch_out_free(struct sg_patch_out *o);

/* Replaces old_s by new_s in text[0..len).  Returns 0 and fills out, or -1
 * with err (SG_E_NOTFOUND, SG_E_INVAL for ambiguity or bad arguments). */
int sg_patch_replace(const char *text, size_t len, const char *old_s, const char *new_s,
		     bool replace_all, struct sg_patch_out *out, struct sg_err *err);

/* One file of a unified diff. */
struct sg_diff_hunk {
	long old_start, old_count, new_start, new_count;
	char header[96];   /* the "@@ ... @@" line, for messages */
	char **lines;      /* body lines without terminator, first char ' ', '-', '+' */
	bool *no_eol;      /* "\ No newline at end of file" followed this line */
	size_t n;
};

struct sg_diff_file {
	char *old_path;    /* as written, a/ b/ prefixes kept; "/dev/null" for a new file */
	char *new_path;
	struct sg_diff_hunk *hunks;
	size_t n;
};

struct sg_diff {
	struct sg_diff_file *files;
	size_t n;
};

/* Parses a unified diff (git or diff -u).  Returns 0 and a new *out (free
 * with sg_diff_free), or -1 with err naming the line that is wrong. */
int sg_diff_parse(const char *text, struct sg_diff **out, struct sg_err *err);
void sg_diff_free(struct sg_diff *d);

/* The path a diff file addresses: new_path (old_path for a deletion) with a
 * leading "a/" or "b/" removed.  Returns a pointer into f. */
const char *sg_diff_target(const struct sg_diff_file *f);

/* Applies every hunk of f to text[0..len) (NULL/0 for a new file).
 * Returns 0 and fills out, or -1 with err naming the failing hunk. */
int sg_diff_apply(const struct sg_diff_file *f, const char *text, size_t len,
		  struct sg_patch_out *out, struct sg_err *err);

/* A unified diff of a -> b (one hunk around the changed lines, 3 lines of
 * context), headers "--- a/path" and "+++ b/path" (path as given, a leading
 * slash dropped).  At most max_lines body lines.  Caller frees. */
char *sg_patch_unified(const char *a, size_t alen, const char *b, size_t blen,
		       const char *path, size_t max_lines);

#endif
