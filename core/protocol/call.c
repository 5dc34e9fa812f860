#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "core/protocol/call.h"
#include "core/base/mem.h"
#include "core/base/util.h"

struct sg_call *sg_call_new(struct sg_session *s, json_t *id, json_t *progress_token,
			    const char *method)
{
	struct sg_call *c = sg_xcalloc(1, sizeof(*c));

	c->session = s;
	/* Copies, not references: the call ends on a worker thread while the
	 * message it came in (a batch) is freed on the transport's, and
	 * jansson's json_decref reads a count another thread may be freeing
	 * (a data race to ThreadSanitizer).  Ids and tokens are scalars. */
	c->id = json_deep_copy(id);
	c->progress_token = progress_token ? json_deep_copy(progress_token) : NULL;
	if ((id && !c->id) || (progress_token && !c->progress_token))
		abort(); /* out of memory: the sg_xmalloc policy */
	snprintf(c->method, sizeof(c->method), "%s", method ? method : "");
	atomic_init(&c->cancelled, false);
	atomic_init(&c->done, false);
	c->efd = -1;
	c->last_progress = -1;
	pthread_mutex_init(&c->lock, NULL);
	return c;
}

/* Cancel eventfds outlive their calls in a small pool: a backend asks for
 * one on every request it waits for, and making one (and its close) cost
 * more than resetting it.  Under pool_lock. */
#define EFD_POOL_MAX 16
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static int efd_pool[EFD_POOL_MAX];
static int efd_pooled;

static int efd_get(void)
{
	int fd = -1;

	pthread_mutex_lock(&pool_lock);
	if (efd_pooled > 0)
		fd = efd_pool[--efd_pooled];
	pthread_mutex_unlock(&pool_lock);
	return fd >= 0 ? fd : eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
}

static void efd_put(int fd)
{
	uint64_t n;

	/* Reset: a read takes the count back to zero (EAGAIN when it is). */
	if (read(fd, &n, sizeof(n)) < 0 && errno != EAGAIN) {
		close(fd);
		return;
	}
	pthread_mutex_lock(&pool_lock);
	if (efd_pooled < EFD_POOL_MAX) {
		efd_pool[efd_pooled++] = fd;
		fd = -1;
	}
	pthread_mutex_unlock(&pool_lock);
	if (fd >= 0)
		close(fd);
}

void sg_call_free(struct sg_call *c)
{
	if (!c)
		return;
	json_decref(c->id);
	json_decref(c->progress_token);
	if (c->efd >= 0)
		efd_put(c->efd);
	pthread_mutex_destroy(&c->lock);
	sg_mem_release(c->mem_held);
	json_decref(c->held.ph);
	free(c->held.data);
	free(c);
}

json_t *sg_call_string(struct sg_call *c, char *data, size_t len, bool plain)
{
	json_t *v;

	if (c && c->pieces && !c->held.ph && len >= SG_CALL_HOLD_MIN) {
		/* A string of its own: its identity is the placeholder's. */
		c->held.ph = json_string("");
		if (!c->held.ph)
			abort(); /* out of memory: the sg_xmalloc policy */
		c->held.data = data;
		c->held.len = len;
		c->held.plain = plain;
		return json_incref(c->held.ph);
	}
	v = json_stringn_nocheck(data ? data : "", len);
	free(data);
	if (!v)
		abort();
	return v;
}

void sg_call_mem_hold(struct sg_call *c, size_t n)
{
	if (!c || !n)
		return;
	sg_mem_hold(n);
	c->mem_held += n;
}

/* Only the call's own thread reserves, so mem_held needs no lock. */
int sg_call_mem_reserve(struct sg_call *c, size_t n, struct sg_err *err)
{
	if (!c || !n)
		return 0;
	if (sg_mem_reserve(n, err) < 0)
		return -1;
	c->mem_held += n;
	return 0;
}

void sg_call_cancel(struct sg_call *c)
{
	uint64_t one = 1;

	pthread_mutex_lock(&c->lock);
	atomic_store(&c->cancelled, true);
	if (c->efd >= 0 && write(c->efd, &one, sizeof(one)) < 0) {
		/* an eventfd write only fails on overflow; it is readable then */
	}
	pthread_mutex_unlock(&c->lock);
}

bool sg_call_cancelled(const struct sg_call *c)
{
	return c && atomic_load(&c->cancelled);
}

/* The eventfd is made on first demand: most calls never need one. */
int sg_call_cancel_fd(const struct sg_call *cc)
{
	struct sg_call *c = (struct sg_call *)cc;
	uint64_t one = 1;
	int fd;

	if (!c)
		return -1;
	pthread_mutex_lock(&c->lock);
	if (c->efd < 0) {
		c->efd = efd_get();
		if (c->efd >= 0 && atomic_load(&c->cancelled) &&
		    write(c->efd, &one, sizeof(one)) < 0) {
			/* see sg_call_cancel */
		}
	}
	fd = c->efd;
	pthread_mutex_unlock(&c->lock);
	return fd;
}

static atomic_uint n_credentials = 1;

void sg_credentials_set(unsigned n)
{
	atomic_store(&n_credentials, n ? n : 1);
}

unsigned sg_credentials_count(void)
{
	return atomic_load(&n_credentials);
}
