/*
 * Fuzz target: the MCP method dispatch (core/server/mcp.c) behind a transport that
 * keeps what is sent.  The input is a conversation: its lines are handed to
 * sg_mcp_handle() one after another on one session, as stdio does, so an
 * initialize can change what later lines may do (batches on 2025-03-26).
 *
 * [server] max_calls is 0: a tools/call is checked (name, arguments, the
 * tool's existence) and then refused as "too many tool calls in flight", so
 * no tool runs and no backend is needed.
 *
 * Invariants: sg_mcp_handle() returns the number of messages it sent (0 or
 * 1 for a batch, whose replies go out as one array); each is one line of
 * JSON, an object (or an array of objects) with "jsonrpc": "2.0" and a
 * result or an error with an integer code and a string message.
 */
#define _GNU_SOURCE 1 /* memmem */
#include "config.h"

#include <string.h>

#include <jansson.h>

#include "core/base/conf.h"
#include "core/protocol/jsonrpc.h"
#include "core/base/log.h"
#include "core/server/exec.h"
#include "core/server/mcp.h"
#include "core/protocol/session.h"
#include "core/tools/registry.h"
#include "t/fuzz/fuzz.h"

static int sent;
static bool tools_checked;

static void check_reply(json_t *m)
{
	json_t *err = json_object_get(m, "error");

	FUZZ_ASSERT(json_is_object(m));
	FUZZ_ASSERT(!strcmp(json_string_value(json_object_get(m, "jsonrpc")), "2.0"));
	FUZZ_ASSERT(json_object_get(m, "id"));
	FUZZ_ASSERT(!json_object_get(m, "result") != !err);
	if (err) {
		FUZZ_ASSERT(json_is_integer(json_object_get(err, "code")));
		FUZZ_ASSERT(json_is_string(json_object_get(err, "message")));
	}
}

/* data with every copy of the tool list's text replaced by {}, or NULL when
 * it holds none.  The tool list is 18 kB of a cached text, spliced into a
 * lone tools/list reply and dumped again inside a batch's: parsing it for
 * every reply was most of the target's time.  It is checked whole once
 * (tools_checked); the reply around each copy is still parsed and checked. */
static char *without_tools(const char *data, size_t len, size_t *out_len)
{
	size_t tlen, o = 0;
	const char *tools = sg_tools_list_text(&tlen), *p = data, *end = data + len, *hit;
	char *out = NULL;

	while ((hit = memmem(p, (size_t)(end - p), tools, tlen)) != NULL) {
		if (!out)
			out = malloc(len);
		FUZZ_ASSERT(out);
		memcpy(out + o, p, (size_t)(hit - p));
		o += (size_t)(hit - p);
		memcpy(out + o, "{}", 2);
		o += 2;
		p = hit + tlen;
	}
	if (!out)
		return NULL;
	memcpy(out + o, p, (size_t)(end - p));
	*out_len = o + (size_t)(end - p);
	return out;
}

static void cap_send(void *ctx, struct sg_call *call, const char *data, size_t len, bool final)
{
	char *cut = NULL;
	size_t cut_len = 0;
	json_t *m;
	size_t i;
	json_t *v;

	(void)ctx;
	(void)call;
	FUZZ_ASSERT(final);
	FUZZ_ASSERT(len > 0 && !memchr(data, '\n', len) && !memchr(data, '\r', len));
	sent++;
	if (len > 4096 && tools_checked)
		cut = without_tools(data, len, &cut_len);
	m = cut ? sg_rpc_parse(cut, cut_len) : sg_rpc_parse(data, len);
	free(cut);
	FUZZ_ASSERT(m);
	if (json_is_array(m)) {
		FUZZ_ASSERT(json_array_size(m) > 0);
		json_array_foreach(m, i, v)
			check_reply(v);
	} else {
		check_reply(m);
		if (json_is_array(json_object_get(json_object_get(m, "result"), "tools")))
			tools_checked = true;
	}
	json_decref(m);
}

static const struct sg_transport_ops cap_ops = { .name = "fuzz", .send = cap_send };

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	sg_log_set_level(SG_LOG_CRITICAL);
	if (sg_config_set_override("server.max_calls=0", NULL) < 0)
		abort();
	sg_tools_init();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sg_session *s = sg_session_new(&cap_ops, NULL, "local:fuzz");
	const char *p = (const char *)data, *end = p + size;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
		int r;

		sent = 0;
		r = sg_mcp_handle(s, p, n, NULL);
		FUZZ_ASSERT(r == sent);
		p += n + 1;
	}
	sg_exec_drain();
	sg_session_unref(s);
	return 0;
}
