/*
 * Sandboxes on SSH: a working directory `<root>/sg-<random>` (mode 0700) on
 * the target's host.  The id is "ssh-<target>-<random>"; a small JSON state
 * file per sandbox in the state directory (<state_dir>/ssh/<id>.json, mode
 * 0600) is its owner tag, what a container's labels are on Docker: it
 * remembers the target, the directory and the owner, written before the
 * core records the machine, so that attach finds the directory again and
 * machine_list finds sandboxes whose record was lost.  Nothing here keeps a
 * connection: the pool of the target does.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/ssh/ssh.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SSH_RAND_BYTES 6          /* 12 hex digits in the id and the directory */
#define SSH_DIR_PREFIX "sg-"

/* Creates the root (0700 on creation) and the sandbox's own directory. */
static const char ssh_mkdir_script[] =
	"umask 077 && mkdir -p -- \"$1\" && mkdir -m 700 -- \"$1/$2\"";

struct ssh_machine *ssh_machine_of(const struct sg_machine *m, struct sg_err *err)
{
	struct ssh_machine *sm = m ? m->handle : NULL;

	if (sm && sm->ctx && sm->pool)
		return sm;
	if (err) {
		/* No host to word it with: fill err by hand. */
		err->code = SG_E_INTERNAL;
		err->sys_errno = 0;
		snprintf(err->msg, sizeof(err->msg),
			 "ssh: this machine has no ssh handle (it was not created or attached by ssh.so)");
	}
	return NULL;
}

/* ---- state files --------------------------------------------------------------------- */

static int ssh_state_dir(struct ssh_ctx *ctx, char *out, size_t n)
{
	const char *base = ctx->host->state_dir();
	int len;

	if (!base)
		return -1;
	len = snprintf(out, n, "%s/ssh", base);
	if (len < 0 || (size_t)len >= n)
		return -1;
	if (mkdir(out, 0700) < 0 && errno != EEXIST)
		return -1;
	return 0;
}

static int ssh_state_path(struct ssh_ctx *ctx, const char *id, char *out, size_t n)
{
	char dir[SSH_PATH_MAX];
	int len;

	if (ssh_state_dir(ctx, dir, sizeof(dir)) < 0 || strchr(id, '/') || id[0] == '.')
		return -1;
	len = snprintf(out, n, "%s/%s.json", dir, id);
	return len < 0 || (size_t)len >= n ? -1 : 0;
}

/* Writes j to the state file of id: temporary file, then rename. */
static int ssh_state_write(struct ssh_ctx *ctx, const char *id, json_t *j)
{
	char path[SSH_PATH_MAX], tmp[SSH_PATH_MAX + 8];
	int fd, rc = -1;

	if (ssh_state_path(ctx, id, path, sizeof(path)) < 0)
		return -1;
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	if (json_dumpfd(j, fd, JSON_COMPACT) == 0 && fsync(fd) == 0)
		rc = 0;
	close(fd);
	if (rc == 0 && rename(tmp, path) < 0)
		rc = -1;
	if (rc < 0)
		unlink(tmp);
	return rc;
}

/* The state of id, or NULL.  Caller's reference. */
static json_t *ssh_state_read(struct ssh_ctx *ctx, const char *id)
{
	char path[SSH_PATH_MAX];

	if (ssh_state_path(ctx, id, path, sizeof(path)) < 0)
		return NULL;
	return json_load_file(path, 0, NULL);
}

static void ssh_state_remove(struct ssh_ctx *ctx, const char *id)
{
	char path[SSH_PATH_MAX];

	if (ssh_state_path(ctx, id, path, sizeof(path)) == 0)
		unlink(path);
}

static json_t *ssh_state_json(const char *id, const char *ws, const struct sg_create_req *req,
			      const char *target)
{
	return json_pack("{s:s, s:s, s:s, s:s, s:b, s:I, s:I}", "id", id, "target", target, "workspace", ws,
			 "owner", req->owner ? req->owner : "", "persistent", req->persistent,
			 "created", (json_int_t)time(NULL), "lifetime", (json_int_t)req->lifetime_s);
}

/* ---- handles ---------------------------------------------------------------------------- */

static int ssh_handle_new(struct ssh_ctx *ctx, struct ssh_pool *p, struct sg_machine *m,
			  struct sg_err *err)
{
	struct ssh_machine *sm = calloc(1, sizeof(*sm)); /* ssh_machine_release() */

	if (!sm)
		return ctx->host->errf(err, SG_E_NOMEM, "ssh: out of memory");
	sm->ctx = ctx;
	sm->pool = p;
	rnc_state_init(&sm->code);
	m->handle = sm;
	return 0;
}

static int ssh_fill(struct ssh_ctx *ctx, struct sg_machine *m, const struct ssh_target *t,
		    const char *id, const char *workspace, struct sg_err *err)
{
	const struct sg_host_api *h = ctx->host;

	if (h->machine_set(m, SG_MACHINE_ID, "%s", id) < 0 ||
	    h->machine_set(m, SG_MACHINE_WORKSPACE, "%s", workspace) < 0 ||
	    h->machine_set(m, SG_MACHINE_URL, "ssh://%s@%s:%u", t->user, t->host, t->port) < 0 ||
	    h->machine_set(m, SG_MACHINE_TEMPLATE, "%s", t->name) < 0)
		return h->errf(err, SG_E_INVAL, "ssh: the id, directory or address of sandbox '%s' is too long or holds control characters",
			       id);
	return 0;
}

/* ---- create ------------------------------------------------------------------------------ */

/* Which target: the create option "target", else a template naming a
 * [ssh.target.NAME] section, else the default target. */
static int ssh_pick_target(struct ssh_ctx *ctx, const struct sg_create_req *req, const char **name,
			   struct sg_err *err)
{
	const json_t *opt = req->options ? json_object_get(req->options, "target") : NULL;

	*name = NULL;
	if (opt) {
		if (!json_is_string(opt) || !*json_string_value(opt))
			return ctx->host->errf(err, SG_E_INVAL, "ssh: create option 'target' must be a target name (a string)");
		*name = json_string_value(opt);
	} else if (req->template_name && *req->template_name &&
		   strcmp(req->template_name, "default") != 0) {
		if (!ssh_target_exists(ctx, req->template_name))
			return ctx->host->errf(err, SG_E_NOTFOUND,
					       "ssh: no target '%s': on SSH the template names a target; define [ssh.target.%s] with host = HOST, or omit the template for the default target",
					       req->template_name, req->template_name);
		*name = req->template_name;
	}
	return 0;
}

static int ssh_check_env(struct ssh_ctx *ctx, const char *const *env, struct sg_err *err)
{
	for (const char *const *e = env; e && *e; e++)
		if (!ssh_env_name_ok(*e))
			return ctx->host->errf(err, SG_E_INVAL,
					       "environment variable '%.60s' is not NAME=VALUE with a name of letters, digits and '_'",
					       *e);
	return 0;
}

int ssh_machine_create(void *priv, const struct sg_create_req *req, struct sg_call *call,
		       struct sg_machine *m, struct sg_err *err)
{
	struct ssh_ctx *ctx = priv;
	struct ssh_pool *p;
	const char *name;
	char rnd[2 * SSH_RAND_BYTES + 1], dir[16], id[SSH_ID_MAX], ws[SSH_PATH_MAX];
	const char *argv[] = { "/bin/sh", "-c", ssh_mkdir_script, "sg", NULL, dir, NULL };
	json_t *state;

	if (ssh_pick_target(ctx, req, &name, err) < 0 || ssh_check_env(ctx, req->env, err) < 0)
		return -1;
	p = ssh_pool_get(ctx, name, err);
	if (!p)
		return -1;
	if (ssh_random_hex(rnd, SSH_RAND_BYTES) < 0)
		return ctx->host->errf(err, SG_E_INTERNAL, "ssh: no randomness");
	snprintf(dir, sizeof(dir), SSH_DIR_PREFIX "%s", rnd);
	if ((size_t)snprintf(id, sizeof(id), "ssh-%s-%s", p->target.name, rnd) >= sizeof(id) ||
	    (size_t)snprintf(ws, sizeof(ws), "%s/%s", strcmp(p->target.root, "/") ? p->target.root : "",
			     dir) >= sizeof(ws))
		return ctx->host->errf(err, SG_E_INVAL, "ssh: target name or root too long");
	argv[4] = p->target.root;
	if (call)
		ctx->host->progress(call, 1, 2, "connecting");
	if (ssh_fill(ctx, m, &p->target, id, ws, err) < 0)
		return -1;
	state = ssh_state_json(id, ws, req, p->target.name);
	if (!state || ssh_state_write(ctx, id, state) < 0) {
		json_decref(state);
		return ctx->host->errf(err, SG_E_IO, "ssh: cannot write the state file of sandbox %s in %s/ssh: check that directory",
				       id, ctx->host->state_dir() ? ctx->host->state_dir() : "(no state directory)");
	}
	json_decref(state);
	if (ssh_script(p, argv, call, "creating the sandbox directory", err) < 0 ||
	    ssh_handle_new(ctx, p, m, err) < 0) {
		ssh_state_remove(ctx, id);
		return -1;
	}
	return 0;
}

/* ---- attach, destroy, release, list --------------------------------------------------- */

int ssh_machine_attach(void *priv, const char *id, const json_t *kept, struct sg_call *call,
		       struct sg_machine *m, struct sg_err *err)
{
	struct ssh_ctx *ctx = priv;
	json_t *st = ssh_state_read(ctx, id);
	const char *target, *ws;
	struct ssh_pool *p;
	int rc = -1;

	(void)call;
	(void)kept; /* the state file says it all */
	if (!st)
		return ctx->host->errf(err, SG_E_NOTFOUND, "ssh: no sandbox '%s' is known here (no state file)", id);
	target = json_string_value(json_object_get(st, "target"));
	ws = json_string_value(json_object_get(st, "workspace"));
	if (!target || !ws || ws[0] != '/') {
		ctx->host->errf(err, SG_E_NOTFOUND, "ssh: the state file of sandbox '%s' is damaged", id);
		goto out;
	}
	p = ssh_pool_get(ctx, target, err);
	if (!p || ssh_fill(ctx, m, &p->target, id, ws, err) < 0 || ssh_handle_new(ctx, p, m, err) < 0)
		goto out;
	rc = 0;
out:
	json_decref(st);
	return rc;
}

/* Only ever `rm -rf` a directory of ours: "<something>/sg-<12 hex>". */
static bool ssh_ours(const char *ws)
{
	const char *base = strrchr(ws, '/');

	if (!base || strncmp(base + 1, SSH_DIR_PREFIX, 3) != 0 ||
	    strlen(base + 4) != 2 * SSH_RAND_BYTES)
		return false;
	return strspn(base + 4, "0123456789abcdef") == 2 * SSH_RAND_BYTES;
}

int ssh_machine_destroy(struct sg_machine *m, struct sg_call *call, struct sg_err *err)
{
	struct ssh_machine *sm = ssh_machine_of(m, err);
	const char *argv[] = { "rm", "-rf", "--", m->workspace, NULL };

	if (!sm)
		return -1;
	if (!ssh_ours(m->workspace))
		return sm->ctx->host->errf(err, SG_E_PERM,
					   "ssh: refusing to remove '%s': not a sandbox directory made by sandgate",
					   m->workspace);
	if (ssh_script(sm->pool, argv, call, "removing the sandbox directory", err) < 0)
		return -1;
	ssh_state_remove(sm->ctx, m->id);
	return 0;
}

void ssh_machine_release(struct sg_machine *m)
{
	struct ssh_machine *sm = m ? m->handle : NULL;

	if (!sm)
		return;
	/* Its kernels live in the target's shared runner: they end with it,
	 * as a container's end with the container's runner. */
	ssh_code_end(m);
	rnc_state_fini(&sm->code);
	free(sm);
	m->handle = NULL;
}

/* The sandboxes the state directory remembers (no network): {id, owner,
 * persistent, created, lifetime} each. */
int ssh_machine_list(void *priv, struct sg_call *call, json_t **machines, struct sg_err *err)
{
	struct ssh_ctx *ctx = priv;
	char dir[SSH_PATH_MAX], path[SSH_PATH_MAX + 300];
	struct dirent *de;
	DIR *d;

	(void)call;
	*machines = json_array();
	if (!*machines)
		return ctx->host->errf(err, SG_E_NOMEM, "ssh: out of memory");
	if (ssh_state_dir(ctx, dir, sizeof(dir)) < 0 || !(d = opendir(dir)))
		return 0;
	while ((de = readdir(d)) != NULL) {
		size_t len = strlen(de->d_name);
		const char *id, *owner;
		json_t *st;

		if (len < 6 || strcmp(de->d_name + len - 5, ".json") != 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		st = json_load_file(path, 0, NULL);
		id = json_string_value(json_object_get(st, "id"));
		owner = json_string_value(json_object_get(st, "owner"));
		if (id)
			json_array_append_new(*machines, json_pack("{s:s, s:s, s:b, s:I, s:I}", "id", id, "owner",
								   owner ? owner : "", "persistent",
								   json_is_true(json_object_get(st, "persistent")),
								   "created", json_integer_value(json_object_get(st, "created")),
								   "lifetime", json_integer_value(json_object_get(st, "lifetime"))));
		json_decref(st);
	}
	closedir(d);
	return 0;
}
