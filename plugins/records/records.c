/* A plugin's machine records (records.h). */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plugins/records/records.h"

int mrec_dir(const char *state_dir, const char *sub, char *out, size_t n)
{
	size_t base;

	if (!state_dir)
		return (errno = EINVAL), -1;
	if ((size_t)snprintf(out, n, "%s/%s", state_dir, sub) >= n)
		return (errno = ENAMETOOLONG), -1;
	/* The state directory is sandgate's; only the levels below are ours. */
	base = strlen(state_dir);
	for (char *p = out + base + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(out, 0700) < 0 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	return mkdir(out, 0700) == 0 || errno == EEXIST ? 0 : -1;
}

static int rec_path(const char *dir, const char *id, char *out, size_t n)
{
	if (!*id || strchr(id, '/') || id[0] == '.')
		return (errno = EINVAL), -1;
	if ((size_t)snprintf(out, n, "%s/%s.json", dir, id) >= n)
		return (errno = ENAMETOOLONG), -1;
	return 0;
}

int mrec_write(const char *dir, const char *id, json_t *j)
{
	char path[PATH_MAX], tmp[PATH_MAX + 8];
	int fd, rc = -1, saved;

	if (rec_path(dir, id, path, sizeof(path)) < 0)
		return -1;
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -1;
	if (json_dumpfd(j, fd, JSON_COMPACT) == 0 && fsync(fd) == 0)
		rc = 0;
	saved = errno;
	close(fd);
	if (rc == 0 && rename(tmp, path) < 0) {
		rc = -1;
		saved = errno;
	}
	if (rc < 0) {
		unlink(tmp);
		errno = saved;
	}
	return rc;
}

json_t *mrec_read(const char *dir, const char *id)
{
	char path[PATH_MAX];

	return rec_path(dir, id, path, sizeof(path)) < 0 ? NULL : json_load_file(path, 0, NULL);
}

void mrec_remove(const char *dir, const char *id)
{
	char path[PATH_MAX];

	if (rec_path(dir, id, path, sizeof(path)) == 0)
		unlink(path);
}

int mrec_move(const char *from, const char *to, const char *id)
{
	char src[PATH_MAX], dst[PATH_MAX];

	if (rec_path(from, id, src, sizeof(src)) < 0 || rec_path(to, id, dst, sizeof(dst)) < 0)
		return -1;
	return rename(src, dst);
}

static json_t *list_entry(json_t *rec, const char *id)
{
	const char *owner = json_string_value(json_object_get(rec, "owner"));

	return json_pack("{s:s, s:s, s:b, s:I, s:I}", "id", id, "owner", owner ? owner : "",
			 "persistent", json_is_true(json_object_get(rec, "persistent")),
			 "created", json_integer_value(json_object_get(rec, "created")),
			 "lifetime", json_integer_value(json_object_get(rec, "lifetime")));
}

int mrec_list(const char *dir, bool (*id_ok)(const char *id), json_t *out)
{
	char path[PATH_MAX];
	struct dirent *de;
	int rc = 0;
	DIR *d = opendir(dir);

	if (!d)
		return 0;
	while (rc == 0 && (de = readdir(d)) != NULL) {
		size_t len = strlen(de->d_name);
		const char *id;
		json_t *rec;

		if (len < 6 || strcmp(de->d_name + len - 5, ".json") != 0 ||
		    (size_t)snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) >= sizeof(path))
			continue;
		rec = json_load_file(path, 0, NULL);
		id = json_string_value(json_object_get(rec, "id"));
		if (id && (!id_ok || id_ok(id)) && json_array_append_new(out, list_entry(rec, id)) < 0)
			rc = -1;
		json_decref(rec);
	}
	closedir(d);
	return rc;
}
