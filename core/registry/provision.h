/*
 * [default_machine]: a persistent machine a server provisions at startup,
 * before it serves any client, so an agent's first sandbox_shell_exec has
 * a machine to run on.  It is found again when it exists (the record, or
 * the backend's own adoption of what it made), made otherwise through the
 * generic persistent-machine path (sg_machine_create_persistent, with the
 * backend's defaults as its create options), and must run a command.  It
 * belongs to the server's own credential, every session may use it (like
 * [server] shared_machines), and it is every session's first default
 * machine.  The core names no backend here.
 */
#ifndef SG_CORE_PROVISION_H
#define SG_CORE_PROVISION_H

#include <stdbool.h>

/* Provisions the default machine when [default_machine] enabled (waits
 * for the backends to load).  Returns 0 (also when disabled), or -1 after
 * logging why: the server must not start (fail-closed). */
int sg_default_machine_provision(void);

/* Copies the provisioned machine's id into out (SG_ID_MAX bytes) and
 * returns true, or returns false when there is none. */
bool sg_default_machine_id(char *out);

/* True when id is the provisioned default machine's id. */
bool sg_default_machine_is(const char *id);

#endif
