/*
 * The jail of a local sandbox: one bwrap process, alive as long as the
 * sandbox's runner, with sandgate-runner as its first process.
 *
 * What the jail holds: the sandbox directory read-write at /workspace (its
 * only writable host path); /usr and the library links read-only; a small
 * read-only /etc (passwd and group entries made for the sandbox user,
 * hosts, hostname, and the host's alternatives, resolver, locale, CA
 * certificates and a few more config files); private /tmp, /proc and /dev;
 * a read-only root; nothing else of the host.  New user, pid, ipc, uts,
 * mount and cgroup namespaces, and a network namespace unless [local]
 * network = host.  Nested user namespaces are refused (--disable-userns),
 * the session is new (no terminal injection), and bwrap dies with us
 * (--die-with-parent; our own child gets PR_SET_PDEATHSIG too).
 *
 * As root, the jail runs as an unprivileged host uid ([local] user), so
 * the kernel's per-user and cgroup limits apply; the child joins the jail's
 * cgroups and takes the rlimits (limits.c) before it drops to that uid and
 * execs bwrap.  bwrap resolves the paths it binds as that user, who may not
 * traverse root's state directory: so the child, still root, makes a mount
 * namespace of its own with a tmpfs over /dev/shm and binds the sandbox
 * directory and the runner there, where bwrap finds them; the namespace,
 * and so those mounts, end with the jail.  Without root, the jail runs as
 * sandgate's own user, and the directory and the runner reach bwrap as
 * open file descriptors (--bind-fd).
 *
 * The child is forked by a keeper thread that lives as long as the jail:
 * PR_SET_PDEATHSIG fires when the thread that forked a child ends, so the
 * thread must outlive the jail.  The keeper logs bwrap's and the runner's
 * stderr lines, keeps the last as the note for a failed start, and notices
 * the end (a pidfd) without reaping, so the pid stays ours to kill until
 * local_jail_end() reaps it.  All processes of a sandbox live in its pid
 * namespace: when bwrap ends, the kernel kills every one of them.
 *
 * Refuse, never degrade: a bwrap that is missing or cannot make the
 * namespaces is an error that names the fix; nothing ever runs unconfined.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/local/local.h"
#include "plugins/runner/jailfilter.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define JAIL_HELLO_MS   10000
#define JAIL_ARGV_MAX   400
#define JAIL_FD_BASE    3       /* the first fd number bwrap's options name */
#define JAIL_NOTE_MAX   300
/* As root, the child shows bwrap the workspace and the runner here, in a
 * tmpfs over /dev/shm of a mount namespace of its own (see jail_portal()):
 * a directory every Linux has, that bwrap itself never needs (the jail gets
 * a /dev of its own), and where neither bwrap nor /usr live. */
#define PORTAL          "/dev/shm"
#define PORTAL_WS       PORTAL "/workspace"
#define PORTAL_RUNNER   PORTAL "/sandgate-runner"

/* Host files the jail's /etc gets read-only (when they exist): what tools
 * need to work as on the host, and doc/local.md lists.  Not
 * /etc/environment: PAM's, for logins a jail never has, and where proxy
 * credentials are often kept. */
static const char *const jail_etc[] = {
	"alternatives", "ssl/certs", "ssl/openssl.cnf", "ca-certificates",
	"ca-certificates.conf", "resolv.conf", "nsswitch.conf", "host.conf", "gai.conf",
	"protocols", "services", "networks", "ethertypes", "localtime", "timezone",
	"locale.alias", "locale.gen", "default/locale", "ld.so.cache", "ld.so.conf",
	"ld.so.conf.d", "mime.types", "magic", "magic.mime", "bash.bashrc", "profile",
	"inputrc", "os-release", "debian_version", "lsb-release",
	"fonts", "matplotlibrc", "python3", "python3.11", "python3.12", "perl", "gitconfig",
	"npmrc", "java-17-openjdk", "subversion", "wgetrc", "curlrc", NULL
};

/* The fds the child hands bwrap, by the number they get there
 * (JAIL_FD_BASE + the enum). */
enum jail_fd {
	JFD_PASSWD = 0, JFD_GROUP, JFD_HOSTS, JFD_HOSTNAME, JFD_SECCOMP, JFD_WORKSPACE, JFD_RUNNER,
	JFD_N
};


/* The steps of the child, for the message when one fails. */
enum jail_step { STEP_SETUP = 1, STEP_CGROUP, STEP_MOUNT, STEP_LIMITS, STEP_USER, STEP_EXEC };

static const char *const jail_steps[] = { "", "setting up its fds", "joining its cgroups",
					  "making its mount namespace", "setting its rlimits",
					  "switching to the sandbox user", "running bwrap" };

struct local_jail {
	struct local_ctx *ctx;            /* borrowed */
	pid_t pid;                        /* bwrap: ours to kill until reaped */
	int pidfd;                        /* its pidfd, or -1 */
	pthread_t keeper;
	bool keeper_started;

	pthread_mutex_t lock;             /* guards what follows */
	pthread_cond_t cond;
	bool forked;                      /* the keeper forked (or failed to) */
	int exec_errno;                   /* the child failed at exec_step: errno */
	int exec_step;                    /* enum jail_step */
	bool exited;                      /* bwrap ended (not reaped) */
	char note[JAIL_NOTE_MAX];         /* the last line on its stderr */

	/* Made by the starter, handed to the child, closed by the keeper: */
	char *argv[JAIL_ARGV_MAX];        /* argv[i] malloc'd from i = 1 */
	int argc;
	char bwrap[LOCAL_PATH_MAX];       /* the bwrap to exec */
	char ws_path[LOCAL_PATH_MAX];     /* the sandbox directory, for jail_portal() */
	char runner_path[LOCAL_PATH_MAX]; /* the runner binary, likewise */
	int child_fd[JFD_N];              /* become JAIL_FD_BASE + i */
	unsigned long nproc;              /* RLIMIT_NPROC, 0 none (local_nproc_cap) */
	int sock_child, err_w, ep_w;      /* the runner's end, stderr, exec errors */
	int err_r, ep_r;                  /* the keeper's ends */
	struct local_cg cg;
	char where[LOCAL_ID_MAX + 32];
};

/* ---- the jail's arguments ----------------------------------------------------------- */

static int jail_arg(struct local_jail *j, const char *fmt, ...) SG_PRINTF(2, 3);

static int jail_arg(struct local_jail *j, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (j->argc >= JAIL_ARGV_MAX - 1)
		return -1;
	va_start(ap, fmt);
	n = vasprintf(&j->argv[j->argc], fmt, ap);
	va_end(ap);
	if (n < 0) {
		j->argv[j->argc] = NULL;
		return -1;
	}
	j->argc++;
	return 0;
}

/* /bin, /lib and the like: links into /usr where the host has them so
 * (merged /usr), else read-only binds. */
static int jail_root_links(struct local_jail *j)
{
	static const char *const tops[] = { "bin", "sbin", "lib", "lib32", "lib64", "libx32" };
	char path[64], target[256];
	struct stat st;
	ssize_t n;
	int rc = 0;

	for (size_t i = 0; i < sizeof(tops) / sizeof(tops[0]); i++) {
		snprintf(path, sizeof(path), "/%s", tops[i]);
		if (lstat(path, &st) < 0)
			continue;
		if (S_ISLNK(st.st_mode)) {
			n = readlink(path, target, sizeof(target) - 1);
			if (n <= 0)
				continue;
			target[n] = '\0';
			rc |= jail_arg(j, "--symlink") | jail_arg(j, "%s", target) |
			      jail_arg(j, "%s", path);
		} else if (S_ISDIR(st.st_mode)) {
			rc |= jail_arg(j, "--ro-bind") | jail_arg(j, "%s", path) |
			      jail_arg(j, "%s", path);
		}
	}
	return rc;
}

/* A tmpfs at `at` of mb MiB (0: as large as the kernel lets it). */
static int jail_tmpfs(struct local_jail *j, unsigned long mb, const char *at)
{
	int rc = 0;

	if (mb)
		rc |= jail_arg(j, "--size") | jail_arg(j, "%lu", mb << 20);
	return rc | jail_arg(j, "--tmpfs") | jail_arg(j, "%s", at);
}

/* The options, after argv[0]. */
static int jail_args(struct local_jail *j, const char *hostname, const char *arg)
{
	struct local_ctx *ctx = j->ctx;
	size_t flen;
	int rc = 0;

	rn_jail_filter(&flen);
	rc |= jail_arg(j, "--unshare-user") | jail_arg(j, "--unshare-pid") |
	      jail_arg(j, "--unshare-ipc") | jail_arg(j, "--unshare-uts") |
	      jail_arg(j, "--unshare-cgroup-try");
	if (!ctx->network_host)
		rc |= jail_arg(j, "--unshare-net");
	/* The runner is the pid namespace's init: the kernel delivers no
	 * SIGSTOP or SIGKILL to it from inside, so a command cannot freeze or
	 * kill the process that answers for the sandbox. */
	rc |= jail_arg(j, "--as-pid-1");
	rc |= jail_arg(j, "--disable-userns") | jail_arg(j, "--die-with-parent") |
	      jail_arg(j, "--new-session") | jail_arg(j, "--hostname") |
	      jail_arg(j, "%s", hostname);
	rc |= jail_arg(j, "--ro-bind") | jail_arg(j, "/usr") | jail_arg(j, "/usr");
	rc |= jail_root_links(j);
	for (size_t i = 0; jail_etc[i]; i++)
		rc |= jail_arg(j, "--ro-bind-try") | jail_arg(j, "/etc/%s", jail_etc[i]) |
		      jail_arg(j, "/etc/%s", jail_etc[i]);
	rc |= jail_arg(j, "--perms") | jail_arg(j, "0644") | jail_arg(j, "--ro-bind-data") |
	      jail_arg(j, "%d", JAIL_FD_BASE + JFD_PASSWD) | jail_arg(j, "/etc/passwd");
	rc |= jail_arg(j, "--perms") | jail_arg(j, "0644") | jail_arg(j, "--ro-bind-data") |
	      jail_arg(j, "%d", JAIL_FD_BASE + JFD_GROUP) | jail_arg(j, "/etc/group");
	rc |= jail_arg(j, "--perms") | jail_arg(j, "0644") | jail_arg(j, "--ro-bind-data") |
	      jail_arg(j, "%d", JAIL_FD_BASE + JFD_HOSTS) | jail_arg(j, "/etc/hosts");
	rc |= jail_arg(j, "--perms") | jail_arg(j, "0644") | jail_arg(j, "--ro-bind-data") |
	      jail_arg(j, "%d", JAIL_FD_BASE + JFD_HOSTNAME) | jail_arg(j, "/etc/hostname");
	rc |= jail_arg(j, "--proc") | jail_arg(j, "/proc") | jail_arg(j, "--dev") | jail_arg(j, "/dev");
	/* tmpfs is memory: without a size a sandbox could fill the host's
	 * (a memory cgroup charges it, but there may be none) */
	rc |= jail_tmpfs(j, ctx->lim.tmp_mb, "/tmp") | jail_tmpfs(j, ctx->lim.shm_mb, "/dev/shm");
	if (ctx->switch_user)
		rc |= jail_arg(j, "--bind") | jail_arg(j, PORTAL_WS) | jail_arg(j, LOCAL_WORKSPACE) |
		      jail_arg(j, "--ro-bind") | jail_arg(j, PORTAL_RUNNER) |
		      jail_arg(j, LOCAL_RUNNER_AT);
	else
		rc |= jail_arg(j, "--bind-fd") | jail_arg(j, "%d", JAIL_FD_BASE + JFD_WORKSPACE) |
		      jail_arg(j, LOCAL_WORKSPACE) | jail_arg(j, "--ro-bind-fd") |
		      jail_arg(j, "%d", JAIL_FD_BASE + JFD_RUNNER) | jail_arg(j, LOCAL_RUNNER_AT);
	rc |= jail_arg(j, "--remount-ro") | jail_arg(j, "/");
	rc |= jail_arg(j, "--chdir") | jail_arg(j, LOCAL_WORKSPACE) | jail_arg(j, "--clearenv");
	rc |= jail_arg(j, "--setenv") | jail_arg(j, "PATH") |
	      jail_arg(j, "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
	rc |= jail_arg(j, "--setenv") | jail_arg(j, "HOME") | jail_arg(j, LOCAL_WORKSPACE);
	rc |= jail_arg(j, "--setenv") | jail_arg(j, "USER") | jail_arg(j, "%s", ctx->user);
	rc |= jail_arg(j, "--setenv") | jail_arg(j, "LOGNAME") | jail_arg(j, "%s", ctx->user);
	rc |= jail_arg(j, "--setenv") | jail_arg(j, "LANG") | jail_arg(j, "C.UTF-8");
	rc |= jail_arg(j, "--setenv") | jail_arg(j, "TMPDIR") | jail_arg(j, "/tmp");
	if (flen)
		rc |= jail_arg(j, "--seccomp") | jail_arg(j, "%d", JAIL_FD_BASE + JFD_SECCOMP);
	rc |= jail_arg(j, "--") | jail_arg(j, LOCAL_RUNNER_AT) | jail_arg(j, "%s", arg);
	return rc;
}

/* ---- what the child gets ------------------------------------------------------------- */

/* A memfd holding the n bytes at text, positioned at 0: bwrap reads it
 * (into a file, or as the filter). */
static int jail_memfd(const char *name, const void *data, size_t n)
{
	const char *text = data;
	size_t off = 0;
	ssize_t w;
	int fd = memfd_create(name, MFD_CLOEXEC);

	while (fd >= 0 && off < n) {
		w = write(fd, text + off, n - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			close(fd);
			return -1;
		}
		off += (size_t)w;
	}
	if (fd >= 0 && lseek(fd, 0, SEEK_SET) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* passwd, group, hosts and hostname of the jail, and its seccomp filter. */
static int jail_etc_fds(struct local_jail *j, const char *hostname)
{
	struct local_ctx *ctx = j->ctx;
	char passwd[512], group[256], hosts[256], host[128];
	struct group *gr = getgrgid(ctx->gid);
	const char *gname = gr && gr->gr_name ? gr->gr_name : "sandbox";
	size_t flen;
	const void *filter = rn_jail_filter(&flen);

	snprintf(passwd, sizeof(passwd),
		 "root:x:0:0:root:/root:/usr/sbin/nologin\n"
		 "%s:x:%u:%u:sandgate sandbox:" LOCAL_WORKSPACE ":/bin/bash\n%s",
		 ctx->user, (unsigned)ctx->uid, (unsigned)ctx->gid,
		 ctx->uid == 65534 ? "" : "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n");
	snprintf(group, sizeof(group), "root:x:0:\n%s:x:%u:\n%s", gname, (unsigned)ctx->gid,
		 ctx->gid == 65534 ? "" : "nogroup:x:65534:\n");
	snprintf(hosts, sizeof(hosts), "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost "
		 "ip6-loopback\n127.0.1.1\t%s\n", hostname);
	snprintf(host, sizeof(host), "%s\n", hostname);
	j->child_fd[JFD_PASSWD] = jail_memfd("passwd", passwd, strlen(passwd));
	j->child_fd[JFD_GROUP] = jail_memfd("group", group, strlen(group));
	j->child_fd[JFD_HOSTS] = jail_memfd("hosts", hosts, strlen(hosts));
	j->child_fd[JFD_HOSTNAME] = jail_memfd("hostname", host, strlen(host));
	j->child_fd[JFD_SECCOMP] = jail_memfd("seccomp", filter, flen);
	for (int i = JFD_PASSWD; i <= JFD_SECCOMP; i++)
		if (j->child_fd[i] < 0)
			return -1;
	return 0;
}

/* Finds bwrap: the configured path, or a name searched in PATH. */
static int jail_find_bwrap(struct local_ctx *ctx, char *out, size_t size)
{
	const char *path = getenv("PATH");
	char dir[LOCAL_PATH_MAX];

	if (strchr(ctx->bwrap, '/')) {
		snprintf(out, size, "%s", ctx->bwrap);
		return access(out, X_OK);
	}
	for (const char *p = path ? path : "/usr/bin:/bin"; *p;) {
		size_t len = strcspn(p, ":");

		if (len > 0 && len < sizeof(dir)) {
			memcpy(dir, p, len);
			dir[len] = '\0';
			if ((size_t)snprintf(out, size, "%s/%s", dir, ctx->bwrap) < size &&
			    access(out, X_OK) == 0)
				return 0;
		}
		p += len + (p[len] == ':');
	}
	errno = ENOENT;
	return -1;
}

/* ---- the fix for a bwrap that cannot make the jail ------------------------------------ */

static bool sysctl_is(const char *path, const char *want)
{
	char buf[32] = "";
	FILE *f = fopen(path, "re");

	if (!f)
		return false;
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = '\0';
	fclose(f);
	buf[strcspn(buf, "\n")] = '\0';
	return strcmp(buf, want) == 0;
}

/* The fix for a namespace bwrap could not make, judged from this host. */
static const char *jail_fix(void)
{
	if (sysctl_is("/proc/sys/kernel/unprivileged_userns_clone", "0"))
		return "unprivileged user namespaces are off: sysctl -w "
		       "kernel.unprivileged_userns_clone=1 (and put it in /etc/sysctl.d)";
	if (sysctl_is("/proc/sys/user/max_user_namespaces", "0"))
		return "user namespaces are off: sysctl -w user.max_user_namespaces=15000 (and "
		       "put it in /etc/sysctl.d)";
	if (sysctl_is("/proc/sys/kernel/apparmor_restrict_unprivileged_userns", "1"))
		return "AppArmor restricts unprivileged user namespaces (Ubuntu 23.10 and later): "
		       "give bwrap an AppArmor profile that allows userns (the apparmor package's "
		       "bwrap-userns-restrict, or a profile for /usr/bin/bwrap with `userns,`), or "
		       "sysctl -w kernel.apparmor_restrict_unprivileged_userns=0";
	if (access("/.dockerenv", F_OK) == 0 || access("/run/.containerenv", F_OK) == 0)
		return "this is a container whose seccomp or AppArmor profile forbids new "
		       "namespaces: run it with --security-opt seccomp=unconfined --security-opt "
		       "apparmor=unconfined (or --privileged)";
	return "allow unprivileged user namespaces: sysctl kernel.unprivileged_userns_clone=1 "
	       "and user.max_user_namespaces > 0, or an AppArmor/SELinux policy that lets bwrap "
	       "create them";
}

/* Fills err for a jail that did not come up: what bwrap (or the exec of
 * it) said, and the fix. */
static int jail_fail(struct local_ctx *ctx, const struct local_jail *j, const char *why,
		     struct sg_err *err)
{
	const char *n = j->note;

	if (j->exec_errno && j->exec_step == STEP_EXEC)
		return ctx->host->errf(err, SG_E_UNAVAILABLE, "local: cannot run %s: %s: install "
				       "bubblewrap (apt-get install bubblewrap) or set [local] "
				       "bwrap; local never runs commands unconfined", j->bwrap,
				       strerror(j->exec_errno));
	if (j->exec_errno)
		return ctx->host->errf(err, SG_E_UNAVAILABLE, "local: the jail's process failed %s: "
				       "%s; local never runs commands unconfined",
				       jail_steps[j->exec_step >= STEP_SETUP && j->exec_step <= STEP_EXEC ?
						  j->exec_step : STEP_SETUP], strerror(j->exec_errno));
	if (strstr(n, "namespace") || strstr(n, "uid map") || strstr(n, "Operation not permitted") ||
	    strstr(n, "Permission denied") || strstr(n, "No space left"))
		return ctx->host->errf(err, SG_E_UNAVAILABLE, "local: bubblewrap cannot create the "
				       "sandbox's namespaces (%.120s%s): %s; local never runs commands "
				       "unconfined", n, strlen(n) > 120 ? "..." : "", jail_fix());
	return ctx->host->errf(err, SG_E_UNAVAILABLE, "local: the jail did not start (%.200s%s%.150s): "
			       "see the log; local never runs commands unconfined", n[0] ? n : why,
			       n[0] ? "; " : "", n[0] ? why : "");
}

/* ---- the child ---------------------------------------------------------------------- */

/* Reports the step and errno on the exec-error pipe and exits
 * (async-signal-safe). */
static void child_die(int ep, int step) __attribute__((noreturn));
static void child_die(int ep, int step)
{
	int v[2] = { step, errno ? errno : EIO };
	ssize_t w = write(ep, v, sizeof(v));

	(void)w;
	_exit(127);
}

/* "/proc/self/fd/<fd>" into out (async-signal-safe). */
static void fd_path(char out[32], int fd)
{
	static const char pre[] = "/proc/self/fd/";
	char digits[12];
	int n = 0, k = 0;

	do
		digits[n++] = (char)('0' + fd % 10);
	while ((fd /= 10) > 0 && n < 11);
	memcpy(out, pre, sizeof(pre) - 1);
	k = sizeof(pre) - 1;
	while (n > 0)
		out[k++] = digits[--n];
	out[k] = '\0';
}

/* As root, in the child: a mount namespace of its own, a tmpfs over the
 * portal in it, and the workspace and the runner bound there (root may
 * traverse any path; the sandbox user, who runs bwrap, only these).  Both
 * are opened in the new namespace first (a mount of the old one cannot be
 * bound into it) and before the tmpfs hides what was there; the paths lead
 * through [local] root, which only sandgate writes. */
static int jail_portal(const struct local_jail *j)
{
	char ws[32], runner[32];
	int fd, wfd, rfd;

	/* "none": the kernel ignores source and type for a propagation change
	 * and a bind, but a NULL there reads as a bad pointer to valgrind. */
	if (unshare(CLONE_NEWNS) < 0 ||
	    mount("none", "/", "none", MS_REC | MS_PRIVATE, NULL) < 0)
		return -1;
	wfd = open(j->ws_path, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	rfd = open(j->runner_path, O_PATH | O_CLOEXEC);
	if (wfd < 0 || rfd < 0)
		return -1;
	fd_path(ws, wfd);
	fd_path(runner, rfd);
	if (mount("sandgate", PORTAL, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64k") < 0 ||
	    mkdir(PORTAL_WS, 0755) < 0)
		return -1;
	fd = open(PORTAL_RUNNER, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
	if (fd < 0)
		return -1;
	close(fd);
	if (mount(ws, PORTAL_WS, "none", MS_BIND, NULL) < 0 ||
	    mount(runner, PORTAL_RUNNER, "none", MS_BIND, NULL) < 0)
		return -1;
	close(wfd);
	close(rfd);
	return 0;
}

/* In the forked child: only async-signal-safe calls from here to exec. */
static void jail_child(struct local_jail *j, pid_t parent) __attribute__((noreturn));
static void jail_child(struct local_jail *j, pid_t parent)
{
	const struct local_ctx *ctx = j->ctx;
	static char path_env[] = "PATH=/usr/bin:/bin";
	char *const envp[] = { path_env, NULL };
	struct sigaction dfl = { .sa_handler = SIG_DFL };
	int hi[JFD_N + 3], ep;
	sigset_t none;

	sigemptyset(&none);
	for (int s = 1; s < NSIG; s++)
		sigaction(s, &dfl, NULL); /* fails quietly for KILL, STOP and glibc's */
	sigprocmask(SIG_SETMASK, &none, NULL);
	setsid();
	if (local_cg_join(&j->cg) < 0)
		child_die(j->ep_w, STEP_CGROUP);
	/* Everything to fds above those bwrap's options name, then in place. */
	ep = fcntl(j->ep_w, F_DUPFD_CLOEXEC, 64);
	hi[0] = fcntl(j->sock_child, F_DUPFD, 64);
	hi[1] = fcntl(j->err_w, F_DUPFD, 64);
	for (int i = 0; i < JFD_N; i++)
		hi[2 + i] = fcntl(j->child_fd[i], F_DUPFD, 64);
	if (ep < 0)
		_exit(127);
	if (hi[0] < 0 || hi[1] < 0 || dup2(hi[0], 0) < 0 || dup2(hi[0], 1) < 0 ||
	    dup2(hi[1], 2) < 0)
		child_die(ep, STEP_SETUP);
	for (int i = 0; i < JFD_N; i++)
		if (hi[2 + i] < 0 || dup2(hi[2 + i], JAIL_FD_BASE + i) < 0)
			child_die(ep, STEP_SETUP);
	if (syscall(SYS_close_range, JAIL_FD_BASE + JFD_N, ep - 1, 0) < 0 ||
	    syscall(SYS_close_range, ep + 1, ~0u, 0) < 0)
		child_die(ep, STEP_SETUP);
	if (ctx->switch_user && jail_portal(j) < 0)
		child_die(ep, STEP_MOUNT);
	/* As root the portal, not these, brings the workspace and the runner
	 * in: bwrap passes on what it does not consume, and the handle on the
	 * host directory would reach every command in the jail (its ".." is
	 * the other sandboxes' and the host's tree). */
	if (ctx->switch_user &&
	    (close(JAIL_FD_BASE + JFD_WORKSPACE) < 0 || close(JAIL_FD_BASE + JFD_RUNNER) < 0))
		child_die(ep, STEP_SETUP);
	if (local_rlimits_apply(ctx, j->nproc) < 0)
		child_die(ep, STEP_LIMITS);
	if (ctx->switch_user &&
	    (syscall(SYS_setgroups, 0, NULL) < 0 ||
	     syscall(SYS_setresgid, ctx->gid, ctx->gid, ctx->gid) < 0 ||
	     syscall(SYS_setresuid, ctx->uid, ctx->uid, ctx->uid) < 0))
		child_die(ep, STEP_USER);
	/* After the credentials change, which clears it. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
		child_die(ep, STEP_SETUP);
	execve(j->bwrap, j->argv, envp);
	child_die(ep, STEP_EXEC);
}

/* ---- the keeper thread -------------------------------------------------------------- */

static void jail_note(struct local_jail *j, const char *line)
{
	if (!line[0])
		return;
	j->ctx->host->log(SG_LOG_INFO, LOCAL_PLUGIN, "jail %s: %s", j->where, line);
	pthread_mutex_lock(&j->lock);
	snprintf(j->note, sizeof(j->note), "%s", line);
	pthread_mutex_unlock(&j->lock);
}

/* Reads what stderr holds now (non-blocking), a line at a time.  Returns
 * false at EOF. */
static bool jail_read_err(struct local_jail *j, char *line, size_t *len)
{
	char buf[1024];
	ssize_t n;

	for (;;) {
		n = read(j->err_r, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno == EAGAIN;
		if (n == 0)
			return false;
		for (ssize_t i = 0; i < n; i++) {
			if (buf[i] == '\n') {
				line[*len] = '\0';
				jail_note(j, line);
				*len = 0;
			} else if (*len + 1 < JAIL_NOTE_MAX && (unsigned char)buf[i] >= 0x20) {
				line[(*len)++] = buf[i];
			}
		}
	}
}

static void jail_close_child_fds(struct local_jail *j)
{
	for (int i = 0; i < JFD_N; i++)
		if (j->child_fd[i] >= 0) {
			close(j->child_fd[i]);
			j->child_fd[i] = -1;
		}
	if (j->sock_child >= 0)
		close(j->sock_child);
	if (j->err_w >= 0)
		close(j->err_w);
	if (j->ep_w >= 0)
		close(j->ep_w);
	j->sock_child = j->err_w = j->ep_w = -1;
}

static void *jail_keeper(void *arg)
{
	struct local_jail *j = arg;
	pid_t parent = getpid();
	char line[JAIL_NOTE_MAX];
	size_t len = 0;
	ssize_t n;
	int e[2] = { 0, 0 };
	bool open_err = true;

	j->pid = fork();
	if (j->pid == 0)
		jail_child(j, parent);
	jail_close_child_fds(j);
	if (j->pid > 0) {
		do
			n = read(j->ep_r, e, sizeof(e));
		while (n < 0 && errno == EINTR);
		if (n != (ssize_t)sizeof(e))
			e[0] = e[1] = 0; /* EOF: bwrap runs */
		j->pidfd = (int)syscall(SYS_pidfd_open, j->pid, 0);
	}
	pthread_mutex_lock(&j->lock);
	j->forked = true;
	j->exec_errno = j->pid < 0 ? errno : e[1];
	j->exec_step = j->pid < 0 ? STEP_SETUP : e[0];
	pthread_cond_broadcast(&j->cond);
	pthread_mutex_unlock(&j->lock);
	if (j->pid < 0)
		return NULL;
	/* Its stderr until it ends: by the pidfd where there is one, else EOF. */
	fcntl(j->err_r, F_SETFL, O_NONBLOCK);
	for (;;) {
		struct pollfd pfd[2] = { { .fd = open_err ? j->err_r : -1, .events = POLLIN },
					 { .fd = j->pidfd, .events = POLLIN } };

		if (poll(pfd, 2, -1) < 0 && errno != EINTR)
			break;
		if (pfd[0].revents && !jail_read_err(j, line, &len))
			open_err = false;
		if (pfd[1].revents || (j->pidfd < 0 && !open_err)) {
			jail_read_err(j, line, &len);
			break;
		}
	}
	if (len) {
		line[len] = '\0';
		jail_note(j, line);
	}
	if (j->pidfd < 0) { /* no pidfd: wait without reaping */
		siginfo_t si;

		while (waitid(P_PID, (id_t)j->pid, &si, WEXITED | WNOWAIT) < 0 && errno == EINTR)
			;
	}
	pthread_mutex_lock(&j->lock);
	j->exited = true;
	pthread_cond_broadcast(&j->cond);
	pthread_mutex_unlock(&j->lock);
	return NULL;
}

/* ---- life ---------------------------------------------------------------------------- */

static void jail_free(struct local_jail *j)
{
	jail_close_child_fds(j);
	if (j->err_r >= 0)
		close(j->err_r);
	if (j->ep_r >= 0)
		close(j->ep_r);
	if (j->pidfd >= 0)
		close(j->pidfd);
	for (int i = 1; i < j->argc; i++)
		free(j->argv[i]);
	pthread_mutex_destroy(&j->lock);
	pthread_cond_destroy(&j->cond);
	free(j);
}

/* Kills bwrap (its pid namespace, every process of the sandbox, dies with
 * it), whatever is left in its cgroups, reaps it; returns its wait status
 * (-1 when it never ran). */
static int jail_kill(struct local_jail *j)
{
	int status = -1;

	if (j->pid > 0) {
		if (j->pidfd >= 0)
			syscall(SYS_pidfd_send_signal, j->pidfd, SIGKILL, NULL, 0);
		else
			kill(j->pid, SIGKILL); /* not reaped yet: still ours */
	}
	local_cg_remove(&j->cg);
	if (j->keeper_started)
		pthread_join(j->keeper, NULL);
	j->keeper_started = false;
	if (j->pid > 0)
		while (waitpid(j->pid, &status, 0) < 0 && errno == EINTR)
			;
	j->pid = -1;
	return status;
}

static struct local_jail *jail_new(struct local_machine *lm)
{
	struct local_jail *j = calloc(1, sizeof(*j)); /* jail_free() */

	if (!j)
		return NULL;
	j->ctx = lm->ctx;
	j->pid = -1;
	j->pidfd = -1;
	j->sock_child = j->err_w = j->ep_w = j->err_r = j->ep_r = -1;
	for (int i = 0; i < JFD_N; i++)
		j->child_fd[i] = -1;
	j->cg.procs_fd[0] = j->cg.procs_fd[1] = -1;
	snprintf(j->where, sizeof(j->where), "of %s", lm->id);
	pthread_mutex_init(&j->lock, NULL);
	pthread_cond_init(&j->cond, NULL);
	return j;
}

/* Everything the child needs, made here (not in the child). */
static int jail_prepare(struct local_machine *lm, struct local_jail *j, const char *arg,
			int sock[2], struct sg_err *err)
{
	struct local_ctx *ctx = lm->ctx;
	const char *host_name = lm->id;
	int pe[2], pp[2];
	char cgname[LOCAL_ID_MAX + 32];

	if (jail_find_bwrap(ctx, j->bwrap, sizeof(j->bwrap)) < 0)
		return ctx->host->errf(err, SG_E_UNAVAILABLE, "local: no bwrap (%s) in PATH: install "
				       "bubblewrap (apt-get install bubblewrap) or set [local] bwrap "
				       "to its path; local never runs commands unconfined", ctx->bwrap);
	j->argv[0] = j->bwrap;
	j->argc = 1;
	if (jail_args(j, host_name, arg) < 0 || jail_etc_fds(j, host_name) < 0)
		return ctx->host->errf(err, SG_E_NOMEM, "local: cannot prepare the jail: %s",
				       strerror(errno));
	snprintf(j->ws_path, sizeof(j->ws_path), "%s", lm->dir);
	snprintf(j->runner_path, sizeof(j->runner_path), "%s", ctx->bin.path);
	j->child_fd[JFD_WORKSPACE] = open(lm->dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (j->child_fd[JFD_WORKSPACE] < 0)
		return ctx->host->errf(err, errno == ENOENT ? SG_E_GONE : SG_E_IO, "local: the "
				       "directory %s of sandbox %s: %s", lm->dir, lm->id,
				       strerror(errno));
	j->child_fd[JFD_RUNNER] = open(ctx->bin.path, O_PATH | O_CLOEXEC);
	if (j->child_fd[JFD_RUNNER] < 0)
		return ctx->host->errf(err, SG_E_UNAVAILABLE, "local: the runner %s: %s",
				       ctx->bin.path, strerror(errno));
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sock) < 0 ||
	    pipe2(pe, O_CLOEXEC) < 0)
		return ctx->host->errf(err, SG_E_IO, "local: socketpair: %s", strerror(errno));
	j->sock_child = sock[1];
	sock[1] = -1;
	j->err_r = pe[0];
	j->err_w = pe[1];
	if (pipe2(pp, O_CLOEXEC) < 0)
		return ctx->host->errf(err, SG_E_IO, "local: pipe: %s", strerror(errno));
	j->ep_r = pp[0];
	j->ep_w = pp[1];
	pthread_mutex_lock(&ctx->lock);
	snprintf(cgname, sizeof(cgname), "%s.%ld.%u", lm->id, (long)getpid(), ++ctx->jail_seq);
	pthread_mutex_unlock(&ctx->lock);
	if (local_cg_make(ctx, cgname, &j->cg, err) < 0)
		return -1;
	j->nproc = local_nproc_cap(ctx, j->cg.procs_fd[0] >= 0);
	return 0;
}

/* Waits until the keeper forked (or failed). */
static void jail_wait_forked(struct local_jail *j)
{
	pthread_mutex_lock(&j->lock);
	while (!j->forked)
		pthread_cond_wait(&j->cond, &j->lock);
	pthread_mutex_unlock(&j->lock);
}

static void jail_log_cb(void *ud, enum rn_log_level level, const char *msg)
{
	const struct sg_host_api *host = ud;

	host->log(level == RN_LOG_WARNING ? SG_LOG_WARNING :
		  level == RN_LOG_INFO ? SG_LOG_INFO : SG_LOG_DEBUG, LOCAL_PLUGIN, "%s", msg);
}

static double jail_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* The runner client's start op: a new jail with the runner in it. */
static int jail_start(void *ud, const char *arg, struct rn_conn **out, char *path, size_t size,
		      struct sg_err *err)
{
	struct local_machine *lm = ud;
	struct local_ctx *ctx = lm->ctx;
	struct rn_conn_opts o = { .hello_timeout_ms = JAIL_HELLO_MS, .log = jail_log_cb,
				  .log_ud = (void *)ctx->host };
	struct local_jail *j;
	struct rn_transport t;
	char why[256] = "";
	int sock[2] = { -1, -1 }, rc;
	double t0 = jail_ms(), t1, t2;

	local_jail_end(lm); /* a jail whose runner ended is over */
	if (local_runner_binary(ctx, err) < 0)
		return -1;
	j = jail_new(lm);
	if (!j)
		return ctx->host->errf(err, SG_E_NOMEM, "local: out of memory");
	o.build_id = ctx->bin.id;
	o.name = j->where;
	if (jail_prepare(lm, j, arg, sock, err) < 0)
		goto fail;
	t1 = jail_ms();
	if (pthread_create(&j->keeper, NULL, jail_keeper, j) != 0) {
		ctx->host->errf(err, SG_E_IO, "local: cannot start the jail's keeper thread");
		goto fail;
	}
	j->keeper_started = true;
	jail_wait_forked(j);
	if (j->pid < 0 || j->exec_errno) {
		jail_kill(j);
		jail_fail(ctx, j, "", err);
		goto fail;
	}
	t2 = jail_ms();
	rn_fd_transport(sock[0], &t);
	sock[0] = -1;
	rc = rn_conn_open(&t, &o, out, why, sizeof(why)); /* owns the socket from here */
	if (rc < 0) {
		jail_kill(j);
		jail_fail(ctx, j, why, err);
		goto fail;
	}
	lm->jail = j;
	snprintf(path, size, "%s", LOCAL_RUNNER_AT);
	ctx->host->log(SG_LOG_DEBUG, LOCAL_PLUGIN, "jail %s: prepared in %.1f ms, bwrap "
		       "started in %.1f ms, the runner's HELLO after %.1f ms", j->where, t1 - t0,
		       t2 - t1, jail_ms() - t2);
	return 0;
fail:
	if (sock[0] >= 0)
		close(sock[0]);
	if (j->keeper_started)
		jail_kill(j);
	local_cg_remove(&j->cg);
	jail_free(j);
	return -1;
}

void local_jail_end(struct local_machine *lm)
{
	struct local_jail *j = lm->jail;

	if (!j)
		return;
	lm->jail = NULL;
	jail_kill(j);
	jail_free(j);
}

/* The ended op: the runner's connection is closed; the jail goes with it. */
static void jail_ended(void *ud, char *how, size_t size)
{
	struct local_machine *lm = ud;
	struct local_jail *j = lm->jail;
	int st;

	if (!j)
		return;
	lm->jail = NULL;
	st = jail_kill(j);
	if (st >= 0 && WIFEXITED(st))
		snprintf(how, size, "bwrap exit status %d", WEXITSTATUS(st));
	else if (st >= 0 && WIFSIGNALED(st))
		snprintf(how, size, "bwrap killed by signal %d", WTERMSIG(st));
	jail_free(j);
}

/* A broken runner connection: its jail ends when the client drops it (the
 * runner sees EOF), and with it every process in its pid namespace, so
 * there is no group left to kill from here. */
static void jail_kill_group(void *ud, long pgid)
{
	(void)ud;
	(void)pgid;
}

const struct rnc_ops local_site_ops = {
	.tag = LOCAL_PLUGIN,
	.plain = NULL, /* no way around the jail */
	.start = jail_start,
	.ended = jail_ended,
	.kill_group = jail_kill_group,
};

/* ---- the probe ----------------------------------------------------------------------- */

int local_jail_check(struct local_ctx *ctx, unsigned timeout_ms, struct sg_err *err)
{
	struct local_machine lm = { .ctx = ctx };
	struct rn_conn *c = NULL;
	char path[64];
	char dir[] = "/tmp/sg-local-probe-XXXXXX";
	int rc;

	(void)timeout_ms; /* the jail greets within milliseconds or fails */
	snprintf(lm.id, sizeof(lm.id), "probe");
	if (!mkdtemp(dir))
		return ctx->host->errf(err, SG_E_IO, "local: mkdtemp: %s", strerror(errno));
	snprintf(lm.dir, sizeof(lm.dir), "%s", dir);
	if (ctx->switch_user && chown(dir, ctx->uid, ctx->gid) < 0) {
		rmdir(dir);
		return ctx->host->errf(err, SG_E_IO, "local: chown %s: %s", dir, strerror(errno));
	}
	rc = jail_start(&lm, "--stdio", &c, path, sizeof(path), err);
	if (rc == 0) {
		rn_conn_close(c);
		local_jail_end(&lm);
	}
	rmdir(dir);
	return rc;
}

json_t *local_jail_facts(struct local_ctx *ctx)
{
	return json_pack("{s:s, s:s, s:s, s:s, s:o}", "isolation", "bwrap", "network",
			 ctx->network_host ? "host" : "none", "user", ctx->user, "workspace",
			 LOCAL_WORKSPACE, "limits", local_limits_json(ctx));
}
