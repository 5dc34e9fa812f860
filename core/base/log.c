#include "config.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/base/log.h"
#include "core/base/util.h"

/* Read on every log call from any thread, set by the startup thread. */
static atomic_int log_level = SG_LOG_INFO;
static FILE *log_fp; /* NULL: stderr */
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *const level_names[] = {
	"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency",
};

void sg_log_set_level(enum sg_log_level level) { atomic_store_explicit(&log_level, (int)level, memory_order_relaxed); }

enum sg_log_level sg_log_get_level(void)
{
	return (enum sg_log_level)atomic_load_explicit(&log_level, memory_order_relaxed);
}

int sg_log_level_parse(const char *name)
{
	if (!name)
		return -1;
	for (int i = 0; i < 8; i++)
		if (strcasecmp(name, level_names[i]) == 0)
			return i;
	if (strcasecmp(name, "warn") == 0)
		return SG_LOG_WARNING;
	return -1;
}

const char *sg_log_level_name(enum sg_log_level level)
{
	return (unsigned)level < 8 ? level_names[level] : "info";
}

int sg_log_open_file(const char *path)
{
	/* Made 0600: the log holds commands and, with an empty [audit]
	 * log_path, the audit rows.  A file that exists keeps its mode (the
	 * operator chose it), with a warning when others may read it. */
	int fd = sg_file_open_private(path, O_WRONLY | O_APPEND, false);
	struct stat st;
	FILE *fp;

	if (fd < 0)
		return -1;
	fp = fdopen(fd, "a");
	if (!fp) {
		close(fd);
		return -1;
	}
	if (fstat(fd, &st) == 0 && (st.st_mode & 044))
		fprintf(fp, "sandgate: warning: the log file %s is readable by group or others (mode %04o) and holds commands: run chmod 600 on it\n",
			path, (unsigned)(st.st_mode & 07777));
	setvbuf(fp, NULL, _IOLBF, 0);
	pthread_mutex_lock(&log_lock);
	if (log_fp)
		fclose(log_fp);
	log_fp = fp;
	pthread_mutex_unlock(&log_lock);
	return 0;
}

void sg_vlog(enum sg_log_level level, const char *tag, const char *fmt, va_list ap)
{
	char msg[2048];
	struct timespec ts;
	struct tm tm;
	FILE *fp;

	if ((int)level < atomic_load_explicit(&log_level, memory_order_relaxed))
		return;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	/* One line per message, whatever the text held. */
	for (char *p = msg; *p; p++)
		if (*p == '\n' || *p == '\r')
			*p = ' ';
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	pthread_mutex_lock(&log_lock);
	fp = log_fp ? log_fp : stderr;
	fprintf(fp, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ sandgate[%ld] %s: %s%s%s%s\n",
		tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
		tm.tm_sec, ts.tv_nsec / 1000000, (long)getpid(),
		sg_log_level_name(level), tag ? "[" : "", tag ? tag : "",
		tag ? "] " : "", msg);
	pthread_mutex_unlock(&log_lock);
}

void sg_log(enum sg_log_level level, const char *tag, const char *fmt, ...)
{
	va_list ap;

	if ((int)level < atomic_load_explicit(&log_level, memory_order_relaxed))
		return;
	va_start(ap, fmt);
	sg_vlog(level, tag, fmt, ap);
	va_end(ap);
}
