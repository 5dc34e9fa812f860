/*
 * What outlived its use, for the machine registry (core/registry/machine.h):
 * ephemeral machines past their expiry, those this process holds and the
 * recorded ones of sandgate processes that are gone (the reaper calls
 * sg_machine_reap_expired once a second), and at a server's startup the
 * machines a backend lists whose record was lost, swept on a thread of
 * their own.  The registry itself is machine.c.
 */
#include "config.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/base/err.h"
#include "core/base/log.h"
#include "core/base/util.h"
#include "core/registry/machine.h"
#include "core/registry/machine_internal.h"
#include "core/registry/plugin.h"
#include "core/registry/record.h"

/* ---- expiry -------------------------------------------------------------------- */

/* Destroys the machine of an expired record whose sandgate is gone. */
void sg_mreg_reap_record(const struct sg_record *r)
{
	struct sg_err err;
	struct sg_entry *e = sg_mreg_attach_record(r, &err);

	if (!e)
		return;
	sg_mreg_unlink_dead(e);
	SG_INFO("reaping the expired sandbox %s of a sandgate that is gone", e->m.id);
	if (sg_mreg_destroy(e, NULL, &err) < 0)
		SG_WARN("reaping sandbox %s failed: %s", e->m.id, err.msg);
	sg_machine_put(e);
}

static bool expired(struct sg_entry *e, void *ud)
{
	int64_t now = *(int64_t *)ud;

	return e->ephemeral && e->lifetime_s && atomic_load(&e->inflight) == 0 &&
	       atomic_load(&e->last_used) + (int64_t)e->lifetime_s <= now;
}

/* Expired records of sandgate processes that are gone: nobody else will
 * remove those machines. */
static int reap_records(int64_t now)
{
	struct sg_record **v;
	size_t n = sg_record_expired(now, &v);
	int reaped = 0;

	for (size_t i = 0; i < n; i++) {
		if (sg_mreg_registered(v[i]->backend, v[i]->id) || sg_machine_owner_alive(v[i]->owner))
			continue;
		sg_mreg_reap_record(v[i]);
		reaped++;
	}
	sg_record_free_all(v, n);
	return reaped;
}

int sg_machine_reap_expired(void)
{
	static int64_t records_checked;
	int64_t now = sg_time_s();
	struct sg_entry *list = sg_mreg_take_matching(expired, &now);
	int n = 0;

	for (struct sg_entry *e = list; e; e = e->next)
		n++;
	sg_mreg_destroy_list(list, "expiry");
	/* The record is shared with other processes: a query every few
	 * seconds is enough for lifetimes counted in minutes. */
	if (now - records_checked >= 2) {
		records_checked = now;
		n += reap_records(now);
	}
	return n;
}

/* ---- machines whose record was lost -------------------------------------------- */

/* A machine the backend tagged with the owner tag of a sandgate that is
 * gone, and that no record names, can be reached by nobody once its
 * lifetime passed: remove it.  Not before: another sandgate with another
 * state directory (another user) may share the backend and have it in its
 * own record. */
static void sweep_one(struct sg_plugin *p, const json_t *m, int64_t now)
{
	const char *id = json_string_value(json_object_get(m, "id"));
	const char *owner = json_string_value(json_object_get(m, "owner"));
	json_int_t created = json_integer_value(json_object_get(m, "created"));
	json_int_t life = json_integer_value(json_object_get(m, "lifetime"));
	struct sg_record r = { 0 };
	struct sg_entry *e;
	struct sg_err err;

	if (!id || !*id || !owner || !*owner || created <= 0 || life <= 0 || created + life > now ||
	    json_is_true(json_object_get(m, "persistent")) || sg_machine_owner_alive(owner) ||
	    sg_record_exists(p->b->name, id) || sg_mreg_registered(p->b->name, id))
		return;
	r.backend = (char *)p->b->name;
	r.id = (char *)id;
	r.name = r.session_hash = r.credential = r.purpose = r.owner = (char *)"";
	e = sg_mreg_attach_record(&r, &err);
	if (!e)
		return;
	sg_mreg_unlink_dead(e);
	SG_INFO("removing sandbox %s on %s: its sandgate (%s) is gone, its lifetime passed and it has no record",
		id, p->b->name, owner);
	if (sg_mreg_destroy(e, NULL, &err) < 0)
		SG_WARN("removing sandbox %s failed: %s", id, err.msg);
	sg_machine_put(e);
}

void sg_machine_sweep_lost(void)
{
	for (struct sg_plugin *p = sg_plugin_first(); p; p = p->next) {
		json_t *list = NULL, *m;
		struct sg_err err;
		size_t i;

		if (p->b->machine_list(p->priv, NULL, &list, &err) < 0) {
			SG_DEBUG("%s: cannot list machines: %s", p->b->name, err.msg);
			continue;
		}
		json_array_foreach(list, i, m)
			sweep_one(p, m, sg_time_s());
		json_decref(list);
	}
	reap_records(sg_time_s());
}

/* ---- startup ------------------------------------------------------------------ */

static pthread_t sweep_thread;
static bool sweep_started;

static void *sweep_main(void *arg)
{
	(void)arg;
	sg_machine_sweep_lost();
	return NULL;
}

/* sweep_thread and sweep_started: a stop that ends the process at once
 * (the signal thread, the watchdog) may reap while main joins. */
static pthread_mutex_t sweep_lock = PTHREAD_MUTEX_INITIALIZER;

int sg_machine_sweep_async(void)
{
	bool started;

	pthread_mutex_lock(&sweep_lock);
	started = sweep_started = pthread_create(&sweep_thread, NULL, sweep_main, NULL) == 0;
	pthread_mutex_unlock(&sweep_lock);
	return started ? 0 : -1;
}

void sg_machine_sweep_reap(void)
{
	if (pthread_mutex_trylock(&sweep_lock) != 0)
		return; /* main is joining it */
	if (sweep_started && pthread_tryjoin_np(sweep_thread, NULL) == 0)
		sweep_started = false;
	pthread_mutex_unlock(&sweep_lock);
}

void sg_machine_sweep_join(void)
{
	pthread_mutex_lock(&sweep_lock);
	if (sweep_started) {
		pthread_join(sweep_thread, NULL);
		sweep_started = false;
	}
	pthread_mutex_unlock(&sweep_lock);
}
