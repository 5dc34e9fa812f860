/*
 * <state dir>/machines.json: {"machines": [{backend, id, name, owner,
 * purpose, template, created}, ...]} (see persist.h).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/hostapi.h"
#include "core/log.h"
#include "core/persist.h"
#include "core/util.h"

static pthread_mutex_t persist_lock = PTHREAD_MUTEX_INITIALIZER;
static struct timespec seen_mtime;
static off_t seen_size = -1;

static int file_path(char *buf, size_t n, const char *suffix)
{
	const char *dir = sg_state_dir();

	if (!dir)
		return -1;
	snprintf(buf, n, "%s/machines.json%s", dir, suffix);
	return 0;
}

/* The array of records in the file, or an empty one.  New reference. */
static json_t *read_records(const char *path)
{
	json_error_t je;
	json_t *doc = json_load_file(path, 0, &je), *arr;

	arr = json_incref(json_object_get(doc, "machines"));
	if (!doc && errno != ENOENT && access(path, F_OK) == 0)
		SG_WARN("%s is not valid JSON (%s, line %d): ignoring it", path, je.text, je.line);
	json_decref(doc);
	if (!json_is_array(arr)) {
		json_decref(arr);
		arr = json_array();
	}
	return arr;
}

static int write_records(const char *path, json_t *arr)
{
	char tmp[SG_PATH_MAX + 64];
	json_t *doc = json_pack("{s:O}", "machines", arr);
	int rc;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	rc = json_dump_file(doc, tmp, JSON_INDENT(1));
	json_decref(doc);
	if (rc == 0 && chmod(tmp, 0600) == 0 && rename(tmp, path) == 0)
		return 0;
	SG_WARN("cannot write %s: %s", path, strerror(errno));
	unlink(tmp);
	return -1;
}

static bool same(const json_t *rec, const char *backend, const char *id)
{
	const char *b = json_string_value(json_object_get(rec, "backend"));
	const char *i = json_string_value(json_object_get(rec, "id"));

	return b && i && !strcmp(b, backend) && !strcmp(i, id);
}

/* Runs a change under both locks: the thread mutex and the file lock. */
static int update(const char *backend, const char *id, const json_t *rec)
{
	char path[SG_PATH_MAX + 32], lockp[SG_PATH_MAX + 32];
	json_t *arr;
	size_t i;
	int fd, rc;

	if (file_path(path, sizeof(path), "") < 0 || file_path(lockp, sizeof(lockp), ".lock") < 0)
		return -1;
	pthread_mutex_lock(&persist_lock);
	fd = open(lockp, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0 || flock(fd, LOCK_EX) < 0) {
		SG_WARN("cannot lock %s: %s", lockp, strerror(errno));
		if (fd >= 0)
			close(fd);
		pthread_mutex_unlock(&persist_lock);
		return -1;
	}
	arr = read_records(path);
	for (i = 0; i < json_array_size(arr);) {
		if (same(json_array_get(arr, i), backend, id))
			json_array_remove(arr, i);
		else
			i++;
	}
	if (rec)
		json_array_append(arr, (json_t *)rec);
	rc = write_records(path, arr);
	json_decref(arr);
	close(fd); /* drops the flock */
	pthread_mutex_unlock(&persist_lock);
	return rc;
}

int sg_persist_put(const json_t *rec)
{
	const char *b = json_string_value(json_object_get(rec, "backend"));
	const char *i = json_string_value(json_object_get(rec, "id"));

	return b && i ? update(b, i, rec) : -1;
}

int sg_persist_delete(const char *backend, const char *id)
{
	return update(backend, id, NULL);
}

json_t *sg_persist_load(bool only_if_changed, bool *changed)
{
	char path[SG_PATH_MAX + 32];
	struct stat st;
	json_t *arr = NULL;

	*changed = false;
	if (file_path(path, sizeof(path), "") < 0)
		return only_if_changed ? NULL : json_array();
	pthread_mutex_lock(&persist_lock);
	if (stat(path, &st) == 0) {
		*changed = st.st_size != seen_size || st.st_mtim.tv_sec != seen_mtime.tv_sec ||
			   st.st_mtim.tv_nsec != seen_mtime.tv_nsec;
		seen_size = st.st_size;
		seen_mtime = st.st_mtim;
	}
	if (*changed || !only_if_changed)
		arr = read_records(path);
	pthread_mutex_unlock(&persist_lock);
	return arr;
}
