#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/base/err.h"

int sg_verrf(struct sg_err *err, int code, const char *fmt, va_list ap)
{
	int saved = errno;

	if (err) {
		err->code = code;
		err->sys_errno = saved;
		vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	}
	errno = saved;
	return -1;
}

int sg_errf(struct sg_err *err, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	sg_verrf(err, code, fmt, ap);
	va_end(ap);
	return -1;
}

void sg_err_prefix(struct sg_err *err, const char *prefix)
{
	char tmp[SG_ERR_MSG_MAX];

	if (!err)
		return;
	snprintf(tmp, sizeof(tmp), "%s%s", prefix, err->msg);
	memcpy(err->msg, tmp, sizeof(tmp));
}

void sg_err_clear(struct sg_err *err)
{
	if (err) {
		err->code = SG_E_OK;
		err->sys_errno = 0;
		err->msg[0] = '\0';
	}
}

const char *sg_errc_name(int code)
{
	static const char *const names[] = {
		[SG_E_OK] = "ok", [SG_E_INVAL] = "invalid", [SG_E_NOMEM] = "no_memory",
		[SG_E_NOTSUP] = "not_supported", [SG_E_NOTFOUND] = "not_found",
		[SG_E_TIMEOUT] = "timeout", [SG_E_IO] = "io", [SG_E_BACKEND] = "backend",
		[SG_E_PROTO] = "protocol", [SG_E_PERM] = "permission",
		[SG_E_CANCELLED] = "cancelled", [SG_E_TOOBIG] = "too_big",
		[SG_E_BUSY] = "busy", [SG_E_EXISTS] = "exists",
		[SG_E_UNAVAILABLE] = "unavailable", [SG_E_GONE] = "gone",
		[SG_E_INTERNAL] = "internal",
	};

	if (code < 0 || (size_t)code >= sizeof(names) / sizeof(names[0]) || !names[code])
		return "unknown";
	return names[code];
}
