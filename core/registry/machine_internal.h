/*
 * Inside the machine registry, shared by its two files: machine.c (the
 * registry and its lock) and sweep.c (expiry and the sweep of machines
 * whose record was lost).  Only those two include this header; the rest of
 * the core uses core/registry/machine.h.
 */
#ifndef SG_CORE_MACHINE_INTERNAL_H
#define SG_CORE_MACHINE_INTERNAL_H

#include <stdbool.h>

#include "core/registry/machine.h"

struct sg_record;

/* ---- machine.c --------------------------------------------------------------- */

/* True when this process holds the machine `id` of backend `backend` (both
 * borrowed). */
bool sg_mreg_registered(const char *backend, const char *id);

/* Binds the machine of record r (borrowed) through its plugin's
 * machine_attach and links it into the registry; an ephemeral one becomes
 * an adopted orphan of this process.  Returns the entry with a reference
 * for the caller (sg_machine_put), or NULL with err (a machine gone from its
 * backend loses its record). */
struct sg_entry *sg_mreg_attach_record(const struct sg_record *r, struct sg_err *err);

/* Closes e's shells, destroys the machine through its plugin (call may be
 * NULL) and deletes its record.  Leaves the caller's reference and the
 * registry alone.  Returns 0, or -1 with err. */
int sg_mreg_destroy(struct sg_entry *e, struct sg_call *call, struct sg_err *err);

/* Marks e dead and takes it out of the registry (giving its quota back),
 * unless it is dead already.  The caller holds a reference on e. */
void sg_mreg_unlink_dead(struct sg_entry *e);

/* Takes every live entry for which pred(entry, ud) is true out of the
 * registry (called with the registry's lock held: pred must not take it),
 * marks them dead, and returns them linked through ->next, each holding the
 * registry's former reference. */
struct sg_entry *sg_mreg_take_matching(bool (*pred)(struct sg_entry *, void *), void *ud);

/* Destroys every entry of a list from sg_mreg_take_matching and drops its
 * reference; a failure is logged prefixed with `why`. */
void sg_mreg_destroy_list(struct sg_entry *list, const char *why);

/* ---- sweep.c ----------------------------------------------------------------- */

/* Destroys the machine of record r (borrowed), an expired one whose
 * sandgate is gone; a failure is logged. */
void sg_mreg_reap_record(const struct sg_record *r);

#endif
