/* A background thread that destroys sandboxes past their expiry (last use
 * plus lifetime), once a second. */
#ifndef SG_CORE_REAPER_H
#define SG_CORE_REAPER_H

/* Starts the thread.  Returns 0 or -1. */
int sg_reaper_start(void);
/* Stops and joins it. */
void sg_reaper_stop(void);

#endif
