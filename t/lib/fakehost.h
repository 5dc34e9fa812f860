/*
 * A minimal host API (struct sg_host_api) for test programs that drive a
 * plugin without the daemon: errors filled in, buffers on malloc, nothing
 * cancelled, progress and notifications dropped; byte buffers are the
 * core's (core/base/buf.c).  Each test brings its own
 * config_get and state_dir (and log, when fakehost_log's plain stderr lines
 * do not suit it):
 *
 *	static const struct sg_host_api host =
 *		FAKEHOST_API(fakehost_log, h_config_get, h_state_dir);
 */
#ifndef SG_T_FAKEHOST_H
#define SG_T_FAKEHOST_H

#include <stdbool.h>
#include <stddef.h>

#include <sandgate/plugin.h>

#include "core/base/buf.h"

/* "[plugin] level: message" on stderr. */
void fakehost_log(enum sg_log_level level, const char *plugin, const char *fmt, ...)
	SG_PRINTF(3, 4);
int fakehost_errf(struct sg_err *err, int code, const char *fmt, ...) SG_PRINTF(3, 4);
/* No sections have keys to list. */
void fakehost_config_each(const char *section, const char *prefix,
			  void (*fn)(const char *, const char *, void *), void *ud);
bool fakehost_cancelled(const struct sg_call *c);
int fakehost_cancel_fd(const struct sg_call *c);
void fakehost_progress(struct sg_call *c, double p, double t, const char *m);
void fakehost_notify(struct sg_call *c, enum sg_log_level l, const char *fmt, ...)
	SG_PRINTF(3, 4);

/* The machine strings and kept JSON of machines bound with
 * fakehost_machine() (freed by fakehost_done()); no machine registry. */
int fakehost_machine_set(struct sg_machine *m, enum sg_machine_field field, const char *fmt, ...)
	SG_PRINTF(3, 4);
int fakehost_machine_keep(struct sg_machine *m, const json_t *data);
/* What the plugin kept for m, or NULL.  Borrowed. */
const json_t *fakehost_kept(const struct sg_machine *m);
int fakehost_machine_create(struct sg_call *call, const struct sg_backend *self,
			    const struct sg_create_req *req, const char *purpose, json_t **result,
			    struct sg_err *err);
int fakehost_machine_remove(struct sg_call *call, struct sg_machine *m, struct sg_err *err);
void fakehost_shells_close(struct sg_machine *m);
/* Keeps the facts of the last report (fakehost_report() returns them). */
int fakehost_machine_report(struct sg_machine *m, const json_t *facts);
/* The facts last reported for any machine, or NULL.  Borrowed. */
const json_t *fakehost_report(void);
/* "0123456789abcdef" for any call. */
const char *fakehost_call_credential(const struct sg_call *call);

/* Prints one TAP line, "ok N - ..." or "not ok N - ...". */
void fakehost_ok(int cond, const char *fmt, ...) SG_PRINTF(2, 3);
/* Prints the TAP plan ("1..N", at the end); returns the exit status: 1
 * when a line was "not ok", else 0. */
int fakehost_done(void);
/* Zeroes m (every string "") and binds it to backend b and its init()
 * state priv, as the core does before machine_create or machine_attach. */
void fakehost_machine(struct sg_machine *m, const struct sg_backend *b, void *priv);

#define FAKEHOST_API(log_fn, config_get_fn, state_dir_fn) { \
	.size = sizeof(struct sg_host_api), .minor = SG_PLUGIN_ABI_MINOR, \
	.log = (log_fn), .errf = fakehost_errf, .config_get = (config_get_fn), \
	.config_each = fakehost_config_each, .buf_append = sg_buf_append, \
	.buf_release = sg_buf_release, .cancelled = fakehost_cancelled, \
	.cancel_fd = fakehost_cancel_fd, .progress = fakehost_progress, \
	.notify = fakehost_notify, .state_dir = (state_dir_fn), \
	.machine_set = fakehost_machine_set, .machine_keep = fakehost_machine_keep, \
	.machine_create = fakehost_machine_create, .machine_remove = fakehost_machine_remove, \
	.shells_close = fakehost_shells_close, .call_credential = fakehost_call_credential, \
	.machine_report = fakehost_machine_report, \
}

#endif /* SG_T_FAKEHOST_H */
