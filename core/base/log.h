/* Logging to stderr (or a file).  Never stdout: over stdio that is the
 * protocol channel.  Checks the level before formatting. */
#ifndef SG_CORE_LOG_H
#define SG_CORE_LOG_H

#include <stdarg.h>

#include <sandgate/plugin.h>

/* Sets the threshold; messages below it cost one comparison. */
void sg_log_set_level(enum sg_log_level level);
enum sg_log_level sg_log_get_level(void);

/* Parses "debug".."emergency" (MCP names; "warn" is accepted for warning).
 * Returns the level or -1. */
int sg_log_level_parse(const char *name);
/* The MCP name of a level. */
const char *sg_log_level_name(enum sg_log_level level);

/* Sends subsequent lines to `path` (appended) instead of stderr; a file it
 * creates is mode 0600.  Returns 0 or -1 with errno. */
int sg_log_open_file(const char *path);

/* Writes one line "sandgate[pid]: level: [tag] message" when level passes. */
void sg_log(enum sg_log_level level, const char *tag, const char *fmt, ...)
	SG_PRINTF(3, 4);
void sg_vlog(enum sg_log_level level, const char *tag, const char *fmt, va_list ap)
	SG_PRINTF(3, 0);

#define SG_DEBUG(...) sg_log(SG_LOG_DEBUG, NULL, __VA_ARGS__)
#define SG_INFO(...)  sg_log(SG_LOG_INFO, NULL, __VA_ARGS__)
#define SG_WARN(...)  sg_log(SG_LOG_WARNING, NULL, __VA_ARGS__)
#define SG_ERROR(...) sg_log(SG_LOG_ERROR, NULL, __VA_ARGS__)

#endif
