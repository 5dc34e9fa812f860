/*
 * Internals shared by sftp.c (files through SFTP) and sftp_confine.c
 * (keeping an unjailed sandbox's file tools in its directory); no other
 * file includes this.
 */
#ifndef SG_SSH_SFTP_INT_H
#define SG_SSH_SFTP_INT_H

#include "plugins/ssh/ssh.h"

#define SSH_WHAT_MAX (SSH_PATH_MAX + 64)

/* One SFTP operation: the connection (a reference), its session, the op. */
struct ssh_sftp {
	struct ssh_pool *pool;       /* borrowed */
	struct ssh_conn *c;          /* referenced until the session ends */
	LIBSSH2_SFTP *sftp;          /* borrowed from c */
	struct ssh_op op;
	bool dead;                   /* the SFTP session (or connection) failed */
};

/* Fails an SFTP request (rc, the libssh2 result; what, the operation for
 * the message) through the adapter, noting a dead session.  Returns -1. */
int ssh_sftp_fail(struct ssh_sftp *so, int rc, const char *what, struct sg_err *err);

/* Runs fn(so, ud, err) on an SFTP session of p, once more on a new
 * connection when the first died under it.  Returns what fn returned, or
 * -1 with err when no session could start. */
int ssh_sftp_with(struct ssh_pool *p, const struct sg_call *call,
		  int (*fn)(struct ssh_sftp *, void *, struct sg_err *), void *ud,
		  struct sg_err *err);

/* Remembers tmp (copied) as a failed write's temporary file to remove
 * later; false when the pool's list is full. */
bool ssh_stale_add(struct ssh_pool *p, const char *tmp);

/* Moves the pool's remembered temporary files into paths (room for
 * SSH_STALE_MAX; each string freed by the caller).  Returns how many. */
size_t ssh_stale_take(struct ssh_pool *p, char **paths);

/* The confinement done by the runner (sftp_confine.c): 0 when path stays
 * in the sandbox directory, -1 with err (SG_E_PERM when it leaves), or 1
 * when the runner cannot say (none, or one without files-realpath). */
int ssh_confine_runner(struct ssh_machine *sm, const char *path, bool parent,
		       const struct sg_call *call, struct sg_err *err);

#endif
