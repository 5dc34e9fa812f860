/*
 * Internals of the runner client shared by client.c (opening, closing and
 * the requests: what the callers of client.h use) and client_read.c (the
 * reader thread: frames from the runner, filed with their requests); no
 * other file includes this.  Locking and ownership as in client.h.
 */
#ifndef SG_RUNNER_CLIENT_INT_H
#define SG_RUNNER_CLIENT_INT_H

#include "plugins/runner/client.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RN_WHY_MAX    200
#define RN_PREFIX_MAX 160 /* bytes kept of a stream that never said HELLO */

/* Data that arrived for a request, in order.  Owned by the request's queue. */
struct rn_chunk {
	struct rn_chunk *next;
	int chan;
	size_t len, off;
	unsigned char data[];
};

/* One request on a connection.  Owned by its references (refs): the
 * table's while it runs and the caller's; freed by rn_req_free(). */
struct rn_req {
	struct rn_conn *c;          /* a reference */
	uint32_t id;
	int efd;                    /* eventfd: news for the waiter */
	uint8_t type;               /* RN_SPAWN, RN_KEXEC, RN_FILE or RN_PING */
	bool ping;
	bool file;                  /* a FILE request: one FILE answer ends it */
	bool quiet_start;           /* STARTED is filed without waking the waiter */
	/* Guarded by c->lock: */
	int refs;                   /* the table's (while running) + the caller's */
	bool in_table;
	enum rn_req_state state;
	struct rn_exit ex;
	char why[RN_WHY_MAX];
	bool started;
	long pid, pgid;
	struct rn_chunk *head, *tail;
	size_t queued;
	bool overflow;
	struct rn_req *next;        /* in the table */
};

/* One runner connection.  Owned by its references (refs): the opener's,
 * each request's; freed by the last rn_conn_put(). */
struct rn_conn {
	struct rn_transport t;
	struct rn_conn_opts o;
	char name[64];
	char want_id[RN_BUILD_ID_LEN + 1];
	pthread_t reader;
	bool reader_started, reader_joined;
	struct rn_reader rd;        /* used by the reader thread only */
	unsigned char prefix[RN_PREFIX_MAX];
	size_t prefix_len;          /* reader thread only, until HELLO */
	bool greeted;               /* reader thread only: HELLO came */
	bool hello_frame;           /* reader thread only: a HELLO was parsed */

	pthread_mutex_t wlock;      /* one frame at a time on the transport */

	pthread_mutex_t lock;       /* guards everything below */
	pthread_cond_t cond;        /* HELLO or death */
	int refs;
	bool hello;
	struct rn_hello h;
	bool dead;
	char why[RN_WHY_MAX];
	uint32_t next_id;
	struct rn_req *table;
};

/* ---- client.c ------------------------------------------------------------------ */

/* Wakes r's waiter (a write to its eventfd). */
void rn_wake(struct rn_req *r);
/* Frees r (its queue, its eventfd) and drops its connection reference;
 * called once its last reference is gone, c->lock not held. */
void rn_req_free(struct rn_req *r);
/* Takes r out of the table; called with c->lock held.  Returns true when
 * that was the last reference (the caller frees after unlocking). */
bool rn_unlink_locked(struct rn_conn *c, struct rn_req *r);
/* Marks the connection dead with reason why and fails every request in
 * flight, and shuts the transport down; any thread, any number of times
 * (the first reason stays). */
void rn_conn_fail(struct rn_conn *c, const char *why);

/* ---- client_read.c --------------------------------------------------------------- */

/* The reader thread (arg: the connection): reads and files frames until the
 * stream ends or breaks a rule, then fails the connection with the reason. */
void *rn_reader_main(void *arg);

#endif
