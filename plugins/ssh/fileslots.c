/*
 * ssh.so's file slots.  Each tries, in order, the runner (inside the jail,
 * or kept to the sandbox directory by the runner itself: rnc_file_*'s
 * root), SFTP (confined on the remote side), and exec with stdin where the
 * host refused the sftp subsystem (sftp_x.c).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/ssh/ssh.h"
#include "plugins/ssh/sftp_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An absolute path: relative ones are under the workspace.  *own is what
 * the caller frees. */
static const char *ssh_abs(const struct sg_machine *m, const char *path, char **own)
{
	*own = NULL;
	if (path && path[0] == '/')
		return path;
	if (!path || !*path)
		return m->workspace;
	if (asprintf(own, "%s/%s", m->workspace, path) < 0) {
		*own = NULL;
		return NULL;
	}
	return *own;
}

/* The machine's handle and the absolute path for a slot. */
static int ssh_slot_path(struct sg_machine *m, const char *path, struct ssh_machine **sm,
			 const char **full, char **own, struct sg_err *err)
{
	*sm = ssh_machine_of(m, err);
	if (!*sm)
		return -1;
	*full = ssh_abs(m, path, own);
	if (!*full)
		return (*sm)->ctx->host->errf(err, SG_E_NOMEM, "ssh: out of memory");
	return 0;
}

int ssh_file_read(struct sg_machine *m, const char *path, size_t max, struct sg_call *call,
		  struct sg_buf *out, struct sg_err *err)
{
	struct ssh_machine *sm;
	struct ssh_read_args ra = { .out = out };
	char *own = NULL;
	int rc;

	if (ssh_slot_path(m, path, &sm, &ra.path, &own, err) < 0)
		return -1;
	ra.max = max && max < sm->ctx->file_cap ? max : sm->ctx->file_cap;
	/* The runner when it is up (kept to the directory by it off a jail), else SFTP. */
	rc = rnc_file_read(ssh_site_of(sm), ssh_runner_root(sm, call), ra.path, 0, ra.max, true,
			   call, out, err);
	if (rc > 0 && (rc = ssh_confine(sm, ra.path, false, call, err)) == 0)
		rc = ssh_sftp_skip(sm->pool, ssh_sftp_with(sm->pool, call, ssh_read_fn, &ra, err), err);
	if (rc > 0)
		rc = ssh_x_read(sm->pool, ra.path, ra.max, call, out, err);
	free(own);
	return rc;
}

/* Through the runner only (confined as ssh_file_read confines it); over SFTP
 * or exec the file is read whole. */
int ssh_file_read_at(struct sg_machine *m, const char *path, uint64_t offset, size_t len,
		     struct sg_call *call, struct sg_buf *out, uint64_t *size, struct sg_err *err)
{
	struct ssh_machine *sm;
	const char *p;
	char *own = NULL;
	int rc;

	if (ssh_slot_path(m, path, &sm, &p, &own, err) < 0)
		return -1;
	if (len > sm->ctx->file_cap)
		len = sm->ctx->file_cap;
	rc = rnc_file_read_at(ssh_site_of(sm), ssh_runner_root(sm, call), p, offset, len, call, out,
			      size, err);
	if (rc > 0)
		rc = sm->ctx->host->errf(err, SG_E_NOTSUP, "%s: no runner: the file is read whole", p);
	free(own);
	return rc;
}

/* A write through the runner (kept to the directory by it off a jail): as
 * rnc_file_write, 1 when the runner cannot serve. */
static int ssh_write_runner(struct ssh_machine *sm, const struct ssh_write_args *wa,
			    struct sg_err *err)
{
	const struct sg_write_opts *o = wa->opts;

	return rnc_file_write(ssh_site_of(sm), ssh_runner_root(sm, wa->call), wa->path, wa->data,
			      wa->len, o ? o->mode : 0, !(o && o->no_mkdir), wa->call, err);
}

int ssh_file_write(struct sg_machine *m, const char *path, const void *data, size_t len,
		   const struct sg_write_opts *opts, struct sg_call *call, struct sg_err *err)
{
	struct ssh_machine *sm;
	struct ssh_write_args wa = { .data = data, .len = len, .opts = opts, .call = call };
	char *own = NULL;
	int rc;

	if (ssh_slot_path(m, path, &sm, &wa.path, &own, err) < 0)
		return -1;
	/* The runner first: one round trip and an atomic rename over the old
	 * file, where SFTP takes a dozen and replaces a file by exec'ing mv
	 * (SFTP v3's rename does not overwrite).  A runner killed with its
	 * connection leaves its temporary file; the site's next operation
	 * has the new runner sweep it (rfiles.c).  Without a runner SFTP,
	 * and without the sftp subsystem exec. */
	if (len > sm->ctx->file_cap)
		rc = sm->ctx->host->errf(err, SG_E_TOOBIG, "%zu bytes are more than [ssh] file_cap (%zu)",
					 len, sm->ctx->file_cap);
	else
		rc = ssh_write_runner(sm, &wa, err);
	if (rc > 0 && (rc = ssh_confine(sm, wa.path, true, call, err)) == 0)
		rc = ssh_sftp_skip(sm->pool, ssh_sftp_with(sm->pool, call, ssh_write_fn, &wa, err), err);
	if (rc > 0)
		rc = ssh_x_write(sm->pool, wa.path, data, len, opts ? opts->mode : 0,
				 !(opts && opts->no_mkdir), call, err);
	free(own);
	return rc;
}

int ssh_sftp_put(struct ssh_pool *p, const char *path, const void *data, size_t len,
		 unsigned mode, struct sg_err *err)
{
	struct sg_write_opts wo = { .mode = mode, .no_mkdir = true };
	struct ssh_write_args wa = { .path = path, .data = data, .len = len, .opts = &wo };
	int rc = ssh_sftp_skip(p, ssh_sftp_with(p, NULL, ssh_write_fn, &wa, err), err);

	return rc > 0 ? ssh_x_write(p, path, data, len, mode, false, NULL, err) : rc;
}

int ssh_file_list(struct sg_machine *m, const char *path, struct sg_call *call, json_t **entries,
		  struct sg_err *err)
{
	struct ssh_machine *sm;
	struct ssh_list_args la = { .arr = NULL };
	char *own = NULL;
	int rc;

	*entries = NULL;
	if (ssh_slot_path(m, path, &sm, &la.path, &own, err) < 0)
		return -1;
	rc = rnc_file_list(ssh_site_of(sm), ssh_runner_root(sm, call), la.path, call, entries, err);
	if (rc <= 0) {
		free(own);
		return rc;
	}
	if ((rc = ssh_confine(sm, la.path, false, call, err)) == 0)
		rc = ssh_sftp_skip(sm->pool, ssh_sftp_with(sm->pool, call, ssh_list_fn, &la, err), err);
	if (rc == 0)
		*entries = la.arr;
	else if (rc > 0)
		rc = ssh_x_list(sm->pool, la.path, call, entries, err);
	free(own);
	return rc;
}

int ssh_file_stat(struct sg_machine *m, const char *path, struct sg_call *call, struct sg_stat *st,
		  struct sg_err *err)
{
	struct ssh_machine *sm;
	struct ssh_path_args pa = { .st = st };
	char *own = NULL;
	int rc;

	if (ssh_slot_path(m, path, &sm, &pa.path, &own, err) < 0)
		return -1;
	rc = rnc_file_stat(ssh_site_of(sm), ssh_runner_root(sm, call), pa.path, call, st, err);
	if (rc > 0 && (rc = ssh_confine(sm, pa.path, true, call, err)) == 0)
		rc = ssh_sftp_skip(sm->pool, ssh_sftp_with(sm->pool, call, ssh_stat_fn, &pa, err), err);
	if (rc > 0)
		rc = ssh_x_stat(sm->pool, pa.path, call, st, err);
	free(own);
	return rc;
}

int ssh_file_remove(struct sg_machine *m, const char *path, bool recursive, struct sg_call *call,
		    struct sg_err *err)
{
	struct ssh_machine *sm;
	struct ssh_path_args pa = { .flag = recursive };
	char *own = NULL;
	int rc;

	if (ssh_slot_path(m, path, &sm, &pa.path, &own, err) < 0)
		return -1;
	if (!sm->jail && strcmp(pa.path, "/") == 0)
		rc = sm->ctx->host->errf(err, SG_E_PERM, "refusing to remove '/'");
	else
		rc = rnc_file_remove(ssh_site_of(sm), ssh_runner_root(sm, call), pa.path, recursive,
				     call, err);
	if (rc <= 0) {
		/* done, or refused */
	} else if ((rc = ssh_confine(sm, pa.path, true, call, err)) < 0) {
		/* outside the directory: refused */
	} else if (recursive) {
		const char *argv[] = { "rm", "-rf", "--", pa.path, NULL };

		rc = ssh_script(sm->pool, argv, call, "rm -rf", err);
	} else if ((rc = ssh_sftp_skip(sm->pool, ssh_sftp_with(sm->pool, call, ssh_remove_fn, &pa,
								err), err)) > 0) {
		rc = ssh_x_remove(sm->pool, pa.path, false, call, err);
	}
	free(own);
	return rc;
}
