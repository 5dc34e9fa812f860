/* sandgate deploy --target fc: writes the artifact that runs `sandgate
 * http` on Function Compute and prints the steps to deploy it. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/cli/atomic.h"
#include "core/cli/cli.h"
#include "core/cli/commands.h"
#include "core/cli/deploy.h"
#include "core/cli/jsonfile.h"
#include "core/base/conf.h"
#include "core/base/err.h"
#include "core/base/util.h"

static const char deploy_help[] =
	"usage: sandgate deploy --target fc [--output-dir DIR] [OPTIONS]\n"
	"\n"
	"Writes an artifact that runs 'sandgate http' on Alibaba Cloud Function Compute\n"
	"as a custom container, and prints the steps to deploy it (sandgate does not\n"
	"call the FC API):\n"
	"  Dockerfile          builds sandgate from source on Debian 12\n"
	"  manifest.json       function, region, memory, timeout, environment, HTTP\n"
	"                      trigger (POST, GET, DELETE), session affinity on\n"
	"                      Mcp-Session-Id, custom domain (mode 0600: holds the token)\n"
	"  auth-token          the bearer token (mode 0600)\n"
	"  client-config.json  an MCP client entry for the endpoint\n"
	"  DEPLOY.md           the steps\n"
	"\n"
	"Options:\n"
	"  --output-dir DIR          where to write (default ./sandgate-fc)\n"
	"  --name NAME               function name (default sandgate-mcp)\n"
	"  --region REGION           default $ALIBABA_CLOUD_REGION_ID, else cn-hangzhou\n"
	"  --template NAME           default sandbox template (default base)\n"
	"  --memory MB               default 512\n"
	"  --timeout SECONDS         default 600\n"
	"  --generate-token          generate a new bearer token (the default when no\n"
	"                            token is given)\n"
	"  --auth-token-file FILE    the bearer token is the first line of FILE\n"
	"                            (else $ABX_MCP_AUTH_TOKEN, else generated)\n"
	"  --no-session-affinity     turn Mcp-Session-Id affinity off (default on;\n"
	"                            --enable-session-affinity says it explicitly)\n"
	"  --sandbox-api-key KEY     the FC sandbox API key (default $ABX_SANDBOX_API_KEY,\n"
	"                            $E2B_API_KEY, [fc] api_key); the environment is safer\n"
	"                            than the command line, which other users can read\n"
	"  --custom-domain DOMAIN    a custom domain bound to the function\n"
	"  --image REF               the image the function runs (default\n"
	"                            registry.REGION.aliyuncs.com/sandgate/NAME:VERSION)\n"
	"  --base-image IMAGE        the Dockerfile's default base image (default debian:12)\n"
	"  --source DIR              the sandgate source tree to build (default: the one\n"
	"                            this binary was built from, when it is still there)\n"
	"  --json                    print what was written as JSON\n"
	"\n"
	"Secrets are never printed: the token and the key are shown as their length.\n"
	"Exit status: 0 written, 1 a file could not be written or read, 2 usage.\n";

#define TOKEN_FILE_MAX 65536
#define DEFAULT_REGION "cn-hangzhou"

/* Region and function names go into host names and resource names. */
static bool word_ok(const char *s, const char *extra, size_t max)
{
	size_t n = strlen(s);

	if (n == 0 || n > max)
		return false;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && !strchr(extra, *s))
			return false;
	return true;
}

/* A bearer token travels in an HTTP header: visible ASCII, no blank. */
static bool token_ok(const char *t)
{
	size_t n = strlen(t);

	if (n < 16 || n > 512)
		return false;
	for (; *t; t++)
		if (*t <= ' ' || *t > '~')
			return false;
	return true;
}

/* The first line of path that is neither blank nor a '#' comment, trimmed.
 * Returns a new string or NULL with err. */
static char *read_token_file(const char *path, struct sg_err *err)
{
	char buf[TOKEN_FILE_MAX + 1], *line, *save = NULL;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;
	size_t len = 0;

	if (fd < 0) {
		sg_errf(err, SG_E_IO, "--auth-token-file: cannot read '%s': %s", path, strerror(errno));
		return NULL;
	}
	while (len < TOKEN_FILE_MAX && (n = read(fd, buf + len, TOKEN_FILE_MAX - len)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	buf[len] = '\0';
	for (line = strtok_r(buf, "\r\n", &save); line; line = strtok_r(NULL, "\r\n", &save)) {
		char *end;

		while (isspace((unsigned char)*line))
			line++;
		end = line + strlen(line);
		while (end > line && isspace((unsigned char)end[-1]))
			*--end = '\0';
		if (*line && *line != '#')
			return sg_xstrdup(line);
	}
	sg_errf(err, SG_E_INVAL, "--auth-token-file: '%s' holds no token: write it on the first line", path);
	return NULL;
}

struct opts {
	const char *target, *dir, *name, *region, *template_, *memory, *timeout, *token_file;
	const char *api_key, *api_key_alias, *domain, *image, *base_image, *source;
	bool generate, affinity_on, affinity_off;
};

static int parse_uint(const char *opt, const char *v, unsigned lo, unsigned hi, unsigned *out)
{
	char *end;
	unsigned long n;

	errno = 0;
	n = strtoul(v, &end, 10);
	if (!isdigit((unsigned char)*v) || *end || errno || n < lo || n > hi)
		return sg_cli_usage("deploy", "%s '%s': give a whole number from %u to %u", opt, v, lo, hi);
	*out = (unsigned)n;
	return 0;
}

/* Fills d from the options and the environment.  Returns 0 or an exit
 * status; *token is the caller's to free (and wipe). */
static int resolve(struct opts *o, struct sg_deploy *d, char **token, char **image,
		   struct sg_err *err)
{
	const char *env;
	int rc;

	d->dir = o->dir ? o->dir : "sandgate-fc";
	d->name = o->name ? o->name : "sandgate-mcp";
	if (!word_ok(d->name, "_-", 64) || isdigit((unsigned char)d->name[0]) || d->name[0] == '-')
		return sg_cli_usage("deploy", "--name '%s': a function name is 1 to 64 letters, digits, "
				    "'_' or '-', starting with a letter or '_'", d->name);
	env = getenv("ALIBABA_CLOUD_REGION_ID");
	d->region = o->region ? o->region : env && *env ? env : DEFAULT_REGION;
	d->region_source = o->region ? "--region" : env && *env ? "environment ALIBABA_CLOUD_REGION_ID"
							  : "default";
	if (!word_ok(d->region, "-", 32))
		return sg_cli_usage("deploy", "region '%s' (%s): a region id such as cn-hangzhou",
				    d->region, d->region_source);
	d->template_ = o->template_ ? o->template_ : "base";
	d->memory_mb = 512;
	d->timeout_s = 600;
	if ((o->memory && (rc = parse_uint("--memory", o->memory, 128, 32768, &d->memory_mb))) ||
	    (o->timeout && (rc = parse_uint("--timeout", o->timeout, 1, 86400, &d->timeout_s))))
		return rc;
	if (o->affinity_on && o->affinity_off)
		return sg_cli_usage("deploy", "%s", "--enable-session-affinity and --no-session-affinity contradict each other");
	d->affinity = !o->affinity_off;
	d->domain = o->domain;
	if (d->domain && !word_ok(d->domain, ".-", 253))
		return sg_cli_usage("deploy", "--custom-domain '%s': a DNS name such as mcp.example.com", d->domain);
	d->base_image = o->base_image ? o->base_image : "debian:12";
	*image = o->image ? sg_xstrdup(o->image)
			  : sg_xasprintf("registry.%s.aliyuncs.com/sandgate/%s:%s", d->region, d->name,
					 PACKAGE_VERSION);
	d->image = *image;
	if (o->generate && o->token_file)
		return sg_cli_usage("deploy", "%s", "give --generate-token or --auth-token-file, not both");
	env = getenv("ABX_MCP_AUTH_TOKEN");
	if (o->token_file) {
		if (!(*token = read_token_file(o->token_file, err)))
			return SG_CLI_FAIL;
		d->token_source = "from --auth-token-file";
	} else if (!o->generate && env && *env) {
		*token = sg_xstrdup(env);
		d->token_source = "from ABX_MCP_AUTH_TOKEN";
	} else {
		*token = sg_xmalloc(65);
		if (sg_random_hex(*token, 32) < 0) {
			sg_errf(err, SG_E_IO, "cannot read random bytes for the token: %s", strerror(errno));
			return SG_CLI_FAIL;
		}
		d->token_source = "generated";
	}
	if (!token_ok(*token))
		return sg_cli_usage("deploy", "the bearer token (%s) must be 16 to 512 visible ASCII "
				    "characters without blanks", d->token_source);
	d->token = *token;
	return 0;
}

/* The FC sandbox key: --sandbox-api-key, then the variables fc.so reads,
 * then the configuration file. */
static void resolve_key(const struct opts *o, struct sg_deploy *d)
{
	static const char *const vars[] = { "ABX_SANDBOX_API_KEY", "E2B_API_KEY" };
	const char *v;

	d->api_key = o->api_key ? o->api_key : o->api_key_alias;
	d->api_key_source = "from --sandbox-api-key";
	for (size_t i = 0; !d->api_key && i < 2; i++) {
		v = getenv(vars[i]);
		if (v && *v) {
			d->api_key = v;
			d->api_key_source = i ? "from E2B_API_KEY" : "from ABX_SANDBOX_API_KEY";
		}
	}
	if (!d->api_key && (v = sg_config_get("fc", "api_key")) && *v) {
		d->api_key = v;
		d->api_key_source = "from [fc] api_key";
	}
}

/* The source tree this binary was built from, when it is still there.
 * Caller frees. */
static char *default_source(void)
{
	struct stat st;

	return stat(SG_SRCDIR "/configure.ac", &st) == 0 ? sg_cli_realpath(SG_SRCDIR) : NULL;
}

static int write_text(const struct sg_deploy *d, const char *file, const char *text,
		      mode_t mode, json_t *written, struct sg_err *err)
{
	char *path = sg_xasprintf("%s/%s", d->dir, file);
	int rc = sg_write_file_atomic(path, text, strlen(text), mode, err);

	free(path);
	if (rc == 0)
		json_array_append_new(written, json_pack("{s:s, s:s}", "file", file, "mode",
							 mode == 0600 ? "0600" : "0644"));
	return rc;
}

static int write_json(const struct sg_deploy *d, const char *file, json_t *v, mode_t mode,
		      json_t *written, struct sg_err *err)
{
	char *text = sg_json_text(v, 2);
	int rc = write_text(d, file, text, mode, written, err);

	/* the manifest's text holds the token: wipe it before it goes back to malloc */
	explicit_bzero(text, strlen(text));
	free(text);
	json_decref(v);
	return rc;
}

static int write_artifact(const struct sg_deploy *d, const char *steps, json_t *written,
			  struct sg_err *err)
{
	char *dockerfile = sg_deploy_dockerfile(d), *tok = sg_xasprintf("%s\n", d->token);
	int rc;

	rc = write_text(d, "auth-token", tok, 0600, written, err);
	rc = rc ? rc : write_json(d, "manifest.json", sg_deploy_manifest(d, false), 0600, written, err);
	rc = rc ? rc : write_text(d, "Dockerfile", dockerfile, 0644, written, err);
	rc = rc ? rc : write_json(d, "client-config.json", sg_deploy_client_config(d), 0644, written, err);
	rc = rc ? rc : write_text(d, "DEPLOY.md", steps, 0644, written, err);
	explicit_bzero(tok, strlen(tok));
	free(tok);
	free(dockerfile);
	return rc;
}

static void print_result(const struct sg_deploy *d, const char *steps, json_t *written, bool json)
{
	json_t *o;
	char *text;
	size_t i;
	json_t *f;

	if (json) {
		o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s?, s:O, s:o, s:o, s:s}", "target", "fc",
			      "output_dir", d->dir, "function_name", d->name, "region", d->region,
			      "region_source", d->region_source, "image", d->image, "source", d->source,
			      "files", written, "manifest", sg_deploy_manifest(d, true),
			      "client_config", sg_deploy_client_config(d), "steps", steps);
		json_object_set_new(o, "token", json_pack("{s:s, s:i}", "source", d->token_source,
							 "length", (int)strlen(d->token)));
		text = sg_json_text(o, 2);
		fputs(text, stdout);
		free(text);
		json_decref(o);
		return;
	}
	printf("Wrote the Function Compute artifact for %s (%s, region %s from %s) to %s:\n",
	       d->name, d->image, d->region, d->region_source, d->dir);
	json_array_foreach(written, i, f)
		printf("  %-20s mode %s\n", json_string_value(json_object_get(f, "file")),
		       json_string_value(json_object_get(f, "mode")));
	printf("Bearer token: %s, %zu characters, in %s/auth-token (not shown)\n", d->token_source,
	       strlen(d->token), d->dir);
	printf("FC sandbox API key: %s\n\n", d->api_key ? "set (not shown)" : "not given");
	o = sg_deploy_client_config(d);
	text = sg_json_text(o, 2);
	printf("%s\nClient configuration template (%s/client-config.json):\n%s", steps, d->dir, text);
	free(text);
	json_decref(o);
}

int sg_cmd_deploy(int argc, char **argv, const char *config, bool json)
{
	struct sg_cli_common com = { .config = config, .json = json };
	struct opts o = { 0 };
	struct sg_deploy d = { 0 };
	char *token = NULL, *image = NULL, *steps = NULL, *source = NULL, *absdir = NULL, *probe;
	json_t *written = json_array();
	struct sg_err err;
	int rc;
	struct sg_cli_opt opts[] = {
		{ .name = "--target", .str = &o.target },
		{ .name = "--output-dir", .str = &o.dir },
		{ .name = "--name", .str = &o.name },
		{ .name = "--region", .str = &o.region },
		{ .name = "--template", .str = &o.template_ },
		{ .name = "--memory", .str = &o.memory },
		{ .name = "--timeout", .str = &o.timeout },
		{ .name = "--generate-token", .flag = &o.generate },
		{ .name = "--auth-token-file", .str = &o.token_file },
		{ .name = "--enable-session-affinity", .flag = &o.affinity_on },
		{ .name = "--no-session-affinity", .flag = &o.affinity_off },
		{ .name = "--sandbox-api-key", .str = &o.api_key },
		{ .name = "--api-key", .str = &o.api_key_alias },
		{ .name = "--custom-domain", .str = &o.domain },
		{ .name = "--image", .str = &o.image },
		{ .name = "--base-image", .str = &o.base_image },
		{ .name = "--source", .str = &o.source },
		{ .name = NULL },
	};

	rc = sg_cli_parse("deploy", argc, argv, opts, deploy_help, &com);
	if (rc)
		goto out;
	if (!o.target || strcmp(o.target, "fc")) {
		rc = sg_cli_usage("deploy", "deploy needs --target fc (Function Compute is the only target)%s%s%s",
				  o.target ? ", not '" : "", o.target ? o.target : "", o.target ? "'" : "");
		goto out;
	}
	if (com.rest) {
		rc = sg_cli_usage("deploy", "%s", "deploy takes no arguments after --");
		goto out;
	}
	if ((rc = sg_cli_load_config(com.config)))
		goto out;
	if ((rc = resolve(&o, &d, &token, &image, &err))) {
		if (rc == SG_CLI_FAIL)
			fprintf(stderr, "sandgate: %s\n", err.msg);
		goto out;
	}
	resolve_key(&o, &d);
	d.source = o.source ? o.source : (source = default_source());
	/* the folder first, so that the steps can name it absolutely */
	probe = sg_xasprintf("%s/.", d.dir);
	rc = sg_mkdir_parents(probe, 0700, &err);
	free(probe);
	if (rc < 0) {
		fprintf(stderr, "sandgate: %s\n", err.msg);
		rc = SG_CLI_FAIL;
		goto out;
	}
	d.dir = absdir = sg_cli_realpath(d.dir);
	steps = sg_deploy_steps(&d);
	if (write_artifact(&d, steps, written, &err) < 0) {
		fprintf(stderr, "sandgate: %s\n", err.msg);
		rc = SG_CLI_FAIL;
		goto out;
	}
	print_result(&d, steps, written, com.json);
out:
	if (token) {
		explicit_bzero(token, strlen(token));
		free(token);
	}
	free(image);
	free(source);
	free(absdir);
	free(steps);
	json_decref(written);
	json_decref(com.rest);
	return rc;
}
