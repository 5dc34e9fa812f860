/* Backend usability for `sandgate status` (core/cli/backends.h): the
 * plugins' own probes, through the loader. */
#include "config.h"

#include "core/cli/backends.h"
#include "core/registry/plugin.h"

#define STATUS_PROBE_MS 3000

int sg_status_backends(json_t **out)
{
	json_t *all = sg_plugin_probe_all(STATUS_PROBE_MS), *b;
	size_t i;

	/* The loader's names: backend -> name, as the rest of status says. */
	json_array_foreach(all, i, b) {
		json_object_set(b, "name", json_object_get(b, "backend"));
		json_object_del(b, "backend");
		if (!json_object_get(b, "why"))
			json_object_set_new(b, "why", json_string("the probe succeeded"));
	}
	*out = all;
	return 0;
}
