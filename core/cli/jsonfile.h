/*
 * An MCP client's JSON configuration file, read strictly and written back
 * with every other key kept in its order.  A file that is not strict JSON
 * (comments, trailing commas, duplicate keys) is never written: the caller
 * gets why and leaves it byte-identical.
 */
#ifndef SG_CORE_CLI_JSONFILE_H
#define SG_CORE_CLI_JSONFILE_H

#include <stdbool.h>
#include <sys/types.h>

#include <jansson.h>

#include <sandgate/plugin.h>

/* Larger client configuration files are refused (read cap). */
#define SG_JSONFILE_MAX (16u << 20)

struct sg_jsonfile {
	char *path;    /* the file written: symlinks resolved, so a link is kept; owned */
	bool exists;
	mode_t mode;   /* permission bits of the existing file */
	int indent;    /* spaces per level in the existing file (2 for a new one) */
	json_t *root;  /* the top-level object, or NULL when the file is not usable */
	char why[384]; /* when root is NULL: why the file is left as it is */
};

/* Reads path (a missing or blank file reads as {}).  Returns 0 with f->root
 * set, or 0 with f->root NULL and f->why ("line 3 column 5: ...") when the
 * file is not a strict JSON object; -1 with err when it cannot be read or
 * is larger than SG_JSONFILE_MAX.  Free with sg_jsonfile_free(). */
int sg_jsonfile_read(const char *path, struct sg_jsonfile *f, struct sg_err *err);

/* The text f->root would be written as: the file's indent, reals as short
 * as they read back exactly, a final newline.  Caller frees. */
char *sg_jsonfile_render(const struct sg_jsonfile *f);

/* Writes f->root atomically to f->path, creating missing directories
 * (dir_mode) and keeping an existing file's mode; a new file gets
 * new_mode less the umask.  Returns 0 or -1 with err. */
int sg_jsonfile_write(const struct sg_jsonfile *f, mode_t new_mode, mode_t dir_mode,
		      struct sg_err *err);

void sg_jsonfile_free(struct sg_jsonfile *f);

/* v as indented JSON text with a final newline.  Caller frees. */
char *sg_json_text(const json_t *v, int indent);

#endif
