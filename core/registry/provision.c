/* [default_machine]: see provision.h. */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/protocol/call.h"
#include "core/base/conf.h"
#include "core/base/err.h"
#include "core/base/log.h"
#include "core/registry/machine.h"
#include "core/registry/plugin.h"
#include "core/registry/provision.h"
#include "core/protocol/session.h"
#include "core/base/util.h"

#define PROBE_TIMEOUT_MS 60000

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char default_id[SG_ID_MAX]; /* guarded by lock; "" until provisioned */

/* The startup session sends nothing: there is no client yet. */
static void quiet_send(void *ctx, struct sg_call *call, const char *data, size_t len, bool final)
{
	(void)ctx;
	(void)call;
	(void)data;
	(void)len;
	(void)final;
}

static const struct sg_transport_ops quiet_ops = { .name = "startup", .send = quiet_send };

/* The machine must run a command: a container whose command exited, a
 * target that does not answer, is no default machine. */
static int probe(struct sg_entry *e, struct sg_call *call, struct sg_err *err)
{
	const char *argv[] = { "true", NULL };
	struct sg_exec_req req = { .argv = argv, .timeout_ms = PROBE_TIMEOUT_MS };
	struct sg_exec_result res = { 0 };
	int rc = sg_m_exec(e, &req, call, &res, err);

	if (rc == 0 && res.timed_out)
		rc = sg_errf(err, SG_E_TIMEOUT, "it does not run commands: 'true' did not finish within %d s",
			     PROBE_TIMEOUT_MS / 1000);
	else if (rc == 0 && res.exit_code != 0)
		rc = sg_errf(err, SG_E_BACKEND, "it does not run commands: 'true' exited with %d", res.exit_code);
	else if (rc < 0)
		sg_err_prefix(err, "it does not run commands: ");
	sg_buf_release(&res.out);
	sg_buf_release(&res.err);
	return rc;
}

/* Finds the machine `name` of session s, or makes it on `backend`. */
static struct sg_entry *find_or_make(struct sg_session *s, struct sg_call *call, const char *name,
				     const char *backend, const char *purpose, bool *made,
				     struct sg_err *err)
{
	struct sg_create_req req = { .name = name };
	struct sg_err gerr = { 0 };
	struct sg_entry *e = sg_machine_get(s, name, &gerr);

	*made = false;
	if (e) {
		SG_INFO("default machine '%s' found (%s on %s): adopted, not made again", name, e->m.id,
			e->m.backend->name);
		return e;
	}
	if (gerr.code != SG_E_NOTFOUND) {
		*err = gerr;
		return NULL;
	}
	if (sg_machine_create_persistent(s, backend, &req, purpose, call, &e, err) < 0)
		return NULL;
	SG_INFO("default machine '%s' made (%s on %s)", name, e->m.id, e->m.backend->name);
	*made = true;
	return e;
}

int sg_default_machine_provision(void)
{
	const char *name = sg_config_get("default_machine", "name");
	const char *backend = sg_config_get("default_machine", "backend");
	const char *purpose = sg_config_get("default_machine", "purpose");
	struct sg_session *s;
	struct sg_call *call;
	struct sg_entry *e;
	struct sg_err err = { 0 }, kerr;
	char owner[64];
	bool made;
	json_t *id;
	int rc = -1;

	if (!sg_config_bool("default_machine", "enabled", false))
		return 0;
	if (!name || !*name)
		name = "admin";
	if (sg_plugin_ready(&err) < 0) {
		SG_ERROR("cannot provision the default machine '%s': %s", name, err.msg);
		return -1;
	}
	snprintf(owner, sizeof(owner), "local:%ld", (long)getuid());
	s = sg_session_new(&quiet_ops, NULL, owner);
	id = json_integer(0);
	call = sg_call_new(s, id, NULL, "startup");
	json_decref(id);
	e = find_or_make(s, call, name, backend && *backend ? backend : NULL, purpose, &made, &err);
	if (e && backend && *backend && strcmp(e->m.backend->name, backend))
		sg_errf(&err, SG_E_EXISTS, "a machine named '%s' exists on backend '%s', not '%s': remove it, or set [default_machine] backend = %s",
			name, e->m.backend->name, backend, e->m.backend->name);
	else if (e && probe(e, call, &err) == 0)
		rc = 0;
	if (rc == 0) {
		pthread_mutex_lock(&lock);
		snprintf(default_id, sizeof(default_id), "%s", e->m.id);
		pthread_mutex_unlock(&lock);
	} else {
		SG_ERROR("cannot provision the default machine '%s' ([default_machine] enabled): %s; the server does not start",
			 name, err.msg[0] ? err.msg : "unknown error");
		/* What this start made and cannot use goes again: a fixed
		 * configuration starts afresh. */
		if (e && made && sg_machine_kill(e, call, &kerr) < 0)
			SG_WARN("removing the unusable default machine '%s' failed: %s", name, kerr.msg);
		if (made)
			e = NULL; /* sg_machine_kill took the reference */
	}
	sg_machine_put(e);
	sg_call_free(call);
	sg_session_close(s, 0);
	sg_session_unref(s);
	return rc;
}

bool sg_default_machine_id(char *out)
{
	bool have;

	pthread_mutex_lock(&lock);
	have = default_id[0] != '\0';
	if (have)
		memcpy(out, default_id, sizeof(default_id));
	pthread_mutex_unlock(&lock);
	return have;
}

bool sg_default_machine_is(const char *id)
{
	bool is;

	pthread_mutex_lock(&lock);
	is = default_id[0] && id && !strcmp(id, default_id);
	pthread_mutex_unlock(&lock);
	return is;
}
