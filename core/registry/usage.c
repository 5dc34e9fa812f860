/* Each credential's use, for `sandgate status` (core/registry/usage.h). */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/base/log.h"
#include "core/base/quota.h"
#include "core/base/util.h"
#include "core/registry/hostapi.h"
#include "core/registry/usage.h"

static uint64_t saved_gen = UINT64_MAX; /* the reaper's thread only */

static char *usage_path(const char *dir, long pid, const char *suffix)
{
	return sg_xasprintf("%s/usage/%ld.json%s", dir, pid, suffix);
}

void sg_usage_save(void)
{
	uint64_t gen = sg_quota_generation();
	const char *dir = sg_state_dir();
	char *sub, *tmp, *path;
	json_t *o;
	int rc;

	if (gen == saved_gen || !dir)
		return;
	sub = sg_xasprintf("%s/usage", dir);
	if (mkdir(sub, 0700) < 0 && errno != EEXIST)
		SG_DEBUG("usage: cannot create %s: %s", sub, strerror(errno));
	free(sub);
	tmp = usage_path(dir, (long)getpid(), ".tmp");
	path = usage_path(dir, (long)getpid(), "");
	o = json_pack("{s:I, s:I, s:o}", "pid", (json_int_t)getpid(), "updated", (json_int_t)sg_time_s(),
		      "credentials", sg_quota_usage());
	rc = json_dump_file(o, tmp, JSON_COMPACT);
	if (rc == 0 && rename(tmp, path) == 0)
		saved_gen = gen;
	else
		SG_DEBUG("usage: cannot write %s: %s", path, strerror(errno));
	json_decref(o);
	free(tmp);
	free(path);
}

void sg_usage_remove(void)
{
	const char *dir = sg_state_dir();
	char *path;

	if (!dir)
		return;
	path = usage_path(dir, (long)getpid(), "");
	unlink(path);
	free(path);
}

json_t *sg_usage_read_all(void)
{
	const char *dir = sg_state_dir();
	json_t *all = json_array();
	char *sub;
	DIR *d;
	struct dirent *de;

	if (!dir)
		return all;
	sub = sg_xasprintf("%s/usage", dir);
	d = opendir(sub);
	while (d && (de = readdir(d))) {
		char *end, *p;
		long pid = strtol(de->d_name, &end, 10);
		json_t *o;

		if (pid <= 0 || strcmp(end, ".json") != 0)
			continue;
		/* a sandgate gone without its clean end left it: not shown */
		if (kill((pid_t)pid, 0) < 0 && errno == ESRCH)
			continue;
		p = sg_xasprintf("%s/%s", sub, de->d_name);
		o = json_load_file(p, 0, NULL);
		free(p);
		if (json_is_object(o))
			json_array_append(all, o);
		json_decref(o);
	}
	if (d)
		closedir(d);
	free(sub);
	return all;
}
