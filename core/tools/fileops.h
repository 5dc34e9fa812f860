/*
 * The file operations of the sandbox_env tools, done in the machine's own
 * view (its filesystem, its symlinks) with one-shot execs of small fixed
 * scripts whose inputs travel as arguments, never spliced into the text:
 *
 *  - read: a page of lines (offset/limit) of a file of any size, found with
 *    sed/awk in the machine, never by moving the whole file; binary and
 *    image detection, BOM and terminal escapes removed, long lines cut;
 *  - validation before a write: JSON (jansson) and YAML (libyaml) here,
 *    Python (ast) and TOML (tomllib) with the machine's python3;
 *  - search: ripgrep when the machine has it, grep and find otherwise;
 *  - safety advisories for paths that usually hold secrets.
 *
 * sandgate never touches the host side of a machine (no bind mounts), so
 * nothing here opens a host path; doc/sandbox-env.md says how a backend that did
 * would have to resolve it (openat2 with RESOLVE_BENEATH).
 */
#ifndef SG_CORE_FILEOPS_H
#define SG_CORE_FILEOPS_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include <sandgate/plugin.h>

struct sg_call;
struct sg_entry;

/* The absolute path in the machine: relative paths are under its
 * workspace, "~" and "~/x" are the machine user's home (one exec).  Caller
 * frees. */
char *sg_fileops_path(struct sg_entry *e, const char *path, struct sg_call *call,
		      struct sg_err *err);

/* A page of a text file: lines offset..offset+limit-1 (1-based).  *result
 * (new) has status "ok" with output "N|line" lines, or status "not_found"
 * (with suggestions), "binary", "image", "directory". */
int sg_fileops_read(struct sg_entry *e, const char *path, unsigned offset, unsigned limit,
		    struct sg_call *call, json_t **result, struct sg_err *err);

/* Checks content for a file named path by its extension.  Returns 0 when
 * it is valid or has no checker, with *lint (new) describing what was
 * checked ({"ok":true,"checked":"json"}, or {"ok":null,"note":...} when the
 * machine has no python3), or NULL when nothing applies; -1 with err
 * (SG_E_INVAL, line and column in the message) when it is not valid. */
int sg_fileops_validate(struct sg_entry *e, const char *path, const char *data, size_t len,
			struct sg_call *call, json_t **lint, struct sg_err *err);

/* Search options, as the tool takes them. */
struct sg_search {
	const char *pattern;
	const char *type;        /* "content" or "files" */
	const char *path;        /* absolute */
	const char *glob;        /* or NULL */
	const char *output_mode; /* "content", "files_only", "count" */
	unsigned context, limit, offset;
};

int sg_fileops_search(struct sg_entry *e, const struct sg_search *q, struct sg_call *call,
		      json_t **result, struct sg_err *err);

/* Adds "warning" and "safety_category" to result when path (or resolved,
 * which may be NULL) is a place that usually holds secrets. */
void sg_fileops_advise(json_t *result, const char *path, const char *resolved);

/* fileslot.c: what the read script prints for path (lines first..last,
 * each cut at line_max bytes), made from the machine's file slots, appended
 * to out.  0, or -1 (nothing appended, no error: the caller runs the
 * script) when path is no regular file of at most 8 MiB or a slot fails. */
int sg_fileops_slot_read(struct sg_entry *e, const char *path, unsigned first,
			 unsigned long long last, size_t line_max, struct sg_call *call,
			 struct sg_buf *out);

/* Removes terminal escape sequences (CSI, OSC, other ESC sequences) from
 * s in place.  Returns the new length. */
size_t sg_fileops_strip_escapes(char *s, size_t n);

#endif
