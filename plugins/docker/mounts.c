/*
 * The only host paths a named machine ever sees, all beneath [storage]
 * work_home (work_home/<scope>/ when the server serves several
 * credentials):
 *
 *   <scope>/<name>            at /workspace      read-write
 *   <scope>/<share>           at /share          read-only
 *   <scope>/<share>/<name>    at /share/<name>   read-write
 *   <scope>                   at /host           read-write (the admin
 *                                                machine, instead of /share)
 *
 * Every directory derived from a machine name is created and opened one
 * component at a time beneath work_home with O_NOFOLLOW: no "..", and no
 * symbolic link is ever followed (a link there, made from the admin
 * machine's /host, is refused, not resolved).  work_home itself is the
 * operator's and is opened as configured.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/docker/docker.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DOCKER_TREE_DEPTH 64

/* mkdir -p of the operator's work_home (mode 0755: containers run as root
 * and write through the mounts). */
static int docker_root_make(struct docker_ctx *ctx, struct sg_err *err)
{
	char path[DOCKER_PATH_MAX];

	snprintf(path, sizeof(path), "%s", ctx->work_home);
	for (char *p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(path, 0755) < 0 && errno != EEXIST)
			goto fail;
		*p = '/';
	}
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		goto fail;
	return 0;
fail:
	return ctx->host->errf(err, SG_E_IO, "cannot create [storage] work_home %s: %s",
			       ctx->work_home, strerror(errno));
}

static int docker_root_open(struct docker_ctx *ctx, bool create, struct sg_err *err)
{
	int fd;

	if (!ctx->work_home)
		return ctx->host->errf(err, SG_E_INVAL, "%s", ctx->work_home_why);
	if (create && docker_root_make(ctx, err) < 0)
		return -1;
	fd = open(ctx->work_home, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return ctx->host->errf(err, errno == ENOENT ? SG_E_NOTFOUND : SG_E_IO,
				       "cannot open [storage] work_home %s: %s", ctx->work_home,
				       strerror(errno));
	return fd;
}

/* One step down from dirfd to `comp`, never through a link. */
static int docker_step(struct docker_ctx *ctx, int dirfd, const char *comp, const char *rel,
		       bool create, struct sg_err *err)
{
	struct stat st;
	int fd;

	if (create && mkdirat(dirfd, comp, 0755) < 0 && errno != EEXIST)
		return ctx->host->errf(err, SG_E_IO, "cannot create %s/%s: %s", ctx->work_home, rel,
				       strerror(errno));
	int e;

	fd = openat(dirfd, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	e = errno;
	if (fd >= 0) {
		if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode))
			return fd;
		close(fd);
		e = ENOTDIR;
	}
	if (fstatat(dirfd, comp, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
		return ctx->host->errf(err, SG_E_PERM, "%s/%s is a symbolic link: sandgate never "
				       "follows one beneath [storage] work_home; replace it with "
				       "a directory", ctx->work_home, rel);
	if (e == ENOENT)
		return ctx->host->errf(err, SG_E_NOTFOUND, "%s/%s does not exist", ctx->work_home, rel);
	return ctx->host->errf(err, SG_E_PERM, "%s/%s is not a directory (%s)", ctx->work_home, rel,
			       strerror(e));
}

/* Opens (creating with `create`) work_home/<rel> component by component.
 * Returns an O_PATH fd, or -1 with err. */
static int docker_walk(struct docker_ctx *ctx, const char *rel, bool create, struct sg_err *err)
{
	char buf[DOCKER_PATH_MAX], done[DOCKER_PATH_MAX] = "";
	char *save = NULL, *comp;
	int fd = docker_root_open(ctx, create, err), next;

	if (fd < 0)
		return -1;
	if (strlen(rel) >= sizeof(buf)) {
		close(fd);
		return ctx->host->errf(err, SG_E_INVAL, "path beneath work_home too long");
	}
	snprintf(buf, sizeof(buf), "%s", rel);
	for (comp = strtok_r(buf, "/", &save); comp; comp = strtok_r(NULL, "/", &save)) {
		if (!strcmp(comp, ".") || !strcmp(comp, "..")) {
			close(fd);
			return ctx->host->errf(err, SG_E_PERM, "'%s' beneath [storage] work_home "
					       "names '.' or '..': refused", rel);
		}
		snprintf(done + strlen(done), sizeof(done) - strlen(done), "%s%s", *done ? "/" : "", comp);
		next = docker_step(ctx, fd, comp, done, create, err);
		close(fd);
		if (next < 0)
			return -1;
		fd = next;
	}
	return fd;
}

int docker_wh_local_root(struct docker_ctx *ctx, struct sg_err *err)
{
	int fd = docker_root_open(ctx, true, err);

	if (fd < 0)
		return -1;
	close(fd);
	return 0;
}

int docker_dir_open(struct docker_ctx *ctx, const char *rel, struct sg_err *err)
{
	int r = docker_wh_remote(ctx, err);

	if (r < 0)
		return -1;
	if (r) /* the caller reads through the engine instead (build.c) */
		return ctx->host->errf(err, SG_E_NOTSUP, "[storage] work_home %s is on the docker "
				       "engine's host, not seen by sandgate: read it through the "
				       "engine", ctx->work_home);
	return docker_walk(ctx, rel, false, err);
}

static int docker_dir_make(struct docker_ctx *ctx, const char *rel, struct sg_err *err)
{
	int fd = docker_walk(ctx, rel, true, err);

	if (fd < 0)
		return -1;
	close(fd);
	return 0;
}

/* a/b into out; a path too long is cut to "" (it then names nothing). */
static void docker_join(char *out, size_t size, const char *a, const char *b)
{
	if ((size_t)snprintf(out, size, "%s%s%s", a, *a && *b ? "/" : "", b) >= size)
		out[0] = '\0';
}

void docker_workspace_rel(const struct docker_scope *sc, const char *name, char *out, size_t size)
{
	docker_join(out, size, sc->key, name);
}

int docker_share_dir(struct docker_ctx *ctx, const struct docker_scope *sc, const char *name,
		     char *out, size_t size)
{
	char rel[DOCKER_PATH_MAX], share[DOCKER_PATH_MAX];

	if (!ctx->work_home || !*ctx->share_subdir)
		return -1;
	docker_join(share, sizeof(share), sc->key, ctx->share_subdir);
	docker_join(rel, sizeof(rel), share, name);
	if (!*rel || (size_t)snprintf(out, size, "%s/%s", ctx->work_home, rel) >= size)
		return -1;
	return 0;
}

static int docker_bind(json_t *mounts, const char *work_home, const char *rel, const char *target,
		       bool ro)
{
	char src[DOCKER_PATH_MAX];

	if ((size_t)snprintf(src, sizeof(src), "%s%s%s", work_home, *rel ? "/" : "", rel) >= sizeof(src))
		return -1;
	return json_array_append_new(mounts, json_pack("{s:s, s:s, s:s, s:b}", "Type", "bind",
						       "Source", src, "Target", target,
						       "ReadOnly", ro));
}

/* Makes work_home/<ws> and, when not NULL, work_home/<self>: here, or
 * through the engine when sandgate does not see work_home. */
static int docker_mounts_dirs(struct docker_ctx *ctx, const char *ws, const char *self,
			      struct sg_err *err)
{
	const char *rels[2] = { ws, self };
	int r = docker_wh_remote(ctx, err);

	if (r < 0)
		return -1;
	if (r)
		return docker_wh_dirs(ctx, rels, self ? 2 : 1, true, err);
	if (docker_dir_make(ctx, ws, err) < 0)
		return -1;
	return self ? docker_dir_make(ctx, self, err) : 0;
}

/* The admin machine writes /host, the directory that holds every bind
 * source of its scope (the workspaces, the share and its directories), and
 * the engine resolves a bind source by its path at every start, its own
 * restarts (the restart policy) included, which ask sandgate nothing: a
 * workspace renamed and replaced with a link to / gave its machine the
 * host's root at its next restart.  So the scope's directory and the
 * share's belong to DOCKER_GUARD_ID, a uid no account has (not nobody's:
 * a process of the host may run as nobody), when sandgate is root, and the
 * admin machine has no capability past owner and mode, nor one to become
 * that owner (docker_admin_caps): it writes inside the workspaces (root's,
 * as the machines are), never names in those two directories.  A sandgate
 * that is not root owns them itself, which is not the admin's root either. */
#define DOCKER_GUARD_ID 2147483646
static void docker_guard_dirs(struct docker_ctx *ctx, const char *scope, const char *share)
{
	const char *rels[2] = { scope, share };
	struct sg_err ignore;

	if (geteuid() != 0)
		return;
	for (int i = 0; i < 2; i++) {
		struct stat st;
		int fd;

		if (!rels[i])
			continue;
		fd = docker_walk(ctx, rels[i], false, &ignore);
		if (fd < 0)
			continue;
		if (fstat(fd, &st) == 0 && st.st_uid == 0 &&
		    fchownat(fd, "", DOCKER_GUARD_ID, DOCKER_GUARD_ID, AT_EMPTY_PATH) < 0)
			ctx->host->log(SG_LOG_WARNING, DOCKER_PLUGIN, "cannot give %s/%s to uid %u: "
				       "the admin machine could rename what it holds (%s)",
				       ctx->work_home, rels[i], DOCKER_GUARD_ID, strerror(errno));
		close(fd);
	}
}

int docker_mounts_make(struct docker_ctx *ctx, const struct docker_scope *sc, const char *name,
		       json_t **mounts, struct sg_err *err)
{
	char ws[DOCKER_PATH_MAX], share[DOCKER_PATH_MAX], self[DOCKER_PATH_MAX], target[DOCKER_PATH_MAX];
	bool admin = docker_is_admin(ctx, name);
	struct sg_err werr;

	*mounts = NULL;
	if (*ctx->share_subdir && !strcmp(name, ctx->share_subdir))
		return ctx->host->errf(err, SG_E_INVAL, "a machine cannot be named '%s': that is "
				       "[storage] share_subdir, the share's directory", name);
	docker_join(ws, sizeof(ws), sc->key, name);
	docker_join(share, sizeof(share), sc->key, ctx->share_subdir);
	docker_join(self, sizeof(self), share, name);
	if (!*ws || (*ctx->share_subdir && !*self))
		return ctx->host->errf(err, SG_E_INVAL, "the machine name '%.64s' makes a path "
				       "beneath work_home that is too long", name);
	if (docker_mounts_dirs(ctx, ws, !admin && *ctx->share_subdir ? self : NULL, err) < 0)
		return -1;
	if (docker_wh_remote(ctx, &werr) == 0) /* decided already, by docker_mounts_dirs */
		docker_guard_dirs(ctx, sc->key, *ctx->share_subdir ? share : NULL);
	*mounts = json_array();
	docker_bind(*mounts, ctx->work_home, ws, DOCKER_WORKSPACE, false);
	if (admin) {
		/* The admin sees every workspace of its scope (its share too). */
		docker_bind(*mounts, ctx->work_home, sc->key, "/host", false);
	} else if (*ctx->share_subdir) {
		snprintf(target, sizeof(target), "/share/%s", name);
		docker_bind(*mounts, ctx->work_home, share, "/share", true);
		docker_bind(*mounts, ctx->work_home, self, target, false);
	}
	return 0;
}

/* Words a changed mount as the reason not to start. */
static int docker_mount_changed(struct docker_ctx *ctx, const char *src, struct sg_err *err)
{
	char why[SG_ERR_MSG_MAX];

	snprintf(why, sizeof(why), "%s", err ? err->msg : "");
	return ctx->host->errf(err, SG_E_PERM, "not starting the container: its mount %s "
			       "changed: %s", src, why);
}

int docker_mounts_verify(struct docker_ctx *ctx, const json_t *info, struct sg_err *err)
{
	const json_t *m;
	const char *rels[8];
	size_t i, nrel = 0, n = ctx->work_home ? strlen(ctx->work_home) : 0;
	int remote = docker_wh_remote(ctx, err), fd;

	if (remote < 0)
		return -1;
	json_array_foreach(json_object_get(info, "Mounts"), i, m) {
		const char *type = json_string_value(json_object_get(m, "Type"));
		const char *src = json_string_value(json_object_get(m, "Source"));

		if (!type || strcmp(type, "bind"))
			continue;
		if (!src || !n || strncmp(src, ctx->work_home, n) || (src[n] && src[n] != '/'))
			return ctx->host->errf(err, SG_E_PERM, "the container binds %s, which is not "
					       "beneath [storage] work_home: sandgate does not start it",
					       src ? src : "?");
		if (remote) {
			/* One helper checks them all (a named machine binds 3 at most). */
			if (nrel == sizeof(rels) / sizeof(rels[0]))
				return ctx->host->errf(err, SG_E_PERM, "the container binds more "
						       "directories than a named machine has: "
						       "sandgate does not start it");
			rels[nrel++] = src[n] ? src + n + 1 : "";
			continue;
		}
		fd = docker_walk(ctx, src[n] ? src + n + 1 : "", false, err);
		if (fd < 0)
			return docker_mount_changed(ctx, src, err);
		close(fd);
	}
	if (nrel && docker_wh_dirs(ctx, rels, nrel, false, err) < 0)
		return err && err->code == SG_E_IO ? -1 : docker_mount_changed(ctx, "beneath work_home", err);
	return 0;
}

/* ---- removal ------------------------------------------------------------------------ */

/* Empties directory dfd (never following a link); counts what stays. */
static void docker_empty(int dfd, int depth, unsigned *stayed)
{
	DIR *d;
	struct dirent *de;
	int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		(*stayed)++;
		return;
	}
	while ((de = readdir(d))) {
		struct stat st;
		int sub;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (S_ISDIR(st.st_mode) && depth < DOCKER_TREE_DEPTH) {
			sub = openat(dirfd(d), de->d_name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sub >= 0) {
				docker_empty(sub, depth + 1, stayed);
				close(sub);
			}
			if (unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR) < 0)
				(*stayed)++;
		} else if (unlinkat(dirfd(d), de->d_name, 0) < 0) {
			(*stayed)++;
		}
	}
	closedir(d);
}

int docker_tree_remove(struct docker_ctx *ctx, const char *rel, struct sg_err *err)
{
	char parent[DOCKER_PATH_MAX], *slash;
	const char *leaf;
	unsigned stayed = 0;
	int pfd, fd, r;

	snprintf(parent, sizeof(parent), "%s", rel);
	slash = strrchr(parent, '/');
	leaf = slash ? slash + 1 : rel;
	if (slash)
		*slash = '\0';
	else
		parent[0] = '\0';
	r = docker_wh_remote(ctx, err);
	if (r != 0)
		return r < 0 ? -1 : docker_wh_remove(ctx, rel, err);
	pfd = docker_walk(ctx, parent, false, err);
	if (pfd < 0)
		return err && err->code == SG_E_NOTFOUND ? 0 : -1;
	fd = openat(pfd, leaf, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		close(pfd);
		return 0; /* nothing there (a link is not ours to follow) */
	}
	docker_empty(fd, 0, &stayed);
	close(fd);
	if (unlinkat(pfd, leaf, AT_REMOVEDIR) < 0 && errno != ENOENT)
		stayed++;
	close(pfd);
	if (stayed)
		return ctx->host->errf(err, SG_E_PERM, "%u entries of %s/%s stay: they belong to "
				       "another user (files the machine made as root)", stayed,
				       ctx->work_home, rel);
	return 0;
}
