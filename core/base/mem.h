/*
 * The server-wide memory budget ([server] memory_budget): bytes held by the
 * calls in flight (a file read, a write's content, a command's output, the
 * result being built).  A call reserves before it holds and gives back when
 * it ends; memory then goes back to the system (malloc_trim on glibc).
 */
#ifndef SG_CORE_MEM_H
#define SG_CORE_MEM_H

#include <stddef.h>

#include <sandgate/plugin.h>

/* Reserves n bytes of the budget, waiting up to SG_MEM_WAIT_MS for calls
 * in flight to give some back.  Returns 0, or -1 with SG_E_BUSY in err
 * (the message names [server] memory_budget and what it holds) when n does
 * not fit in time; n larger than the whole budget fails at once. */
int sg_mem_reserve(size_t n, struct sg_err *err);
/* Counts n bytes already held (a command's output once it ran), past
 * the budget if need be: later reservations wait for them. */
void sg_mem_hold(size_t n);
/* Gives back n bytes reserved with sg_mem_reserve(); when a large amount
 * comes back, freed memory is returned to the system. */
void sg_mem_release(size_t n);
/* Called once at startup, before any thread: buffers of 1 MiB and more
 * get pages of their own (glibc M_MMAP_THRESHOLD, fixed, so it does not
 * grow to 32 MiB after the first large free), which go back to the system
 * as soon as they are freed, on whichever thread frees them (a reply's
 * text is freed by the HTTP daemon after it was sent). */
void sg_mem_init(void);
/* Returns freed memory to the system (malloc_trim on glibc), at most once
 * a second: called when the last call in flight ends, so the arenas of a
 * burst of worker threads do not stay with the process. */
void sg_mem_trim_idle(void);
/* The budget in bytes: [server] memory_budget, or when unset (or 0) a
 * quarter of the machine's memory between 256 MiB and 4 GiB. */
size_t sg_mem_budget(void);
/* Bytes reserved now (tests and status). */
size_t sg_mem_used(void);

#define SG_MEM_WAIT_MS 2000

#endif
