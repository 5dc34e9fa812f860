/*
 * The run_code tool (doc/kernel-protocol.md, "run_code"): one result shape
 * on every backend, from one of three paths.
 *
 *  - python, javascript (and whatever else a backend's interpreter service
 *    runs): the backend's run_code slot, a stateful interpreter per sandbox
 *    and language (the runner's kernels on Docker and SSH, the code
 *    interpreter on FC).  A slot that answers SG_E_NOTSUP (no runner there,
 *    a language it has no kernel for) leaves the call to the exec path.
 *  - shell: the sandbox's persistent bash (core/shell.c), the same one
 *    sandbox_shell_exec uses, so cwd, variables and functions persist.
 *  - otherwise (typescript, r, a backend without the slot or without a
 *    runner): the exec path, one fresh interpreter per call ("stateful":
 *    false in the result), the code written to a file first.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/buf.h"
#include "core/protocol/call.h"
#include "core/base/conf.h"
#include "core/base/err.h"
#include "core/base/log.h"
#include "core/registry/machine.h"
#include "core/protocol/session.h"
#include "core/shell/shell.h"
#include "core/tools/registry.h"
#include "core/base/util.h"

#define CODE_ERRFILE_MAX (1u << 20) /* stderr of a shell run read back from its file */

static size_t output_cap(void)
{
	return (size_t)sg_config_int("sandbox", "output_cap", 1 << 20);
}

static void code_result_release(struct sg_code_result *r)
{
	sg_buf_release(&r->out);
	sg_buf_release(&r->err);
	json_decref(r->results);
	json_decref(r->error);
	json_decref(r->output_files);
	r->results = r->error = r->output_files = NULL;
}

/* ---- the exec path: one interpreter per call ------------------------------------- */

/* Runs code with whatever interpreter the machine has.  The script prints a
 * header line "<nonce> <interpreter>" first ("<nonce> - <node version>"
 * when there is none) and a trailer "<nonce>" plus the files the run created
 * or changed under the working directory last; the nonce is random per
 * call, so program output cannot fake either. */
static const char run_code_script[] =
	"f=$1 n=$2 lang=$3\n"
	"if [ -n \"$4\" ]; then printf '%s' \"$4\" > \"$f\" || exit 126; fi\n"
	"stamp=/tmp/.sandgate-stamp-$n; : > \"$stamp\"\n"
	"case $lang in\n"
	"python) cands='python3 python' ;;\n"
	"javascript) cands='node nodejs' ;;\n"
	"typescript) cands='tsx ts-node deno bun' ;;\n"
	"shell) cands='bash sh' ;;\n"
	"r) cands='Rscript' ;;\n"
	"esac\n"
	"interp=\n"
	"for c in $cands; do if command -v \"$c\" >/dev/null 2>&1; then interp=$c; break; fi; done\n"
	"if [ -z \"$interp\" ] && [ \"$lang\" = typescript ] && command -v node >/dev/null 2>&1 &&"
	" node --experimental-strip-types -e 0 >/dev/null 2>&1; then interp=node-strip-types; fi\n"
	"if [ -z \"$interp\" ]; then\n"
	"  v=; command -v node >/dev/null 2>&1 && v=\"node $(node --version 2>/dev/null)\"\n"
	"  printf '%s - %s\\n' \"$n\" \"$v\"; rm -f \"$stamp\" \"$f\"; exit 127\n"
	"fi\n"
	"printf '%s %s\\n' \"$n\" \"$interp\"\n"
	"case $interp in\n"
	"deno) deno run -A \"$f\" ;;\n"
	"bun) bun run \"$f\" ;;\n"
	"node-strip-types) node --experimental-strip-types --no-warnings \"$f\" ;;\n"
	"*) \"$interp\" \"$f\" ;;\n"
	"esac\n"
	"rc=$?\n"
	"printf '%s\\n' \"$n\"\n"
	"find . -maxdepth 4 -newer \"$stamp\" -type f -printf '%s\\t%P\\n' 2>/dev/null | head -n 200\n"
	"rm -f \"$stamp\" \"$f\"\n"
	"exit $rc\n";

static const char *code_ext(const char *lang)
{
	if (!strcmp(lang, "python")) return "py";
	if (!strcmp(lang, "javascript")) return "js";
	if (!strcmp(lang, "typescript")) return "ts";
	if (!strcmp(lang, "r")) return "R";
	return "sh";
}

/* What a language needs, for the error when the sandbox has none of it. */
static const char *lang_needs(const char *lang)
{
	if (!strcmp(lang, "python")) return "python3 or python";
	if (!strcmp(lang, "javascript")) return "node or nodejs";
	if (!strcmp(lang, "typescript"))
		return "Node >= 22.6 (type stripping), or tsx, ts-node, deno or bun";
	if (!strcmp(lang, "r")) return "Rscript (R)";
	return "bash or sh";
}

/* Memory search for needle in hay[0..n), the last occurrence. */
static const char *last_occurrence(const char *hay, size_t n, const char *needle)
{
	size_t k = strlen(needle);
	const char *found = NULL;

	for (const char *p = hay; n >= k && p <= hay + n - k; p++) {
		p = memmem(p, (size_t)(hay + n - p), needle, k);
		if (!p)
			break;
		found = p;
	}
	return found;
}

/* The trailer's "<size>\t<relative name>" lines into files. */
static void parse_files(const char *line, const char *end, json_t *files, const char *cwd)
{
	while (line < end) {
		const char *eol = memchr(line, '\n', (size_t)(end - line));
		const char *tab;

		if (!eol)
			eol = end;
		tab = memchr(line, '\t', (size_t)(eol - line));
		if (tab) {
			char *name = strndup(tab + 1, (size_t)(eol - tab - 1));
			char *full = sg_xasprintf("%s/%s", cwd, name);

			json_array_append_new(files, json_pack("{s:o, s:s, s:I}",
				"name", sg_json_bytes(name, strlen(name)), "path", full,
				"size", (json_int_t)strtoll(line, NULL, 10)));
			free(name);
			free(full);
		}
		line = eol + 1;
	}
}

/* Splits the script's stdout into header, program output and trailer. */
static int parse_code_output(const char *nonce, struct sg_buf *out, char *interp,
			     size_t ilen, json_t *files, const char *cwd)
{
	const char *p = out->data ? out->data : "", *nl, *trail;
	size_t n = out->len, nlen = strlen(nonce);

	if (n < nlen + 2 || memcmp(p, nonce, nlen) != 0 || p[nlen] != ' ')
		return -1;
	nl = memchr(p, '\n', n);
	if (!nl)
		return -1;
	snprintf(interp, ilen, "%.*s", (int)(nl - p - (ptrdiff_t)nlen - 1), p + nlen + 1);
	p = nl + 1;
	n -= (size_t)(p - out->data);
	trail = last_occurrence(p, n, nonce);
	if (trail) {
		parse_files(trail + nlen + 1, p + n, files, cwd);
		n = (size_t)(trail - p);
	}
	memmove(out->data, p, n);
	out->len = n;
	out->data[n] = '\0';
	return 0;
}

/* No interpreter: the error names what the language needs and, for
 * typescript, the node the sandbox has. */
static int no_interpreter(const struct sg_entry *e, const char *lang, const char *have,
			  struct sg_err *err)
{
	if (!strcmp(lang, "typescript") && have[0])
		return sg_errf(err, SG_E_NOTFOUND,
			       "run_code: typescript needs %s in sandbox '%s', which has %s "
			       "(too old to strip types): use an image with a newer Node or "
			       "install tsx with run_command (npm install -g tsx)",
			       lang_needs(lang), e->m.id, have);
	return sg_errf(err, SG_E_NOTFOUND,
		       "run_code: no %s interpreter in sandbox '%s' (it needs %s): use a "
		       "template whose image has one, or install it with run_command",
		       lang, e->m.id, lang_needs(lang));
}

static int run_exec_path(struct sg_tool_ctx *t, struct sg_entry *e, const char *lang,
			 const char *code, unsigned timeout, struct sg_code_result *res,
			 struct sg_err *err)
{
	struct sg_exec_result x = { 0 };
	struct sg_exec_req req = { 0 };
	char nonce[33], *file, interp[128] = "";
	const char *argv[9];
	bool inline_code;
	int ret = -1;

	res->output_files = json_array();
	sg_random_hex(nonce, 16);
	file = sg_xasprintf("/tmp/.sandgate-code-%s.%s", nonce, code_ext(lang));
	/* One argument holds at most 128 KiB (MAX_ARG_STRLEN): larger code goes
	 * through a file write first. */
	inline_code = strlen(code) <= 64 * 1024;
	if (!inline_code) {
		struct sg_write_opts wo = { .mode = 0600 };

		if (sg_m_file_write(e, file, code, strlen(code), &wo, t->call, err) < 0)
			goto out;
	}
	argv[0] = "/bin/sh";
	argv[1] = "-c";
	argv[2] = run_code_script;
	argv[3] = "sandgate-run-code";
	argv[4] = file;
	argv[5] = nonce;
	argv[6] = lang;
	argv[7] = inline_code ? code : "";
	argv[8] = NULL;
	req.argv = argv;
	req.cwd = e->m.workspace;
	req.timeout_ms = timeout * 1000;
	req.output_cap = output_cap() + 64 * 1024;
	if (sg_m_exec(e, &req, t->call, &x, err) < 0)
		goto out;
	if (parse_code_output(nonce, &x.out, interp, sizeof(interp), res->output_files,
			      e->m.workspace) < 0 && !x.timed_out) {
		sg_errf(err, SG_E_BACKEND, "run_code: the sandbox did not run the code (exit %d): %.200s",
			x.exit_code, x.err.data ? x.err.data : "");
		goto out;
	}
	if (interp[0] == '-') {
		no_interpreter(e, lang, interp[1] ? interp + 2 : "", err);
		goto out;
	}
	res->out = x.out;
	res->err = x.err;
	memset(&x.out, 0, sizeof(x.out));
	memset(&x.err, 0, sizeof(x.err));
	/* 124 is what timeout(1) reports for a command it killed. */
	res->exit_code = x.timed_out ? 124 : x.signal ? 128 + x.signal : x.exit_code;
	res->timed_out = x.timed_out;
	res->out_truncated = x.out_truncated;
	res->err_truncated = x.err_truncated;
	snprintf(res->interpreter, sizeof(res->interpreter), "%s", interp[0] ? interp : "unknown");
	ret = 0;
out:
	sg_buf_release(&x.out);
	sg_buf_release(&x.err);
	free(file);
	return ret;
}

/* ---- shell: the sandbox's persistent bash -------------------------------------------- */

/* The command for the shell: the code into a file (a quoted here-document,
 * so nothing in it is expanded), opened and removed at once (an `exit` in
 * the code leaves nothing behind), sourced from its descriptor with its
 * stderr into a file of its own, then a marker and that stderr on the
 * output.  `return` ends the sourced command with the code's status; the
 * variable it needs is gone by then.  The nonce is random per call: the
 * code's output cannot fake the marker. */
static char *shell_command(const char *nonce, const char *code)
{
	size_t n = strlen(code);

	return sg_xasprintf(
		"cat > /tmp/.sandgate-code-%s.sh <<'SANDGATE_%s'\n%s%s"
		"SANDGATE_%s\n"
		"exec {__sandgate_fd}</tmp/.sandgate-code-%s.sh; rm -f /tmp/.sandgate-code-%s.sh\n"
		". /dev/fd/$__sandgate_fd 2>/tmp/.sandgate-err-%s\n"
		"__sandgate_rc=$?; exec {__sandgate_fd}<&-\n"
		"printf '\\037%s:ERR\\n'; cat /tmp/.sandgate-err-%s 2>/dev/null; "
		"rm -f /tmp/.sandgate-err-%s\n"
		"eval \"unset __sandgate_fd __sandgate_rc; return $__sandgate_rc\"\n",
		nonce, nonce, code, n && code[n - 1] != '\n' ? "\n" : "", nonce, nonce, nonce,
		nonce, nonce, nonce, nonce);
}

/* The output up to the marker is stdout, after it stderr.  Without the
 * marker (the code ended the shell, or was interrupted mid-way) all of it
 * is stdout and stderr is read back from its file. */
static void shell_split(struct sg_entry *e, struct sg_call *call, const char *nonce,
			const char *output, struct sg_code_result *res)
{
	char marker[64];
	const char *m;
	struct sg_err ferr;
	char *errfile;

	snprintf(marker, sizeof(marker), "\037%s:ERR\n", nonce);
	m = strstr(output, marker);
	if (m) {
		sg_buf_append(&res->out, output, (size_t)(m - output));
		sg_buf_append(&res->err, m + strlen(marker), strlen(m + strlen(marker)));
		return;
	}
	sg_buf_append(&res->out, output, strlen(output));
	errfile = sg_xasprintf("/tmp/.sandgate-err-%s", nonce);
	if (sg_m_file_read(e, errfile, CODE_ERRFILE_MAX, call, &res->err, &ferr) == 0)
		sg_m_file_remove(e, errfile, false, call, &ferr);
	free(errfile);
}

/* What shell.c said about the shell's life, as kernel_restarted/died. */
static void shell_life(json_t *r, json_t *ir, struct sg_code_result *res)
{
	json_t *prev = json_object_get(r, "previous_shell");
	const char *status = json_string_value(json_object_get(r, "status"));

	if (prev) {
		res->kernel_restarted = true;
		snprintf(res->restart_reason, sizeof(res->restart_reason),
			 "the previous shell (bash pid %lld) ended: %s",
			 (long long)json_integer_value(json_object_get(prev, "previous_bash_pid")),
			 json_string_value(json_object_get(prev, "exit_reason")) ?
			 json_string_value(json_object_get(prev, "exit_reason")) : "unknown");
	}
	if (json_is_true(json_object_get(ir, "shell_replaced"))) {
		res->kernel_died = true;
		snprintf(res->died_reason, sizeof(res->died_reason),
			 "the code did not stop on the interrupt, so the shell was replaced: "
			 "its cwd and variables are gone");
	} else if (status && !strcmp(status, "terminated")) {
		res->kernel_died = true;
		snprintf(res->died_reason, sizeof(res->died_reason),
			 "the shell exited (exit, or set -e); the next call starts a fresh one "
			 "without this one's cwd and variables");
	}
}

static const char *str_of(json_t *o, const char *key)
{
	const char *v = json_string_value(json_object_get(o, key));

	return v ? v : "";
}

/* The timeout passed with the code still running (r says "running"): it
 * is interrupted, the shell and its state stay.  r then holds what the
 * interrupt said; *ir (new) the interrupt's own answer. */
static int shell_timeout(struct sg_shell *sh, json_t *r, json_t **ir, struct sg_code_result *res,
			 struct sg_err *err)
{
	res->timed_out = true;
	if (sg_shell_interrupt(sh, ir, err) < 0)
		return -1;
	sg_buf_append(&res->out, str_of(r, "output"), strlen(str_of(r, "output")));
	json_object_set(r, "output", json_object_get(*ir, "output"));
	json_object_set(r, "status", json_object_get(*ir, "status"));
	/* A shell replaced right now is this call's death, not a restart. */
	if (json_object_get(*ir, "previous_shell") &&
	    !json_is_true(json_object_get(*ir, "shell_replaced")))
		json_object_set(r, "previous_shell", json_object_get(*ir, "previous_shell"));
	return 0;
}

static int run_shell_path(struct sg_tool_ctx *t, struct sg_entry *e, const char *code,
			  unsigned timeout, bool reset, struct sg_code_result *res,
			  struct sg_err *err)
{
	struct sg_shell_exec req = { .wait = true, .timeout_ms = timeout * 1000,
				     .max_output = output_cap() };
	struct sg_shell *sh = sg_shell_default(e, t->call, err);
	json_t *r = NULL, *ir = NULL;
	char nonce[33];
	char *cmd = NULL;
	int ret = -1;
	json_t *code_v;

	if (!sh)
		return -1;
	if (reset) {
		if (sg_shell_remove(sh, err) < 0)
			return -1;
		sh = sg_shell_default(e, t->call, err);
		if (!sh)
			return -1;
	}
	sg_random_hex(nonce, 16);
	cmd = shell_command(nonce, code);
	req.command = cmd;
	if (sg_shell_exec(sh, &req, t->call, &r, err) < 0)
		goto out;
	if (!strcmp(str_of(r, "status"), "running") && shell_timeout(sh, r, &ir, res, err) < 0)
		goto out;
	shell_split(e, t->call, nonce, str_of(r, "output"), res);
	code_v = json_object_get(r, "exit_code");
	res->exit_code = res->timed_out ? 124 : json_is_integer(code_v) ?
			 (int)json_integer_value(code_v) : -1;
	res->out_truncated = json_object_get(r, "dropped_bytes") != NULL ||
			     json_object_get(ir, "dropped_bytes") != NULL;
	shell_life(r, ir, res);
	snprintf(res->interpreter, sizeof(res->interpreter), "bash (shell %s)", sg_shell_id(sh));
	res->output_files = json_array();
	ret = 0;
out:
	json_decref(r);
	json_decref(ir);
	free(cmd);
	sg_shell_put(sh);
	return ret;
}

/* ---- the result ------------------------------------------------------------------------ */

static json_t *code_result_json(const char *lang, bool stateful, struct sg_code_result *r)
{
	json_t *o = json_object(), *blocks = json_array(), *item;
	size_t i;

	json_object_set_new(o, "stdout", sg_json_bytes(r->out.data, r->out.len));
	json_object_set_new(o, "stderr", sg_json_bytes(r->err.data, r->err.len));
	json_object_set_new(o, "exit_code", json_integer(r->exit_code));
	json_object_set_new(o, "timed_out", json_boolean(r->timed_out));
	json_object_set_new(o, "language", json_string(lang));
	json_object_set_new(o, "interpreter", json_string(r->interpreter[0] ? r->interpreter : "unknown"));
	json_object_set_new(o, "stateful", json_boolean(stateful));
	/* Rich results may carry MCP content blocks (png and jpeg as image
	 * blocks): lifted into the result's extra content. */
	if (!r->results)
		r->results = json_array();
	json_array_foreach(r->results, i, item) {
		json_array_extend(blocks, json_object_get(item, "_content"));
		json_object_del(item, "_content");
	}
	json_object_set_new(o, "results", r->results);
	r->results = NULL;
	if (r->error) {
		json_object_set_new(o, "error", r->error);
		r->error = NULL;
	}
	json_object_set_new(o, "output_files", r->output_files ? r->output_files : json_array());
	r->output_files = NULL;
	json_object_set_new(o, "kernel_restarted", json_boolean(r->kernel_restarted));
	if (r->kernel_restarted)
		json_object_set_new(o, "kernel_restart_reason", json_string(r->restart_reason));
	if (r->kernel_died) {
		json_object_set_new(o, "kernel_died", json_true());
		json_object_set_new(o, "kernel_died_reason", json_string(r->died_reason));
	}
	if (r->out_truncated)
		json_object_set_new(o, "stdout_truncated", json_true());
	if (r->err_truncated)
		json_object_set_new(o, "stderr_truncated", json_true());
	if (json_array_size(blocks))
		json_object_set_new(o, "_content", blocks);
	else
		json_decref(blocks);
	return o;
}

/* ---- the tool ------------------------------------------------------------------------ */

/* The backend's interpreter service.  Returns 0, -1 with err, or 1 when it
 * has none for this call (SG_E_NOTSUP: the exec path runs it). */
static int run_slot_path(struct sg_tool_ctx *t, struct sg_entry *e, const char *lang,
			 const char *code, unsigned timeout, bool reset,
			 struct sg_code_result *res, struct sg_err *err)
{
	struct sg_code_req req = { .language = lang, .code = code, .timeout_ms = timeout * 1000,
				   .output_cap = output_cap(), .reset = reset };

	if (!e->m.backend->run_code)
		return 1;
	if (reset && e->m.backend->abi_minor < 1)
		return sg_errf(err, SG_E_NOTSUP, "run_code: backend '%s' is a plugin of ABI 2.%u, "
			       "which cannot reset its interpreter (reset needs 2.1): update the plugin",
			       e->m.backend->name, e->m.backend->abi_minor);
	if (sg_m_run_code(e, &req, t->call, res, err) == 0)
		return 0;
	if (err->code != SG_E_NOTSUP)
		return -1;
	SG_DEBUG("run_code on %s: %s; the exec path runs it", e->m.id, err->msg);
	code_result_release(res);
	memset(res, 0, sizeof(*res));
	sg_err_clear(err);
	return 1;
}

int sg_tool_run_code(struct sg_tool_ctx *t, json_t *args, json_t **result, struct sg_err *err)
{
	const char *code, *lang;
	unsigned timeout;
	struct sg_entry *e = NULL;
	struct sg_code_result res = { 0 };
	bool created, reset, stateful = true;
	int rc = -1;

	if (sg_arg_str(args, "code", true, &code, err) < 0 ||
	    sg_arg_enum(args, "language", "python", "python|javascript|shell|typescript|r", &lang,
			err) < 0 ||
	    sg_arg_uint(args, "timeout", (unsigned)sg_config_int("sandbox", "code_timeout", 30), 1,
			86400, &timeout, err) < 0 ||
	    sg_arg_bool(args, "reset", false, &reset, err) < 0)
		return -1;
	if (sg_tool_machine(t, args, &e, &created, err) < 0)
		return -1;
	if (!strcmp(lang, "shell"))
		rc = run_shell_path(t, e, code, timeout, reset, &res, err);
	else
		rc = run_slot_path(t, e, lang, code, timeout, reset, &res, err);
	if (rc == 1) {
		stateful = false;
		rc = run_exec_path(t, e, lang, code, timeout, &res, err);
	}
	if (rc < 0) {
		if (err->code == SG_E_GONE)
			sg_tool_machine_failed(t, e, err);
		goto out;
	}
	*result = code_result_json(lang, stateful, &res);
	sg_tool_result_machine(*result, e, created);
out:
	code_result_release(&res);
	sg_machine_put(e);
	return rc < 0 ? -1 : 0;
}
