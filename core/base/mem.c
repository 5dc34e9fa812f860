/* The server-wide memory budget (core/base/mem.h). */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <jansson.h>

#include "core/base/buf.h"
#include "core/base/conf.h"
#include "core/base/err.h"
#include "core/base/log.h"
#include "core/base/mem.h"

#define MIB (1024 * 1024ULL)
/* A release at least this large returns freed memory to the system:
 * glibc keeps freed heap (and every thread's arena) otherwise, and a
 * server that read a few large files stayed at a gigabyte for minutes. */
#define TRIM_AT (4 * MIB)

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t freed = PTHREAD_COND_INITIALIZER;
static size_t used;

static unsigned long long mem_total(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);

	return pages > 0 && size > 0 ? (unsigned long long)pages * (unsigned long long)size : 4096 * MIB;
}

size_t sg_mem_budget(void)
{
	long long v = sg_config_int("server", "memory_budget", 0);
	unsigned long long b;

	if (v > 0)
		return (size_t)v;
	b = mem_total() / 4;
	if (b < 256 * MIB)
		b = 256 * MIB;
	if (b > 4096 * MIB)
		b = 4096 * MIB;
	return (size_t)b;
}

size_t sg_mem_used(void)
{
	size_t u;

	pthread_mutex_lock(&lock);
	u = used;
	pthread_mutex_unlock(&lock);
	return u;
}

static int refuse(struct sg_err *err, size_t n, size_t budget, size_t held)
{
	return sg_errf(err, SG_E_BUSY,
		       "memory budget: this call needs %zu bytes and the calls in flight hold %zu of [server] memory_budget (%zu bytes): retry when they end, ask for less (a smaller limit), or raise [server] memory_budget",
		       n, held, budget);
}

int sg_mem_reserve(size_t n, struct sg_err *err)
{
	size_t budget = sg_mem_budget();
	struct timespec until;
	int rc = 0;

	if (n > budget)
		return refuse(err, n, budget, sg_mem_used());
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += SG_MEM_WAIT_MS / 1000;
	until.tv_nsec += (SG_MEM_WAIT_MS % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&lock);
	while (used + n > budget && rc != ETIMEDOUT)
		rc = pthread_cond_timedwait(&freed, &lock, &until);
	if (used + n <= budget) {
		used += n;
		rc = 0;
	} else {
		size_t held = used;

		pthread_mutex_unlock(&lock);
		SG_INFO("memory budget: refused %zu bytes (%zu of %zu held)", n, held, budget);
		return refuse(err, n, budget, held);
	}
	pthread_mutex_unlock(&lock);
	return 0;
}

void sg_mem_hold(size_t n)
{
	pthread_mutex_lock(&lock);
	used += n;
	pthread_mutex_unlock(&lock);
}

/* jansson's allocations: a large string or a dump's buffer (jansson grows
 * one by allocating anew and copying) gets huge pages, as sg_buf does. */
static void *json_big_malloc(size_t n)
{
	void *p = malloc(n);

	sg_buf_advise(p, n);
	return p;
}

void sg_mem_init(void)
{
#if defined(__GLIBC__)
	mallopt(M_MMAP_THRESHOLD, 1024 * 1024);
#endif
	json_set_alloc_funcs(json_big_malloc, free);
}

void sg_mem_trim_idle(void)
{
#if defined(__GLIBC__)
	static pthread_mutex_t tlock = PTHREAD_MUTEX_INITIALIZER;
	static struct timespec last;
	struct timespec now;
	bool due;

	clock_gettime(CLOCK_MONOTONIC, &now);
	pthread_mutex_lock(&tlock);
	due = now.tv_sec - last.tv_sec >= 1;
	if (due)
		last = now;
	pthread_mutex_unlock(&tlock);
	if (due)
		malloc_trim(0);
#endif
}

void sg_mem_release(size_t n)
{
	if (!n)
		return;
	pthread_mutex_lock(&lock);
	used = used > n ? used - n : 0;
	pthread_mutex_unlock(&lock);
	pthread_cond_broadcast(&freed);
#if defined(__GLIBC__)
	if (n >= TRIM_AT)
		malloc_trim(0);
#endif
}
