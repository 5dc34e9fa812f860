/*
 * A command's end seen in-band (core/shell/internal.h): where the machine
 * has no status channel, bash writes nonce markers into its own output;
 * the reader classifies the stream by them and keeps the rest as output.
 */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/shell/internal.h"

/* Handles the scan buffer in the current phase.  Returns true when it moved
 * on to another phase (call again). */
static bool step(struct sg_shell *sh)
{
	char needle[64];
	const char *hit, *nl;

	switch (sh->phase) {
	case PH_BOOT:
		snprintf(needle, sizeof(needle), "\037%s:B:", sh->nonce);
		hit = sg_sh_find(&sh->scan, needle);
		if (!hit) {
			sg_sh_scan_keep_tail(&sh->scan, strlen(needle));
			return false;
		}
		nl = memchr(hit, '\n', (size_t)(sh->scan.data + sh->scan.len - hit));
		if (!nl)
			return false;
		sh->bash_pid = strtol(hit + strlen(needle), NULL, 10);
		sh->phase = PH_NONE;
		sh->state = SH_IDLE;
		sh->scan.len = 0;
		return false;
	case PH_START:
	case PH_JOBS:
		snprintf(needle, sizeof(needle), "\037%s:%c\n", sh->nonce, sh->phase == PH_START ? 'S' : 'J');
		hit = sg_sh_find(&sh->scan, needle);
		if (!hit) {
			if (sh->phase == PH_START || sh->scan.len > SHELL_SCAN_MAX)
				sg_sh_scan_keep_tail(&sh->scan, strlen(needle));
			return false;
		}
		if (sh->phase == PH_JOBS) {
			size_t n = (size_t)(hit - sh->scan.data);

			snprintf(sh->jobs, sizeof(sh->jobs), "%.*s", (int)n, sh->scan.data);
			for (char *c = sh->jobs; *c; c++)
				if (*c == '\n' || *c == '\r')
					*c = ' ';
		}
		sg_sh_scan_drop(&sh->scan, (size_t)(hit - sh->scan.data) + strlen(needle));
		sh->phase = sh->phase == PH_START ? PH_JOBS : PH_CMD;
		return true;
	case PH_CMD:
		snprintf(needle, sizeof(needle), "\037%s:E:", sh->nonce);
		hit = sg_sh_find(&sh->scan, needle);
		if (!hit) {
			size_t keep = sg_sh_prefix_suffix(&sh->scan, needle);

			if (sh->scan.len > keep) {
				sg_ht_add(&sh->out, sh->scan.data, sh->scan.len - keep);
				sg_sh_scan_drop(&sh->scan, sh->scan.len - keep);
			}
			return false;
		}
		sg_ht_add(&sh->out, sh->scan.data, (size_t)(hit - sh->scan.data));
		sg_sh_scan_drop(&sh->scan, (size_t)(hit - sh->scan.data));
		nl = memchr(sh->scan.data + strlen(needle), '\n', sh->scan.len - strlen(needle));
		if (!nl)
			return false;
		sh->exit_code = (int)strtol(sh->scan.data + strlen(needle), NULL, 10);
		sh->completed = true;
		sh->phase = PH_DONE;
		sh->scan.len = 0;
		return false;
	default:
		sh->scan.len = 0; /* between commands: background chatter */
		return false;
	}
}

void sg_sh_feed_inband(struct sg_shell *sh, const char *p, size_t n)
{
	if (sh->phase == PH_NONE || sh->phase == PH_DONE)
		return;
	if (sg_buf_append(&sh->scan, p, n) < 0)
		abort();
	while (step(sh))
		;
}

