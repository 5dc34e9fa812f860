/*
 * work_home through the engine.  [storage] work_home is a path on the
 * engine's host: when sandgate does not see that directory itself (a tcp://
 * or ssh:// engine, or a unix:// one whose host view differs from ours: a
 * mount namespace, a socket forwarded from elsewhere), the directories of
 * named machines are made, checked and removed by a short-lived helper
 * container of the sandbox image that binds work_home alone at /w, runs one
 * sh script (no network) and is removed.  The script keeps the rules of the
 * local walk (mounts.c): one component at a time, "." and ".." refused, a
 * symbolic link refused, never followed.
 *
 * Which way is decided once per process, at the first need, whatever the
 * engine's address: on a unix socket whose daemon's root sandgate may look
 * into (/proc/PID/root, PID from the socket's peer credentials), work_home
 * there is compared with ours; otherwise sandgate writes a marker file into
 * its own view of work_home and a helper looks for it.  Seen means the two views are one (a
 * local engine, or tcp:// or ssh:// to this host) and the local walk is used
 * with no helper per call; not seen, or work_home not makeable here, means
 * every later make, check and purge goes through a helper.  The scheme alone
 * cannot tell: ssh://localhost shares the directory, a unix socket forwarded
 * from another host or a mount namespace does not.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/docker/docker.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define WH_LOG_CAP 4096

/* Walks every work_home-relative path given after $1 (1: create what is
 * missing).  Exit 0; or a last line "E<code> <path so far>": 2 missing,
 * 3 "." or "..", 4 a symbolic link, 5 not a directory, 6 mkdir failed. */
static const char wh_walk_sh[] =
	"set -f; mk=$1; shift; "
	"for rel do p=/w; done_=; IFS=/; "
	"for c in $rel; do "
	"[ -z \"$c\" ] && continue; "
	"done_=${done_:+$done_/}$c; "
	"case $c in .|..) echo \"E3 $rel\"; exit 3;; esac; "
	"p=$p/$c; "
	"if [ -L \"$p\" ]; then echo \"E4 $done_\"; exit 4; fi; "
	"if [ ! -e \"$p\" ]; then "
	"  if [ \"$mk\" = 1 ]; then mkdir -m 755 \"$p\" 2>/dev/null || [ -d \"$p\" ] || "
	"    { echo \"E6 $done_\"; exit 6; }; "
	"  else echo \"E2 $done_\"; exit 2; fi; fi; "
	"if [ -L \"$p\" ] || [ ! -d \"$p\" ]; then echo \"E5 $done_\"; exit 5; fi; "
	"done; IFS=' '; done; "
	/* rm=1 in the environment: remove the last path's tree (its parents were
	 * walked without a link; a link as the leaf is left alone). */
	"if [ \"${rm:-0}\" = 1 ] && [ -n \"${rel:-}\" ]; then rm -rf -- \"$p\" || exit 7; fi";

/* The sandbox image the helper runs: [docker] default_image, else the base
 * template's. */
static void wh_image(struct docker_ctx *ctx, char *out, size_t size)
{
	if (*ctx->default_image)
		snprintf(out, size, "%s", ctx->default_image);
	else if (docker_template_image(ctx, "base", out, size) < 0)
		snprintf(out, size, "sandgate/base:1");
}

/* Words the script's "E<code> <path>" line as the local walk would. */
static int wh_fail(struct docker_ctx *ctx, long code, const struct sg_buf *log, struct sg_err *err)
{
	char line[600] = "", *e;
	const char *path;

	docker_first_line(log->data ? log->data : "", log->len, line, sizeof(line));
	e = strstr(log->data ? log->data : "", "\nE");
	if (e)
		docker_first_line(e + 1, log->len - (size_t)(e + 1 - log->data), line, sizeof(line));
	path = strchr(line, ' ') ? strchr(line, ' ') + 1 : "?";
	switch (code) {
	case 2:
		return ctx->host->errf(err, SG_E_NOTFOUND, "%s/%s does not exist on the docker "
				       "engine's host", ctx->work_home, path);
	case 3:
		return ctx->host->errf(err, SG_E_PERM, "'%s' beneath [storage] work_home names "
				       "'.' or '..': refused", path);
	case 4:
		return ctx->host->errf(err, SG_E_PERM, "%s/%s is a symbolic link: sandgate never "
				       "follows one beneath [storage] work_home; replace it with "
				       "a directory", ctx->work_home, path);
	case 5:
		return ctx->host->errf(err, SG_E_PERM, "%s/%s is not a directory", ctx->work_home,
				       path);
	default:
		return ctx->host->errf(err, SG_E_IO, "the work_home helper container failed on "
				       "the docker engine's host (exit %ld): %s", code, line);
	}
}

/* Creates, starts, waits for and removes one helper running wh_walk_sh with
 * args.  Returns 0 when it exited 0, -1 with err otherwise. */
static int wh_helper(struct docker_ctx *ctx, const char *const *args, size_t n, bool mk, bool rm,
		     struct sg_err *err)
{
	char image[512], bind[DOCKER_PATH_MAX + 8], path[200], id[DOCKER_ID_MAX];
	json_t *body, *cmd, *out = NULL;
	struct sg_buf log = { 0 };
	struct sg_err ignore;
	long status = 0, code = -1;
	int rc = -1;

	if (!ctx->work_home)
		return ctx->host->errf(err, SG_E_INVAL, "%s", ctx->work_home_why);
	wh_image(ctx, image, sizeof(image));
	snprintf(bind, sizeof(bind), "%s:/w", ctx->work_home);
	cmd = json_pack("[s, s, s, s, s]", "sh", "-c", wh_walk_sh, "sh", mk ? "1" : "0");
	for (size_t i = 0; cmd && i < n; i++)
		json_array_append_new(cmd, json_string(args[i]));
	/* Binds, not Mounts: the engine makes work_home on its host when it is
	 * not there yet, as `docker run -v` does. */
	body = json_pack("{s:s, s:o, s:s, s:b, s:[s], s:{s:s}, s:{s:[s], s:s}}", "Image", image,
			 "Cmd", cmd, "User", "0", "NetworkDisabled", 1, "Env",
			 rm ? "rm=1" : "rm=0", "Labels", "org.sandgate.helper", "work_home",
			 "HostConfig", "Binds", bind, "NetworkMode", "none");
	if (!body)
		return ctx->host->errf(err, SG_E_NOMEM, "docker: out of memory");
	if (docker_engine_json(ctx->engine, "POST", "/containers/create", body, &status, &out,
			       err) < 0)
		goto done;
	if (status != 201) {
		docker_engine_fail(ctx->engine, err, status == 404 ? SG_E_NOTFOUND : SG_E_BACKEND,
				   "the work_home helper container (image) could not be made",
				   status, out);
		goto done;
	}
	snprintf(id, sizeof(id), "%s", json_string_value(json_object_get(out, "Id")) ?: "");
	json_decref(out);
	out = NULL;
	if (docker_container_start_raw(ctx, id, err) < 0)
		goto gone;
	snprintf(path, sizeof(path), "/containers/%s/wait", id);
	if (docker_engine_json(ctx->engine, "POST", path, NULL, &status, &out, err) < 0)
		goto gone;
	code = (long)json_integer_value(json_object_get(out, "StatusCode"));
	if (status != 200)
		code = -1;
	if (code != 0) {
		docker_logs_tail(ctx, id, 20, WH_LOG_CAP, &log, &ignore);
		wh_fail(ctx, code, &log, err);
		goto gone;
	}
	rc = 0;
gone:
	if (docker_container_remove(ctx, id, &ignore) < 0)
		ctx->host->log(SG_LOG_WARNING, DOCKER_PLUGIN, "removing the work_home helper %.12s: %s",
			       id, ignore.msg);
done:
	ctx->host->buf_release(&log);
	json_decref(out);
	json_decref(body);
	return rc;
}

bool docker_engine_sees_dir(struct docker_ctx *ctx, const char *dir)
{
	const char *sock = docker_engine_socket(ctx->engine);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct ucred cr;
	socklen_t len = sizeof(cr);
	char there[DOCKER_PATH_MAX + 32];
	struct stat a, b;
	int fd;
	bool same = false;

	if (!sock || !dir || sock[0] != '/' || strlen(sock) >= sizeof(sa.sun_path))
		return false;
	memcpy(sa.sun_path, sock, strlen(sock) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return false;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
	    getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) == 0 && cr.pid > 0) {
		snprintf(there, sizeof(there), "/proc/%ld/root%s", (long)cr.pid, dir);
		same = stat(there, &a) == 0 && stat(dir, &b) == 0 &&
		       a.st_dev == b.st_dev && a.st_ino == b.st_ino;
	}
	close(fd);
	return same;
}

/* Does the engine see the work_home we see?  1 no, 0 yes, -1 err. */
static int wh_probe(struct docker_ctx *ctx, struct sg_err *err)
{
	char name[96], path[DOCKER_PATH_MAX + 96];
	const char *args[1];
	struct timespec ts;
	struct sg_err local;
	int fd, rc;

	if (docker_wh_local_root(ctx, &local) < 0) {
		ctx->host->log(SG_LOG_INFO, DOCKER_PLUGIN, "work_home through the engine: %s",
			       local.msg);
		return 1;
	}
	if (docker_engine_sees_dir(ctx, ctx->work_home))
		return 0;
	clock_gettime(CLOCK_REALTIME, &ts);
	snprintf(name, sizeof(name), ".sandgate-seen-%ld-%ld", (long)getpid(), (long)ts.tv_nsec);
	snprintf(path, sizeof(path), "%s/%s", ctx->work_home, name);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return 1;
	close(fd);
	args[0] = name;
	rc = wh_helper(ctx, args, 1, false, false, err);
	unlink(path);
	if (rc < 0 && err && err->code == SG_E_PERM)
		return 1; /* not a directory there: not ours either */
	if (rc < 0 && err && err->code == SG_E_NOTFOUND)
		return 1;
	return rc < 0 ? -1 : 0;
}

int docker_wh_remote(struct docker_ctx *ctx, struct sg_err *err)
{
	int r;

	pthread_mutex_lock(&ctx->wh_lock);
	r = ctx->wh_remote;
	if (r < 0) {
		r = wh_probe(ctx, err);
		ctx->wh_remote = r;
		if (r >= 0)
			ctx->host->log(SG_LOG_INFO, DOCKER_PLUGIN, "[storage] work_home %s: %s",
				       ctx->work_home ? ctx->work_home : "?",
				       r ? "on the engine's host, through helper containers"
					 : "seen by sandgate and the engine alike");
	}
	pthread_mutex_unlock(&ctx->wh_lock);
	return r;
}

int docker_wh_dirs(struct docker_ctx *ctx, const char *const *rels, size_t n, bool create,
		   struct sg_err *err)
{
	return wh_helper(ctx, rels, n, create, false, err);
}

int docker_wh_remove(struct docker_ctx *ctx, const char *rel, struct sg_err *err)
{
	const char *args[1] = { rel };

	if (wh_helper(ctx, args, 1, false, true, err) == 0)
		return 0;
	return err && err->code == SG_E_NOTFOUND ? 0 : -1;
}
