/*
 * Spares: local sandboxes made ahead of the calls, their jail started and
 * their runner up (HELLO received), so that create_sandbox (and a session's
 * lazy default) takes one in a list pop instead of a bwrap start.  The
 * rules are docker.so's warm pool's (plugins/docker/pool.c, doc/docker.md).
 *
 * [local] spare = N keeps N (0: none).  Unset, it is 1, or 0 when [sandbox]
 * default_backend names another backend.  Only a server keeps spares
 * (host->server): `sandgate call`, `tools`, `config` and `status` never do.
 * A background thread refills, never on the caller's path, never beyond N.
 *
 * A spare is an ordinary sandbox whose id was chosen ahead, so its
 * directory, its jail's hostname and its cgroups need no rename: only its
 * owner tag lives elsewhere, in <state dir>/local/spares/ rather than
 * local/owners/, until a hand-out moves it over (one rename, no fsync on
 * the caller's path; the core then writes its machine record as for any
 * create).  No record and no machine_list names a spare, so no session
 * ever adopts one.  A request takes a spare when it needs nothing a running
 * jail cannot take afterwards: no persistent machine, no create options
 * (the create-time environment is given to every exec by the core).  One
 * spare goes to one caller, once: a sandbox a session used is destroyed
 * with it, never put back.
 *
 * A clean exit removes this process's spares (jail killed, directory and
 * tag removed).  After a kill -9 their jails die with the process (the
 * keeper's PR_SET_PDEATHSIG, bwrap's --die-with-parent) and the next
 * server's thread removes the directories of spares whose sandgate is gone
 * (host, pid and start time of their tag's owner no longer match); a kill
 * -9 between a hand-out's pop and its tag's move leaves it a spare, removed
 * so: its session died with its sandgate.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/local/local.h"
#include "plugins/records/records.h"
#include "plugins/records/owner.h"
#include "plugins/records/worker.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SPARE_MAX       16
#define SPARE_RETRY_S   15      /* after a failed make */
#define SPARE_TAG_AGE_S 60      /* an older spare's tag is written anew at hand-out */

struct spare {
	struct local_machine *lm;       /* jail running; owned */
	time_t made;                    /* when its tag was written */
};

struct local_spare {
	struct mrec_worker w;           /* the thread; its lock guards everything below */
	unsigned want, n;               /* [local] spare; ready spares */
	struct spare s[SPARE_MAX];
	unsigned long hits, misses, made;
	unsigned lifetime_s;            /* [sandbox] timeout: the tags' lifetime */
	char owner[300];                /* this process's owner tag, as the core's */
};

/* ---- configuration ------------------------------------------------------------------ */

static unsigned spare_size(const struct sg_host_api *h)
{
	const char *v = h->config_get(LOCAL_PLUGIN, "spare");
	const char *b = h->config_get("sandbox", "default_backend");
	unsigned long n;

	if (!v || !*v)
		return !b || !*b || !strcmp(b, LOCAL_PLUGIN);
	n = strtoul(v, NULL, 10); /* the core checked "uint" */
	return n > SPARE_MAX ? SPARE_MAX : (unsigned)n;
}

/* ---- the thread ---------------------------------------------------------------------- */

/* Makes one spare: directory, tag, jail and runner (not when sandgate is
 * ending: it is removed at once). */
static int spare_make(struct local_ctx *ctx, struct spare *s, struct sg_err *err)
{
	struct local_spare *p = ctx->spare;
	struct rn_conn *c = NULL;

	s->made = time(NULL);
	if (local_sandbox_new(ctx, true, p->owner, false, p->lifetime_s, &s->lm, err) < 0)
		return -1;
	if (mrec_worker_stopping(&p->w))
		return 0;
	if (rnc_site_get(&s->lm->site, &c, err) == 0) {
		rn_conn_put(c);
		return 0;
	}
	local_sandbox_drop(s->lm, true);
	return -1;
}

/* Removes the spares of sandgates that are gone (kill -9, a crash): never
 * handed out, so nobody else will. */
static void spare_sweep(struct local_ctx *ctx)
{
	char dir[LOCAL_PATH_MAX];
	json_t *list = json_array(), *e;
	struct sg_err err;
	size_t i;

	if (!list || local_tag_dir(ctx, true, dir, sizeof(dir)) < 0 ||
	    mrec_list(dir, NULL, list) < 0) {
		json_decref(list);
		return;
	}
	json_array_foreach(list, i, e) {
		const char *id = json_string_value(json_object_get(e, "id"));
		const char *owner = json_string_value(json_object_get(e, "owner"));
		json_t *tag;
		const char *sdir;

		if (!id || mrec_owner_alive(ctx->spare->owner, owner))
			continue;
		tag = mrec_read(dir, id);
		sdir = json_string_value(json_object_get(tag, "dir"));
		if (!sdir)
			mrec_remove(dir, id);
		else if (local_sandbox_remove(ctx, true, id, sdir, &err) < 0)
			ctx->host->log(SG_LOG_WARNING, LOCAL_PLUGIN, "spare: removing %s of a "
				       "sandgate that is gone failed: %s", id, err.msg);
		else
			ctx->host->log(SG_LOG_INFO, LOCAL_PLUGIN, "spare: removed %s of a sandgate "
				       "that is gone (%s)", id, owner);
		json_decref(tag);
	}
	json_decref(list);
}

static void *spare_main(void *arg)
{
	struct local_ctx *ctx = arg;
	struct local_spare *p = ctx->spare;
	bool warned = false;

	spare_sweep(ctx);
	mrec_worker_lock(&p->w);
	while (!p->w.stop && p->want) {
		struct spare s;
		struct sg_err err;
		int rc;

		if (p->n >= p->want) {
			mrec_worker_wait(&p->w, 3600);
			continue;
		}
		mrec_worker_unlock(&p->w);
		rc = spare_make(ctx, &s, &err);
		mrec_worker_lock(&p->w);
		if (rc < 0) {
			ctx->host->log(warned ? SG_LOG_DEBUG : SG_LOG_WARNING, LOCAL_PLUGIN,
				       "spare: cannot make a sandbox ahead: %s (tried again every "
				       "%d s)", err.msg, SPARE_RETRY_S);
			warned = true;
			mrec_worker_wait(&p->w, SPARE_RETRY_S);
			continue;
		}
		if (p->w.stop || p->n >= p->want) {
			mrec_worker_unlock(&p->w);
			local_sandbox_drop(s.lm, true);
			mrec_worker_lock(&p->w);
			continue;
		}
		p->s[p->n++] = s;
		p->made++;
		ctx->host->log(SG_LOG_INFO, LOCAL_PLUGIN, "spare: %s ready in %s (%u of %u)",
			       s.lm->id, s.lm->dir, p->n, p->want);
	}
	mrec_worker_unlock(&p->w);
	return NULL;
}

/* ---- the API ------------------------------------------------------------------------- */

int local_spare_start(struct local_ctx *ctx, struct sg_err *err)
{
	const struct sg_host_api *h = ctx->host;
	const char *life = h->config_get("sandbox", "timeout");
	struct local_spare *p;

	if (!SG_HOST_HAS(h, server) || !h->server())
		return 0;
	p = calloc(1, sizeof(*p)); /* local_spare_stop() */
	if (!p)
		return h->errf(err, SG_E_NOMEM, "local: out of memory");
	/* A host that cannot make jails gets none, but the sweep still runs. */
	p->want = ctx->user_why[0] ? 0 : spare_size(h);
	p->lifetime_s = life && *life ? (unsigned)strtoul(life, NULL, 10) : 300;
	mrec_owner_self(p->owner, sizeof(p->owner));
	ctx->spare = p;
	if (mrec_worker_start(&p->w, spare_main, ctx) < 0) {
		ctx->spare = NULL;
		free(p);
		return h->errf(err, SG_E_INTERNAL, "local: cannot start the spare thread: %s",
			       strerror(errno));
	}
	return 0;
}

void local_spare_stop(struct local_ctx *ctx)
{
	struct local_spare *p = ctx->spare;

	if (!p)
		return;
	mrec_worker_stop(&p->w);
	for (unsigned i = 0; i < p->n; i++)
		local_sandbox_drop(p->s[i].lm, true);
	if (p->want)
		ctx->host->log(SG_LOG_INFO, LOCAL_PLUGIN, "spare: %lu hits, %lu misses, %lu made",
			       p->hits, p->misses, p->made);
	ctx->spare = NULL;
	free(p);
}

/* Whether req needs nothing a running jail cannot take afterwards. */
static bool spare_fits(const struct sg_create_req *req)
{
	return !req->persistent && !(req->name && *req->name) &&
	       !(req->options && json_object_size(req->options));
}

/* Takes the oldest ready spare (the thread makes another): 0 with *out, or 1. */
static int spare_pop(struct local_spare *p, struct spare *out)
{
	int rc = 1;

	mrec_worker_lock(&p->w);
	if (p->n > 0) {
		*out = p->s[0];
		memmove(&p->s[0], &p->s[1], (p->n - 1) * sizeof(p->s[0]));
		p->n--;
		p->hits++;
		mrec_worker_wake(&p->w);
		rc = 0;
	} else if (p->want) {
		p->misses++;
	}
	mrec_worker_unlock(&p->w);
	return rc;
}

/* Makes the spare's tag an ordinary owner tag: moved when it says what req
 * would (the owner, the lifetime, about the time), else written anew. */
static int spare_retag(struct local_ctx *ctx, const struct spare *s,
		       const struct sg_create_req *req)
{
	char from[LOCAL_PATH_MAX], to[LOCAL_PATH_MAX];

	if (local_tag_dir(ctx, true, from, sizeof(from)) < 0 ||
	    local_tag_dir(ctx, false, to, sizeof(to)) < 0)
		return -1;
	if (req->owner && !strcmp(req->owner, ctx->spare->owner) &&
	    req->lifetime_s == ctx->spare->lifetime_s && time(NULL) - s->made < SPARE_TAG_AGE_S)
		return mrec_move(from, to, s->lm->id);
	if (local_tag_write(ctx, false, s->lm->id, s->lm->dir, req->owner, false,
			    req->lifetime_s) < 0)
		return -1;
	mrec_remove(from, s->lm->id);
	return 0;
}

int local_spare_take(struct local_ctx *ctx, const struct sg_create_req *req, struct sg_machine *m)
{
	struct local_spare *p = ctx->spare;
	struct rn_conn *c = NULL;
	struct sg_err err = { 0 };
	struct spare s;
	unsigned long hits;

	if (!p || !spare_fits(req) || spare_pop(p, &s) != 0)
		return 1;
	/* A jail that ended meanwhile is no spare: made anew on the caller's path. */
	if (rnc_site_peek(&s.lm->site, &c) != 0) {
		ctx->host->log(SG_LOG_WARNING, LOCAL_PLUGIN, "spare: the jail of %s ended while "
			       "it waited: creating a sandbox", s.lm->id);
		local_sandbox_drop(s.lm, true);
		return 1;
	}
	rn_conn_put(c);
	if (local_sandbox_bind(s.lm, m, &err) < 0 || spare_retag(ctx, &s, req) < 0) {
		ctx->host->log(SG_LOG_WARNING, LOCAL_PLUGIN, "spare: %s cannot be handed out "
			       "(%s): creating a sandbox", s.lm->id,
			       err.msg[0] ? err.msg : strerror(errno));
		m->handle = NULL;
		local_sandbox_drop(s.lm, true);
		return 1;
	}
	mrec_worker_lock(&p->w);
	hits = p->hits;
	mrec_worker_unlock(&p->w);
	ctx->host->log(SG_LOG_INFO, LOCAL_PLUGIN, "spare: handed out %s in %s (spare hit %lu)",
		       m->id, s.lm->dir, hits);
	return 0;
}

/* How many spares of running sandgates this state directory holds now. */
static long spare_count(struct local_ctx *ctx, const char *mine)
{
	char dir[LOCAL_PATH_MAX];
	json_t *list = json_array(), *e;
	long n = 0;
	size_t i;

	if (!list || local_tag_dir(ctx, true, dir, sizeof(dir)) < 0 ||
	    mrec_list(dir, NULL, list) < 0) {
		json_decref(list);
		return -1;
	}
	json_array_foreach(list, i, e)
		n += mrec_owner_alive(mine, json_string_value(json_object_get(e, "owner")));
	json_decref(list);
	return n;
}

json_t *local_spare_facts(struct local_ctx *ctx)
{
	struct local_spare *p = ctx->spare;
	json_t *facts;
	char mine[300];

	if (!p) {
		/* Another process (sandgate status): what is configured, and the
		 * spares of running sandgates now; hits are in the servers' logs. */
		mrec_owner_self(mine, sizeof(mine));
		return json_pack("{s:I, s:I}", "size", (json_int_t)spare_size(ctx->host),
				 "spares_now", (json_int_t)spare_count(ctx, mine));
	}
	mrec_worker_lock(&p->w);
	facts = json_pack("{s:I, s:I, s:I, s:I}", "size", (json_int_t)p->want, "ready",
			  (json_int_t)p->n, "hits", (json_int_t)p->hits, "misses",
			  (json_int_t)p->misses);
	mrec_worker_unlock(&p->w);
	return facts;
}
