/*
 * The remote command line.  An SSH exec request is a string that the user's
 * login shell runs with -c, so it is the one place quoting happens: every
 * argument is single-quoted exactly once here, and the login shell removes
 * that one level and execs /bin/sh with the pieces as separate arguments.
 * Nothing re-splits them after that: the wrapper passes the command to a
 * fresh `/bin/sh -c` as one argument, and argv through "$@".
 *
 * The quoting works for Bourne shells (sh, dash, bash, ksh, zsh) and fish:
 * a quote becomes '\'' and a backslash '\\' (outside the quotes, because fish
 * treats \\ inside single quotes as one backslash).  csh and tcsh cannot hold
 * a newline in quotes; they are not supported as login shells.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/ssh/ssh.h"

#include <ctype.h>
#include <string.h>

/* $1 nonce, $2 cwd, $3 the command (or $3... argv).  The marker line tells
 * us the process group: sshd makes each session's process a session leader
 * and `exec` keeps its pid down the chain, so $$ is the group id.  It is
 * printed after cd, so "<nonce> cwd" means the directory is missing.  CDPATH
 * is cleared so cd neither searches nor prints. */
#define SSH_WRAP_HEAD \
	"CDPATH= cd -- \"$2\" || { printf '%s cwd\\n' \"$1\"; exit 1; }; " \
	"printf '%s %s\\n' \"$1\" $$; "
static const char ssh_wrap_cmd[] = SSH_WRAP_HEAD "exec /bin/sh -c \"$3\"";
static const char ssh_wrap_argv[] = SSH_WRAP_HEAD "shift 2; exec \"$@\"";
static const char ssh_wrap_cmd_merged[] = "exec 2>&1; " SSH_WRAP_HEAD "exec /bin/sh -c \"$3\"";
static const char ssh_wrap_argv_merged[] = "exec 2>&1; " SSH_WRAP_HEAD "shift 2; exec \"$@\"";
/* One-shot commands do not exec: the wrapper waits for the command and
 * prints "\n<nonce> end <status>\n" on both streams, so the reader knows
 * the command ended even while a background job it left holds the
 * channel's pipes open (sshd closes the channel only when they close). */
#define SSH_WRAP_END \
	"; s=$?; printf '\\n%s end %d\\n' \"$n\" $s; printf '\\n%s end %d\\n' \"$n\" $s >&2; exit $s"
static const char ssh_wrap_cmd_end[] = SSH_WRAP_HEAD "n=$1; /bin/sh -c \"$3\"" SSH_WRAP_END;
static const char ssh_wrap_argv_end[] = SSH_WRAP_HEAD "n=$1; shift 2; \"$@\"" SSH_WRAP_END;

int ssh_quote(const struct sg_host_api *host, struct sg_buf *b, const char *s)
{
	const char *run = s;

	if (host->buf_append(b, "'", 1) < 0)
		return -1;
	for (const char *p = s;; p++) {
		const char *esc = *p == '\'' ? "'\\''" : *p == '\\' ? "'\\\\'" : NULL;

		if (!esc && *p)
			continue;
		if (p > run && host->buf_append(b, run, (size_t)(p - run)) < 0)
			return -1;
		if (!*p)
			break;
		if (host->buf_append(b, esc, strlen(esc)) < 0)
			return -1;
		run = p + 1;
	}
	return host->buf_append(b, "'", 1);
}

bool ssh_env_name_ok(const char *kv)
{
	const char *eq = strchr(kv, '=');

	if (!eq || eq == kv || isdigit((unsigned char)kv[0]))
		return false;
	for (const char *c = kv; c < eq; c++)
		if (!isalnum((unsigned char)*c) && *c != '_')
			return false;
	return true;
}

static int ssh_word(const struct sg_host_api *host, struct sg_buf *b, const char *lit)
{
	return host->buf_append(b, lit, strlen(lit));
}

static int ssh_arg(const struct sg_host_api *host, struct sg_buf *b, const char *s)
{
	return ssh_word(host, b, " ") < 0 ? -1 : ssh_quote(host, b, s);
}

int ssh_cmdline(const struct sg_host_api *host, const struct ssh_cmdspec *spec,
		struct sg_buf *b)
{
	const char *wrap = spec->command ? (spec->merge_stderr ? ssh_wrap_cmd_merged : ssh_wrap_cmd)
					 : (spec->merge_stderr ? ssh_wrap_argv_merged : ssh_wrap_argv);

	if (spec->end_mark && !spec->merge_stderr)
		wrap = spec->command ? ssh_wrap_cmd_end : ssh_wrap_argv_end;

	if (ssh_word(host, b, "exec") < 0)
		return -1;
	if (spec->env_prefix && spec->env_prefix[0]) {
		if (ssh_word(host, b, " env") < 0)
			return -1;
		for (const char *const *e = spec->env_prefix; *e; e++)
			if (ssh_arg(host, b, *e) < 0)
				return -1;
	}
	if (ssh_word(host, b, " /bin/sh -c") < 0 || ssh_arg(host, b, wrap) < 0 ||
	    ssh_word(host, b, " sg") < 0 || ssh_arg(host, b, spec->nonce) < 0 ||
	    ssh_arg(host, b, spec->cwd) < 0)
		return -1;
	if (spec->command)
		return ssh_arg(host, b, spec->command);
	for (const char *const *a = spec->argv; *a; a++)
		if (ssh_arg(host, b, *a) < 0)
			return -1;
	return 0;
}
