/*
 * The warm pool: containers made and started ahead of the calls, their
 * runner already running, so create_sandbox (and a session's lazy default)
 * takes one in a few milliseconds instead of a docker create + start.
 *
 * [docker] pool = N sizes the default template's pool, pool.<template> = N
 * the others' (0: none).  Unset, `pool` is 1 in an HTTP server and 0 in a
 * stdio one: stdio serves one session per process (and the test suite
 * starts hundreds of them), so a container made ahead would mostly be made
 * for nobody.  Only a server fills a pool (host->server): `sandgate call`,
 * `tools`, `config` and `status` never do.
 *
 * A member is labelled as a sandbox of this sandgate (owner tag, managed)
 * plus DOCKER_LABEL_POOL and named "sandgate-pool-..."; when it is handed
 * out the thread renames it "sandgate-sb-<id>" (a rename takes the engine
 * tens of ms: not on the caller's path), and from then on it is an ordinary
 * sandbox the core records and reaps.  A kill -9 within those ms of a
 * hand-out leaves it named as a member: the next server then removes it
 * with the dead sandgate's pool, the one case a handed-out container goes
 * that way (its session died with its sandgate).  A member still named sandgate-pool-
 * whose sandgate is gone is removed by the next server's pool thread, never
 * adopted: no record names it (the core's lost-record sweep would also
 * remove it once its lifetime label passed).  A clean exit removes this
 * process's own members.  One member goes to one caller, once: a sandbox a
 * session used is destroyed with it, never put back.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/docker/docker.h"
#include "plugins/records/owner.h"
#include "plugins/records/worker.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define POOL_TEMPLATES_MAX 16
#define POOL_SIZE_MAX      64
#define POOL_RETRY_S       15      /* after a failed fill */
#define POOL_RENAME_TRIES  3       /* a handed-out member's rename, a second apart */
#define POOL_LIFETIME_S    300     /* the lifetime label: the core's last resort */
#define POOL_NAME          "sandgate-pool-"

struct pool_member {
	struct docker_machine *dm; /* its handle, runner started; owned */
	json_t *info;              /* its inspect answer; owned */
	char id[DOCKER_ID_MAX];
	char chan[DOCKER_CHAN_NAME_LEN + 1]; /* its runner channel, "" none */
};

struct pool_tmpl {
	char name[128];
	unsigned want;
	unsigned n;                /* ready members */
	struct pool_member m[POOL_SIZE_MAX];
};

struct docker_pool {
	struct mrec_worker w;      /* the thread; its lock guards everything below */
	struct pool_tmpl t[POOL_TEMPLATES_MAX];
	size_t nt;
	struct {
		char id[DOCKER_ID_MAX];
		unsigned tries;
	} renames[POOL_SIZE_MAX];  /* handed out, not yet renamed */
	unsigned nrenames;
	unsigned reserved;         /* slots of renames taken by a hand-out under way */
	unsigned long hits, misses, made;
	unsigned seq;
	char owner[300];           /* this process's owner tag */
};

/* ---- configuration ----------------------------------------------------------------- */

static unsigned pool_uint(const char *v)
{
	unsigned long n = strtoul(v, NULL, 10); /* the core checked "uint" */

	return n > POOL_SIZE_MAX ? POOL_SIZE_MAX : (unsigned)n;
}

static struct pool_tmpl *pool_tmpl_get(struct docker_pool *p, const char *name)
{
	for (size_t i = 0; i < p->nt; i++)
		if (!strcmp(p->t[i].name, name))
			return &p->t[i];
	if (p->nt == POOL_TEMPLATES_MAX || strlen(name) >= sizeof(p->t[0].name))
		return NULL;
	snprintf(p->t[p->nt].name, sizeof(p->t[0].name), "%s", name);
	return &p->t[p->nt++];
}

static void pool_key_cb(const char *key, const char *value, void *ud)
{
	struct docker_pool *p = ud;
	struct pool_tmpl *t;

	if (!strncmp(key, "pool.", 5))
		key += 5;
	if (!*key || !value || !*value)
		return;
	t = pool_tmpl_get(p, key);
	if (t)
		t->want = pool_uint(value);
}

/* Unset [docker] pool: 1 in an HTTP server whose default backend is
 * docker (set so, or unset: docker ranks first), else 0. */
static unsigned pool_default(const struct sg_host_api *h, const char *server)
{
	const char *b = h->config_get("sandbox", "default_backend");

	return !strcmp(server, "http") && (!b || !*b || !strcmp(b, DOCKER_PLUGIN));
}

/* ---- one member ---------------------------------------------------------------------- */

static void pool_member_drop(struct docker_ctx *ctx, struct pool_member *m, const char *why)
{
	struct sg_err err;
	char chan[DOCKER_CHAN_NAME_LEN + 1];

	snprintf(chan, sizeof(chan), "%s", m->chan);
	docker_machine_free(m->dm); /* ends its runner first */
	json_decref(m->info);
	if (docker_container_remove(ctx, m->id, &err) < 0) {
		ctx->host->log(SG_LOG_WARNING, DOCKER_PLUGIN, "pool: removing container %s "
			       "failed: %s", m->id, err.msg);
	} else {
		docker_chan_remove(ctx, chan);
		ctx->host->log(SG_LOG_INFO, DOCKER_PLUGIN, "pool: removed container %s (%s)",
			       m->id, why);
	}
	memset(m, 0, sizeof(*m));
}

/* POST /containers/create?name=sandgate-pool-... with the pool label; its
 * runner channel's name into chan[DOCKER_CHAN_NAME_LEN + 1]. */
static int pool_create(struct docker_ctx *ctx, const char *tmpl, char *id, size_t size,
		       char *chan, struct sg_err *err)
{
	struct docker_pool *p = ctx->pool;
	struct sg_create_req req = { .template_name = tmpl, .lifetime_s = POOL_LIFETIME_S,
				     .owner = p->owner, .session_hash = "" };
	char image[512], path[160];
	json_t *body, *reply = NULL;
	const char *cid;
	long status;
	unsigned seq;
	int rc = -1;

	if (docker_template_image(ctx, tmpl, image, sizeof(image)) < 0)
		return ctx->host->errf(err, SG_E_NOTFOUND, "no docker template %s: add "
				       "[docker] template.%s = <image> or drop pool.%s",
				       tmpl, tmpl, tmpl);
	body = docker_create_body(ctx, &req, tmpl, image);
	chan[0] = '\0';
	if (!body || json_object_set_new(json_object_get(body, "Labels"), DOCKER_LABEL_POOL,
					 json_string(p->owner)) < 0 ||
	    docker_chan_add(ctx, body, chan, DOCKER_CHAN_NAME_LEN + 1) < 0) {
		json_decref(body);
		return ctx->host->errf(err, SG_E_NOMEM, "docker: out of memory");
	}
	mrec_worker_lock(&p->w);
	seq = ++p->seq;
	mrec_worker_unlock(&p->w);
	snprintf(path, sizeof(path), "/containers/create?name=" POOL_NAME "%ld-%u-%lx",
		 (long)getpid(), seq, (unsigned long)time(NULL));
	if (docker_engine_json(ctx->engine, "POST", path, body, &status, &reply, err) < 0)
		goto out;
	cid = json_string_value(json_object_get(reply, "Id"));
	if (status != 201 || !cid || strlen(cid) >= size) {
		docker_engine_fail(ctx->engine, err, SG_E_BACKEND, "docker create (pool)",
				   status, reply);
		goto out;
	}
	snprintf(id, size, "%s", cid);
	rc = 0;
out:
	if (rc < 0)
		docker_chan_remove(ctx, chan);
	json_decref(body);
	json_decref(reply);
	return rc;
}

/* Makes one member of tmpl: created, started, inspected, runner running. */
static int pool_make(struct docker_ctx *ctx, const char *tmpl, struct pool_member *m,
		     struct sg_err *err)
{
	struct rn_conn *c = NULL;
	struct sg_err rerr;

	memset(m, 0, sizeof(*m));
	if (pool_create(ctx, tmpl, m->id, sizeof(m->id), m->chan, err) < 0)
		return -1;
	if (docker_container_start_raw(ctx, m->id, err) < 0 ||
	    docker_container_inspect(ctx, m->id, &m->info, err) < 0)
		goto fail;
	m->dm = docker_machine_new(ctx, m->id, m->info);
	if (!m->dm) {
		ctx->host->errf(err, SG_E_NOMEM, "docker: out of memory");
		goto fail;
	}
	m->dm->chan_fresh = true;
	/* The runner now, not on the first command (1: it cannot run here,
	 * the plain path serves; an error: the first command tries again);
	 * not when sandgate is ending: the member is removed at once. */
	if (!mrec_worker_stopping(&ctx->pool->w) && rnc_site_get(&m->dm->site, &c, &rerr) == 0)
		rn_conn_put(c);
	return 0;
fail:
	pool_member_drop(ctx, m, "it did not start");
	return -1;
}

/* ---- the thread --------------------------------------------------------------------- */

/* Removes the members of pools whose sandgate is gone (kill -9, a crash):
 * never handed out (still named sandgate-pool-), so nobody else will. */
static void pool_sweep(struct docker_ctx *ctx)
{
	json_t *reply = docker_containers(ctx, "{\"label\":[\"" DOCKER_LABEL_POOL "\"]}", true,
					  NULL), *c;
	char chan[DOCKER_CHAN_NAME_LEN + 1];
	struct sg_err err;
	size_t i;

	if (!reply) {
		ctx->host->log(SG_LOG_DEBUG, DOCKER_PLUGIN, "pool: cannot list old pools");
		return;
	}
	json_array_foreach(reply, i, c) {
		const char *id = json_string_value(json_object_get(c, "Id"));
		const char *name = json_string_value(json_array_get(json_object_get(c, "Names"), 0));
		const char *tag = json_string_value(json_object_get(json_object_get(c, "Labels"),
								    DOCKER_LABEL_POOL));

		if (!id || !name || strncmp(name, "/" POOL_NAME, strlen(POOL_NAME) + 1) ||
		    mrec_owner_alive(ctx->pool->owner, tag))
			continue;
		if (docker_container_remove(ctx, id, &err) < 0) {
			ctx->host->log(SG_LOG_WARNING, DOCKER_PLUGIN, "pool: removing container "
				       "%.12s of the pool of a sandgate that is gone failed: %s",
				       id, err.msg);
			continue;
		}
		if (docker_chan_of(ctx, c, chan, sizeof(chan)))
			docker_chan_remove(ctx, chan);
		ctx->host->log(SG_LOG_INFO, DOCKER_PLUGIN, "pool: removed container %.12s "
			       "of the pool of a sandgate that is gone (%s)", id, tag);
	}
	json_decref(reply);
}

/* Renames the member out of the pool: from now on no pool sweep takes it. */
static int pool_rename(struct docker_ctx *ctx, const char *id, struct sg_err *err)
{
	char path[DOCKER_ID_MAX + 96];
	json_t *reply = NULL;
	long status;
	int rc;

	snprintf(path, sizeof(path), "/containers/%s/rename?name=sandgate-sb-%.16s", id, id);
	if (docker_engine_json(ctx->engine, "POST", path, NULL, &status, &reply, err) < 0)
		return -1;
	rc = status == 204 ? 0 : docker_engine_fail(ctx->engine, err, SG_E_BACKEND,
						   "docker rename (pool)", status, reply);
	json_decref(reply);
	return rc;
}

/* Renames the oldest handed-out member; called and returns with the lock.
 * A member keeps its pool name until renamed, and a pool name is what the
 * next sandgate's sweep removes: a failed rename is tried again (a second
 * apart), POOL_RENAME_TRIES times in all. */
static void pool_rename_next(struct docker_ctx *ctx)
{
	struct docker_pool *p = ctx->pool;
	char id[DOCKER_ID_MAX];
	unsigned tries = p->renames[0].tries + 1;
	struct sg_err err;

	snprintf(id, sizeof(id), "%s", p->renames[0].id);
	memmove(&p->renames[0], &p->renames[1], (size_t)(p->nrenames - 1) * sizeof(p->renames[0]));
	p->nrenames--;
	mrec_worker_unlock(&p->w);
	if (pool_rename(ctx, id, &err) == 0) {
		mrec_worker_lock(&p->w);
		return;
	}
	ctx->host->log(SG_LOG_WARNING, DOCKER_PLUGIN, "pool: renaming the handed-out container "
		       "%.12s failed (try %u of %d): %s", id, tries, POOL_RENAME_TRIES, err.msg);
	mrec_worker_lock(&p->w);
	if (tries < POOL_RENAME_TRIES && err.code != SG_E_NOTFOUND &&
	    p->nrenames + p->reserved < POOL_SIZE_MAX) {
		snprintf(p->renames[p->nrenames].id, sizeof(p->renames[0].id), "%s", id);
		p->renames[p->nrenames++].tries = tries;
		mrec_worker_wait(&p->w, 1);
	}
}

/* The template that lacks a member most, or NULL when every pool is full. */
static struct pool_tmpl *pool_wanting(struct docker_pool *p)
{
	for (size_t i = 0; i < p->nt; i++)
		if (p->t[i].n < p->t[i].want)
			return &p->t[i];
	return NULL;
}

static void *pool_main(void *arg)
{
	struct docker_ctx *ctx = arg;
	struct docker_pool *p = ctx->pool;
	bool warned = false;

	pool_sweep(ctx);
	mrec_worker_lock(&p->w);
	for (;;) {
		struct pool_tmpl *t = pool_wanting(p);
		struct pool_member m;
		char name[sizeof(t->name)];
		struct sg_err err;
		int rc;

		if (p->nrenames) {
			pool_rename_next(ctx);
			continue;
		}
		if (p->w.stop)
			break;
		if (!t) {
			mrec_worker_wait(&p->w, 3600);
			continue;
		}
		snprintf(name, sizeof(name), "%s", t->name);
		mrec_worker_unlock(&p->w);
		rc = pool_make(ctx, name, &m, &err);
		mrec_worker_lock(&p->w);
		if (rc < 0) {
			ctx->host->log(warned ? SG_LOG_DEBUG : SG_LOG_WARNING, DOCKER_PLUGIN,
				       "pool: cannot make a container of template %s ahead: %s "
				       "(tried again every %d s)", name, err.msg, POOL_RETRY_S);
			warned = true;
			mrec_worker_wait(&p->w, POOL_RETRY_S);
			continue;
		}
		t = pool_tmpl_get(p, name); /* the table never shrinks: still there */
		if (p->w.stop || !t || t->n >= t->want) {
			mrec_worker_unlock(&p->w);
			pool_member_drop(ctx, &m, "the pool is full or stopping");
			mrec_worker_lock(&p->w);
			continue;
		}
		t->m[t->n++] = m;
		p->made++;
		ctx->host->log(SG_LOG_INFO, DOCKER_PLUGIN, "pool: container %.12s of template "
			       "%s ready (%u of %u)", m.id, name, t->n, t->want);
	}
	mrec_worker_unlock(&p->w);
	return NULL;
}

/* ---- the API ------------------------------------------------------------------------ */

int docker_pool_start(struct docker_ctx *ctx, struct sg_err *err)
{
	const struct sg_host_api *h = ctx->host;
	const char *server = SG_HOST_HAS(h, server) ? h->server() : NULL;
	const char *def = h->config_get("docker", "pool");
	struct docker_pool *p;
	struct pool_tmpl *t;

	if (!server)
		return 0;
	p = calloc(1, sizeof(*p)); /* docker_pool_stop() */
	if (!p)
		return h->errf(err, SG_E_NOMEM, "docker: out of memory");
	t = pool_tmpl_get(p, ctx->default_template);
	if (t)
		t->want = def && *def ? pool_uint(def) : pool_default(h, server);
	h->config_each("docker", "pool.", pool_key_cb, p);
	if (!pool_wanting(p)) {
		free(p);
		return 0;
	}
	mrec_owner_self(p->owner, sizeof(p->owner));
	ctx->pool = p;
	if (mrec_worker_start(&p->w, pool_main, ctx) < 0) {
		ctx->pool = NULL;
		free(p);
		return h->errf(err, SG_E_INTERNAL, "docker: cannot start the pool thread: %s",
			       strerror(errno));
	}
	return 0;
}

void docker_pool_stop(struct docker_ctx *ctx)
{
	struct docker_pool *p = ctx->pool;

	if (!p)
		return;
	mrec_worker_stop(&p->w);
	for (size_t i = 0; i < p->nt; i++)
		for (unsigned j = 0; j < p->t[i].n; j++)
			pool_member_drop(ctx, &p->t[i].m[j], "sandgate ends");
	ctx->host->log(SG_LOG_INFO, DOCKER_PLUGIN, "pool: %lu hits, %lu misses, %lu made",
		       p->hits, p->misses, p->made);
	ctx->pool = NULL;
	free(p);
}

/* Takes the oldest ready member of tmpl out of the pool (the thread makes
 * another).  0 with *out, or 1. */
static int pool_pop(struct docker_pool *p, const char *tmpl, struct pool_member *out)
{
	struct pool_tmpl *t = NULL;
	int rc = 1;

	mrec_worker_lock(&p->w);
	for (size_t i = 0; i < p->nt; i++)
		if (!strcmp(p->t[i].name, tmpl))
			t = &p->t[i];
	if (t && t->n > 0 && p->nrenames + p->reserved < POOL_SIZE_MAX) {
		p->reserved++; /* its rename's slot, given back by docker_pool_take */
		*out = t->m[0];
		memmove(&t->m[0], &t->m[1], (t->n - 1) * sizeof(t->m[0]));
		t->n--;
		p->hits++;
		rc = 0;
	} else if (t && t->want) {
		p->misses++;
	}
	mrec_worker_unlock(&p->w);
	return rc;
}

int docker_pool_take(struct docker_ctx *ctx, const char *tmpl, struct sg_call *call,
		     struct sg_machine *m, struct sg_err *err)
{
	struct docker_pool *p = ctx->pool;
	struct pool_member pm;
	struct sg_err rerr = { 0 };
	unsigned long hits;

	(void)call;
	(void)err;
	if (!p || pool_pop(p, tmpl, &pm) != 0)
		return 1;
	if (docker_machine_fill(ctx, m, pm.info, &rerr) < 0 ||
	    ctx->host->machine_set(m, SG_MACHINE_TEMPLATE, "%s", tmpl) < 0) {
		ctx->host->log(SG_LOG_WARNING, DOCKER_PLUGIN, "pool: container %.12s cannot be "
			       "handed out (%s): creating one", pm.id, rerr.msg);
		mrec_worker_lock(&p->w);
		p->reserved--;
		mrec_worker_unlock(&p->w);
		pool_member_drop(ctx, &pm, "it could not be handed out");
		return 1;
	}
	m->handle = pm.dm;
	docker_machine_report(ctx, m, pm.info);
	json_decref(pm.info);
	/* The rename that takes it out of the pool (tens of ms in the engine)
	 * is the thread's, off the caller's path. */
	mrec_worker_lock(&p->w);
	hits = p->hits;
	p->reserved--;
	snprintf(p->renames[p->nrenames].id, sizeof(p->renames[0].id), "%s", pm.id);
	p->renames[p->nrenames++].tries = 0;
	mrec_worker_wake(&p->w);
	mrec_worker_unlock(&p->w);
	ctx->host->log(SG_LOG_INFO, DOCKER_PLUGIN, "pool: handed out container %s of "
		       "template %s (pool hit %lu)", m->id, tmpl, hits);
	return 0;
}

/* How many containers are pool members now on this engine, of any
 * sandgate (status runs in a process of its own); -1: no answer. */
static long pool_members_now(struct docker_ctx *ctx)
{
	json_t *reply = docker_containers(ctx, "{\"label\":[\"" DOCKER_LABEL_POOL "\"]}", false,
					  NULL), *c;
	long n = 0;
	size_t i;

	if (!reply)
		return -1;
	json_array_foreach(reply, i, c) {
		const char *name = json_string_value(json_array_get(json_object_get(c, "Names"), 0));

		n += name && !strncmp(name, "/" POOL_NAME, strlen(POOL_NAME) + 1);
	}
	json_decref(reply);
	return n;
}

static void pool_size_cb(const char *key, const char *value, void *ud)
{
	if (!strncmp(key, "pool.", 5) && key[5] && value && *value)
		json_object_set_new(ud, key + 5, json_integer(pool_uint(value)));
}

json_t *docker_pool_facts(struct docker_ctx *ctx)
{
	struct docker_pool *p = ctx->pool;
	json_t *sizes, *facts;
	unsigned ready = 0;

	sizes = json_object();
	if (!p) {
		/* Another process (sandgate status): what is configured, and the
		 * members on the engine now; hits are in the servers' logs. */
		const struct sg_host_api *h = ctx->host;
		const char *def = h->config_get("docker", "pool");
		/* A server's probe (the default backend's choice) stays one call. */
		long now = SG_HOST_HAS(h, server) && h->server() ? -1 : pool_members_now(ctx);

		if (def && *def)
			json_object_set_new(sizes, ctx->default_template, json_integer(pool_uint(def)));
		else
			json_object_set_new(sizes, ctx->default_template,
					    json_string("1 in an HTTP server, 0 under stdio"));
		ctx->host->config_each("docker", "pool.", pool_size_cb, sizes);
		return json_pack("{s:o, s:I}", "templates", sizes, "members_on_engine",
				 (json_int_t)now);
	}
	mrec_worker_lock(&p->w);
	for (size_t i = 0; i < p->nt; i++) {
		json_object_set_new(sizes, p->t[i].name, json_integer(p->t[i].want));
		ready += p->t[i].n;
	}
	facts = json_pack("{s:o, s:I, s:I, s:I}", "templates", sizes, "ready", (json_int_t)ready,
			  "hits", (json_int_t)p->hits, "misses", (json_int_t)p->misses);
	mrec_worker_unlock(&p->w);
	return facts;
}
