/*
 * A plugin's own machine records: one JSON object per machine, in a file
 * <dir>/<id>.json under sandgate's state directory, written atomically.
 * local.so and ssh.so keep what a restart needs to find their sandboxes
 * here (Docker keeps it in container labels, FC in the cloud).
 *
 * Every function takes dir, a directory made by mrec_dir().  An id names a
 * file: one without '/' that does not start with '.' (the plugin checks its
 * own form before).  Errors: -1 or NULL with errno set; nothing is logged.
 */
#ifndef SG_PLUGINS_RECORDS_H
#define SG_PLUGINS_RECORDS_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

/* Makes "<state_dir>/<sub>" (sub may hold '/'), each missing level with
 * mode 0700, and writes its path to out (n bytes).  Returns 0, or -1:
 * state_dir NULL (EINVAL), the path does not fit (ENAMETOOLONG), mkdir's
 * errno. */
int mrec_dir(const char *state_dir, const char *sub, char *out, size_t n);

/* Replaces the record of id with j (borrowed): a temporary file beside it
 * (0600, O_NOFOLLOW), fsync, rename.  Returns 0, or -1 with nothing left
 * behind (EINVAL for a bad id). */
int mrec_write(const char *dir, const char *id, json_t *j);

/* The record of id (a new reference, the caller's), or NULL (no record,
 * unreadable, a bad id). */
json_t *mrec_read(const char *dir, const char *id);

/* Removes the record of id, if any. */
void mrec_remove(const char *dir, const char *id);

/* Moves the record of id from directory `from` to `to` (both made by
 * mrec_dir under one state directory): one rename, atomic, no fsync (a
 * crash may leave it where it was).  Returns 0, or -1 (rename's errno;
 * EINVAL for a bad id). */
int mrec_move(const char *from, const char *to, const char *id);

/* Appends to out (a JSON array, borrowed) {id, owner, persistent, created,
 * lifetime} for each record whose "id" passes id_ok (NULL: any) — the
 * shape of the machine_list slot (include/sandgate/plugin.h).  A missing
 * directory is an empty list.  Returns 0, or -1 (out of memory). */
int mrec_list(const char *dir, bool (*id_ok)(const char *id), json_t *out);

#endif
