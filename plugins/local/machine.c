/*
 * Local sandboxes: a directory `<[local] root>/sg-<12 hex>` (mode 0700,
 * owned by the sandbox user) seen as /workspace by its jail.  The id is
 * "local-<12 hex>".  A small JSON file per sandbox in the state directory
 * (<state dir>/local/owners/<id>.json, mode 0600), outside [local] root
 * and every sandbox directory, is its owner tag: it names the directory and the owner, and
 * is written before the core records the machine, so that attach finds the
 * directory again and machine_list finds sandboxes whose record was lost.
 * A spare's tag waits in <state dir>/local/spares/ until it is handed out
 * (spare.c).
 *
 * A sandbox outlives the sandgate process that made it only as its
 * directory: its jail (and every process in it) ends with that process, and
 * attaching from another one starts a fresh jail over the directory.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/local/local.h"
#include "plugins/records/records.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define LOCAL_RAND_BYTES 6 /* 12 hex digits in the id and the directory */
#define LOCAL_DIR_PREFIX "sg-"

/* ---- tag files ----------------------------------------------------------------------- */

/* mkdir -p with mode 0700 for what it makes. */
static int mkdir_p(const char *path)
{
	char buf[LOCAL_PATH_MAX];

	if ((size_t)snprintf(buf, sizeof(buf), "%s", path) >= sizeof(buf))
		return (errno = ENAMETOOLONG), -1;
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0700) < 0 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	return mkdir(buf, 0700) == 0 || errno == EEXIST ? 0 : -1;
}

int local_tag_dir(struct local_ctx *ctx, bool spare, char *out, size_t n)
{
	return mrec_dir(ctx->host->state_dir(), spare ? "local/spares" : "local/owners", out, n);
}

static int tag_dir(struct local_ctx *ctx, char *out, size_t n)
{
	return local_tag_dir(ctx, false, out, n);
}

/* True for an id this plugin makes: "local-" and 12 hex digits. */
static bool id_ok(const char *id)
{
	return strncmp(id, "local-", 6) == 0 && strlen(id + 6) == 2 * LOCAL_RAND_BYTES &&
	       strspn(id + 6, "0123456789abcdef") == 2 * LOCAL_RAND_BYTES;
}

int local_tag_write(struct local_ctx *ctx, bool spare, const char *id, const char *dir,
		    const char *owner, bool persistent, unsigned lifetime_s)
{
	char tdir[LOCAL_PATH_MAX];
	json_t *tag;
	int rc;

	if (!id_ok(id) || local_tag_dir(ctx, spare, tdir, sizeof(tdir)) < 0)
		return -1;
	tag = json_pack("{s:s, s:s, s:s, s:b, s:I, s:I}", "id", id, "dir", dir, "owner",
			owner ? owner : "", "persistent", persistent, "created",
			(json_int_t)time(NULL), "lifetime", (json_int_t)lifetime_s);
	rc = tag ? mrec_write(tdir, id, tag) : -1;
	json_decref(tag);
	return rc;
}

static json_t *tag_read(struct local_ctx *ctx, const char *id)
{
	char dir[LOCAL_PATH_MAX];

	return !id_ok(id) || tag_dir(ctx, dir, sizeof(dir)) < 0 ? NULL : mrec_read(dir, id);
}

static void tag_remove(struct local_ctx *ctx, bool spare, const char *id)
{
	char dir[LOCAL_PATH_MAX];

	if (id_ok(id) && local_tag_dir(ctx, spare, dir, sizeof(dir)) == 0)
		mrec_remove(dir, id);
}

/* ---- handles --------------------------------------------------------------------------- */

struct local_machine *local_machine_of(const struct sg_machine *m, struct sg_err *err)
{
	struct local_machine *lm = m ? m->handle : NULL;

	if (lm && lm->ctx)
		return lm;
	if (err) {
		/* No host to word it with: fill err by hand. */
		err->code = SG_E_INTERNAL;
		err->sys_errno = 0;
		snprintf(err->msg, sizeof(err->msg),
			 "local: this machine has no local handle (it was not created or attached by local.so)");
	}
	return NULL;
}

/* A handle for sandbox id in dir, bound to no machine; its jail starts on
 * first use.  NULL: out of memory. */
static struct local_machine *handle_alloc(struct local_ctx *ctx, const char *id, const char *dir)
{
	struct local_machine *lm = calloc(1, sizeof(*lm)); /* local_machine_release() */
	char where[LOCAL_ID_MAX + 8];

	if (!lm)
		return NULL;
	lm->ctx = ctx;
	snprintf(lm->id, sizeof(lm->id), "%s", id);
	snprintf(lm->dir, sizeof(lm->dir), "%s", dir);
	snprintf(where, sizeof(where), "in %s", id);
	rnc_site_init(&lm->site, ctx->host, &local_site_ops, lm, where, true, ctx->faults);
	rnc_kstate_init(&lm->code);
	return lm;
}

/* Gives m the strings of lm's sandbox. */
static int fields_set(struct local_ctx *ctx, struct sg_machine *m, const char *id,
		      const char *dir, struct sg_err *err)
{
	const struct sg_host_api *h = ctx->host;

	if (h->machine_set(m, SG_MACHINE_ID, "%s", id) < 0 ||
	    h->machine_set(m, SG_MACHINE_WORKSPACE, LOCAL_WORKSPACE) < 0 ||
	    h->machine_set(m, SG_MACHINE_URL, "file://%s", dir) < 0 ||
	    h->machine_set(m, SG_MACHINE_TEMPLATE, "default") < 0)
		return h->errf(err, SG_E_INVAL, "local: the directory of sandbox %s is too long or "
			       "holds control characters: %s", id, dir);
	return 0;
}

/* A handle for sandbox id in dir, given to m; its jail starts on first use. */
static int handle_new(struct local_ctx *ctx, struct sg_machine *m, const char *id,
		      const char *dir, struct sg_err *err)
{
	if (fields_set(ctx, m, id, dir, err) < 0)
		return -1;
	m->handle = handle_alloc(ctx, id, dir);
	return m->handle ? 0 : ctx->host->errf(err, SG_E_NOMEM, "local: out of memory");
}

/* Ends the handle's runner and jail and frees it. */
static void handle_free(struct local_machine *lm)
{
	rnc_site_fini(&lm->site); /* the runner sees EOF, its jail ends */
	local_jail_end(lm);
	rnc_kstate_fini(&lm->code);
	free(lm);
}

/* Reports the jail's isolation and limits (create_sandbox's details). */
static void report(struct local_ctx *ctx, struct sg_machine *m)
{
	json_t *facts;

	if (!SG_HOST_HAS(ctx->host, machine_report))
		return;
	facts = local_jail_facts(ctx);
	if (facts)
		ctx->host->machine_report(m, facts);
	json_decref(facts);
}

/* ---- create ------------------------------------------------------------------------------- */

static int random_hex(char *out, size_t bytes)
{
	unsigned char b[16];
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, b, bytes) : -1;

	if (fd >= 0)
		close(fd);
	if (n != (ssize_t)bytes)
		return -1;
	for (size_t i = 0; i < bytes; i++)
		snprintf(out + 2 * i, 3, "%02x", b[i]);
	return 0;
}

/* Makes the root (0700, ours) and the sandbox's own directory in it, owned
 * by the sandbox user. */
static int make_dir(struct local_ctx *ctx, const char *name, char *dir, size_t size,
		    struct sg_err *err)
{
	int rootfd, fd;

	if (mkdir_p(ctx->root) < 0)
		return ctx->host->errf(err, SG_E_IO, "local: cannot make [local] root %s: %s",
				       ctx->root, strerror(errno));
	rootfd = open(ctx->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0)
		return ctx->host->errf(err, SG_E_IO, "local: [local] root %s: %s", ctx->root,
				       strerror(errno));
	if (mkdirat(rootfd, name, 0700) < 0) {
		close(rootfd);
		return ctx->host->errf(err, SG_E_IO, "local: cannot make %s/%s: %s", ctx->root,
				       name, strerror(errno));
	}
	fd = local_open_beneath(rootfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
	if (fd < 0 || (ctx->switch_user && fchown(fd, ctx->uid, ctx->gid) < 0)) {
		int e = errno;

		if (fd >= 0)
			close(fd);
		unlinkat(rootfd, name, AT_REMOVEDIR);
		close(rootfd);
		return ctx->host->errf(err, SG_E_IO, "local: cannot give %s/%s to user %s: %s",
				       ctx->root, name, ctx->user, strerror(e));
	}
	close(fd);
	close(rootfd);
	if ((size_t)snprintf(dir, size, "%s/%s", ctx->root, name) >= size)
		return ctx->host->errf(err, SG_E_INVAL, "local: [local] root %s is too long",
				       ctx->root);
	return 0;
}

int local_sandbox_new(struct local_ctx *ctx, bool spare, const char *owner, bool persistent,
		      unsigned lifetime_s, struct local_machine **out, struct sg_err *err)
{
	char rnd[2 * LOCAL_RAND_BYTES + 1], name[32], id[LOCAL_ID_MAX], dir[LOCAL_PATH_MAX];

	if (random_hex(rnd, LOCAL_RAND_BYTES) < 0)
		return ctx->host->errf(err, SG_E_INTERNAL, "local: no randomness");
	snprintf(name, sizeof(name), LOCAL_DIR_PREFIX "%s", rnd);
	snprintf(id, sizeof(id), "local-%s", rnd);
	if (make_dir(ctx, name, dir, sizeof(dir), err) < 0)
		return -1;
	if (local_tag_write(ctx, spare, id, dir, owner, persistent, lifetime_s) < 0) {
		local_remove_tree(AT_FDCWD, dir);
		return ctx->host->errf(err, SG_E_IO, "local: cannot write the owner tag of %s in "
				       "%s/local/%s: check that directory", id,
				       ctx->host->state_dir() ? ctx->host->state_dir() : "(none)",
				       spare ? "spares" : "owners");
	}
	*out = handle_alloc(ctx, id, dir);
	if (!*out) {
		tag_remove(ctx, spare, id);
		local_remove_tree(AT_FDCWD, dir);
		return ctx->host->errf(err, SG_E_NOMEM, "local: out of memory");
	}
	return 0;
}

int local_sandbox_bind(struct local_machine *lm, struct sg_machine *m, struct sg_err *err)
{
	if (fields_set(lm->ctx, m, lm->id, lm->dir, err) < 0)
		return -1;
	m->handle = lm;
	report(lm->ctx, m);
	return 0;
}

void local_sandbox_drop(struct local_machine *lm, bool spare)
{
	struct local_ctx *ctx = lm->ctx;
	char id[LOCAL_ID_MAX], dir[LOCAL_PATH_MAX];
	struct sg_err err;

	snprintf(id, sizeof(id), "%s", lm->id);
	snprintf(dir, sizeof(dir), "%s", lm->dir);
	handle_free(lm);
	if (local_sandbox_remove(ctx, spare, id, dir, &err) < 0)
		ctx->host->log(SG_LOG_WARNING, LOCAL_PLUGIN, "%s", err.msg);
}

int local_machine_create(void *priv, const struct sg_create_req *req, struct sg_call *call,
			 struct sg_machine *m, struct sg_err *err)
{
	struct local_ctx *ctx = priv;
	char id[LOCAL_ID_MAX], dir[LOCAL_PATH_MAX];
	struct local_machine *lm;
	struct rn_conn *c = NULL;

	if (req->template_name && *req->template_name && strcmp(req->template_name, "default"))
		return ctx->host->errf(err, SG_E_NOTFOUND, "local: no template '%s': local "
				       "sandboxes all see this host's /usr; omit the template",
				       req->template_name);
	if (ctx->user_why[0])
		return ctx->host->errf(err, SG_E_INVAL, "local: %s", ctx->user_why);
	/* A jail started ahead when one is ready and fits (spare.c). */
	if (local_spare_take(ctx, req, m) == 0)
		return 0;
	if (call)
		ctx->host->progress(call, 1, 3, "making the directory");
	if (local_sandbox_new(ctx, false, req->owner, req->persistent, req->lifetime_s, &lm,
			      err) < 0)
		return -1;
	snprintf(id, sizeof(id), "%s", lm->id);
	snprintf(dir, sizeof(dir), "%s", lm->dir);
	if (local_sandbox_bind(lm, m, err) < 0) {
		local_sandbox_drop(lm, false);
		return -1;
	}
	/* The jail now, so that a host that cannot make one refuses here. */
	if (call)
		ctx->host->progress(call, 2, 3, "starting the jail");
	if (rnc_site_get(&lm->site, &c, err) != 0) {
		local_machine_release(m);
		local_sandbox_remove(ctx, false, id, dir, NULL);
		return -1;
	}
	rn_conn_put(c);
	ctx->host->log(SG_LOG_INFO, LOCAL_PLUGIN, "created %s in %s (user %s, network %s)", id,
		       dir, ctx->user, ctx->network_host ? "host" : "none");
	return 0;
}

/* ---- attach, destroy, release, list ------------------------------------------------------ */

int local_machine_attach(void *priv, const char *id, const json_t *kept, struct sg_call *call,
			 struct sg_machine *m, struct sg_err *err)
{
	struct local_ctx *ctx = priv;
	json_t *tag = tag_read(ctx, id);
	const char *dir = json_string_value(json_object_get(tag, "dir"));
	struct stat st;
	int rc = -1;

	(void)kept; /* the tag says it all */
	(void)call;
	if (!tag)
		return ctx->host->errf(err, SG_E_NOTFOUND, "local: no sandbox '%s' is known here "
				       "(no owner tag)", id);
	if (!dir || dir[0] != '/') {
		ctx->host->errf(err, SG_E_NOTFOUND, "local: the owner tag of sandbox '%s' is damaged", id);
		goto out;
	}
	if (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
		ctx->host->errf(err, SG_E_GONE, "local: the directory %s of sandbox '%s' is gone", dir, id);
		goto out;
	}
	if (handle_new(ctx, m, id, dir, err) < 0)
		goto out;
	report(ctx, m);
	rc = 0;
out:
	json_decref(tag);
	return rc;
}

/* Only ever remove a directory of ours: "<root>/sg-<12 hex>". */
static bool dir_ours(struct local_ctx *ctx, const char *dir, const char **name)
{
	size_t n = strlen(ctx->root);

	*name = dir + n + 1;
	return strncmp(dir, ctx->root, n) == 0 && dir[n] == '/' &&
	       strncmp(*name, LOCAL_DIR_PREFIX, 3) == 0 && strlen(*name + 3) == 2 * LOCAL_RAND_BYTES &&
	       strspn(*name + 3, "0123456789abcdef") == 2 * LOCAL_RAND_BYTES;
}

/* Removes the directory of a sandbox beneath the root, never following a
 * link the sandbox left there. */
static int remove_dir(struct local_ctx *ctx, const char *id, const char *dir, struct sg_err *err)
{
	const char *name;
	int rootfd, rc;

	if (!dir_ours(ctx, dir, &name))
		return ctx->host->errf(err, SG_E_PERM, "local: refusing to remove '%s' of %s: not a "
				       "sandbox directory under [local] root %s", dir, id, ctx->root);
	rootfd = open(ctx->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0)
		return errno == ENOENT ? 0 : ctx->host->errf(err, SG_E_IO, "local: %s: %s",
							     ctx->root, strerror(errno));
	rc = local_remove_tree(rootfd, name);
	close(rootfd);
	if (rc < 0 && errno != ENOENT)
		return ctx->host->errf(err, SG_E_IO, "local: removing %s: %s", dir, strerror(errno));
	return 0;
}

int local_sandbox_remove(struct local_ctx *ctx, bool spare, const char *id, const char *dir,
			 struct sg_err *err)
{
	if (remove_dir(ctx, id, dir, err) < 0)
		return -1;
	tag_remove(ctx, spare, id);
	return 0;
}

int local_machine_destroy(struct sg_machine *m, struct sg_call *call, struct sg_err *err)
{
	struct local_machine *lm = m ? m->handle : NULL;
	struct local_ctx *ctx = lm ? lm->ctx : m ? m->backend_priv : NULL;
	json_t *tag;
	const char *dir;
	int rc;

	(void)call;
	if (!ctx)
		return local_machine_of(m, err) ? 0 : -1;
	if (lm) {
		rnc_site_stop(&lm->site); /* the runner ends, and its jail with it */
		local_jail_end(lm);
		dir = lm->dir;
		rc = remove_dir(ctx, m->id, dir, err);
	} else {
		/* A listed machine this process never bound: its tag says where. */
		tag = tag_read(ctx, m->id);
		dir = json_string_value(json_object_get(tag, "dir"));
		rc = dir ? remove_dir(ctx, m->id, dir, err) : 0;
		json_decref(tag);
	}
	if (rc < 0)
		return -1;
	tag_remove(ctx, false, m->id);
	ctx->host->log(SG_LOG_INFO, LOCAL_PLUGIN, "removed %s", m->id);
	return 0;
}

void local_machine_release(struct sg_machine *m)
{
	struct local_machine *lm = m ? m->handle : NULL;

	if (!lm)
		return;
	handle_free(lm);
	m->handle = NULL;
}

int local_machine_list(void *priv, struct sg_call *call, json_t **machines, struct sg_err *err)
{
	struct local_ctx *ctx = priv;
	char dir[LOCAL_PATH_MAX];

	(void)call;
	*machines = json_array();
	if (!*machines)
		return ctx->host->errf(err, SG_E_NOMEM, "local: out of memory");
	if (tag_dir(ctx, dir, sizeof(dir)) < 0)
		return 0;
	if (mrec_list(dir, id_ok, *machines) < 0)
		return ctx->host->errf(err, SG_E_NOMEM, "local: out of memory");
	return 0;
}
