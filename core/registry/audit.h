/*
 * The audit log: one SQLite row per tool call, on stdio and HTTP alike
 * (and `sandgate call`), queued by the MCP tool thread after the handler
 * returns and written by a writer thread in batches: one transaction per
 * batch window (at most 100 ms), so a crash loses at most the rows of the
 * last window and a clean stop loses none.
 *
 * File: [audit] log_path, default <state dir>/audit.db, mode 0600 (its -wal
 * and -shm too); WAL mode and a busy timeout, so several sandgate processes
 * of a user share it.  An empty log_path writes each row as a JSON line to
 * sandgate's log instead, and sandbox_audit_query is not offered.
 *
 * Never a secret, never file content: every content-like field (content,
 * code, old_string, new_string, patch; command stays), every value of
 * envs/env and every value under a key that names a secret becomes
 * {"hmac_sha256": ..., "len": ...} under the install's key
 * (core/registry/redact.h).  A row carries a hash of the session id, never
 * the id.
 */
#ifndef SG_CORE_AUDIT_H
#define SG_CORE_AUDIT_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include <sandgate/plugin.h>

struct sg_session;

/* True when rows go to a database file (the query tool exists). */
bool sg_audit_file_backed(void);

/* Records one tools/call: the tool, its arguments (taken: the row owns
 * them, and the caller may not touch them any more; NULL for none), its
 * large argument taken apart from them (taken too; NULL for none,
 * core/protocol/bulk.h), the CallToolResult (borrowed, may be NULL), how
 * long it took, and whether the client cancelled it.  Never fails the
 * call: problems are logged.  Call it before the reply goes out: a query
 * made after the reply then finds the row (a query writes what is queued
 * before it reads). */
struct sg_bulk;
void sg_audit_tool_call(struct sg_session *s, const char *tool, json_t *args,
			struct sg_bulk *bulk, json_t *call_result, int64_t duration_ms,
			bool cancelled);

/* Writes every row queued so far now, waiting at most timeout_ms (-1: as
 * long as it takes; the database's busy timeout is 5 s).  Returns 0, or -1
 * when the time ran out first (the rows are still written, later).  For a
 * stop that cannot wait for the writer to be stopped (sg_audit_close). */
int sg_audit_flush(int timeout_ms);

/* The sandbox_audit_query tool: rows of the caller's credential (and of
 * shared machines) as in the reference (tail window, filters, start/end
 * paging).  *result is new. */
int sg_audit_query(struct sg_session *s, json_t *args, json_t **result, struct sg_err *err);

/* Writes what is queued, stops the writer and closes the database. */
void sg_audit_close(void);

#endif
