/* The host API table the core hands every plugin (struct sg_host_api). */
#ifndef SG_CORE_HOSTAPI_H
#define SG_CORE_HOSTAPI_H

#include <sandgate/plugin.h>

/* Returns the process-wide table; borrowed, lives as long as the process. */
const struct sg_host_api *sg_host_api_get(void);

/* The per-user state directory ($XDG_STATE_HOME/sandgate, or
 * ~/.local/state/sandgate, or [state] dir), created mode 0700 on first use.
 * Borrowed; NULL when it cannot be created (logged). */
const char *sg_state_dir(void);

/* What host->server() answers: "stdio", "http" or NULL (the default).
 * Call before the plugins are loaded; kind must be a static string. */
void sg_host_set_server(const char *kind);

#endif
