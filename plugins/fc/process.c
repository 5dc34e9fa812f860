/*
 * Processes through envd's Connect process service (ref. 5.2, 5.3): the
 * enveloped Start request, its server stream of start/data/end events and
 * the end-of-stream trailer, and the unary SendSignal, SendInput and
 * CloseStdin.  The exec slot lives here.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/fc/fc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugins/fc/connect.h"
#include "plugins/fc/http.h"

#define FC_HTTP_GRACE_MS 5000u /* ref. 5.2: HTTP timeout = command timeout + 5 s */

/* ---- the event stream ---------------------------------------------------------- */

int fc_proc_init(struct fc_proc_events *pe)
{
	struct fc_env_dec *d = malloc(sizeof(*d)); /* freed by fc_proc_free() */

	pe->dec = d;
	if (!d)
		return -1;
	fc_env_init(d, FC_MAX_ENVELOPE);
	return 0;
}

void fc_proc_free(struct fc_proc_events *pe)
{
	if (pe->dec) {
		fc_env_free(pe->dec);
		free(pe->dec);
		pe->dec = NULL;
	}
}

/* Go's ProcessState.String() for a signal death (ref. 5.2 "signal: killed"). */
static int fc_signal_of(const char *status)
{
	static const char *const names[] = {
		NULL, "hangup", "interrupt", "quit", "illegal instruction",
		"trace/breakpoint trap", "aborted", "bus error", "floating point exception",
		"killed", "user defined signal 1", "segmentation fault", "user defined signal 2",
		"broken pipe", "alarm clock", "terminated",
	};

	if (!status || strncmp(status, "signal: ", 8) != 0)
		return 0;
	status += 8;
	for (int i = 1; i < (int)(sizeof(names) / sizeof(names[0])); i++)
		if (strcmp(status, names[i]) == 0)
			return i;
	return 0;
}

static int fc_proc_data(struct fc_proc_events *pe, const json_t *data)
{
	static const struct { const char *key; int fd; } streams[] = {
		{ "stdout", 1 }, { "stderr", 2 }, { "pty", 1 },
	};

	for (size_t i = 0; i < 3; i++) {
		const char *b64 = json_string_value(json_object_get(data, streams[i].key));
		unsigned char *raw;
		size_t n;

		if (!b64)
			continue;
		raw = fc_b64_decode(b64, strlen(b64), &n);
		if (!raw) {
			snprintf(pe->perr, sizeof(pe->perr), "a %s chunk that is not base64",
				 streams[i].key);
			return -1;
		}
		if (pe->out && n)
			pe->out(pe->ud, streams[i].fd, (const char *)raw, n);
		free(raw);
	}
	return 0;
}

static void fc_proc_end(struct fc_proc_events *pe, const json_t *end)
{
	const char *status = json_string_value(json_object_get(end, "status"));

	pe->ended = true;
	/* ref. 5.1: a zero exitCode is omitted; a signal death is -1 */
	pe->exit_code = (int)fc_json_int64(json_object_get(end, "exitCode"), 0);
	pe->signal = fc_signal_of(status);
	if (pe->signal)
		pe->exit_code = -1;
}

static void fc_proc_trailer(struct fc_proc_events *pe, const json_t *t)
{
	const json_t *e = json_object_get(t, "error");
	const char *c = json_string_value(json_object_get(e, "code"));
	const char *m = json_string_value(json_object_get(e, "message"));

	pe->trailer = true;
	if (e) {
		snprintf(pe->tcode, sizeof(pe->tcode), "%s", c ? c : "unknown");
		snprintf(pe->tmsg, sizeof(pe->tmsg), "%s", m ? m : "");
	}
}

static int fc_proc_message(void *ud, uint8_t flags, const char *p, size_t n)
{
	struct fc_proc_events *pe = ud;
	json_t *j = json_loadb(p, n, 0, NULL), *ev;
	int ret = 0;

	if (!json_is_object(j)) {
		snprintf(pe->perr, sizeof(pe->perr), "a stream message that is not a JSON object");
		ret = -1;
	} else if (flags & FC_ENV_END) {
		fc_proc_trailer(pe, j);
	} else if (pe->ended || pe->trailer) {
		ret = 0; /* nothing counts after the end */
	} else {
		ev = json_object_get(j, "event");
		if (json_object_get(ev, "start")) {
			pe->started = true;
			pe->pid = (long)fc_json_int64(json_object_get(json_object_get(ev, "start"), "pid"), 0);
		} else if (!pe->started) {
			/* ref. 5.2: start always comes first */
			snprintf(pe->perr, sizeof(pe->perr), "an event before the start event");
			ret = -1;
		} else if (json_object_get(ev, "data")) {
			ret = fc_proc_data(pe, json_object_get(ev, "data"));
		} else if (json_object_get(ev, "end")) {
			fc_proc_end(pe, json_object_get(ev, "end"));
		} /* keepalive and unknown events are ignored */
	}
	json_decref(j);
	if (ret == 0 && pe->on_event)
		pe->on_event(pe->ud);
	return ret;
}

int fc_proc_feed(struct fc_proc_events *pe, const char *p, size_t n)
{
	struct fc_env_dec *d = pe->dec;

	if (fc_env_feed(d, p, n, fc_proc_message, pe) < 0) {
		if (!pe->perr[0])
			snprintf(pe->perr, sizeof(pe->perr), "%s", d->why);
		return -1;
	}
	return 0;
}

static int fc_proc_on_data(void *ud, const char *p, size_t n)
{
	struct fc_proc_events *pe = ud;
	int r;

	if (pe->lock)
		pthread_mutex_lock(pe->lock);
	r = fc_proc_feed(pe, p, n);
	if (pe->lock)
		pthread_mutex_unlock(pe->lock);
	return r;
}

/* ---- Start --------------------------------------------------------------------- */

json_t *fc_start_request(struct fc_machine *fm, const struct sg_exec_req *req, bool stdin_open)
{
	json_t *args = json_array(), *envs = fc_env_json(req->env), *proc;
	const char *cmd;

	if (req->command) {
		/* ref. 5.2, 10 #6: the whole string through bash -l -c, as E2B
		 * does; FC's base template has no /bin/sh. */
		cmd = "/bin/bash";
		json_array_append_new(args, json_string("-l"));
		json_array_append_new(args, json_string("-c"));
		json_array_append_new(args, json_string(req->command));
	} else {
		cmd = req->argv && req->argv[0] ? req->argv[0] : "/bin/true";
		for (size_t i = 1; req->argv && req->argv[0] && req->argv[i]; i++)
			json_array_append_new(args, json_string(req->argv[i]));
	}
	/* ref. 5.2: the key is "envs", not "envVars" */
	proc = json_pack("{s:s, s:o, s:o, s:s}", "cmd", cmd, "args", args, "envs", envs, "cwd",
			 req->cwd ? req->cwd : fm->ctx->workspace);
	return json_pack("{s:o, s:b}", "process", proc, "stdin", stdin_open);
}

static struct curl_slist *fc_start_headers(struct fc_machine *fm, unsigned timeout_ms,
					   struct sg_err *err)
{
	struct curl_slist *h = fc_envd_headers(fm, FC_ENVD_PORT, "application/connect+json", err);

	if (!h)
		return NULL;
	/* ref. 5.2: envd kills the process when Connect-Timeout-Ms passes, and
	 * sends keepalive events while it is quiet. */
	if (fc_hdr_add(&h, "Connect-Protocol-Version: 1") < 0 ||
	    fc_hdr_add(&h, "Keepalive-Ping-Interval: 50") < 0 ||
	    (timeout_ms && fc_hdr_add(&h, "Connect-Timeout-Ms: %u", timeout_ms) < 0)) {
		curl_slist_free_all(h);
		fm->ctx->host->errf(err, SG_E_NOMEM, "fc: out of memory");
		return NULL;
	}
	return h;
}

/* The Start URL and headers of fm for timeout_ms, made once per machine
 * (a call's path then builds neither).  *url is fm's; *headers is fm's, or,
 * for another timeout than the first one's, the caller's (*own, to free).
 * Returns 0, or -1 with err (out of memory). */
static int fc_start_parts(struct fc_machine *fm, unsigned timeout_ms, const char **url,
			  struct curl_slist **headers, struct curl_slist **own, struct sg_err *err)
{
	int ret = 0;

	*own = NULL;
	pthread_mutex_lock(&fm->start_lock);
	if (!fm->start_url)
		fm->start_url = fc_data_url(fm, FC_ENVD_PORT, "/process.Process/Start");
	if (!fm->start_headers) {
		fm->start_headers = fc_start_headers(fm, timeout_ms, err);
		fm->start_timeout_ms = timeout_ms;
	}
	*url = fm->start_url;
	*headers = fm->start_headers;
	if (fm->start_headers && fm->start_timeout_ms != timeout_ms)
		*headers = *own = fc_start_headers(fm, timeout_ms, err);
	pthread_mutex_unlock(&fm->start_lock);
	if (!*url || !*headers)
		ret = -1;
	if (!*url)
		fm->ctx->host->errf(err, SG_E_NOMEM, "fc: out of memory");
	return ret;
}

int fc_proc_start(struct fc_machine *fm, const struct sg_exec_req *req, bool stdin_open,
		  struct fc_proc_events *pe, struct sg_call *call, int abort_fd,
		  long *status, struct sg_err *err)
{
	struct fc_ctx *ctx = fm->ctx;
	struct fc_req rq = { .what = "start process", .method = "POST", .idempotent = false,
			     .call = call, .abort_fd = abort_fd, .gone_id = fm->id,
			     .secret = fm->token, .on_data = fc_proc_on_data, .ud = pe };
	struct fc_resp rp = { 0 };
	json_t *body = fc_start_request(fm, req, stdin_open);
	char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
	unsigned char *env = text ? fc_envelope(FC_ENV_DATA, text, strlen(text)) : NULL;
	struct curl_slist *own = NULL;
	int ret = -1;

	*status = 0;
	if (!env) {
		ctx->host->errf(err, SG_E_NOMEM, "fc: out of memory");
		goto out;
	}
	if (fc_start_parts(fm, req->timeout_ms, &rq.url, &rq.headers, &own, err) < 0)
		goto out;
	/* ref. 5.1, 5.4: the streaming request is enveloped too */
	rq.body = env;
	rq.body_len = strlen(text) + 5;
	rq.timeout_ms = req->timeout_ms ? req->timeout_ms + FC_HTTP_GRACE_MS : 0;
	ret = fc_http_request(ctx, &rq, &rp, err);
	*status = rp.status;
	if (ret == 0 && rp.status != 200)
		ret = fc_http_fail(ctx, err, "start process", &rp, fm->token);
	else if (ret == 0 && pe->perr[0])
		ret = ctx->host->errf(err, SG_E_PROTO, "fc: process stream: envd sent %s", pe->perr);
out:
	json_decref(body);
	if (text) { /* env values may be secrets */
		size_t n = strlen(text);

		explicit_bzero(text, n);
		if (env)
			explicit_bzero(env, n + 5);
	}
	free(text);
	free(env);
	curl_slist_free_all(own);
	fc_resp_free(ctx, &rp);
	return ret;
}

/* ---- unary process RPCs (ref. 5.3) ----------------------------------------------- */

static int fc_proc_unary(struct fc_machine *fm, const char *method, json_t *body,
			 const char *what, struct sg_err *err)
{
	json_t *out = NULL;
	int r;

	r = fc_envd_unary(fm, method, body, true, NULL, what, &out, NULL, 0, err);
	json_decref(body);
	json_decref(out);
	return r;
}

int fc_process_kill(struct fc_machine *fm, long pid)
{
	struct sg_err err;

	if (pid <= 0)
		return 1;
	if (fc_proc_unary(fm, "process.Process/SendSignal",
			  json_pack("{s:{s:I}, s:s}", "process", "pid", (json_int_t)pid, "signal",
				    "SIGNAL_SIGKILL"),
			  "kill process", &err) == 0)
		return 0;
	if (err.code == SG_E_NOTFOUND)
		return 1;
	fm->ctx->host->log(SG_LOG_WARNING, FC_PLUGIN, "sandbox %s: killing process %ld failed: %s",
			   fm->id, pid, err.msg);
	return -1;
}

int fc_process_send_input(struct fc_machine *fm, long pid, const void *p, size_t n,
			  struct sg_err *err)
{
	char *b64 = fc_b64_encode(p, n);
	json_t *body, *out = NULL;
	int r;

	if (!b64)
		return fm->ctx->host->errf(err, SG_E_NOMEM, "fc: out of memory");
	body = json_pack("{s:{s:I}, s:{s:s}}", "process", "pid", (json_int_t)pid, "input", "stdin",
			 b64);
	free(b64);
	/* not idempotent: the same bytes twice would be typed twice */
	r = fc_envd_unary(fm, "process.Process/SendInput", body, false, NULL, "send input", &out,
			  NULL, 0, err);
	json_decref(body);
	json_decref(out);
	return r;
}

int fc_process_close_stdin(struct fc_machine *fm, long pid, struct sg_err *err)
{
	return fc_proc_unary(fm, "process.Process/CloseStdin",
			     json_pack("{s:{s:I}}", "process", "pid", (json_int_t)pid), "close stdin",
			     err);
}

/* ---- the exec slot ---------------------------------------------------------------- */

struct fc_exec_sink {
	const struct sg_host_api *host;
	struct sg_exec_result *res;
	size_t cap;
};

static void fc_exec_out(void *ud, int fd, const char *p, size_t n)
{
	struct fc_exec_sink *s = ud;
	struct sg_buf *b = fd == 2 ? &s->res->err : &s->res->out;
	bool *trunc = fd == 2 ? &s->res->err_truncated : &s->res->out_truncated;
	size_t room = b->len < s->cap ? s->cap - b->len : 0;

	if (n > room) {
		*trunc = true;
		n = room;
	}
	if (n)
		s->host->buf_append(b, p, n);
}

/* What the stream's end says, once the request is over. */
static int fc_exec_outcome(struct fc_machine *fm, struct fc_proc_events *pe,
			   struct sg_exec_result *res, struct sg_err *err)
{
	const struct sg_host_api *host = fm->ctx->host;
	int killed;

	if (pe->ended) {
		res->exit_code = pe->exit_code;
		res->signal = pe->signal;
		return 0;
	}
	if (!strcmp(pe->tcode, "deadline_exceeded")) {
		/* ref. 5.2: envd killed it at Connect-Timeout-Ms */
		res->timed_out = true;
		res->exit_code = -1;
		res->signal = 9;
		return 0;
	}
	if (pe->tcode[0]) {
		if (!strcmp(pe->tcode, "unavailable") && fc_api_gone(fm->ctx, fm->id) == 1)
			return fc_gone(fm->ctx, err, fm->id);
		host->errf(err, SG_E_BACKEND, "fc: run command: envd ended the stream with %s: %.300s",
			   pe->tcode, pe->tmsg);
		return -1;
	}
	if (fc_api_gone(fm->ctx, fm->id) == 1)
		return fc_gone(fm->ctx, err, fm->id);
	/* ref. 5.2: E2B's "Process exited without a result".  envd keeps a
	 * process whose stream went away: end it, as after a cancellation. */
	killed = pe->started ? fc_process_kill(fm, pe->pid) : -1;
	return host->errf(err, SG_E_IO, "fc: run command: the process stream of sandbox %s ended "
			  "without an end event (connection dropped); %s", fm->id,
			  killed == 0 ? "the command was killed" : killed == 1 ?
			  "the command had ended" : "the command may still be running");
}

int fc_exec(struct sg_machine *m, const struct sg_exec_req *req, struct sg_call *call,
	    struct sg_exec_result *res, struct sg_err *err)
{
	struct fc_machine *fm = fc_machine_of(m, err);
	struct fc_exec_sink sink;
	struct fc_proc_events pe = { 0 };
	long status;
	int r;

	if (!fm)
		return -1;
	sink = (struct fc_exec_sink){ fm->ctx->host, res,
				      req->output_cap ? req->output_cap : SG_OUTPUT_CAP_DEFAULT };
	pe.out = fc_exec_out;
	pe.ud = &sink;
	if (fc_proc_init(&pe) < 0)
		return fm->ctx->host->errf(err, SG_E_NOMEM, "fc: out of memory");
	r = fc_proc_start(fm, req, false, &pe, call, -1, &status, err);
	if (r < 0 && err && err->code == SG_E_CANCELLED) {
		/* envd keeps a process whose stream went away: end it. */
		fc_process_kill(fm, pe.pid);
	} else if (r < 0 && err && err->code == SG_E_TIMEOUT && pe.started && !pe.ended) {
		/* our HTTP timeout came before envd's: the same outcome */
		fc_process_kill(fm, pe.pid);
		res->timed_out = true;
		res->exit_code = -1;
		res->signal = 9;
		r = 0;
	} else if (r == 0 || (pe.started && err && err->code == SG_E_IO)) {
		r = fc_exec_outcome(fm, &pe, res, err);
	}
	fc_proc_free(&pe);
	return r;
}
