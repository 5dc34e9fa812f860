/* Errors: the one convention (0 / -1 plus a caller-owned struct sg_err). */
#ifndef SG_CORE_ERR_H
#define SG_CORE_ERR_H

#include <sandgate/plugin.h>

/* Fills err (may be NULL) with code and a formatted message.  Keeps errno.
 * Returns -1 always. */
int sg_errf(struct sg_err *err, int code, const char *fmt, ...) SG_PRINTF(3, 4);

/* Same as sg_errf() with a va_list. */
int sg_verrf(struct sg_err *err, int code, const char *fmt, va_list ap) SG_PRINTF(3, 0);

/* Puts "prefix" before err's message ("backend: " + msg), for context. */
void sg_err_prefix(struct sg_err *err, const char *prefix);

/* Clears err to SG_E_OK and an empty message. */
void sg_err_clear(struct sg_err *err);

/* A short stable name for a code ("not_found"), for logs and audit rows. */
const char *sg_errc_name(int code);

#endif
