/* The contents of the Function Compute artifact of `sandgate deploy
 * --target fc` (core/cli/deploy_files.c), apart from the command. */
#ifndef SG_CORE_CLI_DEPLOY_H
#define SG_CORE_CLI_DEPLOY_H

#include <stdbool.h>

#include <jansson.h>

/* The port sandgate http listens on inside the container. */
#define SG_DEPLOY_PORT 9000

/* Everything the artifact is made of; strings borrowed from the caller. */
struct sg_deploy {
	const char *dir;           /* the output directory */
	const char *name;          /* function name */
	const char *region;
	const char *region_source; /* "--region", "environment ALIBABA_CLOUD_REGION_ID", "default" */
	const char *template_;     /* default sandbox template */
	const char *image;         /* the image the function runs */
	const char *base_image;    /* the Dockerfile's default BASE_IMAGE */
	const char *source;        /* the sandgate source tree (the build context), or NULL */
	const char *domain;        /* custom domain, or NULL */
	unsigned memory_mb, timeout_s;
	bool affinity;
	const char *token;         /* the bearer token: a secret */
	const char *token_source;  /* "generated", "file PATH", "environment ABX_MCP_AUTH_TOKEN" */
	const char *api_key;       /* the FC sandbox API key (a secret), or NULL */
	const char *api_key_source;
};

/* The Dockerfile: builds sandgate from source on Debian 12 (BASE_IMAGE, an
 * argument, default d->base_image) and runs `sandgate http` on
 * SG_DEPLOY_PORT with the fc backend.  Caller frees. */
char *sg_deploy_dockerfile(const struct sg_deploy *d);

/* The deployment manifest (function, trigger, affinity, domain, the
 * environment with the token and key in it).  masked: secrets replaced by
 * a description, for printing.  New reference. */
json_t *sg_deploy_manifest(const struct sg_deploy *d, bool masked);

/* An MCP client entry for the deployed endpoint, the token left as
 * <BEARER_TOKEN>.  New reference. */
json_t *sg_deploy_client_config(const struct sg_deploy *d);

/* The manual steps, as text (no secret in it).  Caller frees. */
char *sg_deploy_steps(const struct sg_deploy *d);

#endif
