/*
 * The records of persistent machines (sandbox_env machine_create,
 * ssh_connect): backend, id, name, owner credential and purpose, in
 * <state dir>/machines.json, so a persistent machine is found again after a
 * restart and by the other sandgate processes of the user.  Changes take an
 * exclusive flock on machines.json.lock and replace the file atomically.
 *
 * Why not labels: an owner credential and a name must survive on every
 * backend (an SSH host has no labels), and labels cannot change.
 */
#ifndef SG_CORE_PERSIST_H
#define SG_CORE_PERSIST_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

/* Adds or replaces the record of (backend, id).  rec is borrowed: an object
 * with at least "backend" and "id".  Returns 0 or -1 (logged). */
int sg_persist_put(const json_t *rec);
/* Forgets (backend, id).  Returns 0 or -1 (logged). */
int sg_persist_delete(const char *backend, const char *id);
/* Every record: a new array (empty when there is no file).  *changed says
 * whether the file changed since the previous call; with only_if_changed an
 * unchanged file is not read and NULL comes back (a refresh costs a stat). */
json_t *sg_persist_load(bool only_if_changed, bool *changed);

#endif
