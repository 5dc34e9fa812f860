/*
 * File reading, validation, search and safety advisories for the
 * sandbox_env tools.  Each machine-side step is one one-shot exec of a fixed
 * script; paths, patterns and numbers reach it as arguments ($1, $2, ...).
 */
#include "config.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "core/base/err.h"
#include "core/tools/cut.h"
#include "core/tools/fileops.h"
#include "core/registry/machine.h"
#include "core/base/args.h"
#include "core/base/util.h"

#define READ_LINE_MAX   2000       /* characters shown of one line */
#define SCRIPT_TIMEOUT  120000     /* ms: wc/sed over a large file */
#define INLINE_MAX      (100u * 1024u) /* validation source passed as an argument */

/* A JSON string made from s (new, freed here), made valid UTF-8. */
static json_t *take_str(char *s)
{
	json_t *j = sg_json_bytes(s, strlen(s));

	free(s);
	return j;
}

/* ---- running scripts -------------------------------------------------------- */

/* Runs `sh -c script sandgate args...` in the machine from cwd (NULL: the
 * workspace).  res is the caller's to release. */
static int run(struct sg_entry *e, const char *script, const char *const *args, const char *cwd,
	       size_t cap, struct sg_call *call, struct sg_exec_result *res, struct sg_err *err)
{
	const char *argv[16] = { "/bin/sh", "-c", script, "sandgate" };
	struct sg_exec_req req = { .argv = argv, .cwd = cwd, .timeout_ms = SCRIPT_TIMEOUT,
				   .output_cap = cap };
	size_t i;

	for (i = 0; args[i] && i < 11; i++)
		argv[4 + i] = args[i];
	argv[4 + i] = NULL;
	memset(res, 0, sizeof(*res));
	if (sg_m_exec(e, &req, call, res, err) < 0)
		return -1;
	if (res->timed_out)
		return sg_errf(err, SG_E_TIMEOUT, "the file operation took longer than %d s in sandbox '%s'",
			       SCRIPT_TIMEOUT / 1000, e->m.id);
	return 0;
}

static void release(struct sg_exec_result *res)
{
	sg_buf_release(&res->out);
	sg_buf_release(&res->err);
}

/* The first line of a command's stderr, for messages. */
static void first_line(const struct sg_buf *b, char *out, size_t size)
{
	size_t n = 0;
	const char *p = b->data ? b->data : "";

	while (n < b->len && n + 1 < size && p[n] != '\n')
		n++;
	memcpy(out, p, n);
	out[n] = '\0';
}

char *sg_fileops_path(struct sg_entry *e, const char *path, struct sg_call *call,
		      struct sg_err *err)
{
	static const char home_sh[] = "printf '%s' \"$HOME\"";
	const char *none[] = { NULL };
	struct sg_exec_result res;
	char *home, *full;

	if (!path || !*path)
		return sg_xstrdup(e->m.workspace);
	if (path[0] == '/')
		return sg_xstrdup(path);
	if (path[0] != '~' || (path[1] && path[1] != '/'))
		return sg_xasprintf("%s/%s", e->m.workspace, path);
	if (run(e, home_sh, none, "/", 4096, call, &res, err) < 0) {
		release(&res);
		return NULL;
	}
	home = res.out.len ? strndup(res.out.data, res.out.len) : sg_xstrdup("/root");
	full = sg_xasprintf("%s%s", home, path + 1);
	free(home);
	release(&res);
	return full;
}

/* ---- read -------------------------------------------------------------------- */

/* $1 file, $2 first line, $3 last line, $4 bytes kept of one line.  Prints a
 * status line; for OK: "OK size nul ctl lines endsnl", the resolved path,
 * then the lines, each prefixed ' ' (whole) or 'T' (cut). */
static const char read_sh[] =
	"f=$1 o=$2 e=$3 m=$4\n"
	"if [ ! -e \"$f\" ]; then\n"
	"  if [ -L \"$f\" ]; then printf 'DANGLING\\n'; readlink -- \"$f\"; exit 0; fi\n"
	"  printf 'NOTFOUND\\n'; ls -1A -- \"$(dirname -- \"$f\")\" 2>/dev/null | head -n 500; exit 0\n"
	"fi\n"
	"if [ -d \"$f\" ]; then printf 'DIR\\n'; exit 0; fi\n"
	"if [ ! -r \"$f\" ]; then printf 'NOPERM\\n'; exit 0; fi\n"
	"r=$(readlink -f -- \"$f\" 2>/dev/null) || r=$f\n"
	"size=$(wc -c < \"$f\")\n"
	"nul=$(head -c 8192 -- \"$f\" | tr -dc '\\000' | wc -c)\n"
	"ctl=$(head -c 8192 -- \"$f\" | tr -d '\\011-\\015\\033\\040-\\176\\200-\\377' | wc -c)\n"
	"lines=$(wc -l < \"$f\")\n"
	"nl=$(tail -c 1 -- \"$f\" | wc -l)\n"
	"printf 'OK %s %s %s %s %s\\n' $size $nul $ctl $lines $nl\n"
	"printf '%s\\n' \"$r\"\n"
	"[ \"$nul\" -eq 0 ] || exit 0\n"
	"if command -v awk >/dev/null 2>&1; then\n"
	"  exec awk -v o=\"$o\" -v e=\"$e\" -v m=\"$m\" "
	"'NR>=o { if (length($0) > m) printf \"T%s\\n\", substr($0, 1, m); else printf \" %s\\n\", $0 } NR>=e { exit }' \"$f\"\n"
	"fi\n"
	"sed -n \"${o},${e}p;${e}q\" \"$f\" | sed 's/^/ /'\n";

static bool ext_is(const char *path, const char *const *exts)
{
	const char *dot = strrchr(path, '.'), *slash = strrchr(path, '/');

	if (!dot || (slash && dot < slash))
		return false;
	for (size_t i = 0; exts[i]; i++)
		if (strcasecmp(dot + 1, exts[i]) == 0)
			return true;
	return false;
}

size_t sg_fileops_strip_escapes(char *s, size_t n)
{
	size_t i = 0, o = 0;

	while (i < n) {
		unsigned char c = (unsigned char)s[i];

		if (c == 0x1b && i + 1 < n) {
			unsigned char k = (unsigned char)s[i + 1];

			i += 2;
			if (k == '[') { /* CSI: parameters, intermediates, a final byte */
				while (i < n && (unsigned char)s[i] >= 0x20 && (unsigned char)s[i] <= 0x3f)
					i++;
				if (i < n && (unsigned char)s[i] >= 0x40 && (unsigned char)s[i] <= 0x7e)
					i++;
			} else if (k == ']' || k == 'P' || k == '_' || k == '^') { /* OSC, DCS...: to BEL or ST */
				while (i < n && s[i] != '\a' && !(s[i] == 0x1b && i + 1 < n && s[i + 1] == '\\'))
					i++;
				i += i < n && s[i] == '\a' ? 1 : i < n ? 2 : 0;
			} else {
				while (i < n && (unsigned char)s[i - 1] >= 0x20 && (unsigned char)s[i - 1] <= 0x2f &&
				       (unsigned char)s[i] >= 0x20 && (unsigned char)s[i] <= 0x7e)
					i++;
			}
			continue;
		}
		if ((c < 0x20 && c != '\t' && c != '\n') || c == 0x7f) {
			i++;
			continue;
		}
		s[o++] = s[i++];
	}
	return o;
}

/* Cuts s to at most max characters (UTF-8); true when it cut. */
static bool cut_chars(char *s, size_t *len, size_t max)
{
	size_t chars = 0;

	for (size_t i = 0; i < *len; i++) {
		if (((unsigned char)s[i] & 0xC0) == 0x80)
			continue;
		if (chars++ == max) {
			*len = i;
			return true;
		}
	}
	return false;
}

static const char *next_line(const char **p, const char *end, size_t *len)
{
	const char *l = *p, *nl;

	if (l >= end)
		return NULL;
	nl = memchr(l, '\n', (size_t)(end - l));
	*len = nl ? (size_t)(nl - l) : (size_t)(end - l);
	*p = nl ? nl + 1 : end;
	return l;
}

static json_t *suggestions(const char *dir, const char *base, const char *p, const char *end)
{
	json_t *arr = json_array();
	char lb[256];
	size_t len, blen;
	const char *l;

	snprintf(lb, sizeof(lb), "%s", base);
	for (char *c = lb; *c; c++)
		*c = (char)tolower((unsigned char)*c);
	blen = strlen(lb);
	while ((l = next_line(&p, end, &len)) && json_array_size(arr) < 5) {
		char name[256];

		snprintf(name, sizeof(name), "%.*s", (int)len, l);
		for (char *c = name; *c; c++)
			*c = (char)tolower((unsigned char)*c);
		if (!blen || !*name)
			continue;
		if (strstr(name, lb) || strstr(lb, name) || (blen >= 3 && !strncmp(name, lb, 3))) {
			char *full = sg_xasprintf("%s/%.*s", strcmp(dir, "/") ? dir : "", (int)len, l);

			json_array_append_new(arr, sg_json_bytes(full, strlen(full)));
			free(full);
		}
	}
	return arr;
}

static json_t *read_missing(const char *path, const char *status, const char *p, const char *end)
{
	char dir[SG_PATH_MAX];
	const char *slash = strrchr(path, '/');
	json_t *r;

	snprintf(dir, sizeof(dir), "%.*s", slash && slash != path ? (int)(slash - path) : 1,
		 slash && slash != path ? path : "/");
	r = json_pack("{s:s, s:s}", "status", status, "path", path);
	if (!strcmp(status, "not_found"))
		json_object_set_new(r, "suggestions", suggestions(dir, slash ? slash + 1 : path, p, end));
	return r;
}

/* Renders "N|line" lines into out, at most budget bytes (one line at
 * least); returns the number of lines, those cut at READ_LINE_MAX added to
 * cut_lines. */
static unsigned render_lines(struct sg_buf *out, const char *p, const char *end, unsigned first,
			     bool *crlf, size_t budget, json_t *cut_lines)
{
	unsigned n = 0;
	const char *l;
	size_t len;

	while ((l = next_line(&p, end, &len))) {
		size_t before = out->len;

		char *line = strndup(l + 1, len ? len - 1 : 0), num[24];
		size_t ll = len ? len - 1 : 0;
		bool cut = len && l[0] == 'T';

		if (!line)
			abort();
		if (ll && line[ll - 1] == '\r') {
			ll--;
			*crlf = true;
		}
		/* A byte order mark is an encoding detail, not text. */
		if (first + n == 1 && ll >= 3 && !memcmp(line, "\xEF\xBB\xBF", 3)) {
			memmove(line, line + 3, ll - 3);
			ll -= 3;
		}
		ll = sg_fileops_strip_escapes(line, ll);
		cut |= cut_chars(line, &ll, READ_LINE_MAX);
		snprintf(num, sizeof(num), "%u|", first + n);
		sg_buf_append(out, num, strlen(num));
		sg_buf_append(out, line, ll);
		if (cut)
			sg_buf_append(out, "... [truncated]", 15);
		sg_buf_append(out, "\n", 1);
		free(line);
		if (n > 0 && out->len > budget) {
			out->len = before;
			break;
		}
		if (cut)
			json_array_append_new(cut_lines, json_integer(first + n));
		n++;
	}
	return n;
}

/* Single-quoted for sh. New string. */
static char *sh_quote(const char *s)
{
	struct sg_buf b = { 0 };

	sg_buf_append(&b, "'", 1);
	for (; *s; s++)
		if (*s == '\'')
			sg_buf_append(&b, "'\\''", 4);
		else
			sg_buf_append(&b, s, 1);
	sg_buf_append(&b, "'", 1);
	sg_buf_append(&b, "", 1);
	return b.data;
}

/* "truncated" and, when something was cut, "cut": {"output": ...}: the
 * next page, and the lines cut at READ_LINE_MAX characters with the
 * command that prints the rest of the first. */
static void read_cut(json_t *r, const char *path, unsigned long long size, unsigned long long total,
		     unsigned offset, unsigned shown, unsigned limit, size_t kept, json_t *cut_lines)
{
	unsigned long long last = (unsigned long long)offset + shown - 1;
	json_t *rest = NULL, *d;

	if (total <= last && !json_array_size(cut_lines)) {
		json_object_set_new(r, "truncated", json_false());
		json_decref(cut_lines);
		return;
	}
	if (total > last)
		rest = sg_cut_call("sandbox_file_read", json_pack("{s:s, s:I, s:i}", "path", path, "offset",
			(json_int_t)(last + 1), "limit", (int)limit));
	d = sg_cut_desc(size, (long long)total, kept, NULL, rest);
	json_object_del(d, "kept");
	json_object_set_new(d, "kept_lines", json_pack("[I, I]", (json_int_t)offset, (json_int_t)last));
	if (json_array_size(cut_lines)) {
		char *q = sh_quote(path), *cmd = sg_xasprintf("awk 'NR==%lld { print substr($0, %d) }' %s",
			(long long)json_integer_value(json_array_get(cut_lines, 0)), READ_LINE_MAX + 1, q);

		json_object_set_new(d, "line_max_chars", json_integer(READ_LINE_MAX));
		json_object_set_new(d, "lines_cut", cut_lines);
		json_object_set_new(d, "line_rest", sg_cut_call("sandbox_shell_exec",
			json_pack("{s:s}", "command", cmd)));
		free(cmd);
		free(q);
	} else {
		json_decref(cut_lines);
	}
	sg_cut_note(r, "output", d);
}

int sg_fileops_read(struct sg_entry *e, const char *path, unsigned offset, unsigned limit,
		    struct sg_call *call, json_t **result, struct sg_err *err)
{
	static const char *const images[] = { "png", "jpg", "jpeg", "gif", "webp", "bmp", "ico", NULL };
	char so[24], se[24], sm[24], hdr[160], resolved[SG_PATH_MAX];
	const char *args[] = { path, so, se, sm, NULL };
	unsigned long long size = 0, nul = 0, ctl = 0, lines = 0, endnl = 0, total;
	unsigned long long last = (unsigned long long)offset + limit - 1;
	struct sg_exec_result res;
	struct sg_buf out = { 0 };
	const char *p, *end, *l;
	size_t len;
	unsigned shown;
	json_t *cut_lines;
	bool crlf = false, bom;
	int ret = -1;

	snprintf(so, sizeof(so), "%u", offset);
	snprintf(se, sizeof(se), "%llu", last);
	snprintf(sm, sizeof(sm), "%d", READ_LINE_MAX * 4);
	/* The file slots first (the runner's file operations), else the script. */
	memset(&res, 0, sizeof(res));
	if (sg_fileops_slot_read(e, path, offset, last, READ_LINE_MAX * 4, call, &res.out) < 0 &&
	    run(e, read_sh, args, NULL, (size_t)limit * (READ_LINE_MAX * 4 + 8) + 65536, call, &res,
		err) < 0)
		goto out;
	p = res.out.data ? res.out.data : "";
	end = p + res.out.len;
	l = next_line(&p, end, &len);
	snprintf(hdr, sizeof(hdr), "%.*s", l ? (int)len : 0, l ? l : "");
	if (!strcmp(hdr, "NOTFOUND") || !strcmp(hdr, "DANGLING")) {
		*result = read_missing(path, "not_found", p, end);
		if (!strcmp(hdr, "DANGLING"))
			json_object_set_new(*result, "hint", json_string("the path is a symbolic link whose target does not exist"));
		ret = 0;
		goto out;
	}
	if (!strcmp(hdr, "DIR") || !strcmp(hdr, "NOPERM")) {
		*result = json_pack("{s:s, s:s, s:s}", "status", hdr[0] == 'D' ? "directory" : "permission_denied",
				    "path", path, "hint", hdr[0] == 'D' ? "a directory: list it with list_files or search it with sandbox_file_search"
								      : "the sandbox user may not read this file");
		ret = 0;
		goto out;
	}
	if (sscanf(hdr, "OK %llu %llu %llu %llu %llu", &size, &nul, &ctl, &lines, &endnl) != 5) {
		char why[200];

		first_line(&res.err, why, sizeof(why));
		sg_errf(err, SG_E_BACKEND, "reading %s failed: %s", path, why[0] ? why : "the sandbox gave no answer");
		goto out;
	}
	l = next_line(&p, end, &len);
	snprintf(resolved, sizeof(resolved), "%.*s", l ? (int)len : 0, l ? l : path);
	total = lines + (size > 0 && !endnl ? 1 : 0);
	if (ext_is(path, images)) {
		*result = json_pack("{s:s, s:s, s:I, s:s}", "status", "image", "path", path, "file_size",
				    (json_int_t)size, "hint", "an image file: inspect it with a command (file, identify)");
		ret = 0;
		goto out;
	}
	if (nul > 0 || ctl * 10 > 3 * (size < 8192 ? size : 8192)) {
		*result = json_pack("{s:s, s:s, s:I, s:s}", "status", "binary", "path", path, "file_size",
				    (json_int_t)size, "error", "Binary file cannot be displayed as text.");
		ret = 0;
		goto out;
	}
	bom = false;
	if (offset == 1 && p + 4 <= end && !memcmp(p + 1, "\xEF\xBB\xBF", 3))
		bom = true;
	cut_lines = json_array();
	shown = render_lines(&out, p, end, offset, &crlf, sg_cut_budget(), cut_lines);
	/* The page may end early: the result's budget. */
	if (shown > 0 && (unsigned long long)offset + shown - 1 < last && total > (unsigned long long)offset + shown - 1)
		last = (unsigned long long)offset + shown - 1;
	*result = json_pack("{s:s, s:s, s:i, s:i, s:I, s:o}", "status", "ok", "path", path,
			    "offset", (int)offset, "limit", (int)limit, "total_lines", (json_int_t)total,
			    "output", sg_json_bytes(out.data, out.len));
	json_object_set_new(*result, "file_size", json_integer((json_int_t)size));
	read_cut(*result, path, size, total, offset, shown ? shown : (unsigned)(last - offset + 1), limit,
		 out.len, cut_lines);
	if (total > last)
		json_object_set_new(*result, "hint", take_str(sg_xasprintf(
			"Use offset=%llu to continue reading (showing %u-%llu of %llu lines)", last + 1,
			offset, last, total)));
	else if (shown == 0 && total > 0)
		json_object_set_new(*result, "hint", take_str(sg_xasprintf(
			"offset %u is past the end of the file (%llu lines)", offset, total)));
	else if (total > 0)
		json_object_set_new(*result, "hint", take_str(sg_xasprintf(
			"(End of file - total %llu lines)", total)));
	else
		json_object_set_new(*result, "hint", json_string("(empty file)"));
	if (bom)
		json_object_set_new(*result, "bom", json_true());
	if (crlf)
		json_object_set_new(*result, "line_endings", json_string("crlf"));
	if (strcmp(resolved, path))
		json_object_set_new(*result, "resolved_path", sg_json_bytes(resolved, strlen(resolved)));
	sg_fileops_advise(*result, path, resolved);
	ret = 0;
out:
	sg_buf_release(&out);
	release(&res);
	return ret;
}

/* ---- validation -------------------------------------------------------------- */

static int check_json(const char *path, const char *data, size_t len, struct sg_err *err)
{
	json_error_t je;
	json_t *j = json_loadb(data, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);

	if (j) {
		json_decref(j);
		return 0;
	}
	return sg_errf(err, SG_E_INVAL,
		       "refusing to write %s: the content is not valid JSON: %s (line %d, column %d); the file was not created or changed: fix the content and write again",
		       path, je.text, je.line, je.column);
}

static int check_yaml(const char *path, const char *data, size_t len, struct sg_err *err)
{
	yaml_parser_t parser;
	yaml_event_t ev;
	int ret = 0;

	if (!yaml_parser_initialize(&parser))
		return sg_errf(err, SG_E_NOMEM, "cannot start the YAML parser");
	yaml_parser_set_input_string(&parser, (const unsigned char *)data, len);
	for (;;) {
		yaml_event_type_t type;

		if (!yaml_parser_parse(&parser, &ev)) {
			ret = sg_errf(err, SG_E_INVAL,
				      "refusing to write %s: the content is not valid YAML: %s%s%s (line %zu, column %zu); the file was not created or changed: fix the content and write again",
				      path, parser.problem ? parser.problem : "syntax error",
				      parser.context ? " " : "", parser.context ? parser.context : "",
				      parser.problem_mark.line + 1, parser.problem_mark.column + 1);
			break;
		}
		type = ev.type;
		yaml_event_delete(&ev);
		if (type == YAML_STREAM_END_EVENT)
			break;
	}
	yaml_parser_delete(&parser);
	return ret;
}

static const char py_check[] =
	"import sys\n"
	"kind, src = sys.argv[1], sys.argv[2]\n"
	"if src == '-':\n"
	"    data = sys.argv[3].encode('utf-8', 'surrogateescape')\n"
	"else:\n"
	"    with open(src, 'rb') as fh:\n"
	"        data = fh.read()\n"
	"try:\n"
	"    if kind == 'python':\n"
	"        import ast\n"
	"        ast.parse(data)\n"
	"    else:\n"
	"        try:\n"
	"            import tomllib\n"
	"        except ImportError:\n"
	"            print('0\\t0\\tthis python3 has no tomllib (3.11 or newer has it)')\n"
	"            sys.exit(3)\n"
	"        tomllib.loads(data.decode('utf-8'))\n"
	"except SyntaxError as e:\n"
	"    print('%d\\t%d\\t%s' % (e.lineno or 0, e.offset or 0, e.msg))\n"
	"    sys.exit(1)\n"
	"except Exception as e:\n"
	"    import re\n"
	"    m = str(e)\n"
	"    ln, co = getattr(e, 'lineno', 0) or 0, getattr(e, 'colno', 0) or 0\n"
	/* tomllib before 3.14 puts the place only in the text: "... (at line 1, column 5)" */
	"    at = re.search(r' ?\\(at line (\\d+), column (\\d+)\\)', m)\n"
	"    if at:\n"
	"        ln, co, m = ln or int(at.group(1)), co or int(at.group(2)), m[:at.start()] + m[at.end():]\n"
	"    print('%d\\t%d\\t%s' % (ln, co, getattr(e, 'msg', None) or m))\n"
	"    sys.exit(1)\n";

/* $1 the python program, $2 kind, $3 source file or "-", $4 the source. */
static const char py_run_sh[] =
	"command -v python3 >/dev/null 2>&1 || { [ \"$3\" = - ] || rm -f -- \"$3\"; exit 127; }\n"
	"python3 -c \"$1\" \"$2\" \"$3\" \"$4\"; rc=$?\n"
	"[ \"$3\" = - ] || rm -f -- \"$3\"\n"
	"exit $rc\n";

static int check_python(struct sg_entry *e, const char *path, const char *kind, const char *data,
			size_t len, struct sg_call *call, json_t **lint, struct sg_err *err)
{
	bool inline_src = len <= INLINE_MAX && !memchr(data, '\0', len);
	char *tmp = NULL, *src = NULL, rnd[17], msg[400];
	const char *args[5];
	struct sg_exec_result res = { 0 };
	long line = 0, col = 0;
	int ret = -1;

	if (!inline_src) {
		struct sg_write_opts wo = { .mode = 0600 };

		sg_random_hex(rnd, 8);
		tmp = sg_xasprintf("/tmp/.sandgate-check-%s", rnd);
		if (sg_m_file_write(e, tmp, data, len, &wo, call, err) < 0)
			goto out;
	} else {
		src = strndup(data, len);
		if (!src)
			abort();
	}
	args[0] = py_check;
	args[1] = kind;
	args[2] = inline_src ? "-" : tmp;
	args[3] = inline_src ? src : "";
	args[4] = NULL;
	if (run(e, py_run_sh, args, "/", 65536, call, &res, err) < 0)
		goto out;
	if (res.exit_code == 127 || res.exit_code == 3) {
		first_line(&res.out, msg, sizeof(msg));
		*lint = json_pack("{s:n, s:s, s:s}", "ok", "checked", kind, "note",
				  res.exit_code == 127 ? "not validated: the sandbox has no python3" : msg);
		ret = 0;
		goto out;
	}
	if (res.exit_code != 0) {
		char text[400] = "";

		first_line(&res.out, msg, sizeof(msg));
		if (sscanf(msg, "%ld\t%ld\t%399[^\n]", &line, &col, text) < 3)
			snprintf(text, sizeof(text), "%s", msg[0] ? msg : "python3 failed");
		/* line 0: python3 gave no place (the text may say it) */
		if (line > 0)
			sg_errf(err, SG_E_INVAL,
				"refusing to write %s: the content is not valid %s: %s (line %ld, column %ld); the file was not created or changed: fix the content and write again",
				path, strcmp(kind, "python") ? "TOML" : "Python", text, line, col);
		else
			sg_errf(err, SG_E_INVAL,
				"refusing to write %s: the content is not valid %s: %s; the file was not created or changed: fix the content and write again",
				path, strcmp(kind, "python") ? "TOML" : "Python", text);
		goto out;
	}
	*lint = json_pack("{s:b, s:s}", "ok", 1, "checked", kind);
	ret = 0;
out:
	release(&res);
	free(tmp);
	free(src);
	return ret;
}

int sg_fileops_validate(struct sg_entry *e, const char *path, const char *data, size_t len,
			struct sg_call *call, json_t **lint, struct sg_err *err)
{
	static const char *const json_x[] = { "json", NULL }, *const yaml_x[] = { "yaml", "yml", NULL };
	static const char *const py_x[] = { "py", "pyi", NULL }, *const toml_x[] = { "toml", NULL };

	*lint = NULL;
	if (ext_is(path, json_x)) {
		if (check_json(path, data, len, err) < 0)
			return -1;
		*lint = json_pack("{s:b, s:s}", "ok", 1, "checked", "json");
	} else if (ext_is(path, yaml_x)) {
		if (check_yaml(path, data, len, err) < 0)
			return -1;
		*lint = json_pack("{s:b, s:s}", "ok", 1, "checked", "yaml");
	} else if (ext_is(path, py_x)) {
		return check_python(e, path, "python", data, len, call, lint, err);
	} else if (ext_is(path, toml_x)) {
		return check_python(e, path, "toml", data, len, call, lint, err);
	}
	return 0;
}

/* ---- search ------------------------------------------------------------------- */

/* $1 mode, $2 pattern, $3 path, $4 glob, $5 context, $6 output lines.
 * The first stdout line names the tool; file names end with NUL. */
static const char search_sh[] =
	"mode=$1 pat=$2 dir=$3 glob=$4 ctx=$5 max=$6\n"
	"[ -e \"$dir\" ] || { echo \"no such file or directory: $dir\" >&2; exit 3; }\n"
	"if command -v rg >/dev/null 2>&1; then tool=rg\n"
	"elif command -v grep >/dev/null 2>&1; then tool=grep\n"
	"else echo 'the sandbox has neither rg (ripgrep) nor grep: install one' >&2; exit 4; fi\n"
	"echo $tool\n"
	"set --\n"
	"if [ $tool = rg ]; then\n"
	"  [ -n \"$glob\" ] && set -- --glob \"$glob\"\n"
	"  case $mode in\n"
	"  content) [ \"$ctx\" -gt 0 ] && set -- \"$@\" -C \"$ctx\"\n"
	"    rg -n -H --no-heading --null --color never \"$@\" -e \"$pat\" -- \"$dir\" | head -n \"$max\" ;;\n"
	"  files_only) rg -l --null --color never \"$@\" -e \"$pat\" -- \"$dir\" | head -n \"$max\" ;;\n"
	"  count) rg -c -H --null --color never \"$@\" -e \"$pat\" -- \"$dir\" | head -n \"$max\" ;;\n"
	"  esac\n"
	"else\n"
	"  [ -n \"$glob\" ] && set -- --include=\"$glob\"\n"
	"  case $mode in\n"
	"  content) [ \"$ctx\" -gt 0 ] && set -- \"$@\" -C \"$ctx\"\n"
	"    grep -rnHIZE \"$@\" -e \"$pat\" -- \"$dir\" | head -n \"$max\" ;;\n"
	"  files_only) grep -rlIZE \"$@\" -e \"$pat\" -- \"$dir\" | head -n \"$max\" ;;\n"
	"  count) grep -rcHIZE \"$@\" -e \"$pat\" -- \"$dir\" | head -n \"$max\" ;;\n"
	"  esac\n"
	"fi\n";

/* files mode: names only, newest first with rg; find otherwise. */
static const char files_sh[] =
	"glob=$1 dir=$2 max=$3\n"
	"[ -e \"$dir\" ] || { echo \"no such file or directory: $dir\" >&2; exit 3; }\n"
	"if command -v rg >/dev/null 2>&1; then echo rg\n"
	"  rg --files --sortr=modified --null --color never -g \"$glob\" -- \"$dir\" | head -c 4000000\n"
	"elif command -v find >/dev/null 2>&1; then echo find\n"
	"  find \"$dir\" -type f -name \"$glob\" -print0 | head -c 4000000\n"
	"else echo 'the sandbox has neither rg (ripgrep) nor find' >&2; exit 4; fi\n";

struct hit {
	char *path;
	long line;
	char *text;
	json_t *before, *after;
};

static json_t *hit_json(struct hit *h)
{
	json_t *o = json_pack("{s:o, s:I, s:o}", "path", sg_json_bytes(h->path, strlen(h->path)),
			      "line", (json_int_t)h->line, "snippet", sg_json_bytes(h->text, strlen(h->text)));

	if (h->before)
		json_object_set_new(o, "context_before", h->before);
	if (h->after)
		json_object_set_new(o, "context_after", h->after);
	h->before = h->after = NULL;
	return o;
}

/* Parses "path\0N:text" (match) and "path\0N-text" (context) lines. */
static json_t *parse_content(const char *p, const char *end, unsigned ctx, size_t *matches)
{
	json_t *all = json_array(), *pending = NULL;
	struct hit last = { 0 };
	bool have = false;
	const char *l;
	size_t len;

	*matches = 0;
	while ((l = next_line(&p, end, &len))) {
		const char *z = memchr(l, '\0', len), *q;
		char *num_end;
		long n;
		bool match;

		if (!z)
			continue; /* "--" separators */
		q = z + 1;
		n = strtol(q, &num_end, 10);
		if (num_end == q || num_end >= l + len || (*num_end != ':' && *num_end != '-'))
			continue;
		match = *num_end == ':';
		if (match) {
			if (have)
				json_array_append_new(all, hit_json(&last));
			free(last.path);
			free(last.text);
			last.path = strndup(l, (size_t)(z - l));
			last.line = n;
			last.text = strndup(num_end + 1, (size_t)(l + len - num_end - 1));
			last.before = pending;
			last.after = NULL;
			pending = NULL;
			have = true;
			(*matches)++;
			continue;
		}
		{
			char *t = strndup(num_end + 1, (size_t)(l + len - num_end - 1));
			json_t *row = json_pack("{s:I, s:o}", "line", (json_int_t)n, "text", sg_json_bytes(t, strlen(t)));

			free(t);
			if (have && !strncmp(last.path, l, (size_t)(z - l)) && strlen(last.path) == (size_t)(z - l) &&
			    n > last.line && n - last.line <= (long)ctx) {
				if (!last.after)
					last.after = json_array();
				json_array_append_new(last.after, row);
			} else {
				if (!pending)
					pending = json_array();
				json_array_append_new(pending, row);
			}
		}
	}
	if (have)
		json_array_append_new(all, hit_json(&last));
	free(last.path);
	free(last.text);
	json_decref(pending);
	return all;
}

static json_t *parse_names(const char *p, const char *end, bool counts)
{
	json_t *all = counts ? json_object() : json_array();

	while (p < end) {
		const char *z = memchr(p, '\0', (size_t)(end - p)), *nl;
		char *name;

		if (!z)
			break;
		name = strndup(p, (size_t)(z - p));
		if (counts) {
			long c = strtol(z + 1, NULL, 10);

			nl = memchr(z, '\n', (size_t)(end - z));
			if (c > 0)
				json_object_set_new(all, name, json_integer(c));
			p = nl ? nl + 1 : end;
		} else {
			json_array_append_new(all, sg_json_bytes(name, strlen(name)));
			p = z + 1;
			if (p < end && *p == '\n')
				p++;
		}
		free(name);
	}
	return all;
}

/* A page of an array: [offset, offset+limit). */
static json_t *page(json_t *all, unsigned offset, unsigned limit)
{
	json_t *out = json_array();

	for (size_t i = offset; i < json_array_size(all) && i < (size_t)offset + limit; i++)
		json_array_append(out, json_array_get(all, i));
	return out;
}

static json_t *page_object(json_t *all, unsigned offset, unsigned limit)
{
	json_t *out = json_object(), *v;
	const char *k;
	size_t i = 0;

	json_object_foreach(all, k, v) {
		if (i >= offset && i < (size_t)offset + limit)
			json_object_set(out, k, v);
		i++;
	}
	return out;
}

int sg_fileops_search(struct sg_entry *e, const struct sg_search *q, struct sg_call *call,
		      json_t **result, struct sg_err *err)
{
	char sctx[16], smax[24], tool[16] = "", diag[400] = "", *glob = NULL;
	struct sg_exec_result res;
	const char *p, *end, *l;
	size_t len, total, matches = 0;
	json_t *all = NULL, *window;
	unsigned fetch = q->offset + q->limit + 1;
	bool files = !strcmp(q->type, "files");
	int ret = -1;

	snprintf(sctx, sizeof(sctx), "%u", q->context);
	snprintf(smax, sizeof(smax), "%llu", (unsigned long long)fetch * (2ULL * q->context + 2) + 16);
	if (files) {
		/* "main.py" finds any file whose name ends so, like the reference. */
		glob = strchr(q->pattern, '/') || q->pattern[0] == '*' ? sg_xstrdup(q->pattern)
									: sg_xasprintf("*%s", q->pattern);
		{
			const char *args[] = { glob, q->path, smax, NULL };

			if (run(e, files_sh, args, NULL, 4u << 20, call, &res, err) < 0)
				goto out;
		}
	} else {
		const char *args[] = { q->output_mode, q->pattern, q->path, q->glob ? q->glob : "", sctx, smax, NULL };

		if (run(e, search_sh, args, NULL, 8u << 20, call, &res, err) < 0)
			goto out;
	}
	first_line(&res.err, diag, sizeof(diag));
	if (res.exit_code == 3 || res.exit_code == 4) {
		sg_errf(err, res.exit_code == 3 ? SG_E_NOTFOUND : SG_E_NOTSUP, "search: %s", diag);
		goto out;
	}
	p = res.out.data ? res.out.data : "";
	end = p + res.out.len;
	l = next_line(&p, end, &len);
	snprintf(tool, sizeof(tool), "%.*s", l ? (int)len : 0, l ? l : "");
	if (!tool[0]) {
		sg_errf(err, SG_E_BACKEND, "search failed in sandbox '%s' (exit %d): %s", e->m.id, res.exit_code,
			diag[0] ? diag : "no output");
		goto out;
	}
	if (files || strcmp(q->output_mode, "content"))
		all = parse_names(p, end, !files && !strcmp(q->output_mode, "count"));
	else
		all = parse_content(p, end, q->context, &matches);
	total = json_is_object(all) ? json_object_size(all) : json_array_size(all);
	window = json_is_object(all) ? page_object(all, q->offset, q->limit) : page(all, q->offset, q->limit);
	if (total == 0 && diag[0]) {
		json_decref(window);
		sg_errf(err, SG_E_INVAL,
			"search failed (%s): %s: fix the pattern '%.100s' (search_type content: a regular expression, "
			"special characters such as ( [ { escaped with \\; files: a glob such as *.py)",
			tool, diag, q->pattern);
		goto out;
	}
	*result = json_pack("{s:s, s:s, s:o, s:b, s:s, s:i, s:i}", "status", "ok", "type",
			    files ? "files" : !strcmp(q->output_mode, "content") ? "content"
			    : !strcmp(q->output_mode, "count") ? "count" : "files",
			    "results", window, "truncated", total > (size_t)q->offset + q->limit,
			    "tool", tool, "offset", (int)q->offset, "limit", (int)q->limit);
	json_object_set_new(*result, "diagnostics", diag[0] ? json_string(diag) : json_null());
	if (total == 0 && !files && (strstr(q->pattern, "\\n") || strchr(q->pattern, '\n')))
		json_object_set_new(*result, "warning", json_string(
			"the search is line-oriented: a pattern spanning lines (\\n) matches nothing; search for one line"));
	ret = 0;
out:
	json_decref(all);
	free(glob);
	release(&res);
	return ret;
}

/* ---- safety advisories -------------------------------------------------------------- */

struct rule {
	const char *pattern; /* "/x/" component, "=name" basename, "^/abs" prefix */
	const char *category;
};

static const struct rule rules[] = {
	{ "^/etc/shadow", "system credential file (/etc/shadow, /etc/sudoers, ...)" },
	{ "^/etc/gshadow", "system credential file (/etc/shadow, /etc/sudoers, ...)" },
	{ "^/etc/sudoers", "system credential file (/etc/shadow, /etc/sudoers, ...)" },
	{ "^/etc/passwd", "system credential file (/etc/shadow, /etc/sudoers, ...)" },
	{ "/.ssh/", "credential directory (e.g. ~/.ssh, ~/.aws)" },
	{ "/.aws/", "credential directory (e.g. ~/.ssh, ~/.aws)" },
	{ "/.azure/", "credential directory (e.g. ~/.ssh, ~/.aws)" },
	{ "/.gnupg/", "credential directory (e.g. ~/.ssh, ~/.aws)" },
	{ "/.kube/", "credential directory (e.g. ~/.ssh, ~/.aws)" },
	{ "/.docker/", "credential directory (e.g. ~/.ssh, ~/.aws)" },
	{ "/.config/gcloud/", "credential directory (e.g. ~/.ssh, ~/.aws)" },
	{ "/.config/gh/", "credential directory (e.g. ~/.ssh, ~/.aws)" },
	{ "/.git/config", "repository configuration (may hold credentials in remote URLs)" },
	{ "=.git-credentials", "credentials file (.netrc, .git-credentials, .pgpass, ...)" },
	{ "=.netrc", "credentials file (.netrc, .git-credentials, .pgpass, ...)" },
	{ "=.pgpass", "credentials file (.netrc, .git-credentials, .pgpass, ...)" },
	{ "=.pypirc", "credentials file (.netrc, .git-credentials, .pgpass, ...)" },
	{ "=.npmrc", "credentials file (.netrc, .git-credentials, .pgpass, ...)" },
	{ "=.env", "secret-bearing filename (.env, id_rsa)" },
	{ "=.envrc", "secret-bearing filename (.env, id_rsa)" },
	{ "=id_rsa", "secret-bearing filename (.env, id_rsa)" },
	{ "=id_dsa", "secret-bearing filename (.env, id_rsa)" },
	{ "=id_ecdsa", "secret-bearing filename (.env, id_rsa)" },
	{ "=id_ed25519", "secret-bearing filename (.env, id_rsa)" },
};

static const char *classify(const char *path)
{
	const char *base = strrchr(path, '/');
	char wrapped[SG_PATH_MAX + 2];

	base = base ? base + 1 : path;
	snprintf(wrapped, sizeof(wrapped), "%s/", path);
	for (size_t i = 0; i < sizeof(rules) / sizeof(rules[0]); i++) {
		const char *pat = rules[i].pattern;

		if (pat[0] == '^' && !strncmp(path, pat + 1, strlen(pat + 1)))
			return rules[i].category;
		if (pat[0] == '/' && strstr(wrapped, pat))
			return rules[i].category;
		if (pat[0] == '=' && (!strcasecmp(base, pat + 1) ||
				      (!strcmp(pat + 1, ".env") && !strncasecmp(base, ".env.", 5))))
			return rules[i].category;
	}
	return NULL;
}

void sg_fileops_advise(json_t *result, const char *path, const char *resolved)
{
	const char *cat = classify(path), *which = path;

	if (!cat && resolved && *resolved) {
		cat = classify(resolved);
		which = resolved;
	}
	if (!cat)
		return;
	json_object_set_new(result, "warning", take_str(sg_xasprintf(
		"Path '%s'%s%s%s is a %s: it usually holds secrets; keep them out of logs and replies",
		path, which != path ? " (resolves to '" : "", which != path ? which : "",
		which != path ? "')" : "", cat)));
	json_object_set_new(result, "safety_category", json_string(cat));
}
