/*
 * The reader thread of a shell (core/shell/internal.h): one per shell, it
 * reads the stream and hands the bytes to the completion reader of its
 * mode; when the stream ends it closes it and marks the shell dead.
 */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/log.h"
#include "core/base/util.h"
#include "core/registry/machine.h"
#include "core/shell/internal.h"

/* The stream ended: close it (for the exit status) and mark the shell dead. */
static void shell_ended(struct sg_shell *sh, const char *why)
{
	int code = -1;

	pthread_mutex_lock(&sh->io_lock);
	if (sh->stream) {
		sg_m_stream_close(sh->e, sh->stream, &code);
		sh->stream = NULL;
	}
	pthread_mutex_unlock(&sh->io_lock);
	pthread_mutex_lock(&sh->lock);
	if (sh->phase == PH_CMD && sh->scan.len) {
		/* What waited for a marker that will never come is output. */
		sg_ht_add(&sh->out, sh->scan.data, sh->scan.len);
		sh->scan.len = 0;
	}
	sh->sline.len = 0;
	if (sh->state != SH_DEAD) {
		sh->dead_code = code;
		snprintf(sh->dead_reason, sizeof(sh->dead_reason), "%s",
			 sh->killing ? "interrupted" : why ? "io_error" : code >= 0 ? "exit" : "unknown");
		sh->state = SH_DEAD;
	}
	pthread_cond_broadcast(&sh->cond);
	pthread_mutex_unlock(&sh->lock);
	if (why)
		SG_DEBUG("shell %s: stream error: %s", sh->id, why);
}

/* One read of the stream: *chan is SG_STREAM_STATUS only in status_fd mode. */
static ssize_t reader_read(struct sg_shell *sh, char *buf, int *chan, struct sg_err *err)
{
	*chan = SG_STREAM_OUTPUT;
	if (sh->status_mode)
		return sg_m_stream_read_ch(sh->e, sh->stream, buf, SHELL_CHUNK, SHELL_POLL_MS, chan, err);
	return sg_m_stream_read(sh->e, sh->stream, buf, SHELL_CHUNK, SHELL_POLL_MS, err);
}

void *sg_sh_reader_main(void *arg)
{
	struct sg_shell *sh = arg;
	char *buf = sg_xmalloc(SHELL_CHUNK); /* this thread's; freed below */
	struct sg_err err;
	ssize_t r;
	int chan;

	while (!atomic_load(&sh->stop)) {
		r = reader_read(sh, buf, &chan, &err);
		if (r < 0 && err.code == SG_E_TIMEOUT)
			continue;
		if (r <= 0) {
			shell_ended(sh, r < 0 ? err.msg : NULL);
			break;
		}
		pthread_mutex_lock(&sh->lock);
		if (!sh->status_mode)
			sg_sh_feed_inband(sh, buf, (size_t)r);
		else if (chan == SG_STREAM_STATUS)
			sg_sh_feed_status(sh, buf, (size_t)r);
		else
			sg_sh_feed_output(sh, buf, (size_t)r);
		pthread_cond_broadcast(&sh->cond);
		pthread_mutex_unlock(&sh->lock);
	}
	free(buf);
	return NULL;
}

