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

int fakehost_done(void)
{
	printf("1..%d\n", n_test);
	return n_failed ? 1 : 0;
}

void fakehost_machine(struct sg_machine *m, const struct sg_backend *b, void *priv)
{
	memset(m, 0, sizeof(*m));
	m->magic = SG_MACHINE_MAGIC;
	m->backend = b;
	m->backend_priv = priv;
}
