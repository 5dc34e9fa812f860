/*
 * [ssh] prewarm: in a server, the targets it names are made ready before the
 * first call: connected and signed in, bubblewrap looked for, the sandbox
 * root made, and the target's runner started, so that the first
 * create_sandbox and the first command pay none of it.
 *
 * `prewarm = true` names the default target; a comma-separated list names
 * targets ("default" being the default one); false (the default) none.  A
 * background thread does it, joined by fini; a failure is logged and
 * changes nothing (the first call connects as it always did, and says why).
 * Only a server prewarms (host->server): `sandgate call`, `tools`, `config`
 * and `status` never do.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/ssh/ssh.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Makes the root as machine_create would (0700 when it makes it). */
static const char ssh_root_script[] = "umask 077 && mkdir -p -- \"$1\"";

/* Whether the value is a plain boolean: 1 true, 0 false, -1 a list. */
static int prewarm_bool(const char *v)
{
	static const char *const yes[] = { "true", "yes", "on", "1" }, *const no[] = { "false", "no", "off", "0", "" };

	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
		if (!strcasecmp(v, yes[i]))
			return 1;
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
		if (!strcasecmp(v, no[i]))
			return 0;
	return -1;
}

/* Makes target `name` (NULL: the default) ready; logs what it did. */
static void prewarm_one(struct ssh_ctx *ctx, const char *name)
{
	const char *shown = name ? name : "default";
	int64_t t0 = ssh_now_ms();
	const char *argv[] = { "/bin/sh", "-c", ssh_root_script, "sg", NULL, NULL };
	struct ssh_pool *p;
	struct rn_conn *c = NULL;
	struct sg_err err = { 0 };
	const char *runner = "off";
	json_t *st = NULL;
	int jailed, rc;

	p = ssh_pool_get(ctx, name, &err);
	if (!p)
		goto fail;
	jailed = ssh_jail_decide(p, NULL, &err); /* connects and signs in */
	if (jailed < 0)
		goto fail;
	argv[4] = p->target.root;
	if (ssh_script(p, argv, NULL, "making the sandbox root", &err) < 0)
		goto fail;
	/* A jailed sandbox starts a runner of its own in its jail; the
	 * target's runner serves the others. */
	if (ctx->runner_on && !jailed) {
		rc = rnc_site_get(&p->runner.site, &c, &err);
		if (rc < 0)
			goto fail;
		if (c)
			rn_conn_put(c);
		st = rnc_site_status(&p->runner.site);
		runner = json_string_value(json_object_get(st, "runner")) ?: "unknown";
	} else if (jailed) {
		runner = "per sandbox (jailed)";
	}
	ssh_log(ctx, SG_LOG_INFO, "prewarmed target %s in %lld ms: connected, sandbox root %s "
		"ready, runner %s", shown, (long long)(ssh_now_ms() - t0), p->target.root, runner);
	json_decref(st);
	return;
fail:
	ssh_log(ctx, SG_LOG_WARNING, "prewarming target %s failed (the first call tries "
		"again): %s", shown, err.msg);
}

static void *prewarm_main(void *arg)
{
	struct ssh_ctx *ctx = arg;
	char list[1024], *save = NULL;

	snprintf(list, sizeof(list), "%s", ctx->prewarm);
	if (prewarm_bool(list) == 1) {
		prewarm_one(ctx, NULL);
		return NULL;
	}
	for (char *tok = strtok_r(list, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
		if (ctx->prewarm_stop)
			break;
		prewarm_one(ctx, !strcmp(tok, "default") ? NULL : tok);
	}
	return NULL;
}

int ssh_prewarm_start(struct ssh_ctx *ctx, struct sg_err *err)
{
	const struct sg_host_api *h = ctx->host;
	const char *v = h->config_get("ssh", "prewarm");

	if (!v || !SG_HOST_HAS(h, server) || !h->server() || prewarm_bool(v) == 0)
		return 0;
	if (strlen(v) >= sizeof(((struct ssh_ctx *)0)->prewarm))
		return h->errf(err, SG_E_INVAL, "[ssh] prewarm: the list of targets is too long");
	snprintf(ctx->prewarm, sizeof(ctx->prewarm), "%s", v);
	if (pthread_create(&ctx->prewarm_thread, NULL, prewarm_main, ctx) != 0)
		return h->errf(err, SG_E_INTERNAL, "ssh: cannot start the prewarm thread");
	ctx->prewarm_running = true;
	return 0;
}

void ssh_prewarm_join(struct ssh_ctx *ctx)
{
	if (!ctx->prewarm_running)
		return;
	ctx->prewarm_stop = true;
	pthread_join(ctx->prewarm_thread, NULL);
	ctx->prewarm_running = false;
}
