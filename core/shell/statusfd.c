/*
 * A command's end seen on the status channel (core/shell/internal.h): bash
 * writes its protocol lines on fd 3, a channel of its own, so the output
 * channel is all output and needs no scanning.
 */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/shell/internal.h"

/* Output channel: nothing but output, so no scanning.  It counts from the
 * moment the command was begun, not from its start marker: the runner
 * orders output written before a status write ahead of it, but output
 * written after one may overtake it, so waiting for "S" could drop the
 * command's first bytes.  Idle and booting shells drop (background chatter). */
void sg_sh_feed_output(struct sg_shell *sh, const char *p, size_t n)
{
	if (sh->phase == PH_START || sh->phase == PH_JOBS || sh->phase == PH_CMD)
		sg_ht_add(&sh->out, p, n);
}

/* Appends one `jobs -p` line to the job list, space-separated. */
static void jobs_add(struct sg_shell *sh, const char *l)
{
	size_t len = strlen(sh->jobs);

	snprintf(sh->jobs + len, sizeof(sh->jobs) - len, "%s%s", len ? " " : "", l);
}

/* One line of the status channel, NUL-terminated.  Only bash's own protocol
 * writes there (a command runs with fd 3 closed); the nonce still has to
 * match, so a stale or stray line never ends a command. */
static void status_line(struct sg_shell *sh, const char *l)
{
	size_t k = strlen(sh->nonce);
	char tag;

	if (strncmp(l, sh->nonce, k) || l[k] != ':') {
		if (sh->phase == PH_JOBS && *l)
			jobs_add(sh, l); /* a pid from jobs -p */
		return;
	}
	tag = l[k + 1];
	if (tag == 'B' && sh->phase == PH_BOOT && l[k + 2] == ':') {
		sh->bash_pid = strtol(l + k + 3, NULL, 10);
		sh->phase = PH_NONE;
		sh->state = SH_IDLE;
	} else if (tag == 'S' && sh->phase == PH_START) {
		sh->jobs[0] = '\0';
		sh->phase = PH_JOBS;
	} else if (tag == 'J' && sh->phase == PH_JOBS) {
		sh->phase = PH_CMD;
	} else if (tag == 'E' && l[k + 2] == ':' &&
		   (sh->phase == PH_START || sh->phase == PH_JOBS || sh->phase == PH_CMD)) {
		/* Everything the command wrote is in already: the runner sends
		 * output written before a status write ahead of it. */
		sh->exit_code = (int)strtol(l + k + 3, NULL, 10);
		sh->completed = true;
		sh->phase = PH_DONE;
	}
}

/* Status channel: bytes come in pieces; whole lines are handled. */
void sg_sh_feed_status(struct sg_shell *sh, const char *p, size_t n)
{
	char line[SHELL_LINE_MAX + 1];
	const char *nl;
	size_t len;

	if (sg_buf_append(&sh->sline, p, n) < 0)
		abort();
	while (sh->sline.len && (nl = memchr(sh->sline.data, '\n', sh->sline.len)) != NULL) {
		len = (size_t)(nl - sh->sline.data);
		if (len <= SHELL_LINE_MAX) {
			memcpy(line, sh->sline.data, len);
			line[len] = '\0';
			status_line(sh, line);
		}
		sg_sh_scan_drop(&sh->sline, len + 1);
	}
	if (sh->sline.len > SHELL_LINE_MAX)
		sh->sline.len = 0; /* no protocol line is this long */
}

