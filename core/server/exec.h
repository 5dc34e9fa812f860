/*
 * The executor: where tool calls run.  At most [server] max_calls run at
 * once, across every session; each runs on a worker thread of a small pool
 * (a finished worker waits a while for the next call rather than exiting:
 * a thread start per call cost a clone, the faults on its stack and an
 * madvise at exit), or on the thread that read it when the transport hands
 * reading on to another thread (stdio's leader/follower).  The router
 * (core/server/mcp.c) decides what runs; this file only how.
 */
#ifndef SG_CORE_SERVER_EXEC_H
#define SG_CORE_SERVER_EXEC_H

#include <stdbool.h>

/* One unit of work, embedded first in the caller's own job struct; run()
 * owns the job from then on (it frees it). */
struct sg_exec_job {
	void (*run)(struct sg_exec_job *job);
	struct sg_exec_job *next; /* the pool's */
};

/* Takes one of the [server] max_calls slots.  Returns 0, or -1 when all
 * are taken (the caller answers "too many tool calls in flight"). */
int sg_exec_admit(void);

/* Runs an admitted job: on a pooled worker thread, or here when `here`
 * (the caller's thread is free to run it).  The slot is given back when
 * run() returns.  Returns 0, or -1 when no thread could be started: the
 * slot is given back and the job was not run (still the caller's). */
int sg_exec_start(struct sg_exec_job *job, bool here);

/* Waits until no job runs, then ends the waiting workers (before the
 * plugins are unloaded). */
void sg_exec_drain(void);

#endif
