/*
 * local.so: sandboxes on this host, no daemon needed.  Each sandbox is a
 * directory and a bubblewrap jail over it (jail.c) with sandgate-runner as
 * the jail's first process: commands, persistent shells and file tools all
 * go to that runner through the one runner client (slots.c).  This file
 * holds the descriptor the core reads (the single exported symbol
 * `sg_backend`), init/fini, the configuration and the probe.
 *
 * It is the shortest real backend, and the one the plugin guide walks
 * through: a plugin gives the runner client a way to start a runner at a
 * place (here: a jail) and gets exec, streams and files from it.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/local/local.h"

#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef PACKAGE_VERSION
#define PACKAGE_VERSION "0.0.0"
#endif

#define LOCAL_USER_DEFAULT "sandgate" /* made by etc/setup.sh; else nobody */

/* ---- configuration ---------------------------------------------------------------- */

static unsigned long config_ulong(const struct sg_host_api *host, const char *key,
				  unsigned long def)
{
	const char *v = host->config_get(LOCAL_PLUGIN, key);

	/* The core checked "uint" keys: digits only. */
	return v && *v ? strtoul(v, NULL, 10) : def;
}

/* The jail's user: as root, [local] user (default sandgate, else nobody),
 * never root; otherwise sandgate's own user, which cannot switch. */
static void config_user(struct local_ctx *ctx)
{
	const char *want = ctx->host->config_get(LOCAL_PLUGIN, "user");
	struct passwd *pw;

	if (geteuid() != 0) {
		pw = getpwuid(geteuid());
		snprintf(ctx->user, sizeof(ctx->user), "%s", pw ? pw->pw_name : "sandbox");
		ctx->uid = geteuid();
		ctx->gid = getegid();
		if (want && *want && strcmp(want, ctx->user) != 0)
			snprintf(ctx->user_why, sizeof(ctx->user_why), "sandgate runs as %s and "
				 "cannot switch to [local] user = %s: run sandgate as root, or "
				 "unset [local] user", ctx->user, want);
		return;
	}
	ctx->switch_user = true;
	pw = getpwnam(want && *want ? want : LOCAL_USER_DEFAULT);
	if (!pw && !(want && *want))
		pw = getpwnam("nobody");
	if (!pw) {
		snprintf(ctx->user_why, sizeof(ctx->user_why), "no user '%s' on this host: set "
			 "[local] user to an unprivileged user (etc/setup.sh makes 'sandgate')",
			 want && *want ? want : "nobody");
		return;
	}
	snprintf(ctx->user, sizeof(ctx->user), "%s", pw->pw_name);
	ctx->uid = pw->pw_uid;
	ctx->gid = pw->pw_gid;
	if (ctx->uid == 0)
		snprintf(ctx->user_why, sizeof(ctx->user_why), "[local] user = %s is root: the "
			 "jail must run as an unprivileged user, so that the kernel's limits hold",
			 ctx->user);
}

int local_runner_binary(struct local_ctx *ctx, struct sg_err *err)
{
	int rc;

	pthread_mutex_lock(&ctx->lock);
	if (!ctx->bin_tried) {
		ctx->bin_tried = true;
		rn_binary_load(&ctx->bin, ctx->host->config_get(LOCAL_PLUGIN, "runner_path"),
			       "[local] runner_path", ctx->bin_why, sizeof(ctx->bin_why));
	}
	rc = ctx->bin.data ? 0 : ctx->host->errf(err, SG_E_UNAVAILABLE, "local: %s", ctx->bin_why);
	pthread_mutex_unlock(&ctx->lock);
	return rc;
}

/* ---- init / fini / probe ---------------------------------------------------------- */

/* Reads the configuration; starts nothing (the first jail is made on the
 * first create). */
static int local_init(const struct sg_host_api *host, void **priv, struct sg_err *err)
{
	struct local_ctx *ctx = calloc(1, sizeof(*ctx)); /* local_fini() */
	const char *v, *f = getenv("SANDGATE_RUNNER_FAULTS");

	if (!ctx)
		return host->errf(err, SG_E_NOMEM, "local: out of memory");
	ctx->host = host;
	v = host->config_get(LOCAL_PLUGIN, "root");
	if (v && *v)
		snprintf(ctx->root, sizeof(ctx->root), "%s", v);
	else
		snprintf(ctx->root, sizeof(ctx->root), "%s/local/sandboxes",
			 host->state_dir() ? host->state_dir() : "/tmp");
	if (ctx->root[0] != '/') {
		free(ctx);
		return host->errf(err, SG_E_INVAL, "local: [local] root = %s is not an absolute "
				  "path", ctx->root);
	}
	v = host->config_get(LOCAL_PLUGIN, "bwrap");
	snprintf(ctx->bwrap, sizeof(ctx->bwrap), "%s", v && *v ? v : "bwrap");
	v = host->config_get(LOCAL_PLUGIN, "network");
	ctx->network_host = v && strcmp(v, "host") == 0;
	ctx->lim = (struct local_limits){
		.pids = config_ulong(host, "pids", 512),
		.memory_mb = config_ulong(host, "memory_mb", 2048),
		.cpu_seconds = config_ulong(host, "cpu_seconds", 3600),
		.as_mb = config_ulong(host, "address_space_mb", 16384),
		.open_files = config_ulong(host, "open_files", 4096),
		.tmp_mb = config_ulong(host, "tmp_mb", 1024),
		.shm_mb = config_ulong(host, "shm_mb", 64),
	};
	ctx->faults = f && strcmp(f, "1") == 0; /* test hook: the runner's --fault */
	pthread_mutex_init(&ctx->lock, NULL);
	config_user(ctx);
	if (local_spare_start(ctx, err) < 0) {
		pthread_mutex_destroy(&ctx->lock);
		free(ctx);
		return -1;
	}
	*priv = ctx;
	return 0;
}

static void local_fini(void *priv)
{
	struct local_ctx *ctx = priv;

	if (!ctx)
		return;
	local_spare_stop(ctx); /* its jails use the runner binary */
	rn_binary_free(&ctx->bin);
	pthread_mutex_destroy(&ctx->lock);
	free(ctx);
}

/* Usable when a jail comes up here: bwrap is there and can make the
 * namespaces as the sandbox user, and the runner binary is found. */
int local_probe(void *priv, unsigned timeout_ms, struct sg_probe *out, struct sg_err *err)
{
	struct local_ctx *ctx = priv;
	int rc;

	out->preference = 30;
	if (ctx->user_why[0])
		rc = ctx->host->errf(err, SG_E_INVAL, "local: %s", ctx->user_why);
	else
		rc = local_jail_check(ctx, timeout_ms, err);
	out->details = json_pack("{s:s, s:s, s:s, s:s, s:o, s:o}", "bwrap", ctx->bwrap, "root",
				 ctx->root, "user", ctx->user, "network",
				 ctx->network_host ? "host" : "none", "limits",
				 local_limits_json(ctx), "spare", local_spare_facts(ctx));
	return rc;
}

/* ---- the descriptor ---------------------------------------------------------------- */

static const struct sg_config_key local_config_keys[] = {
	{ .key = "root",
	  .help = "directory of the sandbox directories (each sg-<id>, seen as /workspace); "
		  "default: <state dir>/local/sandboxes" },
	{ .key = "network", .def = "none", .accepts = "none|host",
	  .help = "none: a sandbox has only its own loopback; host: it shares this host's "
		  "network (and its loopback services)" },
	{ .key = "user",
	  .help = "as root, the unprivileged host user jails run as, who owns the sandbox "
		  "directories; default: sandgate (etc/setup.sh makes it), else nobody" },
	{ .key = "bwrap", .def = "bwrap",
	  .help = "the bubblewrap program: a path, or a name searched in PATH" },
	{ .key = "runner_path",
	  .help = "the sandgate-runner binary on this host; default: next to local.so, else "
		  "the installed libexec/sandgate/sandgate-runner",
	  .env = "SANDGATE_RUNNER" },
	{ .key = "spare", .accepts = "uint",
	  .help = "sandboxes kept made ahead, their jail running, for create_sandbox to take "
		  "(default 1, or 0 when [sandbox] default_backend names another backend; at "
		  "most 16); only servers keep them" },
	{ .key = "pids", .def = "512", .accepts = "uint",
	  .help = "processes and threads per sandbox (cgroup pids.max; without cgroups "
		  "RLIMIT_NPROC of the user); 0: no limit" },
	{ .key = "memory_mb", .def = "2048", .accepts = "uint",
	  .help = "memory per sandbox in MiB, swap off (cgroup memory.max); 0: no limit" },
	{ .key = "cpu_seconds", .def = "3600", .accepts = "uint",
	  .help = "CPU seconds per process (RLIMIT_CPU); 0: no limit" },
	{ .key = "address_space_mb", .def = "16384", .accepts = "uint",
	  .help = "address space per process in MiB (RLIMIT_AS); 0: no limit" },
	{ .key = "open_files", .def = "4096", .accepts = "uint",
	  .help = "open files per process (RLIMIT_NOFILE); 0: no limit" },
	{ .key = "tmp_mb", .def = "1024", .accepts = "uint",
	  .help = "size of the sandbox's /tmp in MiB (a tmpfs: memory); 0: no limit" },
	{ .key = "shm_mb", .def = "64", .accepts = "uint",
	  .help = "size of the sandbox's /dev/shm in MiB (a tmpfs: memory); 0: no limit" },
	{ .key = NULL }
};

static const char local_help[] =
	"Local backend: each machine is a directory on this host, seen as /workspace by a "
	"bubblewrap jail (new user, pid, ipc, uts, mount and network namespaces; /usr and a "
	"small /etc read-only; private /tmp, /proc and /dev; nothing else of the host) whose "
	"first process is sandgate-runner: a command costs a fork and an exec, and run_code's "
	"python and javascript kernels live there, one per sandbox and language.  The jail "
	"runs as an unprivileged user ([local] user; as root the default is sandgate, else "
	"nobody) with per-sandbox limits ([local] pids, memory_mb through cgroups; "
	"cpu_seconds, address_space_mb, open_files per process), which create_sandbox reports "
	"under details.  [local] network = host shares this host's network; the default "
	"none leaves a sandbox only its own loopback.  Every process of a sandbox ends with "
	"kill_sandbox and with sandgate; the directory stays for a persistent machine, and "
	"another sandgate attaching to it starts a fresh jail.  Needs bubblewrap (apt-get "
	"install bubblewrap) and unprivileged user namespaces; without them local refuses, "
	"it never runs commands unconfined.";

SG_EXPORT const struct sg_backend sg_backend = {
	SG_BACKEND_HEADER,
	.name = LOCAL_PLUGIN,
	.version = PACKAGE_VERSION,
	.summary = "bubblewrap jails on this host, no daemon",
	.help = local_help,
	.config_keys = local_config_keys,
	.init = local_init,
	.fini = local_fini,
	.probe = local_probe,
	.machine_create = local_machine_create,
	.machine_attach = local_machine_attach,
	.machine_destroy = local_machine_destroy,
	.machine_release = local_machine_release,
	.machine_list = local_machine_list,
	/* no expiry group: the core expires local sandboxes */
	.exec = local_exec,
	.run_code = local_run_code,
	.stream_open = local_stream_open,
	.stream_write = local_stream_write,
	.stream_read = local_stream_read,
	.stream_close = local_stream_close,
	.stream_open_status = local_stream_open_status,
	.stream_read_ch = local_stream_read_ch,
	.file_read = local_file_read,
	.file_write = local_file_write,
	.file_list = local_file_list,
	.file_stat = local_file_stat,
	.file_remove = local_file_remove,
	.file_read_at = local_file_read_at,
};
