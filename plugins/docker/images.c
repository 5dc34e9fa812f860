/*
 * Images: docker_images (the engine's, one row per tag), docker_image_history
 * (one image's layers) and docker_commit (a machine's container as an
 * image; long, so it reports progress and stops waiting when cancelled).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/docker/docker.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "sha256:abc..." -> the first 12 hex digits. */
static json_t *docker_short_id(const char *id)
{
	const char *hex = id && !strncmp(id, "sha256:", 7) ? id + 7 : id ? id : "";

	return json_stringn(hex, strlen(hex) < 12 ? strlen(hex) : 12);
}

int docker_act_images(void *priv, struct sg_machine *m, const json_t *params, struct sg_call *call,
		      json_t **result, struct sg_err *err)
{
	struct docker_ctx *ctx = priv;
	json_t *reply = NULL, *rows = json_array(), *img, *tag;
	long status;
	size_t i, j;

	(void)m, (void)params, (void)call;
	if (docker_engine_json(ctx->engine, "GET", "/images/json", NULL, &status, &reply, err) < 0) {
		json_decref(rows);
		return -1;
	}
	if (status != 200 || !json_is_array(reply)) {
		docker_engine_fail(ctx->engine, err, SG_E_BACKEND, "docker images", status, reply);
		json_decref(reply);
		json_decref(rows);
		return -1;
	}
	json_array_foreach(reply, i, img) {
		const char *id = json_string_value(json_object_get(img, "Id"));
		json_int_t size = json_integer_value(json_object_get(img, "Size"));
		json_int_t created = json_integer_value(json_object_get(img, "Created"));
		const json_t *tags = json_object_get(img, "RepoTags");
		double mb = round((double)size / (1024.0 * 1024.0) * 10.0) / 10.0;
		char when[40], untagged[64];
		json_t *sid = docker_short_id(id);
		size_t n = 0;

		docker_iso_time(created, when, sizeof(when));
		json_array_foreach(tags, j, tag) {
			const char *t = json_string_value(tag);

			if (!t || !strcmp(t, "<none>:<none>"))
				continue;
			n++;
			json_array_append_new(rows, json_pack("{s:s, s:O, s:s, s:f}", "tag", t, "image_id",
							      sid, "created", when, "size_mb", mb));
		}
		if (!n) {
			snprintf(untagged, sizeof(untagged), "<none>:%s", json_string_value(sid));
			json_array_append_new(rows, json_pack("{s:s, s:O, s:s, s:f}", "tag", untagged,
							      "image_id", sid, "created", when, "size_mb", mb));
		}
		json_decref(sid);
	}
	json_decref(reply);
	*result = json_pack("{s:o}", "images", rows);
	return 0;
}

int docker_act_history(void *priv, struct sg_machine *m, const json_t *params, struct sg_call *call,
		       json_t **result, struct sg_err *err)
{
	struct docker_ctx *ctx = priv;
	const char *image = json_string_value(json_object_get(params, "image"));
	json_t *reply = NULL, *layers = json_array(), *l;
	json_int_t total = 0;
	char path[1024], *e;
	long status;
	size_t i;

	(void)m, (void)call;
	if (!image || !*image || !(e = docker_engine_escape(image))) {
		json_decref(layers);
		return ctx->host->errf(err, SG_E_INVAL, "docker_image_history needs image: an image "
				       "reference such as sandgate/base:1");
	}
	snprintf(path, sizeof(path), "/images/%s/history", e);
	free(e);
	if (docker_engine_json(ctx->engine, "GET", path, NULL, &status, &reply, err) < 0 ||
	    status != 200 || !json_is_array(reply)) {
		if (status == 404)
			ctx->host->errf(err, SG_E_NOTFOUND, "no image %.200s on this docker daemon: "
					"docker_images lists them", image);
		else if (status)
			docker_engine_fail(ctx->engine, err, SG_E_BACKEND, "docker history", status, reply);
		json_decref(reply);
		json_decref(layers);
		return -1;
	}
	json_array_foreach(reply, i, l) {
		const char *id = json_string_value(json_object_get(l, "Id"));
		json_int_t size = json_integer_value(json_object_get(l, "Size"));

		total += size;
		json_array_append_new(layers, json_pack("{s:o, s:I, s:s, s:I, s:O}", "id",
			id && strcmp(id, "<missing>") ? docker_short_id(id) : json_string("<missing>"),
			"created", json_integer_value(json_object_get(l, "Created")),
			"created_by", json_string_value(json_object_get(l, "CreatedBy")) ?: "",
			"size_bytes", size, "tags", json_object_get(l, "Tags") ?: json_null()));
	}
	json_decref(reply);
	*result = json_pack("{s:s, s:o, s:I, s:I}", "image", image, "layers", layers,
			    "total_size_bytes", total, "layer_count", (json_int_t)json_array_size(layers));
	return 0;
}

/* "repo:tag" (repo: lower case, digits, . _ - / and a registry host:port);
 * splits it at the last ':' that is not part of a host.  0 or -1. */
static int docker_split_tag(const char *ref, char *repo, size_t rsize, char *tag, size_t tsize)
{
	const char *colon = strrchr(ref, ':');

	if (!colon || strchr(colon, '/') || colon == ref || !colon[1] || strlen(colon + 1) >= tsize ||
	    (size_t)(colon - ref) >= rsize)
		return -1;
	for (const char *p = ref; p < colon; p++)
		if (!(islower((unsigned char)*p) || isdigit((unsigned char)*p) || strchr("._-/:", *p)))
			return -1;
	for (const char *p = colon + 1; *p; p++)
		if (!(isalnum((unsigned char)*p) || strchr("._-", *p)))
			return -1;
	snprintf(repo, rsize, "%.*s", (int)(colon - ref), ref);
	snprintf(tag, tsize, "%s", colon + 1);
	return 0;
}

int docker_act_commit(void *priv, struct sg_machine *m, const json_t *params, struct sg_call *call,
		      json_t **result, struct sg_err *err)
{
	struct docker_ctx *ctx = priv;
	const char *ref = json_string_value(json_object_get(params, "image_tag"));
	const char *comment = json_string_value(json_object_get(params, "comment"));
	char repo[256], tag[129], path[1200], *er = NULL, *et = NULL, *ec = NULL;
	/* The container config to change: none (the engine wants JSON). */
	struct docker_http rq = { .method = "POST", .path = path, .call = call,
				  .body = "{}", .body_len = 2, .content_type = "application/json",
				  .timeout_ms = ctx->build_timeout_s * 1000u };
	struct docker_reply rp;
	json_t *reply = NULL;
	int rc = -1;

	if (!ref || docker_split_tag(ref, repo, sizeof(repo), tag, sizeof(tag)) < 0)
		return ctx->host->errf(err, SG_E_INVAL, "image_tag must be 'repo:tag', got '%.100s'",
				       ref ? ref : "");
	if (docker_tag_reserved(ctx, ref, err) < 0)
		return -1;
	er = docker_engine_escape(repo);
	et = docker_engine_escape(tag);
	ec = docker_engine_escape(comment ? comment : "");
	if (!er || !et || !ec) {
		rc = ctx->host->errf(err, SG_E_NOMEM, "docker: out of memory");
		goto out;
	}
	snprintf(path, sizeof(path), "/commit?container=%s&repo=%s&tag=%s&comment=%s&pause=1", m->id,
		 er, et, ec);
	ctx->host->progress(call, 1, 0, "committing the container (a long copy for a large one)");
	if (docker_engine_call(ctx->engine, &rq, &rp, err) < 0) {
		docker_reply_free(ctx->engine, &rp);
		goto out;
	}
	reply = json_loadb(rp.body.data ? rp.body.data : "", rp.body.len, 0, NULL);
	if (rp.status != 201 && rp.status != 200)
		docker_engine_fail(ctx->engine, err, SG_E_BACKEND, "docker commit", rp.status, reply);
	else
		rc = 0;
	if (rc == 0) {
		*result = json_pack("{s:s, s:s, s:o}", "image_tag", ref, "status", "committed",
				    "image_id", docker_short_id(json_string_value(json_object_get(reply, "Id"))));
	}
	docker_reply_free(ctx->engine, &rp);
out:
	json_decref(reply);
	free(er);
	free(et);
	free(ec);
	return rc;
}
