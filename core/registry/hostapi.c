#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/protocol/call.h"
#include "core/base/conf.h"
#include "core/base/err.h"
#include "core/registry/hostapi.h"
#include "core/base/log.h"
#include "core/registry/machine.h"
#include "core/protocol/session.h"
#include "core/base/util.h"

static void host_log(enum sg_log_level level, const char *plugin, const char *fmt, ...)
	SG_PRINTF(3, 4);
static void host_log(enum sg_log_level level, const char *plugin, const char *fmt, ...)
{
	va_list ap;

	if (level < sg_log_get_level())
		return;
	va_start(ap, fmt);
	sg_vlog(level, plugin, fmt, ap);
	va_end(ap);
}

static int host_errf(struct sg_err *err, int code, const char *fmt, ...) SG_PRINTF(3, 4);
static int host_errf(struct sg_err *err, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	sg_verrf(err, code, fmt, ap);
	va_end(ap);
	return -1;
}

static char state_dir_path[SG_PATH_MAX];
static pthread_once_t state_once = PTHREAD_ONCE_INIT;

/* mkdir -p with mode 0700 for the components we create. */
static int mkdir_p(char *path)
{
	for (char *p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(path, 0700) < 0 && errno != EEXIST) {
			*p = '/';
			return -1;
		}
		*p = '/';
	}
	return mkdir(path, 0700) < 0 && errno != EEXIST ? -1 : 0;
}

static void state_dir_init(void)
{
	const char *conf = sg_config_get("state", "dir");
	const char *xdg = getenv("XDG_STATE_HOME");
	const char *home = getenv("HOME");

	if (conf && *conf)
		snprintf(state_dir_path, sizeof(state_dir_path), "%s", conf);
	else if (xdg && *xdg)
		snprintf(state_dir_path, sizeof(state_dir_path), "%s/sandgate", xdg);
	else if (home && *home)
		snprintf(state_dir_path, sizeof(state_dir_path), "%s/.local/state/sandgate", home);
	else
		snprintf(state_dir_path, sizeof(state_dir_path), "/tmp/sandgate-%ld", (long)getuid());
	if (mkdir_p(state_dir_path) < 0) {
		SG_ERROR("cannot create state directory '%s': %s", state_dir_path, strerror(errno));
		state_dir_path[0] = '\0';
	}
}

const char *sg_state_dir(void)
{
	pthread_once(&state_once, state_dir_init);
	return state_dir_path[0] ? state_dir_path : NULL;
}

static int host_buf_append(struct sg_buf *b, const void *p, size_t n)
{
	return sg_buf_append(b, p, n);
}

static const char *server_kind;

void sg_host_set_server(const char *kind)
{
	server_kind = kind;
}

static const char *host_server(void)
{
	return server_kind;
}

static const struct sg_host_api host_api = {
	.size = sizeof(struct sg_host_api),
	.minor = SG_PLUGIN_ABI_MINOR,
	.log = host_log,
	.errf = host_errf,
	.config_get = sg_config_get,
	.config_each = sg_config_each,
	.buf_append = host_buf_append,
	.buf_release = sg_buf_release,
	.cancelled = sg_call_cancelled,
	.cancel_fd = sg_call_cancel_fd,
	.progress = sg_call_progress,
	.notify = sg_call_notify,
	.state_dir = sg_state_dir,
	.machine_set = sg_machine_host_set,
	.machine_keep = sg_machine_host_keep,
	.machine_create = sg_machine_host_create,
	.machine_remove = sg_machine_host_remove,
	.shells_close = sg_machine_host_shells_close,
	.call_credential = sg_call_credential,
	.call_machines = sg_machine_host_list,
	.credentials = sg_credentials_count,
	.machine_report = sg_machine_host_report,
	.server = host_server,
};

const struct sg_host_api *sg_host_api_get(void)
{
	return &host_api;
}
