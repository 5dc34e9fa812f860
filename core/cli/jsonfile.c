/* Client configuration files in JSON (core/cli/jsonfile.h). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/cli/atomic.h"
#include "core/cli/cli.h"
#include "core/cli/jsonfile.h"
#include "core/base/err.h"
#include "core/base/util.h"

/* Reads the whole file, at most SG_JSONFILE_MAX bytes.  Returns 0, 1 when
 * it does not exist, -1 with err. */
static int slurp(const char *path, char **data, size_t *len, mode_t *mode, struct sg_err *err)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct sg_buf b = { 0 };
	struct stat st;
	char chunk[65536];
	ssize_t n;

	if (fd < 0 && errno == ENOENT)
		return 1;
	if (fd < 0)
		return sg_errf(err, SG_E_IO, "cannot read '%s': %s", path, strerror(errno));
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return sg_errf(err, SG_E_IO, "cannot read '%s': not a regular file", path);
	}
	*mode = st.st_mode & 07777;
	while ((n = read(fd, chunk, sizeof(chunk))) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || b.len + (size_t)n > SG_JSONFILE_MAX) {
			int e = n < 0 ? errno : EFBIG;

			close(fd);
			sg_buf_release(&b);
			if (e == EFBIG)
				return sg_errf(err, SG_E_TOOBIG, "'%s' is larger than %u MiB: not a client configuration file",
					       path, SG_JSONFILE_MAX >> 20);
			return sg_errf(err, SG_E_IO, "cannot read '%s': %s", path, strerror(e));
		}
		sg_buf_append(&b, chunk, (size_t)n);
	}
	close(fd);
	*data = b.data ? b.data : sg_xstrdup("");
	*len = b.len;
	return 0;
}

/* Spaces before the first member of the top-level object, when it starts
 * on a line of its own; else 2. */
static int detect_indent(const char *p)
{
	const char *nl = strchr(p, '{');
	int n = 0;

	if (nl)
		nl = strchr(nl, '\n');
	if (!nl)
		return 2;
	for (p = nl + 1; *p == ' '; p++)
		n++;
	return n >= 1 && n <= 8 && *p != '\n' && *p != '}' ? n : 2;
}

int sg_jsonfile_read(const char *path, struct sg_jsonfile *f, struct sg_err *err)
{
	json_error_t jerr;
	char *data = NULL;
	size_t len = 0, i;
	int rc;

	memset(f, 0, sizeof(*f));
	f->path = sg_cli_realpath(path);
	f->indent = 2;
	rc = slurp(f->path, &data, &len, &f->mode, err);
	if (rc < 0)
		return -1;
	f->exists = rc == 0;
	for (i = 0; i < len && strchr(" \t\r\n", data[i]); i++)
		;
	if (!f->exists || i == len) {
		f->root = json_object();
		free(data);
		return 0;
	}
	f->indent = detect_indent(data);
	/* Duplicate keys are refused: writing back would silently drop one. */
	f->root = json_loadb(data, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!f->root)
		snprintf(f->why, sizeof(f->why), "it is not strict JSON (line %d column %d: %s)",
			 jerr.line, jerr.column, jerr.text);
	else if (!json_is_object(f->root)) {
		snprintf(f->why, sizeof(f->why), "its top level is not a JSON object");
		json_decref(f->root);
		f->root = NULL;
	}
	free(data);
	return 0;
}

/* The fewest significant digits (at most 17) that read back as v. */
static int digits_for(double v)
{
	char buf[40];

	for (int p = 1; p < 17; p++) {
		snprintf(buf, sizeof(buf), "%.*g", p, v);
		if (strtod(buf, NULL) == v)
			return p;
	}
	return 17;
}

/* jansson prints every real with one precision: the largest any real of
 * the document needs, so that 0.5 stays 0.5 and not 0.50000000000000000. */
static int precision_for(const json_t *v)
{
	int p = 1, q;
	const char *k;
	json_t *x;
	size_t i;

	if (json_is_real(v) && isfinite(json_real_value(v)))
		return digits_for(json_real_value(v));
	if (json_is_object(v)) {
		json_object_foreach((json_t *)v, k, x)
			if ((q = precision_for(x)) > p)
				p = q;
	} else if (json_is_array(v)) {
		json_array_foreach(v, i, x)
			if ((q = precision_for(x)) > p)
				p = q;
	}
	return p;
}

char *sg_json_text(const json_t *v, int indent)
{
	char *s = json_dumps(v, JSON_INDENT(indent) | JSON_REAL_PRECISION(precision_for(v)));
	char *out;

	if (!s)
		abort(); /* out of memory: the sg_xmalloc policy */
	out = sg_xasprintf("%s\n", s);
	free(s);
	return out;
}

char *sg_jsonfile_render(const struct sg_jsonfile *f)
{
	return sg_json_text(f->root, f->indent);
}

int sg_jsonfile_write(const struct sg_jsonfile *f, mode_t new_mode, mode_t dir_mode,
		      struct sg_err *err)
{
	char *text;
	int rc;

	if (sg_mkdir_parents(f->path, dir_mode, err) < 0)
		return -1;
	text = sg_jsonfile_render(f);
	rc = sg_write_file_atomic(f->path, text, strlen(text),
				  f->exists ? f->mode : (new_mode & ~sg_current_umask()), err);
	free(text);
	return rc;
}

void sg_jsonfile_free(struct sg_jsonfile *f)
{
	json_decref(f->root);
	free(f->path);
	memset(f, 0, sizeof(*f));
}
