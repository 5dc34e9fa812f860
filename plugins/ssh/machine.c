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

#include "plugins/records/records.h"
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

/* The root must be the user's own, not a link, and writable by nobody
 * else: the default /tmp/sandgate-USER may have been made by another user
 * of the host first, who could then swap a sandbox's directory for one of
 * their own and read what the agent writes. */
#define SSH_ROOT_CHECK \
	"umask 077 && mkdir -p -- \"$1\" && { s=$(stat -c '%u %a' -- \"$1\") && u=$(id -u) && " \
	"case \"$s\" in \"$u \"*[2367]?|\"$u \"*[2367]) false;; \"$u \"*) true;; *) false;; esac || " \
	"{ echo \"sandgate: the root $1 is not this user's own directory (another user's, a link, or " \
	"writable by group or others): remove it, or set [ssh] root to one of your own\" >&2; exit 3; }; }"

/* Creates the root (0700 on creation) and the sandbox's own directory. */
static const char ssh_mkdir_script[] =
	SSH_ROOT_CHECK " && mkdir -m 700 -- \"$1/$2\"";

/* The same for a jailed sandbox, and beside it the files of its /etc
 * ($1/.$2.etc: passwd and group entries of the user, hosts, hostname $3). */
static const char ssh_mkjail_script[] =
	SSH_ROOT_CHECK " && mkdir -m 700 -- \"$1/$2\" && "
	"mkdir -m 711 -- \"$1/.$2.etc\" && cd -- \"$1/.$2.etc\" && umask 022 && "
	"u=$(id -un) && i=$(id -u) && g=$(id -g) && gn=$(id -gn) && "
	"{ echo 'root:x:0:0:root:/root:/usr/sbin/nologin'; [ \"$i\" = 0 ] || "
	"printf '%s:x:%s:%s:sandgate sandbox:/workspace:/bin/sh\\n' \"$u\" \"$i\" \"$g\"; } >passwd && "
	"{ echo 'root:x:0:'; [ \"$g\" = 0 ] || printf '%s:x:%s:\\n' \"$gn\" \"$g\"; } >group && "
	"printf '127.0.0.1\\tlocalhost\\n::1\\tlocalhost\\n127.0.1.1\\t%s\\n' \"$3\" >hosts && "
	"printf '%s\\n' \"$3\" >hostname";

/* Whether the host has bwrap, and whether it is 0.8 or later. */
static const char ssh_bwrap_script[] =
	"command -v bwrap >/dev/null 2>&1 || { echo none; exit 0; }; bwrap --version 2>&1";

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
	return mrec_dir(ctx->host->state_dir(), "ssh", out, n);
}

/* Writes j to the state file of id atomically (records.h). */
static int ssh_state_write(struct ssh_ctx *ctx, const char *id, json_t *j)
{
	char dir[SSH_PATH_MAX];

	return ssh_state_dir(ctx, dir, sizeof(dir)) < 0 ? -1 : mrec_write(dir, id, j);
}

/* The state of id, or NULL.  Caller's reference. */
static json_t *ssh_state_read(struct ssh_ctx *ctx, const char *id)
{
	char dir[SSH_PATH_MAX];

	return ssh_state_dir(ctx, dir, sizeof(dir)) < 0 ? NULL : mrec_read(dir, id);
}

static void ssh_state_remove(struct ssh_ctx *ctx, const char *id)
{
	char dir[SSH_PATH_MAX];

	if (ssh_state_dir(ctx, dir, sizeof(dir)) == 0)
		mrec_remove(dir, id);
}

static json_t *ssh_state_json(const char *id, const char *dir, bool jailed,
			      const struct sg_create_req *req, const char *target)
{
	return json_pack("{s:s, s:s, s:s, s:s, s:s, s:b, s:I, s:I}", "id", id, "target", target,
			 "workspace", dir, "isolation", jailed ? "bwrap" : "none",
			 "owner", req->owner ? req->owner : "", "persistent", req->persistent,
			 "created", (json_int_t)time(NULL), "lifetime", (json_int_t)req->lifetime_s);
}

/* ---- handles ---------------------------------------------------------------------------- */

/* The handle of a sandbox in dir; jailed: with its jail's runner site. */
static int ssh_handle_new(struct ssh_ctx *ctx, struct ssh_pool *p, struct sg_machine *m,
			  const char *id, const char *dir, bool jailed, struct sg_err *err)
{
	struct ssh_machine *sm = calloc(1, sizeof(*sm)); /* ssh_machine_release() */
	char etc[SSH_PATH_MAX];
	const char *base = strrchr(dir, '/');

	if (!sm)
		return ctx->host->errf(err, SG_E_NOMEM, "ssh: out of memory");
	sm->ctx = ctx;
	sm->pool = p;
	snprintf(sm->dir, sizeof(sm->dir), "%s", dir);
	if (jailed) {
		snprintf(etc, sizeof(etc), "%.*s/.%s.etc", base ? (int)(base - dir) : 0, dir,
			 base ? base + 1 : dir);
		sm->jail = ssh_jail_new(p, id, dir, etc, err);
		if (!sm->jail) {
			free(sm);
			return -1;
		}
	}
	rnc_kstate_init(&sm->code);
	m->handle = sm;
	return 0;
}

/* What create_sandbox reports: the jail, or that there is none. */
static void ssh_report(struct ssh_ctx *ctx, struct sg_machine *m, const struct ssh_machine *sm)
{
	const struct ssh_target *t = &sm->pool->target;
	json_t *facts;

	if (!SG_HOST_HAS(ctx->host, machine_report))
		return;
	if (sm->jail)
		facts = json_pack("{s:s, s:s, s:s, s:s}", "isolation", "bwrap", "network",
				  t->network_host ? "host" : "none", "workspace", "/workspace",
				  "directory", sm->dir);
	else
		facts = json_pack("{s:s, s:s, s:s}", "isolation", "none", "directory", sm->dir,
				  "warning", "sandboxes on this SSH host are not isolated from each "
				  "other: their commands see the host and each other's directories "
				  "([ssh] isolation = none, or no bubblewrap there); the file tools "
				  "keep to the sandbox's directory");
	if (facts)
		ctx->host->machine_report(m, facts);
	json_decref(facts);
}

/* Whether p's host has bwrap: 1 yes, 0 no, -1 with err (unreachable). */
static int ssh_bwrap_there(struct ssh_pool *p, struct sg_call *call, struct sg_err *err)
{
	const char *argv[] = { "/bin/sh", "-c", ssh_bwrap_script, NULL };
	struct ssh_run r = { .argv = argv, .cwd = "/", .timeout_ms = 30000, .cap = 4096 };
	struct sg_exec_result res;
	unsigned a = 0, b = 0;
	int have;

	pthread_mutex_lock(&p->lock);
	have = p->bwrap;
	pthread_mutex_unlock(&p->lock);
	if (have)
		return have > 0;
	memset(&res, 0, sizeof(res));
	if (ssh_run(p, &r, call, &res, err) < 0) {
		p->ctx->host->buf_release(&res.out);
		p->ctx->host->buf_release(&res.err);
		return -1;
	}
	have = res.out.data && strncmp(res.out.data, "none", 4) != 0 ? 1 : -1;
	if (have > 0 && sscanf(res.out.data, "bubblewrap %u.%u", &a, &b) == 2) {
		p->bwrap_disable_userns = a > 0 || b >= 8;
		p->bwrap_clearenv = a > 0 || b >= 5;
	}
	p->ctx->host->buf_release(&res.out);
	p->ctx->host->buf_release(&res.err);
	pthread_mutex_lock(&p->lock);
	p->bwrap = have;
	pthread_mutex_unlock(&p->lock);
	ssh_log(p->ctx, SG_LOG_INFO, "%s: %s", p->target.host, have > 0 ?
		"bubblewrap is there: sandboxes are jails" : "no bubblewrap");
	return have > 0;
}

/* Jailed or not, by the target's isolation and what the host has: 1 jail,
 * 0 none (said once in the log), -1 with err. */
int ssh_jail_decide(struct ssh_pool *p, struct sg_call *call, struct sg_err *err)
{
	const struct ssh_target *t = &p->target;
	bool warn;
	int have;

	if (t->isolation != SSH_ISO_NONE) {
		have = ssh_bwrap_there(p, call, err);
		if (have < 0)
			return -1;
		if (have)
			return 1;
		if (t->isolation == SSH_ISO_BWRAP)
			return p->ctx->host->errf(err, SG_E_UNAVAILABLE, "ssh: [ssh] isolation = bwrap, "
						  "but %s has no bwrap: install bubblewrap there "
						  "(apt-get install bubblewrap), or set isolation = none",
						  t->host);
	}
	pthread_mutex_lock(&p->lock);
	warn = !p->unjailed_warned;
	p->unjailed_warned = true;
	pthread_mutex_unlock(&p->lock);
	if (warn)
		ssh_log(p->ctx, SG_LOG_WARNING, "sandboxes on %s are not isolated from each other "
			"(%s): their commands see the host and each other's directories",
			t->host, t->isolation == SSH_ISO_NONE ? "[ssh] isolation = none" :
			"no bubblewrap there");
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
	const char *argv[] = { "/bin/sh", "-c", ssh_mkdir_script, "sg", NULL, dir, id, NULL };
	struct rn_conn *rc = NULL;
	json_t *state;
	int jailed;

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
		ctx->host->progress(call, 1, 3, "connecting");
	jailed = ssh_jail_decide(p, call, err);
	if (jailed < 0)
		return -1;
	if (jailed)
		argv[2] = ssh_mkjail_script;
	if (ssh_fill(ctx, m, &p->target, id, jailed ? "/workspace" : ws, err) < 0)
		return -1;
	state = ssh_state_json(id, ws, jailed, req, p->target.name);
	if (!state || ssh_state_write(ctx, id, state) < 0) {
		json_decref(state);
		return ctx->host->errf(err, SG_E_IO, "ssh: cannot write the state file of sandbox %s in %s/ssh: check that directory",
				       id, ctx->host->state_dir() ? ctx->host->state_dir() : "(no state directory)");
	}
	json_decref(state);
	if (ssh_script(p, argv, call, "creating the sandbox directory", err) < 0) {
		ssh_state_remove(ctx, id);
		return -1;
	}
	if (ssh_handle_new(ctx, p, m, id, ws, jailed, err) < 0) {
		const char *rm[] = { "rm", "-rf", "--", ws, NULL };

		ssh_script(p, rm, call, "removing the sandbox directory", NULL);
		ssh_state_remove(ctx, id);
		return -1;
	}
	/* The jail now, so that a host that cannot make one refuses here. */
	if (jailed && call)
		ctx->host->progress(call, 2, 3, "starting the jail");
	if (jailed && rnc_site_get(&((struct ssh_machine *)m->handle)->jail->site, &rc, err) != 0)
		goto fail;
	if (rc)
		rn_conn_put(rc);
	ssh_report(ctx, m, m->handle);
	return 0;
fail:
	ssh_machine_destroy(m, call, NULL);
	ssh_machine_release(m);
	ssh_state_remove(ctx, id);
	return -1;
}

/* What a sandbox without a jail started may outlive its command (a
 * background job, its own session, another directory): every process of
 * the user that carries the sandbox's mark in its environment, or whose
 * working directory is beneath the sandbox's, is stopped, then killed. */
static const char ssh_kill_all[] =
	/* One grep and one ls for the whole of /proc: a fork per process
	 * would take seconds on a busy host. */
	"d=$1; me=$$; m=\"" SSH_MARK_VAR "=$d\"; "
	"pick() { { grep -lszxF \"$m\" /proc/[0-9]*/environ; ls -l /proc/[0-9]*/cwd; } 2>/dev/null | "
	"while read -r l; do case $l in "
	"/proc/*/environ) p=${l#/proc/}; p=${p%/environ};; "
	"*\" -> $d\"|*\" -> $d/\"*) p=${l#*/proc/}; p=${p%%/cwd*};; *) continue;; esac; "
	"[ \"$p\" = \"$me\" ] || echo $p; done; }; "
	"for i in 1 2 3; do l=$(pick); [ -n \"$l\" ] || exit 0; kill -STOP $l 2>/dev/null; "
	"kill -KILL $l 2>/dev/null; done; exit 0";

void ssh_machine_kill(struct ssh_machine *sm, const struct sg_call *call)
{
	const char *argv[] = { "sh", "-c", ssh_kill_all, "sg", sm->dir, NULL };
	struct sg_err e;

	if (ssh_script(sm->pool, argv, call, "ending the sandbox's processes", &e) < 0)
		ssh_log(sm->ctx, SG_LOG_WARNING, "the processes of sandbox %s may outlive it: %s",
			sm->dir, e.msg);
}

/* ---- attach, destroy, release, list --------------------------------------------------- */

int ssh_machine_attach(void *priv, const char *id, const json_t *kept, struct sg_call *call,
		       struct sg_machine *m, struct sg_err *err)
{
	struct ssh_ctx *ctx = priv;
	json_t *st = ssh_state_read(ctx, id);
	const char *target, *ws, *iso;
	struct ssh_pool *p;
	int rc = -1;

	(void)call;
	(void)kept; /* the state file says it all */
	if (!st)
		return ctx->host->errf(err, SG_E_NOTFOUND, "ssh: no sandbox '%s' is known here (no state file)", id);
	target = json_string_value(json_object_get(st, "target"));
	ws = json_string_value(json_object_get(st, "workspace"));
	iso = json_string_value(json_object_get(st, "isolation"));
	if (!target || !ws || ws[0] != '/') {
		ctx->host->errf(err, SG_E_NOTFOUND, "ssh: the state file of sandbox '%s' is damaged", id);
		goto out;
	}
	p = ssh_pool_get(ctx, target, err);
	if (!p || ssh_fill(ctx, m, &p->target, id, iso && strcmp(iso, "bwrap") == 0 ? "/workspace" : ws,
			   err) < 0 ||
	    ssh_handle_new(ctx, p, m, id, ws, iso && strcmp(iso, "bwrap") == 0, err) < 0)
		goto out;
	ssh_report(ctx, m, m->handle);
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
	char etc[SSH_PATH_MAX + 16];
	const char *argv[] = { "rm", "-rf", "--", NULL, NULL, NULL };
	const char *base;

	if (!sm)
		return -1;
	if (!ssh_ours(sm->dir))
		return sm->ctx->host->errf(err, SG_E_PERM,
					   "ssh: refusing to remove '%s': not a sandbox directory made by sandgate",
					   sm->dir);
	argv[3] = sm->dir;
	if (sm->jail) {
		/* The runner sees EOF and ends, and its jail with every process. */
		rnc_site_stop(&sm->jail->site);
		base = strrchr(sm->dir, '/');
		snprintf(etc, sizeof(etc), "%.*s/.%s.etc", (int)(base - sm->dir), sm->dir, base + 1);
		argv[4] = etc;
	} else {
		ssh_machine_kill(sm, call);
	}
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
	rnc_kstate_fini(&sm->code);
	ssh_jail_free(sm->jail);
	free(sm);
	m->handle = NULL;
}

/* The sandboxes the state directory remembers (no network): {id, owner,
 * persistent, created, lifetime} each. */
int ssh_machine_list(void *priv, struct sg_call *call, json_t **machines, struct sg_err *err)
{
	struct ssh_ctx *ctx = priv;
	char dir[SSH_PATH_MAX];

	(void)call;
	*machines = json_array();
	if (!*machines)
		return ctx->host->errf(err, SG_E_NOMEM, "ssh: out of memory");
	if (ssh_state_dir(ctx, dir, sizeof(dir)) < 0)
		return 0;
	if (mrec_list(dir, NULL, *machines) < 0)
		return ctx->host->errf(err, SG_E_NOMEM, "ssh: out of memory");
	return 0;
}
