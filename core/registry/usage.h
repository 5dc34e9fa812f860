/* What each credential holds now (core/base/quota.h), shown to `sandgate
 * status`: a serving sandgate keeps it in <state dir>/usage/PID.json,
 * written whole (temporary file and rename) when it changed, at most once a
 * second, and removed at a clean end.  A file whose process is gone is
 * ignored by the readers. */
#ifndef SG_CORE_USAGE_H
#define SG_CORE_USAGE_H

#include <jansson.h>

/* Writes this process's file when the counts changed since the last write
 * (the reaper's tick).  Failures are logged once, at debug level. */
void sg_usage_save(void);

/* Removes this process's file (a clean end). */
void sg_usage_remove(void);

/* The files of the sandgates alive now: [{"pid": n, "updated": unix s,
 * "credentials": [...]}] (sg_quota_usage()'s rows).  New reference. */
json_t *sg_usage_read_all(void);

#endif
