/* A minimal host API for test programs: see fakehost.h. */
#include "config.h"

#include "t/lib/fakehost.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void fakehost_log(enum sg_log_level level, const char *plugin, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "[%s] %d: ", plugin, (int)level);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int fakehost_errf(struct sg_err *err, int code, const char *fmt, ...)
{
	va_list ap;

	if (!err)
		return -1;
	err->code = code;
	err->sys_errno = 0;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	return -1;
}

void fakehost_config_each(const char *section, const char *prefix,
			  void (*fn)(const char *, const char *, void *), void *ud)
{
	(void)section, (void)prefix, (void)fn, (void)ud;
}

bool fakehost_cancelled(const struct sg_call *c)
{
	(void)c;
	return false;
}

int fakehost_cancel_fd(const struct sg_call *c)
{
	(void)c;
	return -1;
}

void fakehost_progress(struct sg_call *c, double p, double t, const char *m)
{
	(void)c, (void)p, (void)t, (void)m;
}

void fakehost_notify(struct sg_call *c, enum sg_log_level l, const char *fmt, ...)
{
	(void)c, (void)l, (void)fmt;
}

static int n_test, n_failed;

void fakehost_ok(int cond, const char *fmt, ...)
{
	va_list ap;

	printf("%s %d - ", cond ? "ok" : "not ok", ++n_test);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
	if (!cond)
		n_failed++;
}

/* The strings of the machines a test binds (the core keeps them in its
 * registry entry; here a small table), freed by fakehost_done(). */
#define FH_MACHINES 64

static struct fh_machine {
	const struct sg_machine *m;
	char *str[4];
	json_t *kept;
} fh_machines[FH_MACHINES];

static struct fh_machine *fh_slot(const struct sg_machine *m, bool add)
{
	for (int i = 0; i < FH_MACHINES; i++)
		if (fh_machines[i].m == m)
			return &fh_machines[i];
	for (int i = 0; add && i < FH_MACHINES; i++) {
		if (!fh_machines[i].m) {
			fh_machines[i].m = m;
			return &fh_machines[i];
		}
	}
	if (add) {
		fprintf(stderr, "fakehost: more than %d machines\n", FH_MACHINES);
		abort();
	}
	return NULL;
}

static void fh_clear(struct fh_machine *f)
{
	for (int i = 0; i < 4; i++)
		free(f->str[i]);
	json_decref(f->kept);
	memset(f, 0, sizeof(*f));
}

static void fh_point(struct sg_machine *m, struct fh_machine *f)
{
	m->id = f && f->str[SG_MACHINE_ID] ? f->str[SG_MACHINE_ID] : "";
	m->workspace = f && f->str[SG_MACHINE_WORKSPACE] ? f->str[SG_MACHINE_WORKSPACE] : "";
	m->url = f && f->str[SG_MACHINE_URL] ? f->str[SG_MACHINE_URL] : "";
	m->template_name = f && f->str[SG_MACHINE_TEMPLATE] ? f->str[SG_MACHINE_TEMPLATE] : "";
}

int fakehost_machine_set(struct sg_machine *m, enum sg_machine_field field, const char *fmt, ...)
{
	struct fh_machine *f = fh_slot(m, true);
	va_list ap;
	char *v;

	if ((unsigned)field > SG_MACHINE_TEMPLATE)
		return -1;
	va_start(ap, fmt);
	if (vasprintf(&v, fmt, ap) < 0)
		abort();
	va_end(ap);
	free(f->str[field]);
	f->str[field] = v;
	fh_point(m, f);
	return 0;
}

int fakehost_machine_keep(struct sg_machine *m, const json_t *data)
{
	struct fh_machine *f = fh_slot(m, true);

	if (!json_is_object(data))
		return -1;
	json_decref(f->kept);
	f->kept = json_deep_copy(data);
	return 0;
}

const json_t *fakehost_kept(const struct sg_machine *m)
{
	struct fh_machine *f = fh_slot(m, false);

	return f ? f->kept : NULL;
}

int fakehost_machine_create(struct sg_call *call, const struct sg_backend *self,
			    const struct sg_create_req *req, const char *purpose, json_t **result,
			    struct sg_err *err)
{
	(void)call, (void)self, (void)req, (void)purpose, (void)result;
	return fakehost_errf(err, SG_E_NOTSUP, "fakehost: no machine registry");
}

int fakehost_machine_remove(struct sg_call *call, struct sg_machine *m, struct sg_err *err)
{
	(void)call, (void)m;
	return fakehost_errf(err, SG_E_NOTSUP, "fakehost: no machine registry");
}

void fakehost_shells_close(struct sg_machine *m)
{
	(void)m;
}

static json_t *last_report; /* freed by fakehost_done() */

int fakehost_machine_report(struct sg_machine *m, const json_t *facts)
{
	(void)m;
	if (!json_is_object(facts))
		return -1;
	json_decref(last_report);
	last_report = json_deep_copy(facts);
	return 0;
}

const json_t *fakehost_report(void)
{
	return last_report;
}

const char *fakehost_call_credential(const struct sg_call *call)
{
	(void)call;
	return "0123456789abcdef";
}

int fakehost_done(void)
{
	for (int i = 0; i < FH_MACHINES; i++)
		if (fh_machines[i].m)
			fh_clear(&fh_machines[i]);
	json_decref(last_report);
	last_report = NULL;
	printf("1..%d\n", n_test);
	return n_failed ? 1 : 0;
}

void fakehost_machine(struct sg_machine *m, const struct sg_backend *b, void *priv)
{
	struct fh_machine *f = fh_slot(m, false);

	if (f)
		fh_clear(f);
	memset(m, 0, sizeof(*m));
	m->magic = SG_MACHINE_MAGIC;
	m->backend = b;
	m->backend_priv = priv;
	m->name = "";
	fh_point(m, NULL);
}
