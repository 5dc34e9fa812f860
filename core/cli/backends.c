/* Backend usability for `sandgate status` (core/cli/backends.h).  A
 * stand-in until ABI 2.0 gives the plugins a probe slot. */
#include "config.h"

#include "core/cli/backends.h"
#include "core/plugin.h"

int sg_status_backends(json_t **out)
{
	json_t *arr = json_array();

	/* the loader's list is newest first: insert each at the front */
	for (struct sg_plugin *p = sg_plugin_first(); p; p = p->next)
		json_array_insert_new(arr, 0, json_pack("{s:s, s:n, s:s}", "name", p->b->name,
							 "usable", "why", "probe not available"));
	*out = arr;
	return 0;
}
