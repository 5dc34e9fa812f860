/*
 * The dispatch wrappers (core/registry/machine.h, sg_m_*): the only calls of
 * a plugin's exec, stream, file and code slots.  Each checks the entry,
 * maps a missing optional slot to SG_E_NOTSUP, puts the machine's
 * create-time environment in front of the request's, makes sure a failure
 * filled err, records the use (from the call's start to its end), and
 * forgets a machine the backend says is gone.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "core/base/err.h"
#include "core/base/util.h"
#include "core/registry/machine.h"

/* A failing slot must say why; and a machine that vanished on the backend
 * leaves the registry and the record so no one addresses it again. */
static int slot_failed(struct sg_entry *e, struct sg_err *err, const char *op)
{
	if (err && err->code == SG_E_OK)
		sg_errf(err, SG_E_BACKEND, "%s on sandbox '%s' failed", op, e->m.id);
	if (err && err->code == SG_E_GONE)
		sg_machine_forget(e);
	return -1;
}

#define CHECK_ENTRY(e) \
	do { if (!(e) || (e)->m.magic != SG_MACHINE_MAGIC) abort(); } while (0)

/* A slot call is a use of the machine from its start to its end: sandgate's
 * expiry leaves a machine with calls in flight alone, and its idle lifetime
 * counts from the end of its last call, so a command longer than the
 * lifetime is not cut off by its own machine's reaping.  (A backend's own
 * expiry, FC's, is pushed at both ends, as often as its keepalive
 * interval lets it.) */
void sg_machine_use_begin(struct sg_entry *e)
{
	atomic_fetch_add(&e->inflight, 1);
	sg_machine_touch(e);
}

void sg_machine_use_end(struct sg_entry *e)
{
	sg_machine_touch(e);
	atomic_fetch_sub(&e->inflight, 1);
}

/* True when "NAME=..." entry kv sets a name some entry of v sets too. */
static bool env_overridden(const char *kv, const char *const *v)
{
	size_t n = strcspn(kv, "=");

	for (; v && *v; v++)
		if (!strncmp(*v, kv, n) && (*v)[n] == '=')
			return true;
	return false;
}

/* The machine's create-time environment, then the request's, where a name
 * the request sets is not repeated from the machine's (a process sees the
 * first of two equal names).  A new vector of borrowed strings (free()
 * only the vector), or NULL when the machine has none, in which case *use
 * points at req's own. */
static const char **merged_env(const struct sg_entry *e, const char *const *own,
			       const char *const **use)
{
	size_t a = 0, b = 0, k = 0;
	const char **v;

	*use = own;
	while (e->env && e->env[a])
		a++;
	if (!a)
		return NULL;
	while (own && own[b])
		b++;
	v = sg_xcalloc(a + b + 1, sizeof(*v));
	for (size_t i = 0; i < a; i++)
		if (!env_overridden(e->env[i], own))
			v[k++] = e->env[i];
	for (size_t i = 0; i < b; i++)
		v[k++] = own[i];
	*use = v;
	return v;
}

int sg_m_exec(struct sg_entry *e, const struct sg_exec_req *req, struct sg_call *call,
	      struct sg_exec_result *res, struct sg_err *err)
{
	struct sg_exec_req r;
	const char **env;
	int rc;

	CHECK_ENTRY(e);
	r = *req;
	env = merged_env(e, req->env, &r.env);
	sg_err_clear(err);
	sg_machine_use_begin(e);
	rc = e->m.backend->exec(&e->m, &r, call, res, err);
	sg_machine_use_end(e);
	free(env);
	return rc < 0 ? slot_failed(e, err, "exec") : 0;
}

int sg_m_file_read(struct sg_entry *e, const char *path, size_t max, struct sg_call *call,
		   struct sg_buf *out, struct sg_err *err)
{
	int rc;

	CHECK_ENTRY(e);
	sg_err_clear(err);
	sg_machine_use_begin(e);
	rc = e->m.backend->file_read(&e->m, path, max, call, out, err);
	sg_machine_use_end(e);
	if (rc < 0)
		return slot_failed(e, err, "file read");
	return 0;
}

int sg_m_file_read_at(struct sg_entry *e, const char *path, uint64_t offset, size_t len,
		      struct sg_call *call, struct sg_buf *out, uint64_t *size, struct sg_err *err)
{
	int rc;

	CHECK_ENTRY(e);
	if (!SG_HAS(e->m.backend, file_read_at))
		return sg_errf(err, SG_E_NOTSUP, "backend '%s' reads files whole",
			       e->m.backend->name);
	sg_err_clear(err);
	sg_machine_use_begin(e);
	*size = 0;
	rc = e->m.backend->file_read_at(&e->m, path, offset, len, call, out, size, err);
	sg_machine_use_end(e);
	if (rc < 0)
		return err->code == SG_E_NOTSUP ? -1 : slot_failed(e, err, "file read");
	return 0;
}

int sg_m_file_write(struct sg_entry *e, const char *path, const void *data, size_t len,
		    const struct sg_write_opts *opts, struct sg_call *call, struct sg_err *err)
{
	int rc;

	CHECK_ENTRY(e);
	sg_err_clear(err);
	sg_machine_use_begin(e);
	rc = e->m.backend->file_write(&e->m, path, data, len, opts, call, err);
	sg_machine_use_end(e);
	if (rc < 0)
		return slot_failed(e, err, "file write");
	return 0;
}

int sg_m_file_list(struct sg_entry *e, const char *path, struct sg_call *call,
		   json_t **entries, struct sg_err *err)
{
	int rc;

	CHECK_ENTRY(e);
	sg_err_clear(err);
	sg_machine_use_begin(e);
	rc = e->m.backend->file_list(&e->m, path, call, entries, err);
	sg_machine_use_end(e);
	if (rc < 0)
		return slot_failed(e, err, "file list");
	return 0;
}

int sg_m_file_stat(struct sg_entry *e, const char *path, struct sg_call *call,
		   struct sg_stat *st, struct sg_err *err)
{
	int rc;

	CHECK_ENTRY(e);
	sg_err_clear(err);
	sg_machine_use_begin(e);
	rc = e->m.backend->file_stat(&e->m, path, call, st, err);
	sg_machine_use_end(e);
	if (rc < 0)
		return slot_failed(e, err, "file stat");
	return 0;
}

int sg_m_file_remove(struct sg_entry *e, const char *path, bool recursive, struct sg_call *call,
		     struct sg_err *err)
{
	int rc;

	CHECK_ENTRY(e);
	sg_err_clear(err);
	sg_machine_use_begin(e);
	rc = e->m.backend->file_remove(&e->m, path, recursive, call, err);
	sg_machine_use_end(e);
	if (rc < 0)
		return slot_failed(e, err, "file remove");
	return 0;
}

int sg_m_stream_open(struct sg_entry *e, const struct sg_exec_req *req,
		     struct sg_stream **out, struct sg_err *err)
{
	const struct sg_backend *b;
	struct sg_exec_req r;
	const char **env;
	int rc;

	CHECK_ENTRY(e);
	b = e->m.backend;
	*out = NULL;
	if (!b->stream_open)
		return sg_errf(err, SG_E_NOTSUP,
			       "backend '%s' has no interactive streams, so no persistent shell: use run_command",
			       b->name);
	r = *req;
	env = merged_env(e, req->env, &r.env);
	sg_err_clear(err);
	sg_machine_use_begin(e);
	rc = b->stream_open(&e->m, &r, out, err);
	sg_machine_use_end(e);
	free(env);
	return rc < 0 ? slot_failed(e, err, "opening a shell") : 0;
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
	struct sg_exec_req r;
	const char **env;
	int rc;

	CHECK_ENTRY(e);
	b = e->m.backend;
	*out = NULL;
	if (!b->stream_open_status)
		return sg_errf(err, SG_E_NOTSUP, "backend '%s' has no streams with a status fd", b->name);
	r = *req;
	env = merged_env(e, req->env, &r.env);
	sg_err_clear(err);
	sg_machine_use_begin(e);
	rc = b->stream_open_status(&e->m, &r, status_fd, out, err);
	sg_machine_use_end(e);
	free(env);
	return rc < 0 ? slot_failed(e, err, "opening a shell") : 0;
}

ssize_t sg_m_stream_read_ch(struct sg_entry *e, struct sg_stream *st, void *p, size_t n,
			    int timeout_ms, int *channel, struct sg_err *err)
{
	ssize_t r;

	CHECK_ENTRY(e);
	if (!e->m.backend->stream_read_ch)
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
	struct sg_code_req r;
	const char **env;
	int rc;

	CHECK_ENTRY(e);
	if (!e->m.backend->run_code)
		return sg_errf(err, SG_E_NOTSUP, "backend '%s' has no native run_code",
			       e->m.backend->name);
	r = *req;
	env = merged_env(e, req->env, &r.env);
	sg_err_clear(err);
	sg_machine_use_begin(e);
	rc = e->m.backend->run_code(&e->m, &r, call, res, err);
	sg_machine_use_end(e);
	free(env);
	return rc < 0 ? slot_failed(e, err, "run_code") : 0;
}
