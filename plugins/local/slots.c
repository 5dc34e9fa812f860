/*
 * Commands, streams and files of a local sandbox: each goes to the runner
 * in its jail through the one runner client (plugins/runner/rclient.h), so
 * paths mean what they mean to the sandbox's processes and nothing runs
 * outside the jail.  A jail whose runner died is started again (fresh, over
 * the same directory) by the next call.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/local/local.h"

#include <stdlib.h>
#include <string.h>

struct sg_stream {
	struct rnc_stream *rs;  /* owned */
};

static int check_req(const struct local_machine *lm, const struct sg_exec_req *req,
		     struct sg_err *err)
{
	if (!req || (!req->command) == (!req->argv) || (req->argv && !req->argv[0]))
		return lm->ctx->host->errf(err, SG_E_INVAL, "local: give exactly one of command "
					   "and argv (a non-empty vector)");
	for (const char *const *e = req->env; e && *e; e++)
		if ((*e)[0] == '=' || !strchr(*e, '='))
			return lm->ctx->host->errf(err, SG_E_INVAL, "local: environment entry "
						   "\"%.64s\" is not KEY=VALUE", *e);
	return 0;
}

static void cmd_of(const struct sg_machine *m, const struct sg_exec_req *req, struct rnc_cmd *c)
{
	*c = (struct rnc_cmd){ .command = req->command, .argv = req->argv, .env = req->env,
			       .cwd = req->cwd && *req->cwd ? req->cwd : m->workspace,
			       .timeout_ms = req->timeout_ms, .cap = req->output_cap };
}

int local_exec(struct sg_machine *m, const struct sg_exec_req *req, struct sg_call *call,
	       struct sg_exec_result *res, struct sg_err *err)
{
	struct local_machine *lm = local_machine_of(m, err);
	struct rnc_cmd c;

	if (!lm || check_req(lm, req, err) < 0)
		return -1;
	cmd_of(m, req, &c);
	return rnc_exec(&lm->site, &c, call, res, err); /* no site here is without its runner */
}

/* ---- streams ------------------------------------------------------------------------- */

static int open_stream(struct sg_machine *m, const struct sg_exec_req *req, int status_fd,
		       struct sg_stream **out, struct sg_err *err)
{
	struct local_machine *lm = local_machine_of(m, err);
	struct sg_stream *s;
	struct rnc_cmd c;

	*out = NULL;
	if (!lm || check_req(lm, req, err) < 0)
		return -1;
	s = calloc(1, sizeof(*s)); /* local_stream_close() */
	if (!s)
		return lm->ctx->host->errf(err, SG_E_NOMEM, "local: out of memory");
	cmd_of(m, req, &c);
	if (rnc_stream_open(&lm->site, &c, status_fd, &s->rs, err) != 0) {
		free(s);
		return -1;
	}
	*out = s;
	return 0;
}

int local_stream_open(struct sg_machine *m, const struct sg_exec_req *req, struct sg_stream **out,
		      struct sg_err *err)
{
	return open_stream(m, req, -1, out, err);
}

int local_stream_open_status(struct sg_machine *m, const struct sg_exec_req *req, int status_fd,
			     struct sg_stream **out, struct sg_err *err)
{
	struct local_machine *lm = local_machine_of(m, err);

	if (lm && (status_fd < 3 || status_fd > 9))
		return lm->ctx->host->errf(err, SG_E_INVAL, "local: the status fd must be 3..9, "
					   "not %d", status_fd);
	return open_stream(m, req, status_fd, out, err);
}

ssize_t local_stream_write(struct sg_stream *s, const void *p, size_t n, struct sg_err *err)
{
	return rnc_stream_write(s->rs, p, n, err);
}

ssize_t local_stream_read(struct sg_stream *s, void *p, size_t n, int timeout_ms,
			  struct sg_err *err)
{
	return rnc_stream_read(s->rs, p, n, timeout_ms, NULL, err);
}

ssize_t local_stream_read_ch(struct sg_stream *s, void *p, size_t n, int timeout_ms, int *channel,
			     struct sg_err *err)
{
	return rnc_stream_read(s->rs, p, n, timeout_ms, channel, err);
}

int local_stream_close(struct sg_stream *s, int *exit_code)
{
	int code = s ? rnc_stream_close(s->rs) : -1;

	if (exit_code)
		*exit_code = code;
	free(s);
	return 0;
}

/* ---- files ------------------------------------------------------------------------------ */

int local_file_read(struct sg_machine *m, const char *path, size_t max, struct sg_call *call,
		    struct sg_buf *out, struct sg_err *err)
{
	struct local_machine *lm = local_machine_of(m, err);

	return lm ? rnc_file_read(&lm->site, NULL, path, 0, max, true, call, out, err) : -1;
}

int local_file_read_at(struct sg_machine *m, const char *path, uint64_t offset, size_t len,
		       struct sg_call *call, struct sg_buf *out, uint64_t *size, struct sg_err *err)
{
	struct local_machine *lm = local_machine_of(m, err);

	return lm ? rnc_file_read_at(&lm->site, NULL, path, offset, len, call, out, size, err) : -1;
}

int local_file_write(struct sg_machine *m, const char *path, const void *data, size_t len,
		     const struct sg_write_opts *opts, struct sg_call *call, struct sg_err *err)
{
	struct local_machine *lm = local_machine_of(m, err);

	return lm ? rnc_file_write(&lm->site, NULL, path, data, len, opts ? opts->mode : 0,
				   !(opts && opts->no_mkdir), call, err) : -1;
}

int local_file_list(struct sg_machine *m, const char *path, struct sg_call *call, json_t **entries,
		    struct sg_err *err)
{
	struct local_machine *lm = local_machine_of(m, err);

	return lm ? rnc_file_list(&lm->site, NULL, path, call, entries, err) : -1;
}

int local_file_stat(struct sg_machine *m, const char *path, struct sg_call *call,
		    struct sg_stat *st, struct sg_err *err)
{
	struct local_machine *lm = local_machine_of(m, err);

	return lm ? rnc_file_stat(&lm->site, NULL, path, call, st, err) : -1;
}

int local_file_remove(struct sg_machine *m, const char *path, bool recursive,
		      struct sg_call *call, struct sg_err *err)
{
	struct local_machine *lm = local_machine_of(m, err);

	return lm ? rnc_file_remove(&lm->site, NULL, path, recursive, call, err) : -1;
}
