/*
 * Ending sessions: DELETE (MCP 2025-11-25 basic/transports, "Session
 * Management"), the idle TTL and shutdown all end a session through
 * http_close_start(), on a thread of its own.
 */
#include "config.h"

#include <pthread.h>
#include <stdlib.h>

#include <microhttpd.h>

#include "core/base/util.h"
#include "core/protocol/session.h"

#include "transports/http_internal.h"

/* ---- ending sessions (DELETE, idle TTL, shutdown) ---------------------------- */

struct close_job {
	struct hsess *hs;    /* the table's reference, consumed */
	struct req *del;     /* the DELETE waiting for the end, or NULL */
	int grace_ms;
};

/* Every stream of an ended session finishes with what it has; retained
 * ones are let go. */
static void session_end_streams(struct hsess *hs)
{
	struct MHD_Connection **wake = NULL;
	struct stream **dead = NULL;
	size_t nw = 0, nd = 0, n = 0;

	pthread_mutex_lock(&hs->lock);
	for (struct stream *st = hs->streams; st; st = st->next)
		n++;
	wake = sg_xcalloc(n + 1, sizeof(*wake));
	dead = sg_xcalloc(n + 1, sizeof(*dead));
	for (struct stream *st = hs->streams, *next; st; st = next) {
		next = st->next;
		st->closed = true;
		if ((wake[nw] = http_stream_wake_locked(st)))
			nw++;
		if (st->retained) {
			http_stream_unretain_locked(st);
			if (http_stream_put_locked(st))
				dead[nd++] = st;
		}
	}
	pthread_mutex_unlock(&hs->lock);
	for (size_t i = 0; i < nw; i++)
		MHD_resume_connection(wake[i]);
	for (size_t i = 0; i < nd; i++)
		http_stream_free(dead[i]);
	free(wake);
	free(dead);
}

/* sg_session_close() can take seconds (sandboxes are destroyed), so it runs
 * on a thread of its own, never on an MHD thread. */
static void *closer_main(void *arg)
{
	struct close_job *job = arg;
	struct hsess *hs = job->hs;
	struct MHD_Connection *wake = NULL;

	pthread_mutex_lock(&hs->lock);
	hs->ended = true;
	while (hs->handling > 0)
		pthread_cond_wait(&hs->cond, &hs->lock);
	pthread_mutex_unlock(&hs->lock);
	sg_session_close(hs->s, job->grace_ms);
	session_end_streams(hs);
	SG_DEBUG("http: session %s ended", hs->s->hash);
	if (job->del) {
		pthread_mutex_lock(&hs->lock);
		job->del->closed = true;
		if (job->del->waiting)
			wake = job->del->conn;
		job->del->waiting = false;
		pthread_mutex_unlock(&hs->lock);
		if (wake)
			MHD_resume_connection(wake);
	}
	http_hsess_unref(hs);
	free(job);
	pthread_mutex_lock(&http_srv.lock);
	if (--http_srv.closers == 0)
		pthread_cond_broadcast(&http_srv.cond);
	pthread_mutex_unlock(&http_srv.lock);
	return NULL;
}

/* Ends hs (already out of the table; its table reference is consumed). */
void http_close_start(struct hsess *hs, struct req *del, int grace_ms)
{
	struct close_job *job = sg_xcalloc(1, sizeof(*job));
	pthread_attr_t attr;
	pthread_t th;
	int rc;

	job->hs = hs;
	job->del = del;
	job->grace_ms = grace_ms;
	pthread_mutex_lock(&http_srv.lock);
	http_srv.closers++;
	pthread_mutex_unlock(&http_srv.lock);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	rc = pthread_create(&th, &attr, closer_main, job);
	pthread_attr_destroy(&attr);
	if (rc != 0) {
		SG_WARN("cannot start a thread to end session %s: ending it inline", hs->s->hash);
		closer_main(job);
	}
}

/* DELETE (MCP basic/transports "Session Management" 5): the session is out
 * of the table at once (later requests get 404); the 200 waits until its
 * sandboxes are gone. */
enum MHD_Result http_delete(struct req *r)
{
	struct hsess *hs = r->hs;

	if (r->closed)
		return http_reply_empty(r, MHD_HTTP_OK);
	if (!http_table_remove(hs))
		return http_reply_error(r, MHD_HTTP_NOT_FOUND, "session not found: it already ended");
	SG_INFO("http: session %s ended by DELETE", hs->s->hash);
	pthread_mutex_lock(&hs->lock);
	r->waiting = true;
	MHD_suspend_connection(r->conn);
	pthread_mutex_unlock(&hs->lock);
	http_close_start(hs, r, http_srv.conf.grace_ms);
	return MHD_YES;
}
