/*
 * Keeping an unjailed sandbox's file tools in its directory.  Through the
 * runner, the runner checks it in the operation's own round trip (the
 * sandbox directory as rnc_file_*'s root: ssh_runner_root).  Over SFTP the
 * path a file slot is about to touch is canonicalised on the host first
 * (SFTP's realpath, or exec's realpath -m on a host without the sftp
 * subsystem) and must stay beneath the sandbox directory.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/ssh/sftp_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ssh_confine_args {
	const char *dir;      /* the sandbox directory */
	const char *path;     /* what a file slot is about to touch */
	bool parent;          /* the path itself may be a link (stat, remove, a write
				 that replaces it): its directory must be inside */
};

/* realpath on the server of path, or of its nearest existing ancestor (a
 * write may make the rest): the canonical path into out.  -1 with *rcp on
 * failure, -2 when ".." follows a part that is not there (rn_path_climbs). */
static int ssh_realpath(struct ssh_sftp *so, const char *path, char *out, size_t n, int *rcp)
{
	char cur[SSH_PATH_MAX];
	char *slash;
	int rc;

	snprintf(cur, sizeof(cur), "%s", path);
	for (;;) {
		SSH_CALL(&so->op, rc, libssh2_sftp_symlink_ex(so->sftp, cur, (unsigned)strlen(cur), out,
							      (unsigned)n - 1, LIBSSH2_SFTP_REALPATH));
		if (rc >= 0) {
			out[rc] = '\0';
			return rn_path_climbs(path + strlen(cur)) ? -2 : 0;
		}
		*rcp = rc;
		/* Servers word a missing path variously (no such file, failure):
		 * any refusal of the server means "try the directory above". */
		if (rc != LIBSSH2_ERROR_SFTP_PROTOCOL || !(slash = strrchr(cur, '/')) || slash == cur)
			return -1;
		*slash = '\0';
	}
}


/* What confinement resolves: path itself, or with parent (the path may
 * name a link, made or replaced by the operation) its directory, in
 * tmp[SSH_PATH_MAX].  -1 when path names no file. */
static int ssh_confine_target(const char *path, bool parent, char *tmp, const char **target)
{
	const char *last;

	*target = path;
	if (!parent)
		return 0;
	last = strrchr(path, '/');
	if (!last || !last[1] || strcmp(last + 1, ".") == 0 || strcmp(last + 1, "..") == 0)
		return -1;
	snprintf(tmp, SSH_PATH_MAX, "%.*s", (int)(last - path), path);
	*target = tmp[0] ? tmp : "/";
	return 0;
}

static int ssh_confine_refuse(const struct sg_host_api *host, const char *path, const char *canon,
			      const char *dir, struct sg_err *err)
{
	if (!canon)
		return host->errf(err, SG_E_PERM, "ssh: '%s' is not a file inside sandbox directory "
				  "%s", path, dir);
	return host->errf(err, SG_E_PERM, "ssh: '%s' leads to %s, outside sandbox directory %s: "
			  "on a host without isolation the file tools keep to the sandbox's "
			  "directory", path, canon, dir);
}

static int ssh_confine_fn(struct ssh_sftp *so, void *ud, struct sg_err *err)
{
	const struct sg_host_api *host = so->pool->ctx->host;
	struct ssh_confine_args *ca = ud;
	char dir[SSH_PATH_MAX], canon[SSH_PATH_MAX], what[SSH_WHAT_MAX], tmp[SSH_PATH_MAX];
	const char *target;
	int rc = 0;

	snprintf(what, sizeof(what), "resolving '%s'", ca->path);
	if (ssh_realpath(so, ca->dir, dir, sizeof(dir), &rc) < 0)
		return ssh_sftp_fail(so, rc, what, err);
	if (ssh_confine_target(ca->path, ca->parent, tmp, &target) < 0)
		return ssh_confine_refuse(host, ca->path, NULL, ca->dir, err);
	switch (ssh_realpath(so, target, canon, sizeof(canon), &rc)) {
	case -1:
		return ssh_sftp_fail(so, rc, what, err);
	case -2:
		return host->errf(err, SG_E_INVAL, "ssh: '%s': .. past a part that is not there "
				  "yet (where it leads is not known before it is made): name the path "
				  "without it", ca->path);
	}
	if (!rn_path_beneath(canon, dir))
		return ssh_confine_refuse(host, ca->path, canon, dir, err);
	return 0;
}

/* ssh_stale_drop for a sandbox whose file operations go through the runner
 * (no SFTP session would come to remove them). */
static void ssh_stale_drop_runner(struct ssh_machine *sm, const struct sg_call *call)
{
	struct ssh_pool *p = sm->pool;
	char *paths[SSH_STALE_MAX];
	size_t n = ssh_stale_take(p, paths);
	int rc = 0;

	for (size_t i = 0; i < n; i++) {
		struct sg_err e;

		/* no runner (off, or not here): they wait for SFTP's own drop */
		if (rc <= 0)
			rc = rnc_file_remove(ssh_site_of(sm), NULL, paths[i], false, call, &e);
		if ((rc > 0 || (rc < 0 && e.code != SG_E_NOTFOUND)) && !ssh_stale_add(p, paths[i]))
			ssh_log(sm->ctx, SG_LOG_WARNING, "could not remove %s, the temporary file of a "
				"failed write", paths[i]);
		free(paths[i]);
	}
}

const char *ssh_runner_root(struct ssh_machine *sm, const struct sg_call *call)
{
	if (sm->jail)
		return NULL;
	ssh_stale_drop_runner(sm, call);
	return sm->dir;
}

/* ssh_confine through exec (realpath -m), for a host without SFTP. */
static int ssh_confine_exec(struct ssh_machine *sm, const char *path, bool parent,
			    const struct sg_call *call, struct sg_err *err)
{
	char dir[SSH_PATH_MAX], canon[SSH_PATH_MAX], tmp[SSH_PATH_MAX];
	const char *target;

	if (ssh_confine_target(path, parent, tmp, &target) < 0)
		return ssh_confine_refuse(sm->ctx->host, path, NULL, sm->dir, err);
	if (ssh_x_realpath2(sm->pool, sm->dir, target, call, dir, canon, err) < 0)
		return -1;
	if (!rn_path_beneath(canon, dir))
		return ssh_confine_refuse(sm->ctx->host, path, canon, dir, err);
	return 0;
}

int ssh_confine(struct ssh_machine *sm, const char *path, bool parent, const struct sg_call *call,
		struct sg_err *err)
{
	struct ssh_confine_args ca = { .dir = sm->dir, .path = path, .parent = parent };
	int rc;

	/* Resolved in SSH_PATH_MAX buffers: a longer path would be checked cut
	 * short, and its ../ past the cut would go unseen. */
	if (strlen(path) >= SSH_PATH_MAX || strlen(sm->dir) >= SSH_PATH_MAX)
		return sm->ctx->host->errf(err, SG_E_INVAL, "ssh: path '%.80s...' is too long (%d "
					   "bytes at most on a host without isolation)", path,
					   SSH_PATH_MAX - 1);
	rc = ssh_sftp_skip(sm->pool, ssh_sftp_with(sm->pool, call, ssh_confine_fn, &ca, err), err);

	return rc > 0 ? ssh_confine_exec(sm, path, parent, call, err) : rc;
}
