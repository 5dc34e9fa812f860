/* Quotas per credential (core/base/quota.h). */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/conf.h"
#include "core/base/quota.h"
#include "core/base/util.h"

/* One row per credential holding something; few credentials (the tokens
 * of one server), so a list.  A row whose counts all fall to 0 is freed:
 * the list holds only the credentials in use.  Everything under lock. */
struct cred_use {
	struct cred_use *next;
	char owner[96];
	char hash[17];
	int n[SG_QUOTA_KINDS];
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct cred_use *creds;
static uint64_t generation;

static const struct {
	const char *key, *what, *plural, *fix;
} kinds[SG_QUOTA_KINDS] = {
	[SG_QUOTA_SESSIONS] = { "quota_sessions", "session", "sessions",
				"end one (HTTP DELETE, or let one idle out) or raise the key" },
	[SG_QUOTA_CALLS] = { "quota_calls", "calls-in-flight", "calls",
			     "wait for one to finish or cancel one (notifications/cancelled), or raise the key" },
	[SG_QUOTA_SANDBOXES] = { "quota_sandboxes", "sandbox", "sandboxes",
				 "kill_sandbox one (or sandbox_env machine_remove) or raise the key" },
	[SG_QUOTA_SHELLS] = { "quota_shells", "shell", "shells",
			      "remove one (sandbox_env shell_remove) or raise the key" },
};

const char *sg_quota_key(enum sg_quota_kind k)
{
	return kinds[k].key;
}

/* Called with lock held. */
static struct cred_use *find_locked(const char *owner, bool make)
{
	struct cred_use *c;
	char hex[65];

	for (c = creds; c; c = c->next)
		if (!strcmp(c->owner, owner))
			return c;
	if (!make)
		return NULL;
	c = sg_xcalloc(1, sizeof(*c));
	snprintf(c->owner, sizeof(c->owner), "%s", owner);
	/* the same prefix as the session's cred_hash (session.c) */
	sg_sha256_hex(c->owner, strlen(c->owner), hex);
	memcpy(c->hash, hex, 16);
	c->next = creds;
	creds = c;
	return c;
}

/* Called with lock held: frees c when it holds nothing. */
static void drop_if_idle_locked(struct cred_use *c)
{
	for (int k = 0; k < SG_QUOTA_KINDS; k++)
		if (c->n[k])
			return;
	for (struct cred_use **pp = &creds; *pp; pp = &(*pp)->next) {
		if (*pp == c) {
			*pp = c->next;
			free(c);
			return;
		}
	}
}

static atomic_bool enforced;

void sg_quota_enforce(bool on)
{
	atomic_store(&enforced, on);
}

int sg_quota_take(const char *owner, enum sg_quota_kind k, struct sg_err *err)
{
	/* read outside the lock: the configuration is fixed once serving */
	long long max = atomic_load(&enforced) ? sg_config_int("server", kinds[k].key, 0) : 0;
	struct cred_use *c;
	int held;

	pthread_mutex_lock(&lock);
	c = find_locked(owner, true);
	held = c->n[k];
	if (max > 0 && held >= max) {
		drop_if_idle_locked(c);
		pthread_mutex_unlock(&lock);
		return sg_errf(err, SG_E_BUSY, "credential at its %s quota (%d of %lld, [server] %s): %s",
			       kinds[k].what, held, max, kinds[k].key, kinds[k].fix);
	}
	c->n[k]++;
	generation++;
	pthread_mutex_unlock(&lock);
	return 0;
}

void sg_quota_give(const char *owner, enum sg_quota_kind k)
{
	struct cred_use *c;

	pthread_mutex_lock(&lock);
	c = find_locked(owner, false);
	if (c && c->n[k] > 0) {
		c->n[k]--;
		generation++;
		drop_if_idle_locked(c);
	}
	pthread_mutex_unlock(&lock);
}

int sg_quota_count(const char *owner, enum sg_quota_kind k)
{
	struct cred_use *c;
	int n;

	pthread_mutex_lock(&lock);
	c = find_locked(owner, false);
	n = c ? c->n[k] : 0;
	pthread_mutex_unlock(&lock);
	return n;
}

uint64_t sg_quota_generation(void)
{
	uint64_t g;

	pthread_mutex_lock(&lock);
	g = generation;
	pthread_mutex_unlock(&lock);
	return g;
}

json_t *sg_quota_usage(void)
{
	json_t *arr = json_array();

	pthread_mutex_lock(&lock);
	for (struct cred_use *c = creds; c; c = c->next) {
		json_t *o = json_pack("{s:s}", "credential", c->hash);

		for (int k = 0; k < SG_QUOTA_KINDS; k++)
			json_object_set_new(o, kinds[k].plural, json_integer(c->n[k]));
		json_array_append_new(arr, o);
	}
	pthread_mutex_unlock(&lock);
	return arr;
}
