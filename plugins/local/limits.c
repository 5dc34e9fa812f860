/*
 * Limits of local jails that hold whoever runs sandgate, root included.
 *
 * Where sandgate may make cgroups, each jail gets its own with pids.max and
 * memory.max (swap off): under cgroup v2, a "sandgate-local" group at the
 * root of the hierarchy with the pids and memory controllers enabled for
 * its children; under cgroup v1, a "sandgate-local" group below this
 * process's own in the pids and the memory hierarchy (memory.limit_in_bytes
 * and, where swap is accounted, memory.memsw.limit_in_bytes).  Where it may
 * not (not root, a container without a writable hierarchy), the process
 * count falls back to RLIMIT_NPROC of the jail's user, which all local
 * sandboxes share, and memory to the per-process address space: said once
 * in the log and in every create_sandbox's details.
 *
 * Every jail also gets rlimits: CPU seconds, address space and open files
 * per process.  The jail's child joins its cgroups and sets them before it
 * drops to the sandbox user, so nothing in the jail can lift them.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/local/local.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CG_GROUP "sandgate-local"

/* ---- small file helpers ------------------------------------------------------------ */

static int cg_write(const char *dir, const char *file, const char *value)
{
	char path[LOCAL_PATH_MAX + 64];
	ssize_t w;
	int fd, e;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	w = write(fd, value, strlen(value));
	e = errno;
	close(fd);
	errno = e;
	return w == (ssize_t)strlen(value) ? 0 : -1;
}

static bool cg_has(const char *file, const char *word)
{
	char buf[512] = "", *tok, *save = NULL;
	FILE *f = fopen(file, "re");

	if (!f)
		return false;
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = '\0';
	fclose(f);
	for (tok = strtok_r(buf, " \n", &save); tok; tok = strtok_r(NULL, " \n", &save))
		if (strcmp(tok, word) == 0)
			return true;
	return false;
}

/* The mount point of the cgroup hierarchy with `want` (v2: "cgroup2";
 * v1: a controller name) from /proc/self/mountinfo. */
static bool cg_mount(const char *want, char *out, size_t size)
{
	char line[4096];
	bool found = false;
	FILE *f = fopen("/proc/self/mountinfo", "re");

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		char *dash = strstr(line, " - "), mnt[LOCAL_PATH_MAX], fstype[32], opts[1024];

		if (!dash || sscanf(line, "%*s %*s %*s %*s %4095s", mnt) != 1 ||
		    sscanf(dash + 3, "%31s %*s %1023s", fstype, opts) != 2)
			continue;
		if (strcmp(want, "cgroup2") == 0)
			found = strcmp(fstype, "cgroup2") == 0;
		else if (strcmp(fstype, "cgroup") == 0) {
			char *tok, *save = NULL;

			for (tok = strtok_r(opts, ",", &save); tok && !found;
			     tok = strtok_r(NULL, ",", &save))
				found = strcmp(tok, want) == 0;
		}
		if (found)
			snprintf(out, size, "%s", mnt);
	}
	fclose(f);
	return found;
}

/* This process's path in the v1 hierarchy of controller c. */
static bool cg_own_path(const char *c, char *out, size_t size)
{
	char line[4096];
	bool found = false;
	FILE *f = fopen("/proc/self/cgroup", "re");

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		char *a = strchr(line, ':'), *b = a ? strchr(a + 1, ':') : NULL, *tok, *save = NULL;

		if (!b)
			continue;
		*b = '\0';
		for (tok = strtok_r(a + 1, ",", &save); tok && !found; tok = strtok_r(NULL, ",", &save))
			found = strcmp(tok, c) == 0;
		if (found) {
			b[1 + strcspn(b + 1, "\n")] = '\0';
			snprintf(out, size, "%s", strcmp(b + 1, "/") == 0 ? "" : b + 1);
		}
	}
	fclose(f);
	return found;
}

/* ---- leftovers ---------------------------------------------------------------------- */

/* Kills every process in cgroup dir (cgroup.kill where there is one), and
 * removes it; bounded to about a second. */
static void cg_drain(const char *dir)
{
	char path[LOCAL_PATH_MAX + 64], pidline[32];

	for (int round = 0; round < 100; round++) {
		FILE *f;

		if (rmdir(dir) == 0 || errno == ENOENT)
			return;
		if (cg_write(dir, "cgroup.kill", "1") < 0) {
			snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
			f = fopen(path, "re");
			while (f && fgets(pidline, sizeof(pidline), f)) {
				long pid = strtol(pidline, NULL, 10);

				if (pid > 1)
					kill((pid_t)pid, SIGKILL);
			}
			if (f)
				fclose(f);
		}
		nanosleep(&(struct timespec){ .tv_nsec = 10 * 1000 * 1000 }, NULL);
	}
}

/* Removes the cgroups of jails whose sandgate is gone (a kill -9): named
 * "<id>.<pid>.<n>". */
static void cg_sweep(const char *base)
{
	struct dirent *de;
	DIR *d = opendir(base);
	char path[LOCAL_PATH_MAX + 300];

	while (d && (de = readdir(d))) {
		const char *dot = strchr(de->d_name, '.');
		long pid = dot ? strtol(dot + 1, NULL, 10) : 0;

		if (de->d_type != DT_DIR || pid <= 0 || pid == (long)getpid() ||
		    kill((pid_t)pid, 0) == 0 || errno != ESRCH)
			continue;
		snprintf(path, sizeof(path), "%s/%s", base, de->d_name);
		cg_drain(path);
	}
	if (d)
		closedir(d);
}

/* ---- finding where cgroups may be made ------------------------------------------------ */

/* mkdir that accepts an existing directory. */
/* Made, or there and ours to use: a group another sandgate made as root
 * is there but not writable for a sandgate that is not (then -1, EACCES,
 * and the jails fall back to rlimits). */
static int cg_mkdir(const char *dir)
{
	if (mkdir(dir, 0755) == 0)
		return 0;
	return errno == EEXIST ? access(dir, W_OK) : -1;
}

static bool cg_find_v2(struct local_cgroups *cg)
{
	char mnt[LOCAL_PATH_MAX], ctl[LOCAL_PATH_MAX + 32];

	if (!cg_mount("cgroup2", mnt, sizeof(mnt)))
		return false;
	snprintf(ctl, sizeof(ctl), "%s/cgroup.controllers", mnt);
	if (!cg_has(ctl, "pids") || !cg_has(ctl, "memory")) {
		snprintf(cg->why, sizeof(cg->why), "cgroup v2 at %.300s has no pids and memory "
			 "controllers", mnt);
		return false;
	}
	if ((size_t)snprintf(cg->v2_base, sizeof(cg->v2_base), "%s/" CG_GROUP, mnt) >=
	    sizeof(cg->v2_base))
		return false;
	if (cg_write(mnt, "cgroup.subtree_control", "+pids +memory") < 0 ||
	    cg_mkdir(cg->v2_base) < 0 ||
	    cg_write(cg->v2_base, "cgroup.subtree_control", "+pids +memory") < 0) {
		snprintf(cg->why, sizeof(cg->why), "cannot make %.300s with the pids and memory "
			 "controllers: %s%s", cg->v2_base, strerror(errno),
			 geteuid() ? " (sandgate is not root)" : "");
		cg->v2_base[0] = '\0';
		return false;
	}
	cg->kind = LOCAL_CG_V2;
	return true;
}

/* base for v1 controller c: <mount>/<our group>/sandgate-local, made. */
static bool cg_find_v1_one(const char *c, char *base, size_t size, char *why, size_t wsize)
{
	char mnt[LOCAL_PATH_MAX], own[LOCAL_PATH_MAX];

	if (!cg_mount(c, mnt, sizeof(mnt)) || !cg_own_path(c, own, sizeof(own))) {
		snprintf(why, wsize, "no cgroup v1 %s hierarchy", c);
		return false;
	}
	if ((size_t)snprintf(base, size, "%s%s/" CG_GROUP, mnt, own) >= size || cg_mkdir(base) < 0) {
		snprintf(why, wsize, "cannot make %.200s: %s%s", base, strerror(errno),
			 geteuid() ? " (sandgate is not root)" : "");
		base[0] = '\0';
		return false;
	}
	return true;
}

static bool cg_find_v1(struct local_cgroups *cg)
{
	char why[400] = "";

	if (!cg_find_v1_one("pids", cg->pids_base, sizeof(cg->pids_base), why, sizeof(why)) ||
	    !cg_find_v1_one("memory", cg->mem_base, sizeof(cg->mem_base), why, sizeof(why))) {
		size_t have = strlen(cg->why);

		snprintf(cg->why + have, sizeof(cg->why) - have, "%s%.250s", have ? "; " : "",
			 why);
		cg->pids_base[0] = cg->mem_base[0] = '\0';
		return false;
	}
	cg->kind = LOCAL_CG_V1;
	return true;
}

const struct local_cgroups *local_cgroups(struct local_ctx *ctx)
{
	struct local_cgroups *cg = &ctx->cg;

	pthread_mutex_lock(&ctx->lock);
	if (!ctx->cg_tried) {
		ctx->cg_tried = true;
		if (cg_find_v2(cg))
			cg_sweep(cg->v2_base);
		else if (cg_find_v1(cg)) {
			cg_sweep(cg->pids_base);
			cg_sweep(cg->mem_base);
		}
		if (cg->kind == LOCAL_CG_V2)
			ctx->host->log(SG_LOG_INFO, LOCAL_PLUGIN, "sandbox limits: cgroup v2 under %s "
				       "(pids.max %lu, memory.max %lu MiB) and rlimits",
				       cg->v2_base, ctx->lim.pids, ctx->lim.memory_mb);
		else if (cg->kind == LOCAL_CG_V1)
			ctx->host->log(SG_LOG_INFO, LOCAL_PLUGIN, "sandbox limits: cgroup v1 under %s "
				       "and %s (pids.max %lu, memory %lu MiB) and rlimits",
				       cg->pids_base, cg->mem_base, ctx->lim.pids, ctx->lim.memory_mb);
		else
			ctx->host->log(SG_LOG_WARNING, LOCAL_PLUGIN, "no cgroups for sandbox limits "
				       "(%s): processes are limited by RLIMIT_NPROC of user %s, "
				       "which all local sandboxes share, and memory per process "
				       "(RLIMIT_AS) only", cg->why, ctx->user);
	}
	pthread_mutex_unlock(&ctx->lock);
	return cg;
}

/* ---- one jail's cgroups --------------------------------------------------------------- */

static void cg_limit(char *out, size_t size, unsigned long v, unsigned long unit)
{
	if (v)
		snprintf(out, size, "%llu", (unsigned long long)v * unit);
	else
		snprintf(out, size, "max");
}

static int cg_open_procs(const char *dir)
{
	char path[LOCAL_PATH_MAX + 32];

	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	return open(path, O_WRONLY | O_CLOEXEC);
}

int local_cg_make(struct local_ctx *ctx, const char *name, struct local_cg *cg,
		  struct sg_err *err)
{
	const struct local_cgroups *cgs = local_cgroups(ctx);
	char v[32];

	memset(cg, 0, sizeof(*cg));
	cg->procs_fd[0] = cg->procs_fd[1] = -1;
	if (cgs->kind == LOCAL_CG_V2) {
		if ((size_t)snprintf(cg->v2, sizeof(cg->v2), "%s/%s", cgs->v2_base, name) >=
		    sizeof(cg->v2))
			goto fail;
		cg_limit(v, sizeof(v), ctx->lim.pids, 1);
		if (cg_mkdir(cg->v2) < 0 || cg_write(cg->v2, "pids.max", v) < 0)
			goto fail;
		cg_limit(v, sizeof(v), ctx->lim.memory_mb, 1024 * 1024);
		if (cg_write(cg->v2, "memory.max", v) < 0)
			goto fail;
		cg_write(cg->v2, "memory.swap.max", "0"); /* absent without swap accounting */
		cg->procs_fd[0] = cg_open_procs(cg->v2);
		if (cg->procs_fd[0] < 0)
			goto fail;
		return 0;
	}
	if (cgs->kind != LOCAL_CG_V1)
		return 0;
	if ((size_t)snprintf(cg->pids, sizeof(cg->pids), "%s/%s", cgs->pids_base, name) >=
	    sizeof(cg->pids) ||
	    (size_t)snprintf(cg->mem, sizeof(cg->mem), "%s/%s", cgs->mem_base, name) >=
	    sizeof(cg->mem))
		goto fail;
	cg_limit(v, sizeof(v), ctx->lim.pids, 1);
	if (cg_mkdir(cg->pids) < 0 || cg_write(cg->pids, "pids.max", v) < 0)
		goto fail;
	/* v1 has no "max": -1 means none. */
	if (ctx->lim.memory_mb)
		cg_limit(v, sizeof(v), ctx->lim.memory_mb, 1024 * 1024);
	else
		snprintf(v, sizeof(v), "-1");
	if (cg_mkdir(cg->mem) < 0 || cg_write(cg->mem, "memory.limit_in_bytes", v) < 0)
		goto fail;
	cg_write(cg->mem, "memory.memsw.limit_in_bytes", v); /* absent without swap accounting */
	cg->procs_fd[0] = cg_open_procs(cg->pids);
	cg->procs_fd[1] = cg_open_procs(cg->mem);
	if (cg->procs_fd[0] < 0 || cg->procs_fd[1] < 0)
		goto fail;
	return 0;
fail:
	ctx->host->errf(err, SG_E_IO, "local: cannot set up the jail's cgroup %.300s: %s",
			cg->v2[0] ? cg->v2 : cg->pids, strerror(errno));
	local_cg_remove(cg);
	return -1;
}

int local_cg_join(const struct local_cg *cg)
{
	for (int i = 0; i < 2; i++)
		if (cg->procs_fd[i] >= 0 && write(cg->procs_fd[i], "0", 1) != 1)
			return -1;
	return 0;
}

/* The tasks (processes and threads: RLIMIT_NPROC counts both) of uid now:
 * a directory in /proc per process, owned by its user, whose task/ holds
 * one entry per thread (st_nlink is that plus "." and ".."). */
static unsigned long user_tasks(uid_t uid)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	unsigned long n = 0;
	char path[64];
	struct stat st;

	if (!d)
		return 0;
	while ((e = readdir(d)))
		if (e->d_name[0] >= '1' && e->d_name[0] <= '9' &&
		    fstatat(dirfd(d), e->d_name, &st, 0) == 0 && st.st_uid == uid &&
		    (size_t)snprintf(path, sizeof(path), "%s/task", e->d_name) < sizeof(path))
			n += fstatat(dirfd(d), path, &st, 0) == 0 && st.st_nlink > 2 ? st.st_nlink - 2 : 1;
	closedir(d);
	return n;
}

unsigned long local_nproc_cap(const struct local_ctx *ctx, bool have_pids_cg)
{
	if (!ctx->lim.pids || have_pids_cg)
		return 0;
	/* The sandbox user runs nothing but jails: pids for all of them. */
	if (ctx->switch_user)
		return ctx->lim.pids;
	/* The jails run as sandgate's own user, who runs other things too
	 * (sandgate's threads, a desktop): pids more than it runs now, so a
	 * jail's forks stop there and the user's own are not refused. */
	return user_tasks(getuid()) + ctx->lim.pids;
}

/* A limit v above the hard limit sandgate has (and may not raise: not
 * root) comes down to it: a limit is a ceiling, and sandgate's own holds the
 * jail already.  Async-signal-safe. */
static rlim_t limit_within(int res, rlim_t v)
{
	struct rlimit r;

	if (geteuid() == 0 || getrlimit(res, &r) < 0 || r.rlim_max == RLIM_INFINITY)
		return v;
	return v < r.rlim_max ? v : r.rlim_max;
}

static int limit_set(int res, rlim_t v)
{
	struct rlimit r;

	r.rlim_cur = r.rlim_max = limit_within(res, v);
	return setrlimit(res, &r);
}

int local_rlimits_apply(const struct local_ctx *ctx, unsigned long nproc)
{
	const struct local_limits *l = &ctx->lim;

	if ((l->cpu_seconds && limit_set(RLIMIT_CPU, (rlim_t)l->cpu_seconds) < 0) ||
	    (l->as_mb && limit_set(RLIMIT_AS, (rlim_t)l->as_mb << 20) < 0) ||
	    (l->open_files && limit_set(RLIMIT_NOFILE, (rlim_t)l->open_files) < 0))
		return -1;
	/* No pids cgroup: the kernel's per-user count (never applied to root). */
	if (nproc && limit_set(RLIMIT_NPROC, (rlim_t)nproc) < 0)
		return -1;
	return 0;
}

void local_cg_remove(struct local_cg *cg)
{
	char *dirs[] = { cg->v2, cg->pids, cg->mem };

	for (int i = 0; i < 2; i++)
		if (cg->procs_fd[i] >= 0) {
			close(cg->procs_fd[i]);
			cg->procs_fd[i] = -1;
		}
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
		if (dirs[i][0]) {
			cg_drain(dirs[i]);
			dirs[i][0] = '\0';
		}
}

json_t *local_limits_json(struct local_ctx *ctx)
{
	const struct local_cgroups *cgs = local_cgroups(ctx);
	const struct local_limits *l = &ctx->lim;
	json_t *o = json_object();

#define LIM(v) ((v) ? json_integer((json_int_t)(v)) : json_null())
	json_object_set_new(o, "cgroup", json_string(cgs->kind == LOCAL_CG_V2 ? "v2" :
						     cgs->kind == LOCAL_CG_V1 ? "v1" : "none"));
	json_object_set_new(o, "pids", LIM(l->pids));
	json_object_set_new(o, "memory_mb", LIM(cgs->kind != LOCAL_CG_NONE ? l->memory_mb : 0));
	/* what the jail gets: a sandgate that is not root cannot go above its own */
	json_object_set_new(o, "cpu_seconds",
			    LIM(l->cpu_seconds ? limit_within(RLIMIT_CPU, l->cpu_seconds) : 0));
	json_object_set_new(o, "address_space_mb",
			    LIM(l->as_mb ? limit_within(RLIMIT_AS, (rlim_t)l->as_mb << 20) >> 20 : 0));
	json_object_set_new(o, "open_files",
			    LIM(l->open_files ? limit_within(RLIMIT_NOFILE, l->open_files) : 0));
	json_object_set_new(o, "tmp_mb", LIM(l->tmp_mb));
	json_object_set_new(o, "shm_mb", LIM(l->shm_mb));
#undef LIM
	if (cgs->kind == LOCAL_CG_NONE)
		json_object_set_new(o, "note", json_pack("s++", "no cgroups (", cgs->why,
			ctx->switch_user ? "): pids is RLIMIT_NPROC of the sandbox user, shared by "
			"all local sandboxes; memory is limited per process only" :
			"): pids is RLIMIT_NPROC, sandgate's user's tasks at a jail's start plus pids, "
			"shared by all local sandboxes; memory is limited per process only"));
	return o;
}
