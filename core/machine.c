#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/call.h"
#include "core/conf.h"
#include "core/err.h"
#include "core/log.h"
#include "core/machine.h"
#include "core/persist.h"
#include "core/plugin.h"
#include "core/session.h"
#include "core/state.h"
#include "core/util.h"

static struct sg_entry *registry;
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
/* Backends load and orphans are adopted beside the first requests (cold
 * start); lookups and creations wait until that is done, so an explicit id
 * of an orphan is found right after a restart. */
static pthread_mutex_t ready_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ready_cond = PTHREAD_COND_INITIALIZER;
static bool starting;
static pthread_t start_thread;
static bool start_thread_started;

static void wait_ready(void)
{
	pthread_mutex_lock(&ready_lock);
	while (starting)
		pthread_cond_wait(&ready_cond, &ready_lock);
	pthread_mutex_unlock(&ready_lock);
}
static char owner_label[SG_ID_MAX];
static pthread_once_t owner_once = PTHREAD_ONCE_INIT;

/* Field 22 of /proc/PID/stat: start time in clock ticks since boot, which
 * tells a live process from a later one that reused its pid. */
static int proc_start_time(long pid, unsigned long long *start)
{
	char path[64], buf[1024];
	FILE *fp;
	char *p;
	int field = 2;

	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	fp = fopen(path, "re");
	if (!fp)
		return -1;
	if (!fgets(buf, sizeof(buf), fp)) {
		fclose(fp);
		return -1;
	}
	fclose(fp);
	p = strrchr(buf, ')');
	if (!p)
		return -1;
	for (p++; *p && field < 22; p++)
		if (*p == ' ')
			field++;
	if (field != 22)
		return -1;
	*start = strtoull(p, NULL, 10);
	return 0;
}

static void owner_init(void)
{
	char host[256] = "localhost";
	unsigned long long start = 0;

	gethostname(host, sizeof(host) - 1);
	proc_start_time((long)getpid(), &start);
	snprintf(owner_label, sizeof(owner_label), "%s:%ld:%llu", host, (long)getpid(), start);
}

const char *sg_machine_owner_label(void)
{
	pthread_once(&owner_once, owner_init);
	return owner_label;
}

bool sg_machine_owner_alive(const char *label)
{
	char host[256] = "";
	long pid = 0;
	unsigned long long start = 0, now_start;
	const char *mine = sg_machine_owner_label();
	size_t hlen;

	if (sscanf(label, "%255[^:]:%ld:%llu", host, &pid, &start) != 3 || pid <= 0)
		return false;
	hlen = strcspn(mine, ":");
	if (strlen(host) != hlen || strncmp(host, mine, hlen) != 0)
		return true;
	if (proc_start_time(pid, &now_start) < 0)
		return false;
	return now_start == start;
}

/* ---- registry ------------------------------------------------------------ */

static void entry_free(struct sg_entry *e)
{
	if (e->m.handle)
		e->m.backend->machine_release(&e->m);
	e->m.magic = 0;
	free(e);
}

static void entry_link(struct sg_entry *e)
{
	pthread_mutex_lock(&reg_lock);
	e->next = registry;
	registry = e;
	pthread_mutex_unlock(&reg_lock);
}

/* Called with reg_lock held. */
static void entry_unlink_locked(struct sg_entry *e)
{
	for (struct sg_entry **pp = &registry; *pp; pp = &(*pp)->next) {
		if (*pp == e) {
			*pp = e->next;
			e->refs--; /* the registry's reference */
			return;
		}
	}
}

void sg_machine_ref(struct sg_entry *e)
{
	pthread_mutex_lock(&reg_lock);
	e->refs++;
	pthread_mutex_unlock(&reg_lock);
}

void sg_machine_put(struct sg_entry *e)
{
	int left;

	if (!e)
		return;
	pthread_mutex_lock(&reg_lock);
	left = --e->refs;
	pthread_mutex_unlock(&reg_lock);
	if (left == 0)
		entry_free(e);
}

static bool shared_machine(const char *id)
{
	const char *list = sg_config_get("server", "shared_machines");
	size_t n = strlen(id);

	for (const char *p = list; p && *p;) {
		size_t len = strcspn(p, ", ");

		if (len == n && strncmp(p, id, n) == 0)
			return true;
		p += len;
		p += strspn(p, ", ");
	}
	return false;
}

static bool visible(const struct sg_entry *e, const struct sg_session *s)
{
	if (e->dead)
		return false;
	if (e->ephemeral && !e->adopted)
		return strcmp(e->session_hash, s->hash) == 0;
	if (e->adopted)
		return strncmp(s->owner, "local:", 6) == 0 && strcmp(e->owner, s->owner) == 0;
	return strcmp(e->owner, s->owner) == 0 || shared_machine(e->m.id) ||
	       (e->name[0] && shared_machine(e->name));
}

static bool adopt_persistent(bool only_if_changed);

/* Orphans of dead sandgate processes belong to no live session: they stay
 * addressable by explicit id until they expire, but no session lists them
 * as its own. */
static bool listed(const struct sg_entry *e, const struct sg_session *s)
{
	return !e->adopted && visible(e, s);
}

size_t sg_machine_list_visible(struct sg_session *s, struct sg_entry ***out)
{
	size_t n = 0, k = 0;

	wait_ready();
	adopt_persistent(true);
	pthread_mutex_lock(&reg_lock);
	for (struct sg_entry *e = registry; e; e = e->next)
		n += listed(e, s);
	*out = sg_xcalloc(n ? n : 1, sizeof(**out));
	/* The registry is newest first: fill from the back for oldest first. */
	for (struct sg_entry *e = registry; e; e = e->next) {
		if (!listed(e, s))
			continue;
		e->refs++;
		(*out)[n - 1 - k++] = e;
	}
	pthread_mutex_unlock(&reg_lock);
	return n;
}

static void (*destroy_hook)(struct sg_entry *e);

void sg_machine_set_destroy_hook(void (*fn)(struct sg_entry *e))
{
	destroy_hook = fn;
}

/* The one machine visible to s that id names, with a reference, or NULL. */
static struct sg_entry *lookup(struct sg_session *s, const char *id)
{
	struct sg_entry *found = NULL;
	size_t n = strlen(id);
	int matches = 0;

	pthread_mutex_lock(&reg_lock);
	for (struct sg_entry *e = registry; e; e = e->next) {
		if (!visible(e, s))
			continue;
		/* A persistent machine's name works wherever an id does. */
		if (strcmp(e->m.id, id) == 0 || (e->name[0] && strcmp(e->name, id) == 0)) {
			found = e;
			matches = 1;
			break;
		}
		if (n >= 8 && strncmp(e->m.id, id, n) == 0) {
			found = e;
			matches++;
		}
	}
	if (matches == 1)
		found->refs++;
	else
		found = NULL;
	pthread_mutex_unlock(&reg_lock);
	return found;
}

struct sg_entry *sg_machine_get(struct sg_session *s, const char *id, struct sg_err *err)
{
	struct sg_entry *found;

	wait_ready();
	found = lookup(s, id);
	/* Another sandgate process may have made a persistent machine. */
	if (!found && adopt_persistent(true))
		found = lookup(s, id);
	if (!found)
		sg_errf(err, SG_E_NOTFOUND,
			"sandbox_id '%s' not found: it was killed, expired, or never existed in this session; omit sandbox_id to use the default sandbox or call create_sandbox",
			id);
	return found;
}

static struct sg_entry *entry_new(struct sg_plugin *p)
{
	struct sg_entry *e = sg_xcalloc(1, sizeof(*e));

	e->m.magic = SG_MACHINE_MAGIC;
	e->m.backend = p->b;
	e->m.backend_priv = p->priv;
	e->plugin = p;
	e->refs = 1; /* the registry's */
	return e;
}

/* ---- persistent machines (core/persist.c keeps their records) ----------- */

static void persist_record(const struct sg_entry *e)
{
	json_t *rec = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:I}", "backend", e->m.backend->name,
				"id", e->m.id, "name", e->name, "owner", e->owner, "purpose", e->purpose,
				"template", e->m.template_name, "created", (json_int_t)e->created);

	if (rec)
		sg_persist_put(rec);
	json_decref(rec);
}

void sg_machine_set_purpose(struct sg_entry *e, const char *purpose)
{
	snprintf(e->purpose, sizeof(e->purpose), "%s", purpose ? purpose : "");
	if (!e->ephemeral)
		persist_record(e);
}

static const char *text_of(const json_t *o, const char *key)
{
	const char *v = json_string_value(json_object_get(o, key));

	return v ? v : "";
}

static bool registered(const char *backend, const char *id)
{
	bool found = false;

	pthread_mutex_lock(&reg_lock);
	for (struct sg_entry *e = registry; e && !found; e = e->next)
		found = !strcmp(e->m.backend->name, backend) && !strcmp(e->m.id, id);
	pthread_mutex_unlock(&reg_lock);
	return found;
}

/* Registers the persistent machines of the records file that this process
 * does not know yet (startup, or another process made one).  A machine that
 * is gone from its backend loses its record. */
static bool adopt_persistent(bool only_if_changed)
{
	bool changed, added = false;
	json_t *recs = sg_persist_load(only_if_changed, &changed), *r;
	size_t i;

	if (!recs)
		return false;
	json_array_foreach(recs, i, r) {
		const char *b = json_string_value(json_object_get(r, "backend"));
		const char *id = json_string_value(json_object_get(r, "id"));
		struct sg_plugin *p = b ? sg_plugin_find(b) : NULL;
		struct sg_entry *e;
		struct sg_err err;

		if (!p || !id || registered(b, id) || !SG_HAS(p->b, machine_attach))
			continue;
		e = entry_new(p);
		if (p->b->machine_attach(p->priv, id, NULL, &e->m, &err) < 0) {
			e->m.handle = NULL;
			entry_free(e);
			if (err.code == SG_E_NOTFOUND || err.code == SG_E_GONE)
				sg_persist_delete(b, id);
			continue;
		}
		snprintf(e->name, sizeof(e->name), "%s", text_of(r, "name"));
		snprintf(e->owner, sizeof(e->owner), "%s", text_of(r, "owner"));
		snprintf(e->purpose, sizeof(e->purpose), "%s", text_of(r, "purpose"));
		e->created = json_integer_value(json_object_get(r, "created"));
		atomic_store(&e->last_used, sg_time_s());
		entry_link(e);
		added = true;
		SG_INFO("found persistent machine %s (%.12s on %s)", e->name, e->m.id, b);
	}
	json_decref(recs);
	return added;
}

int sg_machine_create(struct sg_session *s, const char *backend,
		      const struct sg_create_req *req, struct sg_call *call,
		      struct sg_entry **out, struct sg_err *err)
{
	struct sg_plugin *p;
	struct sg_entry *e;

	wait_ready();
	if (!backend)
		backend = sg_config_get("sandbox", "default_backend");
	p = sg_plugin_find(backend);
	if (!p)
		return sg_errf(err, SG_E_INVAL,
			       "backend '%s' is not loaded: add it to [plugin] load (loaded: %s)",
			       backend, sg_config_get("plugin", "load"));
	e = entry_new(p);
	sg_err_clear(err);
	if (p->b->machine_create(p->priv, req, call, &e->m, err) < 0) {
		if (err && err->code == SG_E_OK)
			sg_errf(err, SG_E_BACKEND, "%s: create failed", backend);
		e->m.handle = NULL;
		entry_free(e);
		return -1;
	}
	snprintf(e->session_hash, sizeof(e->session_hash), "%s", s->hash);
	snprintf(e->owner, sizeof(e->owner), "%s", s->owner);
	e->ephemeral = !req->persistent;
	snprintf(e->name, sizeof(e->name), "%s", req->name ? req->name : "");
	e->lifetime_s = req->lifetime_s;
	e->created = sg_time_s();
	atomic_store(&e->last_used, e->created);
	e->last_saved = e->created;
	if (e->ephemeral)
		sg_state_put(backend, e->m.id, e->session_hash, e->created, e->lifetime_s,
			     e->created);
	e->refs++; /* the caller's */
	entry_link(e);
	if (!e->ephemeral)
		persist_record(e);
	SG_INFO("created sandbox %.12s on %s (template %s, lifetime %us, session %s)", e->m.id,
		backend, e->m.template_name, e->lifetime_s, s->hash);
	*out = e;
	return 0;
}

void sg_machine_touch(struct sg_entry *e)
{
	int64_t now = sg_time_s();

	atomic_store(&e->last_used, now);
	/* Labels cannot change: the last use lives in the state db, where the
	 * reaper writes it (sg_machine_save_touches), off the call's path. */
	if (e->lifetime_s && SG_HAS(e->m.backend, machine_keepalive)) {
		struct sg_err err;

		if (e->m.backend->machine_keepalive(&e->m, e->lifetime_s, &err) < 0)
			SG_WARN("keepalive of sandbox %.12s failed: %s", e->m.id, err.msg);
	}
}

static int destroy(struct sg_entry *e, struct sg_call *call, struct sg_err *err)
{
	if (destroy_hook)
		destroy_hook(e);
	sg_err_clear(err);
	if (e->m.backend->machine_destroy(&e->m, call, err) < 0) {
		if (err && err->code == SG_E_OK)
			sg_errf(err, SG_E_BACKEND, "destroying sandbox '%s' failed", e->m.id);
		return -1;
	}
	sg_state_delete(e->m.backend->name, e->m.id);
	if (!e->ephemeral)
		sg_persist_delete(e->m.backend->name, e->m.id);
	SG_INFO("destroyed sandbox %.12s on %s", e->m.id, e->m.backend->name);
	return 0;
}

int sg_machine_kill(struct sg_entry *e, struct sg_call *call, struct sg_err *err)
{
	int r;

	pthread_mutex_lock(&reg_lock);
	if (e->dead) {
		pthread_mutex_unlock(&reg_lock);
		sg_machine_put(e);
		return sg_errf(err, SG_E_NOTFOUND, "sandbox '%s' was already killed", e->m.id);
	}
	e->dead = true;
	entry_unlink_locked(e);
	pthread_mutex_unlock(&reg_lock);
	r = destroy(e, call, err);
	sg_machine_put(e);
	return r;
}

/* Takes every registered entry matching pred out of the registry, marks it
 * dead, and returns them as a list (each holding the registry's former
 * reference). */
static struct sg_entry *take_matching(bool (*pred)(struct sg_entry *, void *), void *ud)
{
	struct sg_entry *taken = NULL;

	pthread_mutex_lock(&reg_lock);
	for (struct sg_entry **pp = &registry; *pp;) {
		struct sg_entry *e = *pp;

		if (!e->dead && pred(e, ud)) {
			*pp = e->next;
			e->dead = true;
			e->next = taken;
			taken = e;
		} else {
			pp = &e->next;
		}
	}
	pthread_mutex_unlock(&reg_lock);
	return taken;
}

static void destroy_list(struct sg_entry *list, const char *why)
{
	while (list) {
		struct sg_entry *e = list;
		struct sg_err err;

		list = e->next;
		if (destroy(e, NULL, &err) < 0)
			SG_WARN("%s: %s", why, err.msg);
		sg_machine_put(e);
	}
}

static bool of_session(struct sg_entry *e, void *ud)
{
	const struct sg_session *s = ud;

	return e->ephemeral && !e->adopted && strcmp(e->session_hash, s->hash) == 0;
}

void sg_machine_session_end(struct sg_session *s)
{
	destroy_list(take_matching(of_session, s), "session end");
}

static bool expired(struct sg_entry *e, void *ud)
{
	int64_t now = *(int64_t *)ud;

	return e->ephemeral && e->lifetime_s &&
	       atomic_load(&e->last_used) + (int64_t)e->lifetime_s <= now;
}

void sg_machine_save_touches(void)
{
	struct touch {
		const char *backend; /* the plugin's, loaded until exit */
		char id[SG_ID_MAX];
		int64_t used;
	} *list = NULL;
	size_t n = 0, cap = 0;

	pthread_mutex_lock(&reg_lock);
	for (struct sg_entry *e = registry; e; e = e->next) {
		int64_t used = atomic_load(&e->last_used);

		if (e->dead || !e->ephemeral || used == atomic_load(&e->last_saved))
			continue;
		atomic_store(&e->last_saved, used);
		if (n == cap) {
			cap = cap ? 2 * cap : 16;
			list = sg_xrealloc(list, cap * sizeof(*list));
		}
		list[n].backend = e->m.backend->name;
		snprintf(list[n].id, sizeof(list[n].id), "%s", e->m.id);
		list[n++].used = used;
	}
	pthread_mutex_unlock(&reg_lock);
	for (size_t i = 0; i < n; i++)
		sg_state_touch(list[i].backend, list[i].id, list[i].used);
	free(list);
}

int sg_machine_reap_expired(void)
{
	int64_t now = sg_time_s();
	struct sg_entry *list = take_matching(expired, &now);
	int n = 0;

	for (struct sg_entry *e = list; e; e = e->next)
		n++;
	destroy_list(list, "expiry");
	return n;
}

static bool any(struct sg_entry *e, void *ud)
{
	(void)e;
	(void)ud;
	return true;
}

void sg_machine_release_all(void)
{
	struct sg_entry *list = take_matching(any, NULL);

	while (list) {
		struct sg_entry *e = list;

		list = e->next;
		sg_machine_put(e);
	}
}

/* ---- adoption of orphans at startup -------------------------------------- */

static void adopt_one(struct sg_plugin *p, const struct sg_machine_entry *me, const char *owner)
{
	int64_t last = me->created, now = sg_time_s();
	struct sg_entry *e;
	struct sg_err err;

	if (me->persistent || !me->owner[0] || sg_machine_owner_alive(me->owner))
		return; /* a live sandgate's, or not an ephemeral sandbox of ours */
	if (sg_state_last_used(p->b->name, me->id, &last) < 1)
		last = me->created;
	e = entry_new(p);
	if (!SG_HAS(p->b, machine_attach) ||
	    p->b->machine_attach(p->priv, me->id, NULL, &e->m, &err) < 0) {
		e->m.handle = NULL;
		entry_free(e);
		return;
	}
	if (me->lifetime_s && last + (int64_t)me->lifetime_s <= now) {
		SG_INFO("reaping expired sandbox %.12s of dead owner %s", me->id, me->owner);
		if (destroy(e, NULL, &err) < 0)
			SG_WARN("reaping sandbox %.12s failed: %s", me->id, err.msg);
		entry_free(e);
		return;
	}
	e->ephemeral = true;
	e->adopted = true;
	e->lifetime_s = me->lifetime_s ? me->lifetime_s : 300;
	e->created = me->created;
	atomic_store(&e->last_used, last);
	e->last_saved = last;
	snprintf(e->owner, sizeof(e->owner), "%s", owner);
	snprintf(e->session_hash, sizeof(e->session_hash), "%.16s", me->session_hash);
	entry_link(e);
	SG_INFO("adopted sandbox %.12s of dead owner %s until it expires", me->id, me->owner);
}

void sg_machine_adopt_orphans(void)
{
	char owner[96];

	snprintf(owner, sizeof(owner), "local:%ld", (long)getuid());
	for (struct sg_plugin *p = sg_plugin_first(); p; p = p->next) {
		struct sg_machine_entry *list = NULL;
		size_t n = 0;
		struct sg_err err;

		if (!SG_HAS(p->b, machine_list))
			continue;
		if (p->b->machine_list(p->priv, NULL, &list, &n, &err) < 0) {
			SG_DEBUG("%s: cannot list sandboxes for adoption: %s", p->b->name, err.msg);
			continue;
		}
		for (size_t i = 0; i < n; i++)
			adopt_one(p, &list[i], owner);
		free(list);
	}
	adopt_persistent(false);
}

/* ---- dispatch wrappers --------------------------------------------------- */

/* A failing slot must say why; and a machine that vanished on the backend
 * leaves the registry so no one addresses it again. */
static int slot_failed(struct sg_entry *e, struct sg_err *err, const char *op)
{
	if (err && err->code == SG_E_OK)
		sg_errf(err, SG_E_BACKEND, "%s on sandbox '%s' failed", op, e->m.id);
	if (err && err->code == SG_E_GONE) {
		pthread_mutex_lock(&reg_lock);
		if (!e->dead) {
			e->dead = true;
			entry_unlink_locked(e);
			/* The caller still holds a reference, so this is never the last. */
		}
		pthread_mutex_unlock(&reg_lock);
		sg_state_delete(e->m.backend->name, e->m.id);
	}
	return -1;
}

#define CHECK_ENTRY(e) \
	do { if (!(e) || (e)->m.magic != SG_MACHINE_MAGIC) abort(); } while (0)

int sg_m_exec(struct sg_entry *e, const struct sg_exec_req *req, struct sg_call *call,
	      struct sg_exec_result *res, struct sg_err *err)
{
	CHECK_ENTRY(e);
	sg_err_clear(err);
	sg_machine_touch(e);
	if (e->m.backend->exec(&e->m, req, call, res, err) < 0)
		return slot_failed(e, err, "exec");
	return 0;
}

int sg_m_file_read(struct sg_entry *e, const char *path, size_t max, struct sg_call *call,
		   struct sg_buf *out, struct sg_err *err)
{
	CHECK_ENTRY(e);
	sg_err_clear(err);
	sg_machine_touch(e);
	if (e->m.backend->file_read(&e->m, path, max, call, out, err) < 0)
		return slot_failed(e, err, "file read");
	return 0;
}

int sg_m_file_write(struct sg_entry *e, const char *path, const void *data, size_t len,
		    const struct sg_write_opts *opts, struct sg_call *call, struct sg_err *err)
{
	CHECK_ENTRY(e);
	sg_err_clear(err);
	sg_machine_touch(e);
	if (e->m.backend->file_write(&e->m, path, data, len, opts, call, err) < 0)
		return slot_failed(e, err, "file write");
	return 0;
}

int sg_m_file_list(struct sg_entry *e, const char *path, struct sg_call *call,
		   json_t **entries, struct sg_err *err)
{
	CHECK_ENTRY(e);
	sg_err_clear(err);
	sg_machine_touch(e);
	if (e->m.backend->file_list(&e->m, path, call, entries, err) < 0)
		return slot_failed(e, err, "file list");
	return 0;
}

int sg_m_stream_open(struct sg_entry *e, const struct sg_exec_req *req,
		     struct sg_stream **out, struct sg_err *err)
{
	const struct sg_backend *b;

	CHECK_ENTRY(e);
	b = e->m.backend;
	*out = NULL;
	if (!SG_HAS(b, stream_open) || !SG_HAS(b, stream_write) || !SG_HAS(b, stream_read) ||
	    !SG_HAS(b, stream_close))
		return sg_errf(err, SG_E_NOTSUP,
			       "backend '%s' has no interactive streams, so no persistent shell: use run_command",
			       b->name);
	sg_err_clear(err);
	sg_machine_touch(e);
	if (b->stream_open(&e->m, req, out, err) < 0)
		return slot_failed(e, err, "opening a shell");
	return 0;
}

ssize_t sg_m_stream_write(struct sg_entry *e, struct sg_stream *st, const void *p, size_t n,
			  struct sg_err *err)
{
	ssize_t r;

	CHECK_ENTRY(e);
	sg_err_clear(err);
	sg_machine_touch(e);
	r = e->m.backend->stream_write(st, p, n, err);
	if (r < 0 && err && err->code == SG_E_OK)
		sg_errf(err, SG_E_IO, "writing to a shell on sandbox '%s' failed", e->m.id);
	return r;
}

ssize_t sg_m_stream_read(struct sg_entry *e, struct sg_stream *st, void *p, size_t n,
			 int timeout_ms, struct sg_err *err)
{
	ssize_t r;

	CHECK_ENTRY(e);
	sg_err_clear(err);
	r = e->m.backend->stream_read(st, p, n, timeout_ms, err);
	if (r < 0 && err && err->code == SG_E_OK)
		sg_errf(err, SG_E_IO, "reading from a shell on sandbox '%s' failed", e->m.id);
	return r;
}

int sg_m_stream_close(struct sg_entry *e, struct sg_stream *st, int *exit_code)
{
	CHECK_ENTRY(e);
	return e->m.backend->stream_close(st, exit_code);
}

int sg_m_stream_open_status(struct sg_entry *e, const struct sg_exec_req *req, int status_fd,
			    struct sg_stream **out, struct sg_err *err)
{
	const struct sg_backend *b;

	CHECK_ENTRY(e);
	b = e->m.backend;
	*out = NULL;
	/* Without read_ch the status bytes could not be told from output. */
	if (!SG_HAS(b, stream_open_status) || !SG_HAS(b, stream_read_ch) ||
	    !SG_HAS(b, stream_write) || !SG_HAS(b, stream_close))
		return sg_errf(err, SG_E_NOTSUP, "backend '%s' has no streams with a status fd", b->name);
	sg_err_clear(err);
	sg_machine_touch(e);
	if (b->stream_open_status(&e->m, req, status_fd, out, err) < 0)
		return slot_failed(e, err, "opening a shell");
	return 0;
}

ssize_t sg_m_stream_read_ch(struct sg_entry *e, struct sg_stream *st, void *p, size_t n,
			    int timeout_ms, int *channel, struct sg_err *err)
{
	ssize_t r;

	CHECK_ENTRY(e);
	if (!SG_HAS(e->m.backend, stream_read_ch))
		return sg_errf(err, SG_E_NOTSUP, "backend '%s' has no stream channels",
			       e->m.backend->name);
	sg_err_clear(err);
	*channel = SG_STREAM_OUTPUT;
	r = e->m.backend->stream_read_ch(st, p, n, timeout_ms, channel, err);
	if (r < 0 && err && err->code == SG_E_OK)
		sg_errf(err, SG_E_IO, "reading from a shell on sandbox '%s' failed", e->m.id);
	return r;
}

int sg_m_run_code(struct sg_entry *e, const struct sg_code_req *req, struct sg_call *call,
		  struct sg_code_result *res, struct sg_err *err)
{
	CHECK_ENTRY(e);
	if (!SG_HAS(e->m.backend, run_code))
		return sg_errf(err, SG_E_NOTSUP, "backend '%s' has no native run_code",
			       e->m.backend->name);
	sg_err_clear(err);
	sg_machine_touch(e);
	if (e->m.backend->run_code(&e->m, req, call, res, err) < 0)
		return slot_failed(e, err, "run_code");
	return 0;
}

static void *start_main(void *arg)
{
	void (*fn)(void) = (void (*)(void))arg;

	fn();
	pthread_mutex_lock(&ready_lock);
	starting = false;
	pthread_cond_broadcast(&ready_cond);
	pthread_mutex_unlock(&ready_lock);
	return NULL;
}

int sg_machine_start_async(void (*fn)(void))
{
	starting = true;
	/* A function pointer through void *: POSIX guarantees the round trip. */
	if (pthread_create(&start_thread, NULL, start_main, (void *)fn) != 0) {
		starting = false;
		return -1;
	}
	start_thread_started = true;
	return 0;
}

void sg_machine_wait_ready(void)
{
	wait_ready();
}

void sg_machine_start_join(void)
{
	if (start_thread_started) {
		pthread_join(start_thread, NULL);
		start_thread_started = false;
	}
}
