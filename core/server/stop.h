/*
 * How a server ends, whatever its threads are blocked on.
 *
 * Signals: SIGTERM, SIGINT and SIGHUP are blocked in every thread (main
 * calls sg_stop_block_signals() before it starts any) and read by one
 * thread of their own.  The first starts the transport's stop (its
 * callback); a second ends the process at once: the audit batch is
 * written (at most a second), then _exit(128 + the signal).
 *
 * The stop's deadline: once a stop begins (sg_stop_begin: end of input, the
 * first signal), calls in flight get the grace period, are then cancelled,
 * and are abandoned SG_CANCEL_WAIT_MS later if they still run
 * (sg_session_close); whatever else is still blocked when the grace period
 * plus SG_STOP_SLACK_MS has passed (a clean-up on a frozen backend, a
 * reaper inside a plugin) is abandoned by a watchdog, which ends the process
 * as a second signal would, with status 0.  A process with abandoned calls
 * ends the same way once its clean-up is done (sg_stop_exit): a thread
 * blocked inside a plugin forbids unloading it.  Machines left behind are
 * in the record, owned by a process that is gone: the next sandgate reaps
 * them.
 */
#ifndef SG_CORE_SERVER_STOP_H
#define SG_CORE_SERVER_STOP_H

#include <stdbool.h>

#include <sandgate/plugin.h>

#define SG_STOP_SLACK_MS 5000

/* Blocks the stop signals in the calling thread (and the threads it starts
 * later).  Call it before any thread starts. */
void sg_stop_block_signals(void);

/* Starts the signal thread: `first` (called on that thread) is given the
 * first signal's number; a second signal ends the process.  Returns 0 or
 * -1 (logged). */
int sg_stop_signals_start(void (*first)(int sig));

/* The stop has begun: arms the watchdog at now + grace_ms +
 * SG_STOP_SLACK_MS.  Later calls do nothing. */
void sg_stop_begin(int grace_ms);

/* Ends the process now, `why` logged as a warning (printf format): the
 * audit batch is written (at most a second), then _exit(code). */
_Noreturn void sg_stop_now(int code, const char *why, ...) SG_PRINTF(2, 3);

/* After a transport returned: ends the process with `code` when calls
 * were abandoned (sg_session_abandoned()); returns otherwise, for the
 * normal teardown. */
void sg_stop_exit_if_abandoned(int code);

#endif
