/*
 * The machine registry (core/registry/machine.h): the machines this process
 * holds, their owner labels and visibility, lookup by id, name or prefix
 * (adopting from the record), create, kill, session end, and the host API's
 * machine entries.  What outlived its use (expiry, orphans of sandgates that
 * are gone, the startup sweep) is in sweep.c; the wrappers of a plugin's
 * exec, stream, file and code slots in dispatch.c.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/protocol/call.h"
#include "core/base/conf.h"
#include "core/base/err.h"
#include "core/base/log.h"
#include "core/base/quota.h"
#include "core/registry/machine.h"
#include "core/registry/machine_internal.h"
#include "core/registry/plugin.h"
#include "core/registry/provision.h"
#include "core/registry/record.h"
#include "core/protocol/session.h"
#include "core/base/util.h"

static struct sg_entry *registry;
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- owner labels ---------------------------------------------------------- */

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

static struct sg_entry *entry_new(struct sg_plugin *p)
{
	struct sg_entry *e = sg_xcalloc(1, sizeof(*e));

	for (int i = 0; i < 4; i++)
		e->str[i] = sg_xstrdup("");
	e->m.magic = SG_MACHINE_MAGIC;
	e->m.backend = p->b;
	e->m.backend_priv = p->priv;
	e->m.id = e->str[SG_MACHINE_ID];
	e->m.workspace = e->str[SG_MACHINE_WORKSPACE];
	e->m.url = e->str[SG_MACHINE_URL];
	e->m.template_name = e->str[SG_MACHINE_TEMPLATE];
	e->m.name = e->name;
	e->plugin = p;
	e->refs = 1; /* the registry's */
	return e;
}

static void entry_free(struct sg_entry *e)
{
	if (e->bound)
		e->m.backend->machine_release(&e->m);
	e->m.magic = 0;
	for (int i = 0; i < 4; i++)
		free(e->str[i]);
	sg_strv_free(e->env);
	json_decref(e->kept);
	json_decref(e->report);
	free(e);
}

static void entry_link(struct sg_entry *e)
{
	pthread_mutex_lock(&reg_lock);
	e->next = registry;
	registry = e;
	pthread_mutex_unlock(&reg_lock);
}

/* Out of the registry, a machine is no longer its credential's: every way
 * out (kill, session end, expiry, the lost-record sweep) gives its quota
 * back here, once.  Called with reg_lock held. */
static void quota_release_locked(struct sg_entry *e)
{
	if (e->quota_held)
		sg_quota_give(e->cred, SG_QUOTA_SANDBOXES);
	e->quota_held = false;
}

/* Called with reg_lock held. */
static void entry_unlink_locked(struct sg_entry *e)
{
	for (struct sg_entry **pp = &registry; *pp; pp = &(*pp)->next) {
		if (*pp == e) {
			*pp = e->next;
			e->refs--; /* the registry's reference */
			quota_release_locked(e);
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

const char *sg_machine_label(const struct sg_entry *e)
{
	return e->name[0] ? e->name : e->m.id;
}

/* A whole item of the comma-separated [server] shared_machines, or the
 * default machine provisioned at startup. */
static bool shared_machine(const char *id)
{
	const char *list = sg_config_get("server", "shared_machines");
	size_t n = strlen(id);

	if (!n)
		return false;
	if (sg_default_machine_is(id))
		return true;
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
		return strcmp(e->cred, s->owner) == 0;
	return strcmp(e->cred, s->owner) == 0 || shared_machine(e->m.id) ||
	       (e->name[0] && shared_machine(e->name));
}

bool sg_machine_visible(const struct sg_entry *e, const struct sg_session *s)
{
	bool v;

	pthread_mutex_lock(&reg_lock);
	v = visible(e, s);
	pthread_mutex_unlock(&reg_lock);
	return v;
}

/* Whether key is the id of a machine in the registry, whoever's. */
static bool id_in_use(const char *key)
{
	bool found = false;

	pthread_mutex_lock(&reg_lock);
	for (struct sg_entry *e = registry; e && !found; e = e->next)
		found = strcmp(e->m.id, key) == 0;
	pthread_mutex_unlock(&reg_lock);
	return found;
}

/* Orphans of dead sandgate processes belong to no live session: they stay
 * addressable by explicit id until they expire, but no session lists them
 * as its own. */
static bool listed(const struct sg_entry *e, const struct sg_session *s)
{
	return !e->adopted && visible(e, s);
}

static void (*shells_hook)(struct sg_entry *e);

void sg_machine_init(void)
{
	sg_session_set_end_hook(sg_machine_session_end);
}

void sg_machine_set_shells_hook(void (*fn)(struct sg_entry *e))
{
	shells_hook = fn;
}

/* The machines visible to s that key names (id, name, or an id prefix of 8
 * characters or more), with a reference each when exactly one does.
 * Returns the number of matches. */
static int lookup(struct sg_session *s, const char *key, struct sg_entry **out)
{
	struct sg_entry *found = NULL;
	size_t n = strlen(key);
	int matches = 0;

	pthread_mutex_lock(&reg_lock);
	for (struct sg_entry *e = registry; e; e = e->next) {
		if (!visible(e, s))
			continue;
		/* A persistent machine's name works wherever an id does. */
		if (strcmp(e->m.id, key) == 0 || (e->name[0] && strcmp(e->name, key) == 0)) {
			found = e;
			matches = 1;
			break;
		}
		if (n >= 8 && strncmp(e->m.id, key, n) == 0) {
			found = e;
			matches++;
		}
	}
	if (matches == 1)
		found->refs++;
	pthread_mutex_unlock(&reg_lock);
	*out = matches == 1 ? found : NULL;
	return matches;
}

bool sg_mreg_registered(const char *backend, const char *id)
{
	bool found = false;

	pthread_mutex_lock(&reg_lock);
	for (struct sg_entry *e = registry; e && !found; e = e->next)
		found = !strcmp(e->m.backend->name, backend) && !strcmp(e->m.id, id);
	pthread_mutex_unlock(&reg_lock);
	return found;
}

/* ---- the record ---------------------------------------------------------------- */

static void record_of(const struct sg_entry *e, struct sg_record *r)
{
	memset(r, 0, sizeof(*r));
	r->backend = (char *)e->m.backend->name;
	r->id = (char *)e->m.id;
	r->name = (char *)e->name;
	r->persistent = !e->ephemeral;
	r->owner = (char *)sg_machine_owner_label();
	r->session_hash = (char *)e->session_hash;
	r->credential = (char *)e->cred;
	r->template_name = (char *)e->m.template_name;
	r->workspace = (char *)e->m.workspace;
	r->url = (char *)e->m.url;
	r->purpose = (char *)e->purpose;
	r->created = e->created;
	r->lifetime_s = e->lifetime_s;
	r->last_used = atomic_load(&e->last_used);
	r->env = e->env;
	r->data = e->kept;
}

static int record_write(const struct sg_entry *e)
{
	struct sg_record r;

	record_of(e, &r);
	return sg_record_put(&r);
}

bool sg_machine_recorded(const struct sg_entry *e)
{
	return sg_record_exists(e->m.backend->name, e->m.id);
}

static char **strv_copy(const char *const *v)
{
	size_t n = 0;
	char **c;

	while (v && v[n])
		n++;
	if (!n)
		return NULL;
	c = sg_xcalloc(n + 1, sizeof(*c));
	for (size_t i = 0; i < n; i++)
		c[i] = sg_xstrdup(v[i]);
	return c;
}

/* A failing slot must say why. */
static void explain(struct sg_err *err, const char *what, const struct sg_entry *e)
{
	if (err && err->code == SG_E_OK)
		sg_errf(err, SG_E_BACKEND, "%s: %s failed", e->m.backend->name, what);
}

static bool has_id(const struct sg_entry *e, struct sg_err *err)
{
	if (e->m.id[0] && e->m.workspace[0])
		return true;
	sg_errf(err, SG_E_PROTO, "plugin '%s' made a machine without %s: a plugin bug (see doc/plugin-abi.md)",
		e->m.backend->name, e->m.id[0] ? "a workspace" : "an id");
	return false;
}

/* Binds the machine of record r with machine_attach: a new entry, linked
 * into the registry.  An ephemeral one becomes an adopted orphan of this
 * process.  A machine gone from its backend loses its record.  Returns the
 * entry with a reference for the caller, or NULL with err. */
struct sg_entry *sg_mreg_attach_record(const struct sg_record *r, struct sg_err *err)
{
	struct sg_plugin *p = sg_plugin_find(r->backend);
	struct sg_entry *e;

	if (!p) {
		sg_errf(err, SG_E_UNAVAILABLE,
			"machine '%s' is on backend '%s', which is not loaded: add it to [plugin] load or the plugin path",
			r->id, r->backend);
		return NULL;
	}
	e = entry_new(p);
	snprintf(e->name, sizeof(e->name), "%s", r->name);
	e->env = strv_copy((const char *const *)r->env);
	e->kept = r->data ? json_deep_copy(r->data) : NULL;
	sg_err_clear(err);
	e->bound = p->b->machine_attach(p->priv, r->id, r->data, NULL, &e->m, err) == 0;
	if (!e->bound || !has_id(e, err)) {
		explain(err, "attach", e);
		if (err && (err->code == SG_E_NOTFOUND || err->code == SG_E_GONE))
			sg_record_delete(r->backend, r->id);
		entry_free(e);
		return NULL;
	}
	snprintf(e->cred, sizeof(e->cred), "%s", r->credential);
	snprintf(e->purpose, sizeof(e->purpose), "%s", r->purpose);
	snprintf(e->session_hash, sizeof(e->session_hash), "%.16s", r->session_hash);
	e->ephemeral = !r->persistent;
	e->adopted = !r->persistent;
	e->lifetime_s = r->lifetime_s ? r->lifetime_s : (r->persistent ? 0 : 300);
	e->created = r->created;
	atomic_store(&e->last_used, r->last_used ? r->last_used : sg_time_s());
	atomic_store(&e->last_saved, atomic_load(&e->last_used));
	if (e->adopted)
		sg_record_set_owner(r->backend, r->id, sg_machine_owner_label());
	e->refs++; /* the caller's */
	entry_link(e);
	SG_INFO("%s machine %s on %s%s%s", e->adopted ? "adopted the orphaned" : "found the persistent",
		e->m.id, r->backend, e->name[0] ? " named " : "", e->name);
	return e;
}

static bool expired_record(const struct sg_record *r, int64_t now)
{
	return !r->persistent && r->lifetime_s && r->last_used + (int64_t)r->lifetime_s <= now;
}

/* Whether session s may reach the machine of record r by an explicit id.
 * Not registered here; so an ephemeral one is another process's. */
static bool reachable(const struct sg_record *r, const struct sg_session *s)
{
	if (r->persistent)
		return !strcmp(r->credential, s->owner) || shared_machine(r->id) ||
		       (r->name[0] && shared_machine(r->name));
	if (sg_machine_owner_alive(r->owner))
		return false; /* a live sandgate's own sandbox */
	return !strcmp(r->credential, s->owner);
}

/* The machine key names in the record, bound for s.  NULL with err when
 * there is none that s may reach. */
static struct sg_entry *from_record(struct sg_session *s, const char *key, struct sg_err *err)
{
	struct sg_record **v, *pick = NULL;
	size_t n = sg_record_find(key, &v);
	int64_t now = sg_time_s();
	struct sg_entry *e = NULL;
	int matches = 0;

	for (size_t i = 0; i < n; i++) {
		if (sg_mreg_registered(v[i]->backend, v[i]->id) || !reachable(v[i], s))
			continue;
		if (expired_record(v[i], now)) {
			sg_mreg_reap_record(v[i]);
			continue;
		}
		pick = v[i];
		matches++;
	}
	if (matches > 1)
		sg_errf(err, SG_E_INVAL, "'%s' matches %d machines: give more of the id", key, matches);
	else if (pick)
		e = sg_mreg_attach_record(pick, err);
	sg_record_free_all(v, n);
	return e;
}

struct sg_entry *sg_machine_get(struct sg_session *s, const char *id, struct sg_err *err)
{
	struct sg_entry *found = NULL;
	struct sg_err rerr = { 0 };
	int n;

	n = lookup(s, id, &found);
	if (n > 1) {
		sg_errf(err, SG_E_INVAL, "'%s' matches %d machines: give more of the id", id, n);
		return NULL;
	}
	if (!found)
		found = from_record(s, id, &rerr);
	if (found)
		return found;
	if (rerr.code == SG_E_INVAL || rerr.code == SG_E_UNAVAILABLE)
		sg_errf(err, rerr.code, "%s", rerr.msg);
	else
		sg_errf(err, SG_E_NOTFOUND,
			"sandbox_id '%s' not found: it was killed, expired, or never existed in this session; omit sandbox_id to use the default sandbox or call create_sandbox",
			id);
	return NULL;
}

/* Binds the persistent machines of s's credential that another process
 * made (or an earlier run of this one), so they are listed. */
static void bind_persistent(struct sg_session *s)
{
	struct sg_record **v;
	size_t n = sg_record_persistent(s->owner, &v);

	for (size_t i = 0; i < n; i++) {
		struct sg_err err;
		struct sg_entry *e;

		if (sg_mreg_registered(v[i]->backend, v[i]->id))
			continue;
		e = sg_mreg_attach_record(v[i], &err);
		if (e)
			sg_machine_put(e);
		else
			SG_DEBUG("persistent machine %s on %s: %s", v[i]->id, v[i]->backend, err.msg);
	}
	sg_record_free_all(v, n);
}

size_t sg_machine_list_visible(struct sg_session *s, struct sg_entry ***out)
{
	size_t n = 0, k = 0;

	bind_persistent(s);
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

void sg_machine_set_purpose(struct sg_entry *e, const char *purpose)
{
	snprintf(e->purpose, sizeof(e->purpose), "%s", purpose ? purpose : "");
	sg_record_set_purpose(e->m.backend->name, e->m.id, e->purpose);
}

/* ---- create ------------------------------------------------------------------ */

int sg_machine_create(struct sg_session *s, const char *backend,
		      const struct sg_create_req *req, struct sg_call *call,
		      struct sg_entry **out, struct sg_err *err)
{
	struct sg_plugin *p;
	struct sg_entry *e;

	p = backend ? sg_plugin_find(backend) : sg_plugin_default(err);
	if (!p) {
		if (backend) {
			char *names = sg_plugin_names();

			sg_errf(err, SG_E_INVAL, "backend '%s' is not loaded: use one of %s, or add its plugin to [plugin] load",
				backend, names);
			free(names);
		}
		return -1;
	}
	/* Counted before the backend makes it: concurrent creations of one
	 * credential cannot pass the quota together. */
	if (sg_quota_take(s->owner, SG_QUOTA_SANDBOXES, err) < 0)
		return -1;
	e = entry_new(p);
	snprintf(e->name, sizeof(e->name), "%s", req->name ? req->name : "");
	sg_err_clear(err);
	e->bound = p->b->machine_create(p->priv, req, call, &e->m, err) == 0;
	if (!e->bound || !has_id(e, err)) {
		explain(err, "create", e);
		entry_free(e);
		sg_quota_give(s->owner, SG_QUOTA_SANDBOXES);
		return -1;
	}
	snprintf(e->session_hash, sizeof(e->session_hash), "%s", s->hash);
	snprintf(e->cred, sizeof(e->cred), "%s", s->owner);
	e->quota_held = true;
	e->ephemeral = !req->persistent;
	e->lifetime_s = req->persistent ? 0 : req->lifetime_s;
	e->env = strv_copy(req->env);
	e->created = sg_time_s();
	atomic_store(&e->last_used, e->created);
	atomic_store(&e->last_saved, e->created);
	if (record_write(e) < 0)
		SG_WARN("sandbox %s on %s has no record: only this process can reach it", e->m.id,
			p->b->name);
	e->refs++; /* the caller's */
	entry_link(e);
	SG_INFO("created %s %s on %s (template %s, lifetime %us, session %s)",
		e->ephemeral ? "sandbox" : "persistent machine", e->m.id, p->b->name,
		e->m.template_name, e->lifetime_s, s->hash);
	*out = e;
	return 0;
}

/* Machine names double as container names and ids in messages. */
static bool valid_name(const char *n)
{
	if (!n || !*n || strlen(n) > 63)
		return false;
	for (const char *c = n; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
		      *c == '-' || *c == '_' || *c == '.'))
			return false;
	return true;
}

int sg_machine_create_persistent(struct sg_session *s, const char *backend,
				 const struct sg_create_req *req, const char *purpose,
				 struct sg_call *call, struct sg_entry **out,
				 struct sg_err *err)
{
	struct sg_create_req r = *req;
	struct sg_entry *e;

	if (!valid_name(req->name))
		return sg_errf(err, SG_E_INVAL,
			       "name '%.64s' is not valid: use 1 to 63 letters, digits, '-', '_' or '.'",
			       req->name ? req->name : "");
	e = sg_machine_get(s, req->name, NULL);
	if (e) {
		sg_machine_put(e);
		return sg_errf(err, SG_E_EXISTS,
			       "a machine named '%s' exists already: use it, or remove it first", req->name);
	}
	/* A name works wherever an id does: one that is another machine's id
	 * would stand for that machine in lookups by id. */
	if (id_in_use(req->name))
		return sg_errf(err, SG_E_EXISTS,
			       "name '%s' is a machine's id: choose another name", req->name);
	r.owner = sg_machine_owner_label();
	r.session_hash = s->hash;
	r.persistent = true;
	if (sg_machine_create(s, backend, &r, call, &e, err) < 0)
		return -1;
	sg_machine_set_purpose(e, purpose);
	*out = e;
	return 0;
}

json_t *sg_machine_summary(const struct sg_entry *e)
{
	return json_pack("{s:s, s:s, s:s, s:s, s:s}", "name", e->name, "status", "running", "backend",
			 e->m.backend->name, "sandbox_id", e->m.id, "workspace", e->m.workspace);
}

void sg_machine_touch(struct sg_entry *e)
{
	int64_t now = sg_time_s();

	atomic_store(&e->last_used, now);
	/* The last use lives in the record, where the reaper writes it
	 * (sg_machine_save_touches), off the call's path. */
	if (e->lifetime_s && e->m.backend->machine_keepalive) {
		struct sg_err err;

		if (e->m.backend->machine_keepalive(&e->m, e->lifetime_s, &err) < 0)
			SG_WARN("keepalive of sandbox %s failed: %s", e->m.id, err.msg);
	}
}

/* ---- destroy ------------------------------------------------------------------ */

int sg_mreg_destroy(struct sg_entry *e, struct sg_call *call, struct sg_err *err)
{
	if (shells_hook)
		shells_hook(e);
	sg_err_clear(err);
	if (e->m.backend->machine_destroy(&e->m, call, err) < 0) {
		explain(err, "destroy", e);
		return -1;
	}
	sg_record_delete(e->m.backend->name, e->m.id);
	SG_INFO("destroyed sandbox %s on %s", e->m.id, e->m.backend->name);
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
	r = sg_mreg_destroy(e, call, err);
	sg_machine_put(e);
	return r;
}

int sg_machine_kill_by(struct sg_session *s, struct sg_entry *e, const char *label,
		       struct sg_call *call, struct sg_err *err)
{
	if (s && strcmp(e->cred, s->owner) != 0) {
		sg_machine_put(e);
		return sg_errf(err, SG_E_PERM,
			       "machine '%s' is shared with you but was made by another credential: you may use it, "
			       "not remove it; its owner (or the operator, through [server] shared_machines) decides",
			       label);
	}
	return sg_machine_kill(e, call, err);
}

/* Takes every registered entry matching pred out of the registry, marks it
 * dead, and returns them as a list (each holding the registry's former
 * reference). */
struct sg_entry *sg_mreg_take_matching(bool (*pred)(struct sg_entry *, void *), void *ud)
{
	struct sg_entry *taken = NULL;

	pthread_mutex_lock(&reg_lock);
	for (struct sg_entry **pp = &registry; *pp;) {
		struct sg_entry *e = *pp;

		if (!e->dead && pred(e, ud)) {
			*pp = e->next;
			quota_release_locked(e);
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

void sg_mreg_destroy_list(struct sg_entry *list, const char *why)
{
	while (list) {
		struct sg_entry *e = list;
		struct sg_err err;

		list = e->next;
		if (sg_mreg_destroy(e, NULL, &err) < 0)
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
	sg_mreg_destroy_list(sg_mreg_take_matching(of_session, s), "session end");
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

		if (e->dead || used == atomic_load(&e->last_saved))
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
		sg_record_touch(list[i].backend, list[i].id, list[i].used);
	free(list);
}

static bool any(struct sg_entry *e, void *ud)
{
	(void)e;
	(void)ud;
	return true;
}

void sg_machine_release_all(void)
{
	struct sg_entry *list = sg_mreg_take_matching(any, NULL);

	while (list) {
		struct sg_entry *e = list;

		list = e->next;
		sg_machine_put(e);
	}
}

/* ---- host API ------------------------------------------------------------------ */

static struct sg_entry *entry_of(struct sg_machine *m)
{
	/* m is the first member of its entry. */
	if (!m || m->magic != SG_MACHINE_MAGIC)
		abort();
	return (struct sg_entry *)m;
}

int sg_machine_host_set(struct sg_machine *m, enum sg_machine_field field, const char *fmt, ...)
{
	struct sg_entry *e = entry_of(m);
	size_t max = field == SG_MACHINE_ID ? SG_ID_MAX - 1 : SG_MACHINE_FIELD_MAX;
	va_list ap;
	char *v;
	int n;

	if ((unsigned)field > SG_MACHINE_TEMPLATE) {
		errno = EINVAL;
		return -1;
	}
	va_start(ap, fmt);
	n = vasprintf(&v, fmt, ap);
	va_end(ap);
	if (n < 0)
		abort();
	if ((size_t)n > max) {
		free(v);
		errno = E2BIG;
		return -1;
	}
	for (const char *c = v; *c; c++) {
		if ((unsigned char)*c < 0x20 || *c == 0x7f) {
			free(v);
			errno = EINVAL;
			return -1;
		}
	}
	if (field == SG_MACHINE_ID && !*v) {
		free(v);
		errno = EINVAL;
		return -1;
	}
	free(e->str[field]);
	e->str[field] = v;
	e->m.id = e->str[SG_MACHINE_ID];
	e->m.workspace = e->str[SG_MACHINE_WORKSPACE];
	e->m.url = e->str[SG_MACHINE_URL];
	e->m.template_name = e->str[SG_MACHINE_TEMPLATE];
	return 0;
}

int sg_machine_host_keep(struct sg_machine *m, const json_t *data)
{
	struct sg_entry *e = entry_of(m);

	if (!json_is_object(data))
		return -1;
	json_decref(e->kept);
	e->kept = json_deep_copy(data);
	/* In create the record is written after the slot returns; in attach
	 * (or later) it exists already. */
	if (e->m.id[0] && sg_record_exists(e->m.backend->name, e->m.id))
		return sg_record_set_data(e->m.backend->name, e->m.id, data);
	return 0;
}

int sg_machine_host_report(struct sg_machine *m, const json_t *facts)
{
	struct sg_entry *e = entry_of(m);

	if (!json_is_object(facts))
		return -1;
	json_decref(e->report);
	e->report = json_deep_copy(facts);
	return e->report ? 0 : -1;
}

int sg_machine_host_create(struct sg_call *call, const struct sg_backend *self,
			   const struct sg_create_req *req, const char *purpose, json_t **result,
			   struct sg_err *err)
{
	struct sg_entry *e;

	if (!call || !call->session || !self || !self->name)
		return sg_errf(err, SG_E_INVAL, "host machine_create needs the action's call and the plugin's descriptor");
	if (sg_machine_create_persistent(call->session, self->name, req, purpose, call, &e, err) < 0)
		return -1;
	*result = sg_machine_summary(e);
	sg_machine_put(e);
	return 0;
}

int sg_machine_host_remove(struct sg_call *call, struct sg_machine *m, struct sg_err *err)
{
	struct sg_entry *e = entry_of(m);
	char id[SG_ID_MAX];

	snprintf(id, sizeof(id), "%s", e->m.id);
	sg_machine_ref(e); /* sg_machine_kill consumes one; the handler's stays */
	if (sg_machine_kill_by(call ? call->session : NULL, e, sg_machine_label(e), call, err) < 0)
		return -1;
	if (call && call->session)
		sg_session_default_clear(call->session, id);
	return 0;
}

void sg_machine_host_shells_close(struct sg_machine *m)
{
	if (shells_hook)
		shells_hook(entry_of(m));
}

json_t *sg_machine_host_list(struct sg_call *call, const struct sg_backend *self)
{
	struct sg_session *s = call ? call->session : NULL;
	struct sg_record **v;
	json_t *out;
	size_t n;

	if (!s || !self || !self->name)
		return NULL;
	out = json_array();
	n = sg_record_persistent(NULL, &v);
	for (size_t i = 0; i < n; i++) {
		const struct sg_record *r = v[i];

		if (strcmp(r->backend, self->name) || !reachable(r, s))
			continue;
		json_array_append_new(out, json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:b}", "name", r->name,
						     "id", r->id, "purpose", r->purpose, "template",
						     r->template_name, "workspace", r->workspace, "created",
						     (json_int_t)r->created, "shared", strcmp(r->credential, s->owner) != 0));
	}
	sg_record_free_all(v, n);
	return out;
}

/* ---- gone machines ------------------------------------------------------------ */

void sg_mreg_unlink_dead(struct sg_entry *e)
{
	pthread_mutex_lock(&reg_lock);
	if (!e->dead) {
		e->dead = true;
		entry_unlink_locked(e);
	}
	pthread_mutex_unlock(&reg_lock);
}

void sg_machine_forget(struct sg_entry *e)
{
	/* The caller still holds a reference, so the unlink never drops the last. */
	sg_mreg_unlink_dead(e);
	sg_record_delete(e->m.backend->name, e->m.id);
}
