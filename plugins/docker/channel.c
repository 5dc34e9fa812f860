/*
 * The runner's direct channel: a Unix socket instead of the engine's relay.
 *
 * Through `docker exec`, each runner frame crosses dockerd and the
 * container's shim both ways: a millisecond or more a round trip, and 64
 * MiB at the relay's pace.  When the engine runs on this host and sees our
 * files (a local daemon, rootful or rootless), a sandbox is made with one
 * extra read-only bind: a directory of its own, <state>/runner-chan/NAME,
 * at /run/sandgate in the container.  Before it starts a runner, sandgate
 * listens on NAME/runner.sock; the runner, started with `--dial
 * /run/sandgate/runner.sock`, takes a one-time token from its exec's stdin,
 * connects and sends it; sandgate accepts only that token (constant time),
 * then stops listening.  The exec stays attached for the runner's stderr.
 *
 * Why it is safe:
 *   - sandgate listens; it never connects to a path in a sandbox's reach,
 *     so nothing there can point it at another socket;
 *   - the directory is read-only inside and no other container binds it,
 *     so no sandbox can put a socket of its own in a runner's way;
 *   - the root is 0700: no other user of the host reaches the sockets;
 *   - a process in the sandbox that connects first has no token (it only
 *     crossed the exec's stdin) and is dropped; the socket is CLOEXEC in
 *     the runner, so no command inherits it.
 * Where any of that cannot be had (a remote engine, a daemon that sees
 * other files, [docker] runner_channel = false, a container made before),
 * the runner speaks over the exec as before, and so does a runner that
 * cannot dial.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/docker/docker.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define CHAN_SOCK     "runner.sock"
#define CHAN_TOKEN_MS 2000  /* for a connection's token line */
#define CHAN_PEND_MAX 8     /* connections waiting for their token line */
#define CHAN_STALE_S  600   /* a directory no container names, older than
			       this, is a leftover (younger: a create may be
			       on its way) */

/* Each directory above the root: ours or root's, not a link, and not
 * writable by others unless sticky (/tmp): nobody else may rename the root
 * away and put a directory of theirs in its place. */
static int chan_above_safe(const char *root, char *why, size_t size)
{
	char p[DOCKER_PATH_MAX];
	struct stat st;
	char *slash;

	snprintf(p, sizeof(p), "%s", root);
	while ((slash = strrchr(p, '/'))) {
		slash[slash == p] = '\0'; /* "/x" -> "/" */
		if (lstat(p, &st) < 0)
			return snprintf(why, size, "%s: %s", p, strerror(errno)), -1;
		if (!S_ISDIR(st.st_mode) || (st.st_uid != geteuid() && st.st_uid != 0) ||
		    ((st.st_mode & 022) && !(st.st_mode & S_ISVTX)))
			return snprintf(why, size, "%s is a link, another user's, or writable by "
					"others", p), -1;
		if (!strcmp(p, "/"))
			break;
	}
	return 0;
}

/* The root: absolute, 0700 and ours, under directories only we (or root)
 * may change (chan_above_safe); made when make.  A link or another's
 * directory is refused. */
static int chan_root_check(const char *root, bool make, char *why, size_t size)
{
	struct stat st;

	if (root[0] != '/')
		return snprintf(why, size, "the state directory %s is not absolute", root), -1;
	if (chan_above_safe(root, why, size) < 0)
		return -1;
	if (make && mkdir(root, 0700) < 0 && errno != EEXIST)
		return snprintf(why, size, "mkdir %s: %s", root, strerror(errno)), -1;
	if (lstat(root, &st) < 0)
		return snprintf(why, size, "%s: %s", root, strerror(errno)), -1;
	if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077))
		return snprintf(why, size, "%s is not a directory of ours with mode 0700", root),
		       -1;
	return 0;
}

/* Removes root/name (a channel's name: docker_chan_name_ok) with its
 * socket.  0, or -1 with errno (rmdir's). */
static int chan_rm(const char *root, const char *name)
{
	char path[DOCKER_PATH_MAX + 64];

	snprintf(path, sizeof(path), "%s/%.*s/" CHAN_SOCK, root, DOCKER_CHAN_NAME_LEN, name);
	unlink(path);
	path[strlen(path) - sizeof(CHAN_SOCK)] = '\0';
	return rmdir(path);
}

/* Whether a container on the engine names the channel name. */
static bool chan_named(const json_t *list, const char *name)
{
	const json_t *c;
	size_t i;

	json_array_foreach(list, i, c) {
		const char *v = json_string_value(json_object_get(json_object_get(c, "Labels"),
								  DOCKER_LABEL_CHAN));

		if (v && !strcmp(v, name))
			return true;
	}
	return false;
}

/* Removes the directories of containers that are gone without sandgate
 * (docker rm by hand, a sandgate killed before it removed one), once per
 * process: one engine call. */
static void chan_sweep(struct docker_ctx *ctx)
{
	json_t *list = docker_containers(ctx, "{\"label\":[\"" DOCKER_LABEL_CHAN "\"]}", true, NULL);
	struct dirent *de;
	struct stat st;
	DIR *d;
	int dfd;

	if (!list || !(d = opendir(ctx->chan_root))) {
		json_decref(list);
		return;
	}
	dfd = dirfd(d);
	while ((de = readdir(d))) {
		if (!docker_chan_name_ok(de->d_name) || chan_named(list, de->d_name) ||
		    fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISDIR(st.st_mode) || time(NULL) - st.st_mtime < CHAN_STALE_S ||
		    chan_rm(ctx->chan_root, de->d_name) < 0)
			continue;
		ctx->host->log(SG_LOG_INFO, DOCKER_PLUGIN, "runner channel %s: its container is "
			       "gone, removed", de->d_name);
	}
	closedir(d);
	json_decref(list);
}

/* Called once, chan_lock held.  The root is known (chan_root) whenever it
 * is there and safe, so that a process with the channel off still removes
 * the directories of the containers it removes; chan_on says whether new
 * sandboxes get one. */
static void chan_decide(struct docker_ctx *ctx)
{
	const char *v = ctx->host->config_get("docker", "runner_channel");
	const char *sd = ctx->host->state_dir();
	/* resolved once: a link on the way (/home -> /var/home) is followed
	 * now, and the path the engine binds is the directory itself */
	char *state = sd && *sd ? realpath(sd, NULL) : NULL;
	bool force = v && !strcmp(v, "true"), want;
	char why[DOCKER_PATH_MAX + 96] = "";

	want = ctx->runner_on && !(v && !strcmp(v, "false"));
	if (!state ||
	    snprintf(ctx->chan_root, sizeof(ctx->chan_root), "%s/runner-chan", state) >=
		    (int)sizeof(ctx->chan_root) ||
	    chan_root_check(ctx->chan_root, want, why, sizeof(why)) < 0) {
		if (want)
			ctx->host->log(SG_LOG_INFO, DOCKER_PLUGIN, "runner channel: off (%s): "
				       "runners speak through the engine",
				       why[0] ? why : "no state directory, or its path is too long");
		ctx->chan_root[0] = '\0';
		free(state);
		return;
	}
	free(state);
	if (!want) {
		ctx->host->log(SG_LOG_INFO, DOCKER_PLUGIN, "runner channel: off (%s)",
			       ctx->runner_on ? "[docker] runner_channel" : "[docker] runner");
		return;
	}
	if (!force && !docker_engine_sees_dir(ctx, ctx->chan_root)) {
		ctx->host->log(SG_LOG_INFO, DOCKER_PLUGIN, "runner channel: off (the engine does "
			       "not see our files, or we may not look): runners speak through "
			       "the engine");
		return;
	}
	ctx->chan_on = true;
	ctx->host->log(SG_LOG_INFO, DOCKER_PLUGIN, "runner channel: on, %s", ctx->chan_root);
	chan_sweep(ctx);
}

/* Decides once; returns with chan_lock held. */
static void chan_lock_decided(struct docker_ctx *ctx)
{
	pthread_mutex_lock(&ctx->chan_lock);
	if (!ctx->chan_decided) {
		ctx->chan_decided = true;
		chan_decide(ctx);
	}
}

/* Whether new sandboxes get a channel: decided once, at the first need
 * ([docker] runner_channel; auto: the engine is on this host and sees our
 * state directory). */
static bool chan_on(struct docker_ctx *ctx)
{
	bool on;

	chan_lock_decided(ctx);
	on = ctx->chan_on;
	pthread_mutex_unlock(&ctx->chan_lock);
	return on;
}

/* Whether the root is known (on or off): chan_root may be read after. */
static bool chan_root_known(struct docker_ctx *ctx)
{
	bool known;

	chan_lock_decided(ctx);
	known = ctx->chan_root[0] != '\0';
	pthread_mutex_unlock(&ctx->chan_lock);
	return known;
}

void docker_chan_result(struct docker_ctx *ctx, bool reached, const char *cid)
{
	pthread_mutex_lock(&ctx->chan_lock);
	if (reached) {
		ctx->chan_worked = true;
	} else if (ctx->chan_on && !ctx->chan_worked) {
		/* The first runner could not reach its socket: the engine's
		 * files are not ours after all (a socket forwarded from
		 * another host passes the look).  Once one has, a failure is
		 * that sandbox's own doing, and changes nothing for others. */
		ctx->chan_on = false;
		ctx->host->log(SG_LOG_WARNING, DOCKER_PLUGIN, "runner channel: the first runner "
			       "(in %.12s) could not reach its socket, so the engine does not see "
			       "our files: off for new sandboxes", cid);
	}
	pthread_mutex_unlock(&ctx->chan_lock);
}

int docker_chan_of(struct docker_ctx *ctx, const json_t *info, char *name, size_t size)
{
	const json_t *labels = json_object_get(info, "Labels") ? json_object_get(info, "Labels") :
			       json_object_get(json_object_get(info, "Config"), "Labels");
	const char *label = json_string_value(json_object_get(labels, DOCKER_LABEL_CHAN));
	char src[DOCKER_PATH_MAX + 64];
	const json_t *m;
	size_t i;

	name[0] = '\0';
	/* the label alone proves nothing: an image's LABEL is there too */
	if (!docker_chan_name_ok(label) || size <= DOCKER_CHAN_NAME_LEN || !chan_root_known(ctx))
		return 0;
	snprintf(src, sizeof(src), "%s/%s", ctx->chan_root, label);
	json_array_foreach(json_object_get(info, "Mounts"), i, m) {
		const char *t = json_string_value(json_object_get(m, "Type"));
		const char *s = json_string_value(json_object_get(m, "Source"));
		const char *d = json_string_value(json_object_get(m, "Destination"));

		if (t && s && d && !strcmp(t, "bind") && !strcmp(s, src) &&
		    !strcmp(d, DOCKER_CHAN_DIR) && json_is_false(json_object_get(m, "RW"))) {
			snprintf(name, size, "%s", label);
			return 1;
		}
	}
	return 0;
}

bool docker_chan_name_ok(const char *name)
{
	size_t i;

	for (i = 0; name && name[i]; i++)
		if (!strchr("0123456789abcdef", name[i]))
			return false;
	return i == DOCKER_CHAN_NAME_LEN;
}

/* Whether the container could make its read-only bind writable (mount
 * needs CAP_SYS_ADMIN): then the channel's directory would be its to fill
 * with links, and it gets none. */
static bool chan_can_remount(const json_t *hc)
{
	const json_t *c;
	size_t i;

	if (json_is_true(json_object_get(hc, "Privileged")))
		return true;
	json_array_foreach(json_object_get(hc, "CapAdd"), i, c) {
		const char *s = json_string_value(c);

		if (s && (!strcasecmp(s, "ALL") || !strcasecmp(s, "SYS_ADMIN") ||
			  !strcasecmp(s, "CAP_SYS_ADMIN")))
			return true;
	}
	return false;
}

int docker_chan_add(struct docker_ctx *ctx, json_t *body, char *name, size_t size)
{
	unsigned char rnd[DOCKER_CHAN_NAME_LEN / 2];
	char dir[DOCKER_PATH_MAX + 64], bind[DOCKER_PATH_MAX + 96];
	json_t *hc = json_object_get(body, "HostConfig"), *binds;

	name[0] = '\0';
	if (!hc || size <= DOCKER_CHAN_NAME_LEN || !chan_on(ctx) || chan_can_remount(hc))
		return 0;
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		return 0;
	for (size_t i = 0; i < sizeof(rnd); i++)
		snprintf(name + 2 * i, 3, "%02x", rnd[i]);
	snprintf(dir, sizeof(dir), "%s/%s", ctx->chan_root, name);
	/* 0711: the runner, whatever its uid in the container, reaches the
	 * socket by name and cannot list or change the directory */
	if (mkdir(dir, 0711) < 0 || chmod(dir, 0711) < 0) {
		ctx->host->log(SG_LOG_WARNING, DOCKER_PLUGIN, "runner channel %s: %s", dir,
			       strerror(errno));
		rmdir(dir);
		name[0] = '\0';
		return 0;
	}
	snprintf(bind, sizeof(bind), "%s:" DOCKER_CHAN_DIR ":ro", dir);
	binds = json_object_get(hc, "Binds");
	if (!binds && json_object_set_new(hc, "Binds", json_array()) == 0)
		binds = json_object_get(hc, "Binds");
	if (json_array_append_new(binds, json_string(bind)) < 0 ||
	    json_object_set_new(json_object_get(body, "Labels"), DOCKER_LABEL_CHAN,
				json_string(name)) < 0) {
		docker_chan_remove(ctx, name);
		name[0] = '\0';
		return -1;
	}
	return 0;
}

void docker_chan_remove(struct docker_ctx *ctx, const char *name)
{
	if (!docker_chan_name_ok(name) || !chan_root_known(ctx))
		return;
	if (chan_rm(ctx->chan_root, name) < 0 && errno != ENOENT)
		ctx->host->log(SG_LOG_DEBUG, DOCKER_PLUGIN, "runner channel %s/%s: %s",
			       ctx->chan_root, name, strerror(errno));
}

/* The channel directory, opened without following a link: the socket is
 * bound through /proc/self/fd/N, so a long state path never meets
 * sun_path's 108 bytes. */
static int chan_dir_open(struct docker_ctx *ctx, const char *name)
{
	char dir[DOCKER_PATH_MAX + 64];

	if (!chan_root_known(ctx) || !docker_chan_name_ok(name))
		return -1;
	snprintf(dir, sizeof(dir), "%s/%s", ctx->chan_root, name);
	return open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

int docker_chan_listen(struct docker_ctx *ctx, const char *name)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int dfd = chan_dir_open(ctx, name), fd = -1;

	if (dfd < 0)
		return -1;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/" CHAN_SOCK, dfd);
	unlinkat(dfd, CHAN_SOCK, 0); /* the last runner's */
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	/* 0666 on the socket: its directory's 0711 and the root's 0700 keep
	 * the host's other users out; inside, the token decides.  Never
	 * through a link: what is there is whatever the container could put
	 * there if it ever could write (bind itself does not follow one). */
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    fchmodat(dfd, CHAN_SOCK, 0666, AT_SYMLINK_NOFOLLOW) < 0 || listen(fd, 4) < 0) {
		ctx->host->log(SG_LOG_WARNING, DOCKER_PLUGIN, "runner channel %s/%s: %s",
			       ctx->chan_root, name, strerror(errno));
		if (fd >= 0)
			close(fd);
		unlinkat(dfd, CHAN_SOCK, 0);
		fd = -1;
	}
	close(dfd);
	return fd;
}

void docker_chan_unlisten(struct docker_ctx *ctx, const char *name, int fd)
{
	int dfd = chan_dir_open(ctx, name);

	if (fd >= 0)
		close(fd);
	if (dfd >= 0) {
		unlinkat(dfd, CHAN_SOCK, 0);
		close(dfd);
	}
}

/* Compares the whole token line in constant time. */
static bool chan_token_ok(const char *got, size_t n, const char *want)
{
	size_t len = strlen(want);
	unsigned char d = n != len;

	for (size_t i = 0; i < len; i++)
		d |= (unsigned char)(want[i] ^ (i < n ? got[i] : 0));
	return d == 0;
}

/* A connection on the channel that has not shown its token yet. */
struct chan_pend {
	int fd;
	size_t n;
	long long until;                       /* docker_now_ms() */
	char line[2 * DOCKER_CHAN_TOKEN_BYTES + 1]; /* the token and its newline */
};

/* Reads what pend has sent, never past its token line (the HELLO behind it
 * stays for the transport).  1: it is the token; 0: not yet; -1: drop it. */
static int chan_pend_read(struct chan_pend *pd, const char *token)
{
	size_t len = strlen(token) + 1;
	ssize_t r = read(pd->fd, pd->line + pd->n, len - pd->n);

	if (r < 0 && (errno == EINTR || errno == EAGAIN))
		return 0;
	if (r <= 0)
		return -1;
	pd->n += (size_t)r;
	if (pd->n < len)
		return 0;
	return pd->line[len - 1] == '\n' && chan_token_ok(pd->line, len - 1, token) ? 1 : -1;
}

static void chan_pend_drop(struct chan_pend *pend, size_t *k, size_t i)
{
	close(pend[i].fd);
	pend[i] = pend[--*k];
}

/* Drops the entry that has waited longest (the smallest until). */
static void chan_pend_drop_oldest(struct chan_pend *pend, size_t *k)
{
	size_t old = 0;

	for (size_t i = 1; i < *k; i++)
		if (pend[i].until < pend[old].until)
			old = i;
	chan_pend_drop(pend, k, old);
}

/* Up to CHAN_PEND_MAX connections wait for their token line at once, each
 * CHAN_TOKEN_MS at most, the one that has waited longest dropped for a new
 * one: one that says nothing, or a wrong token, cannot keep the runner out. */
int docker_chan_accept(int lfd, int xfd, const char *token, long long end,
		       int (*xready)(void *ud), void *ud)
{
	struct chan_pend pend[CHAN_PEND_MAX];
	struct pollfd p[2 + CHAN_PEND_MAX];
	size_t k = 0;
	int won = -1;

	while (won < 0) {
		long long now = docker_now_ms(), wait = end - now;

		for (size_t i = 0; i < k; i++) {
			if (pend[i].until <= now) {
				chan_pend_drop(pend, &k, i--);
				continue;
			}
			if (pend[i].until - now < wait)
				wait = pend[i].until - now;
		}
		if (now >= end)
			break;
		p[0] = (struct pollfd){ .fd = lfd, .events = POLLIN };
		p[1] = (struct pollfd){ .fd = xfd, .events = POLLIN };
		for (size_t i = 0; i < k; i++)
			p[2 + i] = (struct pollfd){ .fd = pend[i].fd, .events = POLLIN };
		if (poll(p, 2 + k, (int)wait) < 0 && errno != EINTR)
			break;
		if (p[1].revents && xready(ud) != 0)
			break;
		for (size_t i = k; i-- > 0;) {
			int r = p[2 + i].revents ? chan_pend_read(&pend[i], token) : 0;

			if (r > 0) {
				won = pend[i].fd;
				pend[i] = pend[--k];
				break;
			}
			if (r < 0)
				chan_pend_drop(pend, &k, i);
		}
		if (won < 0 && p[0].revents) {
			int cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

			/* out of descriptors: give the channel up (the runner,
			 * refused, speaks on stdio) rather than spin */
			if (cfd < 0 && errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
				break;
			if (cfd >= 0 && k == CHAN_PEND_MAX)
				chan_pend_drop_oldest(pend, &k);
			if (cfd >= 0)
				pend[k++] = (struct chan_pend){ .fd = cfd,
					.until = docker_now_ms() + CHAN_TOKEN_MS };
		}
	}
	while (k)
		chan_pend_drop(pend, &k, 0);
	if (won >= 0)
		fcntl(won, F_SETFL, fcntl(won, F_GETFL) & ~O_NONBLOCK);
	return won;
}
