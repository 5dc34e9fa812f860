/*
 * ssh.so: sandgate's SSH backend.  This file holds the descriptor the core
 * reads (the single exported symbol `sg_backend`), init/fini, the
 * configuration keys and small helpers; the slots live in machine.c,
 * exec.c, stream.c and sftp.c.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/ssh/ssh.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#ifndef PACKAGE_VERSION
#define PACKAGE_VERSION "0.0.0"
#endif

#define SSH_FILE_CAP (64u * 1024u * 1024u)

/* ---- helpers ------------------------------------------------------------------- */

static const struct sg_host_api *ssh_host; /* for ssh_log from anywhere */

void ssh_log(const struct ssh_ctx *ctx, enum sg_log_level lvl, const char *fmt, ...)
{
	const struct sg_host_api *host = ctx ? ctx->host : ssh_host;
	char line[1024];
	va_list ap;

	if (!host)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	host->log(lvl, SSH_PLUGIN, "%s", line);
}

int64_t ssh_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int ssh_random_hex(char *out, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char raw[64];
	size_t got = 0;

	if (n > sizeof(raw))
		return -1;
	while (got < n) {
		ssize_t r = getrandom(raw + got, n - got, 0);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		got += (size_t)r;
	}
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = hex[raw[i] >> 4];
		out[2 * i + 1] = hex[raw[i] & 15];
	}
	out[2 * n] = '\0';
	return 0;
}

void ssh_strv_free(char **v)
{
	if (!v)
		return;
	for (char **p = v; *p; p++)
		free(*p);
	free(v);
}

static unsigned long ssh_config_uint(const struct sg_host_api *host, const char *key,
				     unsigned long def)
{
	const char *v = host->config_get("ssh", key);
	unsigned long n;
	char *end;

	if (!v || !*v)
		return def;
	errno = 0;
	n = strtoul(v, &end, 10);
	if (errno || *end || v[0] == '-')
		return def; /* the core validated "uint" keys already */
	return n;
}

/* ---- init / fini ------------------------------------------------------------------ */

/* Reads the configuration; never touches the network (connections are made
 * by the first call that needs one), so startup stays fast. */
static int ssh_init(const struct sg_host_api *host, void **priv, struct sg_err *err)
{
	struct ssh_ctx *ctx;

	ssh_host = host;
	ctx = calloc(1, sizeof(*ctx)); /* freed by ssh_fini() */
	if (!ctx)
		return host->errf(err, SG_E_NOMEM, "ssh: out of memory");
	ctx->host = host;
	pthread_mutex_init(&ctx->lock, NULL);
	ctx->file_cap = ssh_config_uint(host, "file_cap", SSH_FILE_CAP);
	if (ssh_random_hex(ctx->nonce, 8) < 0) {
		pthread_mutex_destroy(&ctx->lock);
		free(ctx);
		return host->errf(err, SG_E_INTERNAL, "ssh: no randomness: %s", strerror(errno));
	}
	ssh_runner_setup(ctx);
	if (ssh_prewarm_start(ctx, err) < 0) {
		ssh_runner_teardown(ctx);
		pthread_mutex_destroy(&ctx->lock);
		free(ctx);
		return -1;
	}
	*priv = ctx;
	return 0;
}

/* Usable when the default target is configured and its port answers
 * within timeout_ms (a TCP connect: authentication is checked when a
 * sandbox is made, with a message that names the key). */
int ssh_probe(void *priv, unsigned timeout_ms, struct sg_probe *out, struct sg_err *err)
{
	struct ssh_ctx *ctx = priv;
	struct ssh_target t;
	char where[SSH_HOST_MAX + SSH_USER_MAX + 16];
	int fd;

	out->preference = 20;
	if (ssh_target_resolve(ctx, NULL, &t, err) < 0)
		return -1;
	out->details = json_pack("{s:s, s:s, s:s}", "default_target",
				 ssh_target_str(&t, where, sizeof(where)), "root", t.root,
				 "host_key_policy", ctx->host->config_get("ssh", "host_key_policy") ?: "strict");
	fd = ssh_tcp_connect(ctx, &t, ssh_now_ms() + (timeout_ms ? timeout_ms : 1), NULL, err);
	if (fd < 0)
		return -1;
	close(fd);
	return 0;
}

static void ssh_fini(void *priv)
{
	struct ssh_ctx *ctx = priv;

	if (!ctx)
		return;
	ssh_prewarm_join(ctx); /* it uses the pools */
	/* Every runner first: removing their files may use any pool's
	 * connections, which the loop below frees. */
	for (struct ssh_pool *p = ctx->pools; p; p = p->next)
		ssh_runner_pool_fini(p);
	while (ctx->pools) {
		struct ssh_pool *p = ctx->pools;

		ctx->pools = p->next;
		ssh_pool_free(p);
	}
	ssh_runner_teardown(ctx);
	pthread_mutex_destroy(&ctx->lock);
	if (ctx->lib_started)
		libssh2_exit();
	free(ctx);
}

/* libssh2 (and its crypto library) starts with the first connection, not
 * with sandgate: init() stays cheap for a backend nobody uses. */
int ssh_lib_start(struct ssh_ctx *ctx, struct sg_err *err)
{
	int rc = 0;

	pthread_mutex_lock(&ctx->lock);
	if (!ctx->lib_started) {
		if (libssh2_init(0) == 0)
			ctx->lib_started = true;
		else
			rc = ctx->host->errf(err, SG_E_INTERNAL,
					     "ssh: libssh2 failed to initialise its crypto backend");
	}
	pthread_mutex_unlock(&ctx->lock);
	return rc;
}

/* ---- the descriptor ----------------------------------------------------------------- */

static const struct sg_config_key ssh_config_keys[] = {
	{ .key = "known_hosts", .def = "~/.ssh/known_hosts",
	  .help = "OpenSSH known_hosts file host keys are checked against (accept-new appends here)" },
	{ .key = "host_key_policy", .def = "strict", .accepts = "strict|accept-new|off",
	  .help = "strict refuses unknown and changed host keys; accept-new records unknown ones; "
		  "off checks nothing (logged as a warning)" },
	{ .key = "passphrase", .secret = true,
	  .help = "passphrase of encrypted identity files (or SANDGATE_SSH_PASSPHRASE)" },
	{ .key = "default_host",
	  .help = "host of the default target (sandboxes without a target name)" },
	{ .key = "default_user",
	  .help = "remote user of the default target (default: the local user name)" },
	{ .key = "default_port", .def = "22", .accepts = "uint",
	  .help = "SSH port of the default target" },
	{ .key = "default_key",
	  .help = "identity file of the default target (default: ssh-agent, then "
		  "~/.ssh/id_ed25519, id_ecdsa, id_rsa)" },
	{ .key = "connect_timeout", .def = "10", .accepts = "uint",
	  .help = "seconds to connect, exchange keys and authenticate" },
	{ .key = "keepalive_interval", .def = "30", .accepts = "uint",
	  .help = "seconds between keepalives while waiting on a server; three "
		  "unanswered intervals drop the connection (0: off)" },
	{ .key = "root",
	  .help = "remote directory holding the sandboxes' working directories, the remote "
		  "user's own and writable by nobody else, or refused (default "
		  "/tmp/sandgate-<remote user>)" },
	{ .key = "file_cap", .def = "67108864", .accepts = "uint",
	  .help = "largest file in bytes that file read/write moves" },
	{ .key = "prewarm", .def = "false",
	  .help = "in a server, make targets ready before the first call (connected, "
		  "sandbox root made, runner started): true for the default target, or "
		  "a comma-separated list of targets (\"default\" is the default one)" },
	{ .key = "runner", .def = "true", .accepts = "bool",
	  .help = "run commands through sandgate-runner, uploaded to each host once "
		  "($XDG_RUNTIME_DIR/sandgate, else ~/.cache/sandgate) and started on one "
		  "channel (about 1 ms a command); false: one exec channel per command" },
	{ .key = "runner_path",
	  .help = "the sandgate-runner binary on this host; default: next to ssh.so, "
		  "else the installed libexec/sandgate/sandgate-runner",
	  .env = "SANDGATE_RUNNER" },
	{ .key = "isolation", .def = "auto", .accepts = "auto|bwrap|none",
	  .help = "bwrap: each sandbox is a bubblewrap jail on the host (its directory at "
		  "/workspace its only writable path, the runner inside, its processes "
		  "ended with it); none: a plain directory, not isolated from the host's "
		  "other sandboxes (said at create); auto: bwrap where the host has it" },
	{ .key = "network", .def = "host", .accepts = "none|host",
	  .help = "a jailed sandbox's network: host shares the host's, none only its own "
		  "loopback" },
	{ .key = NULL }
};

static const char ssh_help[] =
	"SSH backend: a sandbox is a working directory (mode 0700) under [ssh] root "
	"on an SSH host; kill_sandbox removes it.  Where the host has bubblewrap "
	"([ssh] isolation = auto or bwrap) the directory is the /workspace of a jail "
	"of its own (new namespaces, /usr and a small /etc read-only, nothing else "
	"of the host writable, other sandboxes invisible) with the runner inside; "
	"its commands, shells and files go through that runner, and its processes "
	"end with kill_sandbox and with sandgate's connection.  With isolation = "
	"none, create_sandbox says the sandboxes of that host are not isolated from "
	"each other, and the file tools still keep to the directory.  The host is the default target "
	"([ssh] default_host, default_user, default_port, default_key) or a named one, "
	"[ssh.target.NAME] with host, port, user, key, root, known_hosts, "
	"host_key_policy: name it with the create option {\"target\": \"NAME\"} or, "
	"for now, as create_sandbox's template.  Commands run as "
	"`exec /bin/sh -c` whatever the login shell, without a pty, in their own "
	"process group that a timeout kills; files move through SFTP (atomic "
	"replace).  Commands and shells go through sandgate-runner, a small static "
	"program uploaded once per host to $XDG_RUNTIME_DIR/sandgate (else "
	"~/.cache/sandgate), started on one channel and removed when sandgate "
	"ends; where it cannot run (another CPU, noexec, no writable place), or "
	"with [ssh] runner = false, each command opens its own channel.  run_code's "
	"python and javascript kernels live in that runner too, one per sandbox and "
	"language, ended with the sandbox.  Host keys are checked against [ssh] known_hosts (strict by "
	"default).  One connection carries up to MaxSessions channels; more "
	"concurrent calls open more connections.  RSA keys need SHA-1 signatures "
	"with libssh2 1.10, which OpenSSH 8.8+ refuses: use ed25519 or ECDSA keys.";

/* [ssh.target.NAME]: a named target.  No defaults here: each unset key
 * falls back to [ssh]'s (default_host, default_port, ...). */
static const struct sg_config_key ssh_target_keys[] = {
	{ .key = "host", .help = "host name or address of the target" },
	{ .key = "port", .accepts = "uint", .help = "SSH port (default [ssh] default_port)" },
	{ .key = "user", .help = "remote user (default [ssh] default_user)" },
	{ .key = "key", .help = "identity file (default [ssh] default_key)" },
	{ .key = "root", .help = "remote directory of the sandboxes (default [ssh] root)" },
	{ .key = "known_hosts", .help = "known_hosts file (default [ssh] known_hosts)" },
	{ .key = "host_key_policy", .accepts = "strict|accept-new|off",
	  .help = "host key policy (default [ssh] host_key_policy)" },
	{ .key = "isolation", .accepts = "auto|bwrap|none",
	  .help = "sandbox isolation on this target (default [ssh] isolation)" },
	{ .key = "network", .accepts = "none|host",
	  .help = "a jailed sandbox's network on this target (default [ssh] network)" },
	{ .key = NULL }
};

static const struct sg_config_section ssh_config_sections[] = {
	{ .section = "ssh.target.*", .keys = ssh_target_keys },
	{ .section = NULL }
};

SG_EXPORT const struct sg_backend sg_backend = {
	SG_BACKEND_HEADER,
	.name = "ssh",
	.version = PACKAGE_VERSION,
	.summary = "working directories on SSH hosts (libssh2)",
	.help = ssh_help,
	.config_keys = ssh_config_keys,
	.config_sections = ssh_config_sections,
	.init = ssh_init,
	.fini = ssh_fini,
	.probe = ssh_probe,
	.machine_create = ssh_machine_create,
	.machine_attach = ssh_machine_attach,
	.machine_destroy = ssh_machine_destroy,
	.machine_release = ssh_machine_release,
	.machine_list = ssh_machine_list,
	/* no expiry group: directories have no backend-side expiry */
	.exec = ssh_exec,
	.run_code = ssh_run_code,
	.stream_open = ssh_stream_open,
	.stream_write = ssh_stream_write,
	.stream_read = ssh_stream_read,
	.stream_close = ssh_stream_close,
	/* A status fd through the runner; SG_E_NOTSUP without one. */
	.stream_open_status = ssh_stream_open_status,
	.stream_read_ch = ssh_stream_read_ch,
	.file_read = ssh_file_read,
	.file_write = ssh_file_write,
	.file_list = ssh_file_list,
	.file_stat = ssh_file_stat,
	.file_remove = ssh_file_remove,
	.actions = ssh_actions,
	.n_actions = SSH_N_ACTIONS,
	.file_read_at = ssh_file_read_at,
};
