/*
 * The audit log: one SQLite row per tool call, on stdio and HTTP alike,
 * queued by the MCP tool thread after the handler returns and written by a
 * writer thread once the reply is out.
 *
 * File: [audit] log_path, default <state dir>/audit.db; WAL mode and a busy
 * timeout, so several sandgate processes of a user share it.  An empty
 * log_path writes each row as a JSON line to sandgate's log instead, and
 * sandbox_audit_query is not offered.
 *
 * Never a secret, never file content: every content-like field (content,
 * code, old_string, new_string, patch, command stays) and every value of
 * envs/env is replaced by {"sha256": ..., "len": ...}.  A row carries a
 * hash of the session id, never the id.
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
 * them, and the caller may not touch them any more; NULL for none), the
 * CallToolResult (borrowed, may be NULL), how long it took, and whether the
 * client cancelled it.  Never fails the call: problems are logged.  Call it
 * before the reply goes out (a query made after the reply then finds the
 * row), and sg_audit_kick() after: the row is written then, off the reply's
 * path (or within a second without a kick). */
void sg_audit_tool_call(struct sg_session *s, const char *tool, json_t *args,
			json_t *call_result, int64_t duration_ms, bool cancelled);
void sg_audit_kick(void);

/* The arguments with every content field hashed.  New reference. */
json_t *sg_audit_redact(json_t *args);

/* The sandbox_audit_query tool: rows of the caller's credential (and of
 * shared machines) as in the reference (tail window, filters, start/end
 * paging).  *result is new. */
int sg_audit_query(struct sg_session *s, json_t *args, json_t **result, struct sg_err *err);

void sg_audit_close(void);

#endif
