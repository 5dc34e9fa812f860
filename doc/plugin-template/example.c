/*
 * example.so: the copy-me sandgate backend (plugin ABI 2.1).
 *
 * It fills the required slot groups (probe, lifecycle, exec, files) and
 * the stream group (persistent shells).  A machine is a directory on this
 * host, <[example] root>/ex-<12 hex>, and its workspace.  Commands run
 * there with /bin/sh, as sandgate's own user: NOTHING IS ISOLATED (the
 * path checks of the file slots are no wall: a command can go anywhere,
 * and so can a link).  That is the part you replace: where this file
 * forks a shell and opens files, your backend calls its service (a
 * container engine, a VM, a cloud API).  The rest (the descriptor, the
 * configuration keys, the owner tags, the error and memory conventions)
 * carries over as it is.  doc/plugin-guide.md walks through it slot by
 * slot; <sandgate/plugin.h> is the reference for every slot.
 *
 * Because it is not a sandbox, its probe never calls it usable: it is never
 * chosen as the default backend by accident.  Name it to use it
 * (create_sandbox "backend": "example", or [sandbox] default_backend).
 *
 * Build (plain cc; the guide also shows libtool):
 *   cc -std=c11 -Wall -Wextra -shared -fPIC -fvisibility=hidden \
 *      -o example.so example.c $(pkg-config --cflags --libs sandgate-plugin)
 *
 * To start your own: copy this directory, rename example.c and every
 * "example" / EX_ name (the descriptor's name must equal the file stem),
 * then replace the bodies marked "YOUR BACKEND".
 */
#define _XOPEN_SOURCE 700 /* nftw, and POSIX 2008 (openat, mkdtemp) */

#include <sandgate/plugin.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define EX_NAME      "example"
#define EX_ID_PREFIX "ex-"
#define EX_ID_HEX    12
#define EX_PATH_MAX  4096

/* The plugin's state (init's *priv): read-only after init, so no lock. */
struct ex_ctx {
	const struct sg_host_api *host; /* borrowed, process lifetime */
	char root[EX_PATH_MAX];         /* [example] root: the machine directories */
};

/* m->handle: made by create/attach, freed by machine_release. */
struct ex_machine {
	struct ex_ctx *ctx;             /* borrowed */
	char dir[EX_PATH_MAX];          /* the machine's directory = its workspace */
};

/* ---- small helpers ----------------------------------------------------------------- */

/* mkdir -p, mode 0700 for what it makes.  0 or -1 (errno). */
static int mkdir_p(const char *path)
{
	char buf[EX_PATH_MAX];

	if ((size_t)snprintf(buf, sizeof(buf), "%s", path) >= sizeof(buf))
		return (errno = ENAMETOOLONG), -1;
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0700) < 0 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	return mkdir(buf, 0700) == 0 || errno == EEXIST ? 0 : -1;
}

/* True for an id this plugin makes: "ex-" and 12 lowercase hex digits.
 * Ids from the record are checked before they become paths. */
static bool id_ok(const char *id)
{
	size_t n = strlen(EX_ID_PREFIX);

	return strncmp(id, EX_ID_PREFIX, n) == 0 && strlen(id + n) == EX_ID_HEX &&
	       strspn(id + n, "0123456789abcdef") == EX_ID_HEX;
}

static struct ex_machine *ex_of(struct sg_machine *m)
{
	return m ? m->handle : NULL;
}

/* The path a file slot was given, if it lies in the machine's directory.
 * Paths arrive absolute (the core joined relative ones to the workspace);
 * this refuses the others and any ".." component.  YOUR BACKEND: a real
 * machine resolves paths inside itself and needs no such check; note
 * that a symbolic link made in the directory still leads out of it. */
static int ex_path(struct ex_machine *em, const char *path, struct sg_err *err)
{
	size_t n = strlen(em->dir);
	const char *p;

	if (strncmp(path, em->dir, n) != 0 || (path[n] != '\0' && path[n] != '/'))
		return em->ctx->host->errf(err, SG_E_PERM, "example: path %s is outside the "
					   "machine's directory %s: give a path in it", path, em->dir);
	for (p = path + n; (p = strstr(p, "/..")) != NULL; p += 3)
		if (p[3] == '/' || p[3] == '\0')
			return em->ctx->host->errf(err, SG_E_INVAL, "example: path %s has a \"..\" "
						   "component: give the path without it", path);
	return 0;
}

/* ---- init / fini / probe --------------------------------------------------------- */

/* Reads the configuration only: init must not block on the network. */
static int ex_init(const struct sg_host_api *host, void **priv, struct sg_err *err)
{
	struct ex_ctx *ctx = calloc(1, sizeof(*ctx)); /* freed by ex_fini() */
	const char *root = host->config_get(EX_NAME, "root");
	int n;

	if (!ctx)
		return host->errf(err, SG_E_NOMEM, "example: out of memory");
	ctx->host = host;
	if (root && *root)
		n = snprintf(ctx->root, sizeof(ctx->root), "%s", root);
	else
		n = snprintf(ctx->root, sizeof(ctx->root), "%s/example",
			     host->state_dir() ? host->state_dir() : "/tmp");
	if (n < 0 || (size_t)n >= sizeof(ctx->root) || ctx->root[0] != '/') {
		free(ctx);
		return host->errf(err, SG_E_INVAL, "example: [example] root = %s is not an "
				  "absolute path (or is too long): set an absolute directory",
				  root ? root : "");
	}
	*priv = ctx;
	return 0;
}

static void ex_fini(void *priv)
{
	free(priv);
}

/* YOUR BACKEND: check that the service answers within timeout_ms and
 * return 0 when a machine can be made now; fill out->preference (the
 * project's: docker 40, local 30, ssh 20, fc 10). */
static int ex_probe(void *priv, unsigned timeout_ms, struct sg_probe *out, struct sg_err *err)
{
	struct ex_ctx *ctx = priv;

	(void)timeout_ms;
	out->preference = 0;
	out->details = json_pack("{s:s}", "root", ctx->root);
	if (mkdir_p(ctx->root) < 0 || access(ctx->root, W_OK | X_OK) < 0)
		return ctx->host->errf(err, SG_E_UNAVAILABLE, "example: cannot use [example] root "
				       "%s: %s: set it to a directory sandgate's user may write",
				       ctx->root, strerror(errno));
	return ctx->host->errf(err, SG_E_INVAL, "example: the template backend runs commands "
			       "unconfined on this host, so it is never chosen by probe: name it "
			       "(create_sandbox backend \"example\", or [sandbox] default_backend)");
}

/* ---- machines ------------------------------------------------------------------------ */

/* The owner tag of a machine, a file beside its directory (out of the
 * reach of its commands): what machine_list reports for it. */
static int tag_path(struct ex_ctx *ctx, const char *id, char *out, size_t n)
{
	return (size_t)snprintf(out, n, "%s/%s.owner", ctx->root, id) >= n ? -1 : 0;
}

/* Writes the tag atomically: a temporary file, then rename. */
static int tag_write(struct ex_ctx *ctx, const char *id, const struct sg_create_req *req)
{
	char path[EX_PATH_MAX], tmp[EX_PATH_MAX + 8];
	json_t *j;
	int fd, rc = -1;

	if (tag_path(ctx, id, path, sizeof(path)) < 0)
		return -1;
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	j = json_pack("{s:s, s:s, s:b, s:I, s:I}", "id", id, "owner", req->owner ? req->owner : "",
		      "persistent", req->persistent, "created", (json_int_t)time(NULL),
		      "lifetime", (json_int_t)req->lifetime_s);
	fd = j ? open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600) : -1;
	if (fd >= 0 && json_dumpfd(j, fd, JSON_COMPACT) == 0 && fsync(fd) == 0)
		rc = 0;
	if (fd >= 0)
		close(fd);
	if (rc == 0 && rename(tmp, path) < 0)
		rc = -1;
	if (rc < 0)
		unlink(tmp);
	json_decref(j);
	return rc;
}

/* Binds m to the machine `id` in `dir`: sets its strings, makes its handle. */
static int ex_bind(struct ex_ctx *ctx, struct sg_machine *m, const char *id, const char *dir,
		struct sg_err *err)
{
	const struct sg_host_api *h = ctx->host;
	struct ex_machine *em;

	if (h->machine_set(m, SG_MACHINE_ID, "%s", id) < 0 ||
	    h->machine_set(m, SG_MACHINE_WORKSPACE, "%s", dir) < 0 ||
	    h->machine_set(m, SG_MACHINE_URL, "file://%s", dir) < 0 ||
	    h->machine_set(m, SG_MACHINE_TEMPLATE, "directory") < 0)
		return h->errf(err, SG_E_INVAL, "example: the directory %s is too long or holds "
			       "control characters: set a shorter [example] root", dir);
	em = calloc(1, sizeof(*em)); /* freed by ex_release() */
	if (!em)
		return h->errf(err, SG_E_NOMEM, "example: out of memory");
	em->ctx = ctx;
	snprintf(em->dir, sizeof(em->dir), "%s", dir);
	m->handle = em;
	return 0;
}

/* YOUR BACKEND: make the machine (tagged with req->owner), wait for it,
 * reporting progress on long waits (host->progress). */
static int ex_create(void *priv, const struct sg_create_req *req, struct sg_call *call,
		     struct sg_machine *m, struct sg_err *err)
{
	struct ex_ctx *ctx = priv;
	char dir[EX_PATH_MAX], tag[EX_PATH_MAX], id[sizeof(EX_ID_PREFIX) + EX_ID_HEX];
	unsigned char rnd[EX_ID_HEX / 2];
	int fd;

	(void)call;
	if (req->template_name && strcmp(req->template_name, "directory") != 0)
		return ctx->host->errf(err, SG_E_NOTFOUND, "example: no template '%s': this "
				       "backend has one, \"directory\" (or omit template)",
				       req->template_name);
	fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	if (fd < 0 || read(fd, rnd, sizeof(rnd)) != (ssize_t)sizeof(rnd)) {
		if (fd >= 0)
			close(fd);
		return ctx->host->errf(err, SG_E_IO, "example: cannot read /dev/urandom");
	}
	close(fd);
	snprintf(id, sizeof(id), "%s", EX_ID_PREFIX);
	for (size_t i = 0; i < sizeof(rnd); i++)
		snprintf(id + strlen(id), 3, "%02x", rnd[i]);
	if ((size_t)snprintf(dir, sizeof(dir), "%s/%s", ctx->root, id) >= sizeof(dir))
		return ctx->host->errf(err, SG_E_INVAL, "example: [example] root %s is too long",
				       ctx->root);
	if (mkdir_p(ctx->root) < 0)
		return ctx->host->errf(err, SG_E_IO, "example: cannot make [example] root %s: %s",
				       ctx->root, strerror(errno));
	/* The tag first: a crash after this leaves something machine_list finds. */
	if (tag_write(ctx, id, req) < 0)
		return ctx->host->errf(err, SG_E_IO, "example: cannot write the owner tag of %s "
				       "in %s: %s", id, ctx->root, strerror(errno));
	if (mkdir(dir, 0700) < 0) {
		int e = errno;

		if (tag_path(ctx, id, tag, sizeof(tag)) == 0)
			unlink(tag);
		return ctx->host->errf(err, SG_E_IO, "example: cannot make %s: %s", dir,
				       strerror(e));
	}
	if (ex_bind(ctx, m, id, dir, err) < 0) {
		rmdir(dir);
		if (tag_path(ctx, id, tag, sizeof(tag)) == 0)
			unlink(tag);
		return -1;
	}
	return 0;
}

/* Binds an existing machine, named by the core's record (`kept`: what this
 * plugin gave host->machine_keep, unused here: the id names the directory). */
static int ex_attach(void *priv, const char *id, const json_t *kept, struct sg_call *call,
		     struct sg_machine *m, struct sg_err *err)
{
	struct ex_ctx *ctx = priv;
	char dir[EX_PATH_MAX];
	struct stat st;

	(void)kept;
	(void)call;
	if (!id_ok(id))
		return ctx->host->errf(err, SG_E_NOTFOUND, "example: '%s' is not an id of this "
				       "backend (ex- and 12 hex digits)", id);
	if ((size_t)snprintf(dir, sizeof(dir), "%s/%s", ctx->root, id) >= sizeof(dir) ||
	    lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
		return ctx->host->errf(err, SG_E_GONE, "example: machine %s is gone (no %s)", id, dir);
	return ex_bind(ctx, m, id, dir, err);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	return (flag == FTW_DP ? rmdir(path) : unlink(path)) < 0 && errno != ENOENT ? -1 : 0;
}

/* rm -rf that never follows a link.  0 or -1 (errno). */
static int remove_tree(const char *path)
{
	return nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS) < 0 && errno != ENOENT ? -1 : 0;
}

/* An already gone machine is success. */
static int ex_destroy(struct sg_machine *m, struct sg_call *call, struct sg_err *err)
{
	struct ex_machine *em = ex_of(m);
	char tag[EX_PATH_MAX];

	(void)call;
	if (remove_tree(em->dir) < 0)
		return em->ctx->host->errf(err, SG_E_IO, "example: cannot remove %s: %s", em->dir,
					   strerror(errno));
	if (tag_path(em->ctx, m->id, tag, sizeof(tag)) == 0)
		unlink(tag);
	return 0;
}

/* Frees the handle only; the machine stays. */
static void ex_release(struct sg_machine *m)
{
	free(m->handle);
	m->handle = NULL;
}

/* Every machine this plugin tagged, for the core's search of machines whose
 * record was lost: {id, owner, persistent, created, lifetime}. */
static int ex_list(void *priv, struct sg_call *call, json_t **machines, struct sg_err *err)
{
	struct ex_ctx *ctx = priv;
	struct dirent *de;
	char path[EX_PATH_MAX];
	DIR *d;

	(void)call;
	*machines = json_array();
	if (!*machines)
		return ctx->host->errf(err, SG_E_NOMEM, "example: out of memory");
	d = opendir(ctx->root);
	if (!d)
		return 0; /* no root yet: no machines */
	while ((de = readdir(d)) != NULL) {
		size_t n = strlen(de->d_name);
		json_t *tag;

		if (n < 7 || strcmp(de->d_name + n - 6, ".owner") != 0 ||
		    (size_t)snprintf(path, sizeof(path), "%s/%s", ctx->root, de->d_name) >= sizeof(path))
			continue;
		tag = json_load_file(path, 0, NULL);
		if (json_is_object(tag))
			json_array_append(*machines, tag);
		json_decref(tag);
	}
	closedir(d);
	return 0;
}

/* ---- exec ---------------------------------------------------------------------------- */

/* Appends what fd has to buf, up to cap bytes; the rest is read and
 * dropped (*cut set).  Returns 0 at EOF, 1 while open, -1 on error. */
static int drain(const struct sg_host_api *h, int fd, struct sg_buf *buf, size_t cap, bool *cut)
{
	char chunk[16384];
	ssize_t n = read(fd, chunk, sizeof(chunk));

	if (n < 0)
		return errno == EINTR || errno == EAGAIN ? 1 : -1;
	if (n == 0)
		return 0;
	if (buf->len < cap) {
		size_t keep = (size_t)n < cap - buf->len ? (size_t)n : cap - buf->len;

		if (h->buf_append(buf, chunk, keep) < 0)
			return -1;
		if (keep < (size_t)n)
			*cut = true;
	} else {
		*cut = true;
	}
	return 1;
}

/* A pipe whose ends close on exec: a command another thread starts at the
 * same time must not hold them, or this one's EOF would wait for it.
 * (pipe2 does it in one step, but is not in POSIX 2008; the gap here is
 * between two calls, not across a fork of ours.)  0 or -1 (errno). */
static int pipe_cloexec(int fd[2])
{
	if (pipe(fd) < 0)
		return -1;
	if (fcntl(fd[0], F_SETFD, FD_CLOEXEC) < 0 || fcntl(fd[1], F_SETFD, FD_CLOEXEC) < 0) {
		int e = errno;

		close(fd[0]);
		close(fd[1]);
		fd[0] = fd[1] = -1;
		errno = e;
		return -1;
	}
	return 0;
}

/* The command's environment: a small base, then what the core gave (the
 * machine's create-time variables and the call's), which overrides it.
 * Never sandgate's own environment: it may hold keys.  A new vector of
 * borrowed strings: the caller frees the vector only. */
static char **exec_env(const struct sg_exec_req *req, const char *dir, char *home, size_t size)
{
	const char *base[] = { "PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", home };
	size_t n = 0, i = 0;
	char **env;

	snprintf(home, size, "HOME=%s", dir);
	for (const char *const *e = req->env; e && *e; e++)
		n++;
	env = calloc(n + 4, sizeof(*env));
	if (!env)
		return NULL;
	for (size_t b = 0; b < 3; b++) {
		size_t k = strcspn(base[b], "=") + 1;
		bool given = false;

		for (const char *const *e = req->env; e && *e && !given; e++)
			given = strncmp(*e, base[b], k) == 0;
		if (!given)
			env[i++] = (char *)base[b];
	}
	for (const char *const *e = req->env; e && *e; e++)
		env[i++] = (char *)*e;
	return env;
}

/* The program vector: `sh -c command`, or argv, a bare name searched in
 * the command's PATH by the shell.  A new vector of borrowed strings. */
static char **exec_argv(const struct sg_exec_req *req)
{
	size_t n = 0;
	char **v;

	for (const char *const *a = req->argv; a && *a; a++)
		n++;
	v = calloc(n + 5, sizeof(*v));
	if (!v)
		return NULL;
	v[0] = (char *)"/bin/sh";
	v[1] = (char *)"-c";
	if (req->command) {
		v[2] = (char *)req->command;
		return v;
	}
	v[2] = (char *)"exec \"$@\"";
	v[3] = (char *)"sh";
	for (size_t i = 0; i < n; i++)
		v[4 + i] = (char *)req->argv[i];
	return v;
}

/* Descriptors a child closes above 2: sandgate may have inherited some
 * without close-on-exec (a make jobserver's), and a command must not see
 * them.  Read before fork: sysconf is not async-signal-safe. */
static int fd_limit(void)
{
	long n = sysconf(_SC_OPEN_MAX);

	return n < 0 || n > 65536 ? 65536 : (int)n;
}

/* In the child: the command's own process group, its pipes (stdin: `in`,
 * or /dev/null when -1), only descriptors 0-2, its directory.  Only
 * async-signal-safe calls. */
static void child(const char *cwd, int in, int out, int errfd, int max_fd, char **argv,
		  char **env)
{
	if (in < 0)
		in = open("/dev/null", O_RDONLY);
	setpgid(0, 0);
	if (in < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(errfd, 2) < 0 ||
	    chdir(cwd) < 0)
		_exit(127);
	for (int fd = 3; fd < max_fd; fd++)
		close(fd);
	execve(argv[0], argv, env);
	_exit(127);
}

/* Reads both pipes until they close, the timeout passes or the call is
 * cancelled.  0, 1 when cancelled, -1 on a read error (errno). */
static int pump(const struct sg_host_api *h, const struct sg_exec_req *req, struct sg_call *call,
		int fds[2], struct sg_exec_result *res)
{
	size_t cap = req->output_cap ? req->output_cap : SG_OUTPUT_CAP_DEFAULT;
	struct pollfd pf[3] = { { fds[0], POLLIN, 0 }, { fds[1], POLLIN, 0 },
				{ h->cancel_fd(call), POLLIN, 0 } };
	struct timespec t0, now;
	int open_fds = 2;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (open_fds > 0) {
		int wait_ms = -1;

		if (req->timeout_ms) {
			long long spent;

			clock_gettime(CLOCK_MONOTONIC, &now);
			spent = (now.tv_sec - t0.tv_sec) * 1000LL + (now.tv_nsec - t0.tv_nsec) / 1000000;
			if (spent >= req->timeout_ms) {
				res->timed_out = true;
				return 0;
			}
			wait_ms = (int)(req->timeout_ms - spent);
		}
		if (poll(pf, 3, wait_ms) < 0) {
			if (errno == EINTR)
				continue; /* revents are stale: poll again */
			return -1;
		}
		if (pf[2].fd >= 0 && pf[2].revents)
			return 1;
		for (int i = 0; i < 2; i++) {
			int r = pf[i].fd >= 0 && pf[i].revents
				? drain(h, pf[i].fd, i ? &res->err : &res->out, cap,
					i ? &res->err_truncated : &res->out_truncated)
				: 1;

			if (r < 0)
				return -1;
			if (r == 0) {
				pf[i].fd = -1; /* poll ignores it now; the caller closes it */
				open_fds--;
			}
		}
	}
	return 0;
}

/* YOUR BACKEND: run the command in the machine.  Keep these semantics: the
 * exact bytes of stdout and stderr each up to the cap, a non-zero exit is
 * success, a timeout is success with timed_out and the partial output,
 * cancellation (host->cancel_fd) kills the command and is SG_E_CANCELLED. */
static int ex_exec(struct sg_machine *m, const struct sg_exec_req *req, struct sg_call *call,
		   struct sg_exec_result *res, struct sg_err *err)
{
	struct ex_machine *em = ex_of(m);
	const struct sg_host_api *h = em->ctx->host;
	const char *cwd = req->cwd ? req->cwd : em->dir;
	char home[EX_PATH_MAX + 8], **argv, **env;
	int po[2] = { -1, -1 }, pe[2] = { -1, -1 }, fds[2], status = 0, rc, max_fd = fd_limit();
	pid_t pid = -1;

	/* cwd is not held to the directory: the core runs its own scripts
	 * from "/" (interrupting a shell's jobs), and the command could cd
	 * anywhere anyway.  YOUR BACKEND: a cwd in the machine. */
	if ((!req->command) == (!req->argv) || (req->argv && !req->argv[0]))
		return h->errf(err, SG_E_INVAL, "example: give exactly one of command and argv");
	argv = exec_argv(req);
	env = exec_env(req, em->dir, home, sizeof(home));
	if (argv && env && pipe_cloexec(po) == 0 && pipe_cloexec(pe) == 0)
		pid = fork();
	if (pid == 0)
		child(cwd, -1, po[1], pe[1], max_fd, argv, env);
	rc = errno; /* of pipe or fork, before close(-1) changes it */
	free(argv); /* the child has its copy */
	free(env);
	close(po[1]);
	close(pe[1]);
	if (pid < 0) {
		close(po[0]);
		close(pe[0]);
		return h->errf(err, SG_E_IO, "example: cannot start the command: %s", strerror(rc));
	}
	setpgid(pid, pid); /* also here: the group exists before the kill below */
	fds[0] = po[0];
	fds[1] = pe[0];
	rc = pump(h, req, call, fds, res);
	if (rc < 0)
		rc = -errno;
	kill(-pid, SIGKILL); /* what the command left running in its group ends with it */
	waitpid(pid, &status, 0);
	close(po[0]);
	close(pe[0]);
	if (rc == 1)
		return h->errf(err, SG_E_CANCELLED, "example: the call was cancelled");
	if (rc < 0)
		return h->errf(err, SG_E_IO, "example: reading the command's output: %s",
			       strerror(-rc));
	res->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
	res->signal = WIFSIGNALED(status) && !res->timed_out ? WTERMSIG(status) : 0;
	return 0;
}

/* ---- streams (optional group: persistent shells) -------------------------------------- */

/* An interactive process: its stdin, and its stdout and stderr merged in
 * one pipe (in the order it wrote them).  Made by stream_open, freed by
 * stream_close. */
struct sg_stream {
	const struct sg_host_api *host; /* borrowed */
	pid_t pid;                      /* the process and its group */
	int in, out;                    /* our ends of its stdin and output */
};

/* YOUR BACKEND: open an interactive process in the machine (Docker: an
 * attached exec; SSH: a channel). */
static int ex_stream_open(struct sg_machine *m, const struct sg_exec_req *req,
			  struct sg_stream **out, struct sg_err *err)
{
	struct ex_machine *em = ex_of(m);
	const struct sg_host_api *h = em->ctx->host;
	const char *cwd = req->cwd ? req->cwd : em->dir;
	char home[EX_PATH_MAX + 8], **argv, **env;
	int pin[2] = { -1, -1 }, pout[2] = { -1, -1 }, e, max_fd = fd_limit();
	struct sg_stream *s;
	pid_t pid = -1;

	*out = NULL;
	if ((!req->command) == (!req->argv) || (req->argv && !req->argv[0]))
		return h->errf(err, SG_E_INVAL, "example: give exactly one of command and argv");
	s = calloc(1, sizeof(*s)); /* freed by ex_stream_close() */
	argv = exec_argv(req);
	env = exec_env(req, em->dir, home, sizeof(home));
	if (s && argv && env && pipe_cloexec(pin) == 0 && pipe_cloexec(pout) == 0)
		pid = fork();
	if (pid == 0)
		child(cwd, pin[0], pout[1], pout[1], max_fd, argv, env);
	e = errno;
	free(argv);
	free(env);
	close(pin[0]);
	close(pout[1]);
	if (pid < 0) {
		close(pin[1]);
		close(pout[0]);
		free(s);
		return h->errf(err, SG_E_IO, "example: cannot start the process: %s", strerror(e));
	}
	setpgid(pid, pid);
	*s = (struct sg_stream){ .host = h, .pid = pid, .in = pin[1], .out = pout[0] };
	*out = s;
	return 0;
}

static ssize_t ex_stream_write(struct sg_stream *s, const void *p, size_t n, struct sg_err *err)
{
	ssize_t w;

	do
		w = write(s->in, p, n);
	while (w < 0 && errno == EINTR);
	if (w < 0)
		return s->host->errf(err, errno == EPIPE ? SG_E_GONE : SG_E_IO, "example: "
				     "writing to the process: %s", strerror(errno));
	return w;
}

/* The bytes read, 0 at EOF, or -1: SG_E_TIMEOUT when nothing came. */
static ssize_t ex_stream_read(struct sg_stream *s, void *p, size_t n, int timeout_ms,
			      struct sg_err *err)
{
	struct pollfd pf = { s->out, POLLIN, 0 };
	int r;
	ssize_t got;

	do
		r = poll(&pf, 1, timeout_ms);
	while (r < 0 && errno == EINTR);
	if (r == 0)
		return s->host->errf(err, SG_E_TIMEOUT, "example: no output within %d ms",
				     timeout_ms);
	do
		got = r < 0 ? -1 : read(s->out, p, n);
	while (got < 0 && errno == EINTR);
	if (got < 0)
		return s->host->errf(err, SG_E_IO, "example: reading the process: %s",
				     strerror(errno));
	return got;
}

/* Ends the process and what it started; *exit_code gets its status. */
static int ex_stream_close(struct sg_stream *s, int *exit_code)
{
	int status = 0;

	if (!s) {
		if (exit_code)
			*exit_code = -1;
		return 0;
	}
	close(s->in);
	close(s->out);
	kill(-s->pid, SIGKILL);
	waitpid(s->pid, &status, 0);
	if (exit_code)
		*exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
	free(s);
	return 0;
}

/* ---- files ------------------------------------------------------------------------- */

static int io_err(const struct sg_host_api *h, struct sg_err *err, const char *what,
		  const char *path)
{
	int code = errno == ENOENT || errno == ENOTDIR ? SG_E_NOTFOUND
		 : errno == EACCES || errno == EPERM ? SG_E_PERM
		 : SG_E_IO;

	return h->errf(err, code, "example: %s %s: %s", what, path, strerror(errno));
}

/* YOUR BACKEND: every file slot reads or changes the file in the machine. */
static int ex_read(struct sg_machine *m, const char *path, size_t max, struct sg_call *call,
		   struct sg_buf *out, struct sg_err *err)
{
	struct ex_machine *em = ex_of(m);
	const struct sg_host_api *h = em->ctx->host;
	char chunk[65536];
	struct stat st;
	ssize_t n;
	int fd;

	(void)call;
	if (ex_path(em, path, err) < 0)
		return -1;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return io_err(h, err, "cannot open", path);
	if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
		close(fd);
		return h->errf(err, SG_E_INVAL, "example: %s is a directory: use list_files", path);
	}
	/* The cap holds while the file grows: never trust the size fstat saw. */
	while ((n = read(fd, chunk, sizeof(chunk))) > 0) {
		if (out->len + (size_t)n > max) {
			close(fd);
			return h->errf(err, SG_E_TOOBIG, "example: %s is larger than %zu bytes",
				       path, max);
		}
		if (h->buf_append(out, chunk, (size_t)n) < 0) {
			close(fd);
			return h->errf(err, SG_E_NOMEM, "example: out of memory");
		}
	}
	close(fd);
	return n < 0 ? io_err(h, err, "cannot read", path) : 0;
}

/* The parent directory of path, made when the options allow. */
static int parent_dir(const char *path, bool mk, char *dir, size_t size)
{
	char *slash;

	snprintf(dir, size, "%s", path);
	slash = strrchr(dir, '/');
	if (slash == dir)
		slash[1] = '\0';
	else if (slash)
		*slash = '\0';
	return mk ? mkdir_p(dir) : 0;
}

/* The file a write to `path` changes: path itself, or where its chain of
 * symbolic links ends (a write through a link keeps the link, as a write
 * in a machine does).  0, or -1 with errno ELOOP or ENAMETOOLONG. */
static int link_target(const char *path, char *out, size_t size)
{
	char link[EX_PATH_MAX];
	struct stat st;

	if ((size_t)snprintf(out, size, "%s", path) >= size)
		return (errno = ENAMETOOLONG), -1;
	for (int hops = 0; lstat(out, &st) == 0 && S_ISLNK(st.st_mode); hops++) {
		ssize_t n = readlink(out, link, sizeof(link) - 1);
		char *slash = strrchr(out, '/');

		if (hops == 40 || n < 0)
			return (errno = ELOOP), -1;
		link[n] = '\0';
		if (link[0] == '/') {
			if ((size_t)snprintf(out, size, "%s", link) >= size)
				return (errno = ENAMETOOLONG), -1;
		} else if (slash && (size_t)(slash + 1 - out) + (size_t)n < size) {
			memcpy(slash + 1, link, (size_t)n + 1);
		} else {
			return (errno = ENAMETOOLONG), -1;
		}
	}
	return 0;
}

/* Atomic: a temporary file beside it, fsync, rename.  An existing file
 * keeps its mode. */
static int ex_write(struct sg_machine *m, const char *path, const void *data, size_t len,
		    const struct sg_write_opts *opts, struct sg_call *call, struct sg_err *err)
{
	struct ex_machine *em = ex_of(m);
	const struct sg_host_api *h = em->ctx->host;
	char dir[EX_PATH_MAX], tmp[EX_PATH_MAX + 16], file[EX_PATH_MAX];
	mode_t mode = opts && opts->mode ? opts->mode : 0644;
	const char *p = data;
	struct stat st;
	int fd;

	(void)call;
	if (ex_path(em, path, err) < 0)
		return -1;
	if (link_target(path, file, sizeof(file)) < 0)
		return io_err(h, err, "cannot follow the links of", path);
	path = file;
	if (parent_dir(path, !(opts && opts->no_mkdir), dir, sizeof(dir)) < 0)
		return io_err(h, err, "cannot make the directory", dir);
	if (stat(path, &st) == 0) {
		if (S_ISDIR(st.st_mode))
			return h->errf(err, SG_E_INVAL, "example: %s is a directory", path);
		mode = st.st_mode & 07777;
	}
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.sgtmpXXXXXX", path) >= sizeof(tmp))
		return h->errf(err, SG_E_INVAL, "example: path %s is too long", path);
	fd = mkstemp(tmp);
	if (fd < 0)
		return io_err(h, err, "cannot write in", dir);
	while (len > 0) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		p += n;
		len -= (size_t)n;
	}
	if (len > 0 || fchmod(fd, mode) < 0 || fsync(fd) < 0 || close(fd) < 0) {
		int e = errno;

		close(fd);
		unlink(tmp);
		errno = e;
		return io_err(h, err, "cannot write", path);
	}
	if (rename(tmp, path) < 0) {
		int e = errno;

		unlink(tmp);
		errno = e;
		return io_err(h, err, "cannot replace", path);
	}
	return 0;
}

static int ft_type(mode_t mode)
{
	return S_ISREG(mode) ? SG_FT_FILE : S_ISDIR(mode) ? SG_FT_DIR
	     : S_ISLNK(mode) ? SG_FT_SYMLINK : SG_FT_OTHER;
}

static const char *const ft_names[] = { "file", "dir", "symlink", "other" };

/* Entries in name order, so that a listing is the same each time. */
static int ex_list_dir(struct sg_machine *m, const char *path, struct sg_call *call,
		       json_t **entries, struct sg_err *err)
{
	struct ex_machine *em = ex_of(m);
	const struct sg_host_api *h = em->ctx->host;
	struct dirent **names;
	char full[EX_PATH_MAX];
	int n;

	(void)call;
	if (ex_path(em, path, err) < 0)
		return -1;
	n = scandir(path, &names, NULL, alphasort);
	if (n < 0)
		return io_err(h, err, "cannot list", path);
	*entries = json_array();
	for (int i = 0; i < n; i++) {
		const char *name = names[i]->d_name;
		struct stat st;

		if (strcmp(name, ".") != 0 && strcmp(name, "..") != 0 &&
		    (size_t)snprintf(full, sizeof(full), "%s/%s", strcmp(path, "/") ? path : "",
				     name) < sizeof(full) &&
		    lstat(full, &st) == 0)
			json_array_append_new(*entries, json_pack(
				"{s:s, s:s, s:s, s:I, s:i, s:I}", "name", name, "path", full,
				"type", ft_names[ft_type(st.st_mode)], "size", (json_int_t)st.st_size,
				"mode", (int)(st.st_mode & 07777), "mtime", (json_int_t)st.st_mtime));
		free(names[i]);
	}
	free(names);
	return 0;
}

static int ex_stat(struct sg_machine *m, const char *path, struct sg_call *call,
		   struct sg_stat *out, struct sg_err *err)
{
	struct ex_machine *em = ex_of(m);
	struct stat st;

	(void)call;
	if (ex_path(em, path, err) < 0)
		return -1;
	if (lstat(path, &st) < 0)
		return io_err(em->ctx->host, err, "cannot stat", path);
	*out = (struct sg_stat){ .type = ft_type(st.st_mode), .size = (uint64_t)st.st_size,
				 .mode = st.st_mode & 07777, .mtime = st.st_mtime,
				 .uid = st.st_uid, .gid = st.st_gid };
	return 0;
}

static int ex_remove(struct sg_machine *m, const char *path, bool recursive,
		     struct sg_call *call, struct sg_err *err)
{
	struct ex_machine *em = ex_of(m);
	const struct sg_host_api *h = em->ctx->host;
	struct stat st;

	(void)call;
	if (ex_path(em, path, err) < 0)
		return -1;
	if (strcmp(path, em->dir) == 0)
		return h->errf(err, SG_E_PERM, "example: %s is the workspace itself: remove what "
			       "is in it", path);
	if (lstat(path, &st) < 0)
		return io_err(h, err, "cannot remove", path);
	if (!S_ISDIR(st.st_mode))
		return unlink(path) < 0 ? io_err(h, err, "cannot remove", path) : 0;
	if (recursive)
		return remove_tree(path) < 0 ? io_err(h, err, "cannot remove", path) : 0;
	return rmdir(path) < 0 ? io_err(h, err, "cannot remove the directory (pass recursive)",
					path) : 0;
}

/* ---- the descriptor: the one exported symbol ----------------------------------------- */

static const struct sg_config_key ex_config_keys[] = {
	{ .key = "root",
	  .help = "directory of the example machines (each ex-<id>, its workspace); default: "
		  "<state dir>/example" },
	{ .key = NULL }
};

SG_EXPORT const struct sg_backend sg_backend = {
	SG_BACKEND_HEADER,
	.name = EX_NAME, /* = the file stem: example.so */
	.version = "1.0",
	.summary = "the plugin template: a directory on this host, NOT isolated",
	.help = "Example backend (doc/plugin-template): each machine is a directory on this "
		"host and its workspace; commands run there with /bin/sh as sandgate's user, "
		"unconfined.  For plugin authors: copy it and replace the machine.",
	.config_keys = ex_config_keys,
	.init = ex_init,
	.fini = ex_fini,
	.probe = ex_probe,
	.machine_create = ex_create,
	.machine_attach = ex_attach,
	.machine_destroy = ex_destroy,
	.machine_release = ex_release,
	.machine_list = ex_list,
	.exec = ex_exec,
	/* no code group: run_code goes through exec, once per call */
	.stream_open = ex_stream_open,
	.stream_write = ex_stream_write,
	.stream_read = ex_stream_read,
	.stream_close = ex_stream_close,
	.file_read = ex_read,
	.file_write = ex_write,
	.file_list = ex_list_dir,
	.file_stat = ex_stat,
	.file_remove = ex_remove,
};
