/* sandgate's own state in an SQLite file in the per-user state directory
 * (state.db): the last-use time of every sandbox, since container labels
 * cannot change.  Several sandgate processes share the file (WAL mode and a
 * busy timeout).  Opened on first use, so cold start does not pay for it. */
#ifndef SG_CORE_STATE_H
#define SG_CORE_STATE_H

#include <stdbool.h>
#include <stdint.h>

/* Records (or replaces) a sandbox.  Returns 0 or -1 (logged). */
int sg_state_put(const char *backend, const char *id, const char *session_hash,
		 int64_t created, unsigned lifetime_s, int64_t last_used);
/* Updates the last-use time.  Returns 0 or -1 (logged). */
int sg_state_touch(const char *backend, const char *id, int64_t last_used);
/* Reads the last-use time into *last_used.  Returns 1 when found, 0 when
 * not, -1 on error. */
int sg_state_last_used(const char *backend, const char *id, int64_t *last_used);
/* Forgets a sandbox. */
int sg_state_delete(const char *backend, const char *id);
/* Closes the database. */
void sg_state_close(void);

#endif
