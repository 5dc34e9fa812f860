/*
 * Internals shared by sftp.c (files through SFTP), fileslots.c (the file
 * slots: runner, SFTP, exec), sftp_confine.c (keeping an unjailed
 * sandbox's file tools in its directory) and sftp_x.c; no other file
 * includes this.
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

/* ---- sftp.c: the operations, each run by ssh_sftp_with(fn, ud) with ud
 * its arguments below.  Each returns 0 or -1 with err. */

/* Reads a whole file of at most max bytes into out. */
struct ssh_read_args {
	const char *path;
	size_t max;
	size_t size_hint;    /* the file's size when fstat said it, else 0 */
	struct sg_buf *out;
};
/* Replaces path atomically with data (a temporary file, fsync, rename). */
struct ssh_write_args {
	const char *path;
	const void *data;
	size_t len;
	const struct sg_write_opts *opts;
	const struct sg_call *call;
};
/* One level of path: arr gets the entries, sorted by name. */
struct ssh_list_args {
	const char *path;
	json_t *arr;   /* filled: the caller's reference on success */
};
/* stat (st) or remove (flag: recursive) of path. */
struct ssh_path_args {
	const char *path;
	struct sg_stat *st;
	bool flag;      /* mkdir: parents; remove: recursive */
};

int ssh_read_fn(struct ssh_sftp *so, void *ud, struct sg_err *err);   /* ud: ssh_read_args */
int ssh_write_fn(struct ssh_sftp *so, void *ud, struct sg_err *err);  /* ud: ssh_write_args */
int ssh_list_fn(struct ssh_sftp *so, void *ud, struct sg_err *err);   /* ud: ssh_list_args */
int ssh_stat_fn(struct ssh_sftp *so, void *ud, struct sg_err *err);   /* ud: ssh_path_args */
int ssh_remove_fn(struct ssh_sftp *so, void *ud, struct sg_err *err); /* ud: ssh_path_args */

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

/* The root the runner keeps sm's file operations to (rnc_file_*'s root,
 * sftp_confine.c): NULL in a jail (the runner sees only the sandbox), else
 * the sandbox directory (borrowed from sm).  Off a jail, first removes the
 * temporary files failed SFTP writes left, through the runner. */
const char *ssh_runner_root(struct ssh_machine *sm, const struct sg_call *call);

/* Whether the pool's server refused the sftp subsystem; set marks it so
 * (logged once).  Returns the mark after the call. */
bool ssh_sftp_missing(struct ssh_pool *p, bool set);

/* rc of an SFTP stage, or 1 in place of the subsystem's refusal (err
 * then says it): the next stage (runner, exec) follows. */
int ssh_sftp_skip(struct ssh_pool *p, int rc, const struct sg_err *err);

/* Fills err with SG_E_NOTSUP naming the refused subsystem.  Returns -1. */
int ssh_sftp_refusal(struct ssh_pool *p, struct sg_err *err);

/* ---- sftp_x.c: the same operations through exec with stdin, for a host
 * without the sftp subsystem when the runner cannot serve.  path is
 * absolute.  Each returns 0, or -1 with err: SG_E_NOTFOUND (no such path),
 * SG_E_INVAL (a directory where a file belongs, or the reverse),
 * SG_E_TOOBIG (read: more than max bytes), SG_E_BACKEND (the host's
 * message), or ssh_run's errors. */

/* Appends the file's bytes to out (the caller's buffer). */
int ssh_x_read(struct ssh_pool *p, const char *path, size_t max, const struct sg_call *call,
	       struct sg_buf *out, struct sg_err *err);
/* Writes len bytes of data atomically (a temporary file in the same
 * directory, then mv); an existing file keeps its mode and, when allowed,
 * its owner; a new one gets mode (0: 0644); mkdir creates the parents. */
int ssh_x_write(struct ssh_pool *p, const char *path, const void *data, size_t len,
		unsigned mode, bool mkdir, const struct sg_call *call, struct sg_err *err);
/* *entries: a new array, sorted by name, as ssh_file_list's. */
int ssh_x_list(struct ssh_pool *p, const char *path, const struct sg_call *call,
	       json_t **entries, struct sg_err *err);
int ssh_x_stat(struct ssh_pool *p, const char *path, const struct sg_call *call,
	       struct sg_stat *st, struct sg_err *err);
int ssh_x_remove(struct ssh_pool *p, const char *path, bool recursive,
		 const struct sg_call *call, struct sg_err *err);
/* realpath -m of dir and of target on the host into the two buffers of
 * SSH_PATH_MAX bytes each. */
int ssh_x_realpath2(struct ssh_pool *p, const char *dir, const char *target,
		    const struct sg_call *call, char *dir_out, char *target_out,
		    struct sg_err *err);

/* One directory entry as read by a listing. */
struct ssh_dirent {
	char *name;    /* owned */
	size_t len;
	LIBSSH2_SFTP_ATTRIBUTES a;
};

/* The listing's entries, sorted in place by name, as a new JSON array of
 * {name, path, type, size, mode, mtime} (path: dir/name); NULL when out
 * of memory.  ents stays the caller's. */
json_t *ssh_dirents_json(const char *dir, struct ssh_dirent *ents, size_t n);

/* enum sg_file_type of SFTP attributes (SG_FT_OTHER without permissions). */
int ssh_ftype(const LIBSSH2_SFTP_ATTRIBUTES *a);

/* JSON text of bytes that should be UTF-8 (file names): invalid bytes
 * become U+FFFD.  New reference, NULL when out of memory. */
json_t *ssh_json_text(const char *p, size_t n);

#endif
