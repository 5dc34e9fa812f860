/*
 * The router: JSON-RPC messages of a session to what answers them
 * (initialize, ping, tools/list, tools/call, logging/setLevel,
 * notifications/initialized and /cancelled; batches on a 2025-03-26
 * session).  Tool calls are handed to the executor (core/server/exec.h);
 * tools/list and tools/call wait here for the backends, the only place
 * that does.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/registry/audit.h"
#include "core/protocol/bulk.h"
#include "core/protocol/call.h"
#include "core/base/conf.h"
#include "core/protocol/jsonrpc.h"
#include "core/base/log.h"
#include "core/base/quota.h"
#include "core/server/exec.h"
#include "core/server/mcp.h"
#include "core/protocol/session.h"
#include "core/registry/plugin.h"
#include "core/tools/registry.h"
#include "core/base/util.h"

static const char *const versions[] = { "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05" };


bool sg_mcp_version_supported(const char *version)
{
	for (size_t i = 0; i < sizeof(versions) / sizeof(versions[0]); i++)
		if (strcmp(version, versions[i]) == 0)
			return true;
	return false;
}

/* A batch (2025-03-26 only): replies are gathered and sent as one array
 * when the last one is in. */
struct batch {
	pthread_mutex_t lock;
	json_t *replies;
	int pending;
	struct sg_session *s;
	void *ctx;
};

static void batch_done(struct batch *b, json_t *reply)
{
	bool last;

	pthread_mutex_lock(&b->lock);
	if (reply)
		json_array_append_new(b->replies, reply);
	last = --b->pending == 0;
	pthread_mutex_unlock(&b->lock);
	if (!last)
		return;
	if (json_array_size(b->replies) > 0) {
		/* A transport send needs a call for HTTP routing; a synthetic
		 * one carries the request context. */
		struct sg_call c = { .session = b->s, .transport_ctx = b->ctx };

		sg_session_send(b->s, &c, json_incref(b->replies), true);
	} else if (b->s->ops->dropped) {
		struct sg_call c = { .session = b->s, .transport_ctx = b->ctx };

		b->s->ops->dropped(b->s->ctx, &c);
	}
	json_decref(b->replies);
	pthread_mutex_destroy(&b->lock);
	sg_session_unref(b->s);
	free(b);
}

/* Where a reply goes: into its batch, or straight out. */
struct reply_to {
	struct batch *batch;
	void *ctx;
	struct sg_bulk *bulk;    /* a lone tools/call's large arguments, for its job */
};

static void reply(struct sg_session *s, struct reply_to *rt, struct sg_call *call, json_t *msg)
{
	if (rt->batch) {
		batch_done(rt->batch, msg);
		return;
	}
	if (call) {
		sg_session_send(s, call, msg, true);
	} else {
		struct sg_call c = { .session = s, .transport_ctx = rt->ctx };

		sg_session_send(s, &c, msg, true);
	}
}

static json_t *handle_initialize(struct sg_session *s, json_t *params, json_t **error)
{
	const char *asked = json_string_value(json_object_get(params, "protocolVersion"));
	const char *chosen = SG_MCP_LATEST;

	if (!json_is_object(params) || !asked) {
		*error = sg_rpc_error(NULL, SG_RPC_INVALID_PARAMS,
				      "initialize needs params.protocolVersion (a string such as \"2025-11-25\")",
				      NULL);
		return NULL;
	}
	/* lifecycle: answer with the client's version when supported, else our
	 * latest and let the client decide. */
	if (sg_mcp_version_supported(asked))
		chosen = asked;
	/* Once per session (lifecycle: initialization is the first
	 * interaction): a second one would change the version the session's
	 * transport and batches already follow.  Checked and set under one
	 * lock, so two racing initializes cannot both pass. */
	pthread_mutex_lock(&s->lock);
	if (s->protocol[0]) {
		char msg[240];

		snprintf(msg, sizeof(msg),
			 "initialize was already answered in this session (protocol %s): a session is initialized once; to start over, open a new session (stdio: a new process; HTTP: initialize without Mcp-Session-Id)",
			 s->protocol);
		pthread_mutex_unlock(&s->lock);
		*error = sg_rpc_error(NULL, SG_RPC_INVALID_REQUEST, msg, NULL);
		return NULL;
	}
	snprintf(s->protocol, sizeof(s->protocol), "%s", chosen);
	pthread_mutex_unlock(&s->lock);
	return json_pack("{s:s, s:{s:{s:b}, s:{}}, s:{s:s, s:s, s:s}, s:s}",
			 "protocolVersion", chosen,
			 "capabilities", "tools", "listChanged", 0, "logging",
			 "serverInfo", "name", "sandgate", "title", "sandgate sandbox gateway",
			 "version", PACKAGE_VERSION,
			 "instructions",
			 "Sandboxes for running code and commands. Tools without sandbox_id use the "
			 "session's default sandbox, created on first use; create_sandbox makes a new "
			 "default. Sandboxes end with the session.");
}

struct tool_job {
	struct sg_exec_job ex;   /* first: the executor's view of it */
	struct sg_call *call;
	const struct sg_tool *tool;
	json_t *args;
	struct sg_bulk *bulk;    /* owned, then the audit row's */
	struct reply_to rt;
};

static void run_job(struct sg_exec_job *ex)
{
	struct tool_job *job = (struct tool_job *)ex;
	struct sg_call *call = job->call;
	struct sg_session *s = call->session;
	struct sg_tool_ctx t = { .s = s, .call = call, .bulk = job->bulk };
	json_t *result;
	int64_t t0 = sg_now_ms(), took;
	bool cancelled;

	result = sg_tool_call(&t, job->tool, job->args);
	atomic_store(&call->done, true);
	/* given back before the reply: a client that sends its next call on
	 * the answer finds the quota free */
	sg_quota_give(s->owner, SG_QUOTA_CALLS);
	took = sg_now_ms() - t0;
	cancelled = sg_call_cancelled(call);
	/* The row is queued before the reply, so a client that queries the log
	 * next sees the call it just made; the writer writes it later, in a
	 * batch. */
	sg_audit_tool_call(s, job->tool->name, job->args, job->bulk, result, took, cancelled);
	job->args = NULL; /* the audit row's now */
	job->bulk = NULL;
	SG_DEBUG("tools/call %s took %lld ms", job->tool->name, (long long)took);
	/* A cancelled request gets no response (basic/utilities/cancellation). */
	if (cancelled) {
		SG_INFO("tools/call %s cancelled, no response sent", job->tool->name);
		json_decref(result);
		if (job->rt.batch)
			batch_done(job->rt.batch, NULL);
		else if (s->ops->dropped)
			s->ops->dropped(s->ctx, call);
	} else {
		json_t *msg = sg_rpc_result(call->id, result);

		/* the reply's own id: a batch's replies are freed by the thread
		 * that ends the batch, while this one frees the call (call.c) */
		json_object_set_new(msg, "id", json_deep_copy(call->id));
		reply(s, &job->rt, call, msg);
	}
	sg_session_call_remove(s, call);
	sg_call_free(call);
	free(job);
}

/* Starts tools/call on its own thread, or runs it here (see handoff in
 * struct sg_transport_ops).  Returns a JSON-RPC error to send now, or NULL
 * when the call is (or will be) answered. */
static json_t *start_tool_call(struct sg_session *s, struct sg_rpc_msg *m, struct reply_to *rt)
{
	const char *name = json_string_value(json_object_get(m->params, "name"));
	json_t *args = json_object_get(m->params, "arguments");
	json_t *meta = json_object_get(m->params, "_meta");
	json_t *token = json_object_get(meta, "progressToken"), *id;
	const struct sg_tool *tool;
	struct tool_job *job;
	struct sg_err qerr;

	if (!name)
		return sg_rpc_error(m->id, SG_RPC_INVALID_PARAMS,
				    "tools/call needs params.name (a string): call tools/list for the names", NULL);
	tool = sg_tool_find(name);
	if (!tool) {
		const char *family = sg_tool_unserved_family(name);
		char msg[256];

		if (family)
			snprintf(msg, sizeof(msg),
				 "tool '%.64s' is not served here: it is in the %s family and this server has [server] "
				 "tools = %s (call tools/list for the tools served)",
				 name, family, sg_config_get("server", "tools"));
		else
			snprintf(msg, sizeof(msg), "unknown tool '%.64s': call tools/list for the available tools", name);
		return sg_rpc_error(m->id, SG_RPC_INVALID_PARAMS, msg, NULL);
	}
	if (args && !json_is_object(args) && !json_is_null(args))
		return sg_rpc_error(m->id, SG_RPC_INVALID_PARAMS,
				    "tools/call params.arguments must be an object", NULL);
	if (token && !json_is_string(token) && !json_is_integer(token))
		token = NULL;
	/* The credential's quota first: one at its quota takes none of the
	 * server's slots from the others. */
	if (sg_quota_take(s->owner, SG_QUOTA_CALLS, &qerr) < 0)
		return sg_rpc_error(m->id, SG_RPC_INTERNAL_ERROR, qerr.msg, NULL);
	if (sg_exec_admit() < 0) {
		sg_quota_give(s->owner, SG_QUOTA_CALLS);
		return sg_rpc_error(m->id, SG_RPC_INTERNAL_ERROR,
				    "too many tool calls in flight: retry shortly, or raise [server] max_calls", NULL);
	}
	job = sg_xcalloc(1, sizeof(*job));
	/* The call gets copies of the id and token (the arguments are taken
	 * out of the message, below): a reference shared with the message
	 * would be dropped on two threads, and jansson's count orders nothing
	 * between them (TSan: the final free here raced the worker's decref
	 * once the worker no longer waited for a new thread to start). */
	id = json_deep_copy(m->id);
	token = token ? json_deep_copy(token) : NULL;
	job->call = sg_call_new(s, id, token, "tools/call");
	json_decref(id);
	json_decref(token);
	job->call->transport_ctx = rt->ctx;
	/* A reply in a batch is sent after its call is gone: it holds nothing. */
	job->call->pieces = !rt->batch && s->ops->send_json;
	snprintf(job->call->tool, sizeof(job->call->tool), "%s", name);
	job->tool = tool;
	/* The arguments are taken out of the message, not copied: a file's
	 * content is the largest thing a call carries, and a copy of it was
	 * one whole extra copy on every write.  The message keeps no
	 * reference, so the job's is the only one (jansson's reference count
	 * orders nothing between two threads that drop one each). */
	job->args = json_is_object(args) ? json_incref(args) : NULL;
	if (job->args)
		json_object_del(m->params, "arguments");
	job->bulk = rt->bulk;
	rt->bulk = NULL;
	job->rt = *rt;
	job->ex.run = run_job;
	sg_session_call_add(s, job->call);
	/* The reading thread runs the call itself when its transport lets
	 * another thread read on (stdio): no wake-up of a second thread on the
	 * call's way in. */
	if (sg_exec_start(&job->ex, !rt->batch && s->ops->handoff && s->ops->handoff(s->ctx)) < 0) {
		sg_quota_give(s->owner, SG_QUOTA_CALLS);
		sg_session_call_remove(s, job->call);
		sg_call_free(job->call);
		json_decref(job->args);
		rt->bulk = job->bulk; /* the caller frees it */
		free(job);
		return sg_rpc_error(m->id, SG_RPC_INTERNAL_ERROR, "cannot start a thread for the call", NULL);
	}
	return NULL;
}

static json_t *handle_set_level(struct sg_session *s, struct sg_rpc_msg *m)
{
	const char *level = json_string_value(json_object_get(m->params, "level"));
	int l = sg_log_level_parse(level);

	if (!level || l < 0 || !strcmp(level, "warn"))
		return sg_rpc_error(m->id, SG_RPC_INVALID_PARAMS,
				    "logging/setLevel needs params.level: one of debug, info, notice, warning, error, critical, alert, emergency",
				    NULL);
	atomic_store(&s->log_level, l);
	return sg_rpc_result(m->id, json_object());
}

/* The one place that waits for the backends: the tool list names them and
 * every tool reaches them.  A load that failed after initialize was
 * answered is this error, for every later request (the server stays up to
 * say so). */
static json_t *backends_ready(struct sg_rpc_msg *m)
{
	struct sg_err err;

	if (sg_plugin_ready(&err) == 0)
		return NULL;
	return sg_rpc_error(m->id, SG_RPC_INTERNAL_ERROR, err.msg, NULL);
}

/* tools/list outside a batch: the cached result text is spliced into the
 * response instead of serialising the whole list for every request. */
static void send_tools_list(struct sg_session *s, struct reply_to *rt, json_t *id)
{
	struct sg_call c = { .session = s, .transport_ctx = rt->ctx };
	char *idtext = json_dumps(id, JSON_ENCODE_ANY | JSON_COMPACT);
	size_t tlen, len;
	const char *tools = sg_tools_list_text(&tlen);
	char *msg;

	if (!idtext)
		abort(); /* out of memory: the sg_xmalloc policy */
	len = strlen(idtext) + tlen + 40;
	msg = sg_xmalloc(len);
	len = (size_t)snprintf(msg, len, "{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":%s}", idtext, tools);
	s->ops->send(s->ctx, &c, msg, len, true);
	free(msg);
	free(idtext);
}

/* Handles one request or notification.  Returns the reply to send now, or
 * NULL (notification, or a reply that a thread will send). */
static json_t *dispatch(struct sg_session *s, struct sg_rpc_msg *m, struct reply_to *rt,
			bool *async)
{
	json_t *err = NULL, *res;

	*async = false;
	if (m->kind == SG_RPC_NOTIFICATION) {
		if (!strcmp(m->method, "notifications/initialized")) {
			pthread_mutex_lock(&s->lock);
			s->initialized = true;
			pthread_mutex_unlock(&s->lock);
		} else if (!strcmp(m->method, "notifications/cancelled")) {
			json_t *rid = json_object_get(m->params, "requestId");

			if (rid && sg_session_cancel(s, rid))
				SG_INFO("request cancelled by the client: %s",
					json_string_value(json_object_get(m->params, "reason"))
						? json_string_value(json_object_get(m->params, "reason"))
						: "no reason given");
		}
		return NULL; /* never answered, known or not */
	}
	if (!strcmp(m->method, "initialize")) {
		res = handle_initialize(s, m->params, &err);
		if (!res) {
			json_object_set(err, "id", m->id);
			return err;
		}
		return sg_rpc_result(m->id, res);
	}
	if (!strcmp(m->method, "ping"))
		return sg_rpc_result(m->id, json_object());
	if ((!strcmp(m->method, "tools/list") || !strcmp(m->method, "tools/call")) &&
	    (err = backends_ready(m)) != NULL)
		return err;
	if (!strcmp(m->method, "tools/list")) {
		json_t *cursor = json_object_get(m->params, "cursor");

		/* One page holds every tool, so no cursor is ever valid. */
		if (cursor && !json_is_null(cursor))
			return sg_rpc_error(m->id, SG_RPC_INVALID_PARAMS,
					    "invalid cursor: tools/list has a single page; call it without a cursor", NULL);
		if (!rt->batch) {
			send_tools_list(s, rt, m->id);
			*async = true; /* answered already */
			return NULL;
		}
		return sg_rpc_result(m->id, json_incref(sg_tools_list()));
	}
	if (!strcmp(m->method, "tools/call")) {
		err = start_tool_call(s, m, rt);
		*async = err == NULL;
		return err;
	}
	if (!strcmp(m->method, "logging/setLevel"))
		return handle_set_level(s, m);
	{
		char msg[200];

		snprintf(msg, sizeof(msg), "method not found: '%.80s'", m->method);
		return sg_rpc_error(m->id, SG_RPC_METHOD_NOT_FOUND, msg, NULL);
	}
}

/* Handles one message of a batch or a lone message.  Returns 1 when a reply
 * is (or will be) sent, 0 otherwise. */
static int handle_one(struct sg_session *s, json_t *msg, struct reply_to *rt)
{
	struct sg_rpc_msg m;
	json_t *out;
	bool async;

	sg_rpc_classify(msg, &m);
	switch (m.kind) {
	case SG_RPC_RESPONSE:
		return 0; /* sandgate sends no requests yet: nothing to match */
	case SG_RPC_INVALID:
		out = sg_rpc_error(m.id, SG_RPC_INVALID_REQUEST, m.why, NULL);
		break;
	default:
		out = dispatch(s, &m, rt, &async);
		if (async)
			return 1;
		if (!out)
			return 0;
		break;
	}
	reply(s, rt, NULL, out);
	return 1;
}

static bool batches_allowed(struct sg_session *s)
{
	bool ok;

	pthread_mutex_lock(&s->lock);
	ok = strcmp(s->protocol, "2025-03-26") == 0;
	pthread_mutex_unlock(&s->lock);
	return ok;
}

static int handle_batch(struct sg_session *s, json_t *arr, void *ctx)
{
	struct batch *b;
	struct reply_to rt = { .ctx = ctx };
	size_t i, n = json_array_size(arr);
	long long max_batch = sg_config_int("server", "max_batch", 100);
	int replies = 0;
	json_t *msg;

	if (n == 0 || !batches_allowed(s)) {
		reply(s, &rt, NULL,
		      sg_rpc_error(NULL, SG_RPC_INVALID_REQUEST,
				   n == 0 ? "empty batch"
					  : "batches are only part of MCP 2025-03-26: send one message at a time",
				   NULL));
		return 1;
	}
	/* Each element's reply is built and held until the batch's end (a
	 * tools/list one is the whole list): a small request could make a
	 * reply of hundreds of megabytes. */
	if (max_batch > 0 && n > (size_t)max_batch) {
		char why[160];

		snprintf(why, sizeof(why), "a batch of %zu messages: [server] max_batch allows %lld; "
			 "send them in smaller batches", n, max_batch);
		reply(s, &rt, NULL, sg_rpc_error(NULL, SG_RPC_INVALID_REQUEST, why, NULL));
		return 1;
	}
	b = sg_xcalloc(1, sizeof(*b));
	pthread_mutex_init(&b->lock, NULL);
	b->replies = json_array();
	b->pending = 1; /* held until every element is dispatched */
	b->s = s;
	b->ctx = ctx;
	sg_session_ref(s);
	rt.batch = b;
	json_array_foreach(arr, i, msg) {
		pthread_mutex_lock(&b->lock);
		b->pending++;
		pthread_mutex_unlock(&b->lock);
		if (handle_one(s, msg, &rt))
			replies = 1;
		else
			batch_done(b, NULL);
	}
	batch_done(b, NULL);
	return replies;
}

/* A message parsed: a batch, or one message (with the large arguments of a
 * lone tools/call, when its tool takes them as they are). */
static int handle_msg(struct sg_session *s, json_t *msg, struct sg_bulk *bulk, void *transport_ctx)
{
	struct reply_to rt = { .ctx = transport_ctx };
	int r;

	if (!msg) {
		reply(s, &rt, NULL, sg_rpc_error(NULL, SG_RPC_PARSE_ERROR,
						 "parse error: the message is not valid JSON", NULL));
		return 1;
	}
	if (bulk) {
		const char *method = json_string_value(json_object_get(msg, "method"));
		const struct sg_tool *tool = method && !strcmp(method, "tools/call")
			? sg_tool_find(json_string_value(json_object_get(json_object_get(msg, "params"), "name")) ?: "")
			: NULL;

		/* Only the argument the tool reads as it is stays apart; anything
		 * else goes back into the message, for every other reader. */
		if (tool && tool->bulk_arg && !bulk->next && !strcmp(bulk->key, tool->bulk_arg))
			rt.bulk = bulk;
		else
			sg_bulk_restore(msg, bulk);
	}
	if (json_is_array(msg))
		r = handle_batch(s, msg, transport_ctx);
	else
		r = handle_one(s, msg, &rt);
	sg_bulk_free(rt.bulk); /* not taken by a job: the call was refused */
	json_decref(msg);
	return r;
}

int sg_mcp_handle(struct sg_session *s, const char *data, size_t len, void *transport_ctx)
{
	return handle_msg(s, sg_rpc_parse(data, len), NULL, transport_ctx);
}

int sg_mcp_handle_taking(struct sg_session *s, char *data, size_t len, void *transport_ctx)
{
	struct sg_bulk *bulk;
	json_t *msg = sg_rpc_parse_taking(data, len, &bulk);

	return handle_msg(s, msg, bulk, transport_ctx);
}
