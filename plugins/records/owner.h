/*
 * Whose machines made ahead are: the owner tag of a process, "host:pid:start"
 * (start: its start time in clock ticks since boot, field 22 of
 * /proc/PID/stat), as the core tags its own machine records.  A pid alone is
 * reused; with its start time it names one process.  docker.so's warm pool
 * and local.so's spares tag what they make with it, and the next sandgate
 * removes what a dead one left.
 */
#ifndef SG_PLUGINS_OWNER_H
#define SG_PLUGINS_OWNER_H

#include <stdbool.h>
#include <stddef.h>

/* Writes this process's owner tag to out (size bytes, cut to fit). */
void mrec_owner_self(char *out, size_t size);

/* Whether the process of owner tag `tag` still runs, seen from the process
 * whose tag is `mine`.  A malformed tag: false (nobody owns it).  Another
 * host's: true (this host cannot tell). */
bool mrec_owner_alive(const char *mine, const char *tag);

#endif /* SG_PLUGINS_OWNER_H */
