/*
 * Targets: where a sandbox's host is and how to log in.  The default target
 * comes from [ssh] default_*; a named one from [ssh.target.NAME] (host,
 * port, user, key, root, known_hosts, host_key_policy), each key falling
 * back to [ssh]'s.  The section family is declared to the core as
 * "ssh.target.*" (ABI 1.2 config_sections), without defaults, so an unset
 * key reads as NULL and the [ssh] fallback applies.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/ssh/ssh.h"

#include <ctype.h>
#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SSH_SECTION_MAX (SSH_NAME_MAX + 16)

const char *ssh_target_str(const struct ssh_target *t, char *buf, size_t n)
{
	snprintf(buf, n, "%s@%s:%u", t->user, t->host, t->port);
	return buf;
}

static bool ssh_name_ok(const char *name)
{
	size_t n = strlen(name);

	if (n == 0 || n >= SSH_NAME_MAX)
		return false;
	for (const char *c = name; *c; c++)
		if (!isalnum((unsigned char)*c) && *c != '_' && *c != '-' && *c != '.')
			return false;
	return true;
}

bool ssh_target_exists(struct ssh_ctx *ctx, const char *name)
{
	char section[SSH_SECTION_MAX];
	const char *host;

	if (!ssh_name_ok(name))
		return false;
	snprintf(section, sizeof(section), "ssh.target.%s", name);
	host = ctx->host->config_get(section, "host");
	return host && *host;
}

/* A target key: the named section's own value, else [ssh] `fallback`. */
static const char *ssh_tget(struct ssh_ctx *ctx, const char *section, const char *key,
			    const char *fallback)
{
	const char *v = section ? ctx->host->config_get(section, key) : NULL;

	if (v && *v)
		return v;
	return fallback ? ctx->host->config_get("ssh", fallback) : NULL;
}

static int ssh_copy(struct ssh_ctx *ctx, char *dst, size_t n, const char *src,
		    const char *what, struct sg_err *err)
{
	if (strlen(src) >= n)
		return ctx->host->errf(err, SG_E_INVAL, "ssh: %s is longer than %zu bytes", what,
				       n - 1);
	strcpy(dst, src);
	return 0;
}

static int ssh_parse_port(struct ssh_ctx *ctx, const char *v, unsigned *port,
			  struct sg_err *err)
{
	char *end;
	unsigned long n;

	errno = 0;
	n = strtoul(v ? v : "22", &end, 10);
	if (errno || *end || n == 0 || n > 65535)
		return ctx->host->errf(err, SG_E_INVAL, "ssh: port '%s' is not a TCP port (1-65535)", v);
	*port = (unsigned)n;
	return 0;
}

static int ssh_parse_policy(struct ssh_ctx *ctx, const char *v, enum ssh_policy *pol,
			    struct sg_err *err)
{
	if (!v || !*v || !strcmp(v, "strict"))
		*pol = SSH_POLICY_STRICT;
	else if (!strcmp(v, "accept-new"))
		*pol = SSH_POLICY_ACCEPT_NEW;
	else if (!strcmp(v, "off"))
		*pol = SSH_POLICY_OFF;
	else
		return ctx->host->errf(err, SG_E_INVAL,
				       "ssh: host_key_policy '%s' is not strict, accept-new or off", v);
	return 0;
}

static unsigned ssh_uint(struct ssh_ctx *ctx, const char *key, unsigned def)
{
	const char *v = ctx->host->config_get("ssh", key);
	char *end;
	unsigned long n;

	if (!v || !*v)
		return def;
	n = strtoul(v, &end, 10);
	return *end || n > 86400 ? def : (unsigned)n;
}

static const char *ssh_local_user(char *buf, size_t n)
{
	struct passwd pw, *res = NULL;
	char tmp[1024];
	const char *u = getenv("USER");

	if (u && *u)
		return u;
	if (getpwuid_r(getuid(), &pw, tmp, sizeof(tmp), &res) == 0 && res) {
		snprintf(buf, n, "%s", pw.pw_name);
		return buf;
	}
	return "root";
}

int ssh_target_resolve(struct ssh_ctx *ctx, const char *name, struct ssh_target *t,
		       struct sg_err *err)
{
	char section[SSH_SECTION_MAX], ubuf[SSH_USER_MAX], path[SSH_PATH_MAX];
	const char *sec = NULL, *v;

	memset(t, 0, sizeof(*t));
	if (name && *name && strcmp(name, "default") != 0) {
		if (!ssh_name_ok(name))
			return ctx->host->errf(err, SG_E_INVAL,
					       "ssh: target name '%s' is not valid: use letters, digits, '_', '-' and '.'",
					       name);
		snprintf(section, sizeof(section), "ssh.target.%s", name);
		if (!ssh_target_exists(ctx, name))
			return ctx->host->errf(err, SG_E_NOTFOUND,
					       "ssh: no target '%s': add a section [%s] with host = HOST (and user, port, key) to the configuration",
					       name, section);
		sec = section;
	}
	snprintf(t->name, sizeof(t->name), "%s", sec ? name : "default");
	v = sec ? ssh_tget(ctx, sec, "host", NULL) : ctx->host->config_get("ssh", "default_host");
	if (!v || !*v)
		return ctx->host->errf(err, SG_E_INVAL,
				       "ssh: no default target: set [ssh] default_host (and default_user, default_key), or define [ssh.target.NAME] and pass its name as the template");
	if (ssh_copy(ctx, t->host, sizeof(t->host), v, "host", err) < 0 ||
	    ssh_parse_port(ctx, ssh_tget(ctx, sec, "port", "default_port"), &t->port, err) < 0)
		return -1;
	v = ssh_tget(ctx, sec, "user", "default_user");
	if (ssh_copy(ctx, t->user, sizeof(t->user), v && *v ? v : ssh_local_user(ubuf, sizeof(ubuf)),
		     "user", err) < 0)
		return -1;
	v = ssh_tget(ctx, sec, "key", "default_key");
	if (v && *v && sshc_expand_home(v, t->key, sizeof(t->key)) < 0)
		return ctx->host->errf(err, SG_E_INVAL, "ssh: key path '%s' is too long", v);
	v = ssh_tget(ctx, sec, "known_hosts", "known_hosts");
	if (sshc_expand_home(v && *v ? v : "~/.ssh/known_hosts", t->known_hosts,
			    sizeof(t->known_hosts)) < 0)
		return ctx->host->errf(err, SG_E_INVAL, "ssh: known_hosts path is too long or HOME is unknown");
	if (ssh_parse_policy(ctx, ssh_tget(ctx, sec, "host_key_policy", "host_key_policy"),
			     &t->policy, err) < 0)
		return -1;
	v = ssh_tget(ctx, sec, "root", "root");
	if (v && *v)
		snprintf(path, sizeof(path), "%s", v);
	else
		snprintf(path, sizeof(path), "/tmp/sandgate-%s", t->user);
	if (path[0] != '/')
		return ctx->host->errf(err, SG_E_INVAL,
				       "ssh: root '%s' of target '%s' is not an absolute path", path, t->name);
	while (strlen(path) > 1 && path[strlen(path) - 1] == '/')
		path[strlen(path) - 1] = '\0';
	if (ssh_copy(ctx, t->root, sizeof(t->root) - 32, path, "root", err) < 0)
		return -1;
	v = ssh_tget(ctx, sec, "isolation", "isolation");
	t->isolation = !v || !*v || strcmp(v, "auto") == 0 ? SSH_ISO_AUTO :
		       strcmp(v, "bwrap") == 0 ? SSH_ISO_BWRAP : SSH_ISO_NONE;
	if (v && *v && strcmp(v, "auto") && strcmp(v, "bwrap") && strcmp(v, "none"))
		return ctx->host->errf(err, SG_E_INVAL, "ssh: isolation = %s of target '%s': use "
				       "auto, bwrap or none", v, t->name);
	v = ssh_tget(ctx, sec, "network", "network");
	t->network_host = !v || !*v || strcmp(v, "host") == 0;
	t->connect_timeout_s = ssh_uint(ctx, "connect_timeout", 10);
	if (t->connect_timeout_s == 0)
		t->connect_timeout_s = 10;
	t->keepalive_s = ssh_uint(ctx, "keepalive_interval", 30);
	t->passphrase = ctx->host->config_get("ssh", "passphrase");
	return 0;
}
