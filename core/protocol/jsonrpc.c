#include "config.h"

#include <string.h>

#include "core/base/buf.h"
#include "core/protocol/dump.h"
#include "core/protocol/jsonrpc.h"
#include "core/protocol/jskip.h"
#include "core/base/util.h"

static bool valid_id(json_t *id)
{
	return json_is_string(id) || json_is_integer(id);
}

void sg_rpc_classify(json_t *msg, struct sg_rpc_msg *m)
{
	json_t *v, *id, *method;

	memset(m, 0, sizeof(*m));
	m->kind = SG_RPC_INVALID;
	if (!json_is_object(msg)) {
		m->why = "a message must be a JSON object";
		return;
	}
	id = json_object_get(msg, "id");
	if (id && valid_id(id))
		m->id = id;
	v = json_object_get(msg, "jsonrpc");
	if (!json_is_string(v) || strcmp(json_string_value(v), "2.0") != 0) {
		m->why = "\"jsonrpc\" must be \"2.0\"";
		return;
	}
	/* A response, even an error with id null (a peer that could not parse
	 * something of ours), is never answered: that would ping-pong. */
	if (!json_object_get(msg, "method") &&
	    (json_object_get(msg, "result") || json_object_get(msg, "error"))) {
		m->kind = SG_RPC_RESPONSE;
		return;
	}
	if (id && !valid_id(id)) {
		m->why = json_is_null(id) ? "\"id\" must not be null: use a string or an integer"
					  : "\"id\" must be a string or an integer";
		return;
	}
	method = json_object_get(msg, "method");
	if (!method) {
		m->why = "\"method\" is missing";
		return;
	}
	if (!json_is_string(method)) {
		m->why = "\"method\" must be a string";
		return;
	}
	m->method = json_string_value(method);
	m->params = json_object_get(msg, "params");
	if (m->params && !json_is_object(m->params) && !json_is_array(m->params)) {
		m->why = "\"params\" must be an object or an array";
		return;
	}
	m->kind = id ? SG_RPC_REQUEST : SG_RPC_NOTIFICATION;
}

json_t *sg_rpc_parse(const char *data, size_t len)
{
	json_error_t jerr;

	return json_loadb(data, len, JSON_DECODE_ANY, &jerr);
}

/* ---- the id of a message's first bytes ---------------------------------- */

json_t *sg_rpc_peek_id(const char *data, size_t len)
{
	struct sg_jskip k = { data, data + len };

	sg_jskip_ws(&k);
	if (k.p >= k.end || *k.p++ != '{')
		return NULL;
	for (;;) {
		const char *key, *val;
		json_t *name, *v;
		bool is_id;

		sg_jskip_ws(&k);
		if (k.p >= k.end || *k.p != '"')
			return NULL;
		key = k.p;
		if (sg_jskip_string(&k) < 0)
			return NULL;
		/* the key decoded by jansson: "\u0069d" is "id" too */
		name = json_loadb(key, (size_t)(k.p - key), JSON_DECODE_ANY, NULL);
		is_id = json_is_string(name) && !strcmp(json_string_value(name), "id");
		json_decref(name);
		sg_jskip_ws(&k);
		if (k.p >= k.end || *k.p++ != ':')
			return NULL;
		sg_jskip_ws(&k);
		val = k.p;
		if (sg_jskip_value(&k) < 0)
			return NULL;
		if (is_id) {
			v = json_loadb(val, (size_t)(k.p - val), JSON_DECODE_ANY, NULL);
			if (valid_id(v))
				return v;
			json_decref(v);
			return NULL;
		}
		sg_jskip_ws(&k);
		if (k.p >= k.end || *k.p++ != ',')
			return NULL;
	}
}

json_t *sg_rpc_result(json_t *id, json_t *result)
{
	return json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id, "result",
			 result ? result : json_object());
}

json_t *sg_rpc_error(json_t *id, int code, const char *message, json_t *data)
{
	json_t *err = json_pack("{s:i, s:s}", "code", code, "message", message);

	if (data)
		json_object_set_new(err, "data", data);
	return json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id ? id : json_null(),
			 "error", err);
}

json_t *sg_rpc_notification(const char *method, json_t *params)
{
	json_t *n = json_pack("{s:s, s:s}", "jsonrpc", "2.0", "method", method);

	if (params)
		json_object_set_new(n, "params", params);
	return n;
}

static int dump_cb(const char *p, size_t n, void *ud)
{
	return sg_buf_append(ud, p, n);
}

char *sg_json_dump(const json_t *j, size_t flags, size_t *len)
{
	struct sg_buf b = { 0 };

	if (json_dump_callback(j, dump_cb, &b, flags) < 0 || !b.data) {
		sg_buf_release(&b);
		return NULL;
	}
	if (len)
		*len = b.len;
	return b.data; /* the caller's */
}

char *sg_rpc_dump(const json_t *msg, size_t *len)
{
	return sg_rpc_dump_with(msg, NULL, len);
}

char *sg_rpc_dump_with(const json_t *msg, const struct sg_bytes *bytes, size_t *len)
{
	struct sg_buf b = { 0 };
	char *s = NULL;

	if (sg_msg_dump(msg, bytes, dump_cb, &b) == 0 && b.data) {
		s = b.data;
		*len = b.len;
	} else {
		sg_buf_release(&b);
	}
	if (!s) {
		s = sg_xstrdup(SG_RPC_CANNOT_SERIALISE);
		*len = strlen(s);
	}
	return s;
}
