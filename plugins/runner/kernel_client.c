/* Running code on a runner's kernels: see kernel_client.h. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/runner/kernel_client.h"
#include "plugins/runner/client_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define KC_CANCEL_WAIT_MS 5000 /* after grace: an answer to a cancel, or give up */
#define KC_PING_MS 2000        /* a runner late with a call's end: alive if it answers by then */

/* An event line copied out of the request's queue (the copy is quick, the
 * JSON parse happens after the connection's lock is released). */
struct kc_line {
	struct kc_line *next;
	size_t len;
	char text[];
};

struct kc_state {
	struct rn_kernel_result *res;
	uint64_t out_cap;
	size_t out_room, err_room;  /* allocated */
	struct kc_line *head, **tail;
	size_t results_bytes, rich_cap;
	bool results_cut;
	bool oom;
	bool late;                  /* no end by the call's timeout, grace and slack */
};

static int64_t kc_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Appends to a stream's buffer, capped while it grows. */
static void kc_append(struct kc_state *s, char **buf, size_t *len, size_t *room,
		      bool *trunc, const void *p, size_t n)
{
	size_t left = *len < s->out_cap ? (size_t)(s->out_cap - *len) : 0;

	if (n > left) {
		*trunc = true;
		n = left;
	}
	if (n == 0)
		return;
	if (*len + n + 1 > *room) {
		size_t want = *room ? *room : 4096;
		char *nb;

		while (want < *len + n + 1)
			want *= 2;
		nb = realloc(*buf, want);
		if (!nb) {
			s->oom = true;
			return;
		}
		*buf = nb;
		*room = want;
	}
	memcpy(*buf + *len, p, n);
	*len += n;
	(*buf)[*len] = '\0';
}

/* Called with the request locked: copies only. */
static void kc_on_data(int chan, const void *p, size_t n, void *ud)
{
	struct kc_state *s = ud;
	struct rn_kernel_result *res = s->res;
	struct kc_line *l;

	if (chan == RN_R_STDOUT) {
		kc_append(s, &res->out, &res->out_len, &s->out_room, &res->out_trunc, p, n);
		return;
	}
	if (chan == RN_R_STDERR) {
		kc_append(s, &res->err, &res->err_len, &s->err_room, &res->err_trunc, p, n);
		return;
	}
	if (chan != RN_R_KEVENT)
		return;
	l = malloc(sizeof(*l) + n + 1); /* freed by kc_events() */
	if (!l) {
		s->oom = true;
		return;
	}
	l->next = NULL;
	l->len = n;
	memcpy(l->text, p, n);
	l->text[n] = '\0';
	*s->tail = l;
	s->tail = &l->next;
}

static void kc_result(struct kc_state *s, json_t *item, size_t bytes)
{
	if (s->results_bytes + bytes > s->rich_cap + RN_KERNEL_RESULTS_SLACK) {
		json_decref(item);
		if (s->results_cut)
			return;
		s->results_cut = true;
		item = json_pack("{s:s}", "omitted", "further rich results passed the call's "
				 "cap on rich output");
	}
	s->results_bytes += bytes;
	if (item)
		json_array_append_new(s->res->results, item);
}

/* One event line: `<word> <json>`.  Words this client does not know are
 * skipped (a newer kernel may say more). */
static void kc_event(struct kc_state *s, const char *line, size_t len)
{
	const char *sp = memchr(line, ' ', len);
	size_t wlen = sp ? (size_t)(sp - line) : len;
	json_t *j = sp ? json_loadb(sp + 1, len - wlen - 1, 0, NULL) : NULL;
	struct rn_kernel_result *res = s->res;

#define KC_IS(w) (wlen == strlen(w) && memcmp(line, w, wlen) == 0)
	if (KC_IS("result")) {
		if (!json_is_object(j)) {
			json_decref(j);
			j = json_pack("{s:s}", "omitted", "a result the kernel sent was not JSON");
		}
		kc_result(s, j, len);
		return;
	}
	if (KC_IS("error") && json_is_object(j) && !res->error) {
		res->error = j;
		return;
	}
	if (KC_IS("files") && json_is_array(j)) {
		json_decref(res->output_files);
		res->output_files = j;
		return;
	}
	if (KC_IS("hello") && json_is_object(j))
		snprintf(res->interpreter, sizeof(res->interpreter), "%s",
			 json_string_value(json_object_get(j, "interpreter")) ?
			 json_string_value(json_object_get(j, "interpreter")) : "");
#undef KC_IS
	json_decref(j);
}

static void kc_events(struct kc_state *s)
{
	struct kc_line *l;

	while ((l = s->head)) {
		s->head = l->next;
		kc_event(s, l->text, l->len);
		free(l);
	}
	s->tail = &s->head;
}

/* The KEXEC payload.  Returns 0, or -1 when it does not fit a frame. */
static int kc_fields(struct rn_buf *b, const struct rn_kernel_call *kc)
{
	size_t n = strlen(kc->code);

	if (n > RN_MAX_PAYLOAD)
		return -1;
	rn_put_str(b, RN_F_LANG, kc->language);
	if (kc->scope)
		rn_put_str(b, RN_F_SCOPE, kc->scope);
	rn_put_bytes(b, RN_F_SOURCE, kc->code, (uint32_t)n);
	for (size_t i = 0; kc->env && kc->env[i]; i++)
		rn_put_str(b, RN_F_ENV, kc->env[i]);
	if (kc->cwd)
		rn_put_str(b, RN_F_CWD, kc->cwd);
	if (kc->timeout_ms)
		rn_put_u32(b, RN_F_TIMEOUT_MS, kc->timeout_ms);
	rn_put_u32(b, RN_F_GRACE_MS, kc->grace_ms ? kc->grace_ms : RN_KGRACE_MS_DEFAULT);
	rn_put_u64(b, RN_F_CAP, kc->output_cap ? kc->output_cap : RN_QUEUE_MAX);
	rn_put_u32(b, RN_F_RICH_CAP, kc->rich_cap ? kc->rich_cap : RN_RICH_CAP_DEFAULT);
	if (kc->reset)
		rn_put_u32(b, RN_F_KFLAGS, RN_KFLAG_RESET);
	return b->oom || b->len > RN_MAX_PAYLOAD ? -1 : 0;
}

/* Waits for the end of r; interrupts it when cancel_fd fires.  Returns the
 * final state, or RN_REQ_RUNNING when no answer came after a cancel. */
static enum rn_req_state kc_wait(struct rn_req *r, const struct rn_kernel_call *kc,
				 struct kc_state *s, struct rn_exit *ex, char *why,
				 size_t size)
{
	unsigned grace = kc->grace_ms ? kc->grace_ms : RN_KGRACE_MS_DEFAULT;
	/* The runner ends a kernel call by its timeout and grace (a slow
	 * kernel's longer grace too): one that still says nothing well after
	 * may be stuck, and a call with no deadline of its own would wait for
	 * it for good.  It may also be healthy with calls queued before this
	 * one: a runner that answers a ping is waited for again. */
	int64_t wait = kc->timeout_ms ? (int64_t)kc->timeout_ms + grace + RN_KGRACE_SLOW_MS +
					KC_CANCEL_WAIT_MS : 0;
	int64_t late = wait ? kc_now_ms() + wait : 0;
	int64_t give_up = 0;
	enum rn_req_state st;

	for (;;) {
		st = rn_req_drain(r, kc_on_data, s, ex, why, size);
		kc_events(s);
		if (st != RN_REQ_RUNNING)
			return st;
		if (give_up && kc_now_ms() >= give_up)
			return st;
		if (late && kc_now_ms() >= late) {
			if (rn_ping(r->c, KC_PING_MS) >= 0) {
				late = kc_now_ms() + wait;
				continue;
			}
			s->late = true;
			return st;
		}
		if (rn_req_wait(r, give_up ? 100 : 1000, give_up ? -1 : kc->cancel_fd) == 2) {
			s->res->cancelled = true;
			rn_req_kill(r, 0);
			give_up = kc_now_ms() + grace + KC_CANCEL_WAIT_MS;
		}
	}
}

/* The call did not start: what to tell. */
static int kc_start_failed(const struct rn_kernel_call *kc, const struct rn_exit *ex,
			   char *why, size_t size)
{
	bool js = strcmp(kc->language, "javascript") == 0;

	if (ex->spawn_stage == RN_STAGE_CHDIR)
		return snprintf(why, size, "cannot start the %s kernel in %s: %s",
				kc->language, kc->cwd ? kc->cwd : "the runner's directory",
				strerror(ex->spawn_errno)), -1;
	if (ex->spawn_stage == RN_STAGE_EXEC && ex->spawn_errno == ENOENT)
		return snprintf(why, size, "no %s interpreter in the machine (looked for %s "
				"on PATH)", kc->language, js ? "node, nodejs" : "python3"), 1;
	return snprintf(why, size, "cannot start the %s kernel: %s", kc->language,
			strerror(ex->spawn_errno)), -1;
}

int rn_kernel_run(struct rn_conn *c, const struct rn_kernel_call *kc,
		  struct rn_kernel_result *res, char *why, size_t size)
{
	struct kc_state s = { .res = res };
	struct rn_buf b = { 0 };
	struct rn_exit ex;
	struct rn_req *r = NULL;
	enum rn_req_state st;
	char rwhy[256] = "";
	int rc;

	memset(res, 0, sizeof(*res));
	res->results = json_array();
	res->output_files = json_array();
	s.out_cap = kc->output_cap ? kc->output_cap : RN_QUEUE_MAX;
	s.rich_cap = kc->rich_cap ? kc->rich_cap : RN_RICH_CAP_DEFAULT;
	s.tail = &s.head;
	if (!res->results || !res->output_files)
		return snprintf(why, size, "out of memory"), -1;
	if (!rn_conn_has_cap(c, RN_CAP_KERNEL) ||
	    (kc->scope && !rn_conn_has_cap(c, RN_CAP_KERNEL_SCOPE)))
		return snprintf(why, size, "the runner has no \"%s\" capability (an older "
				"build)", kc->scope ? RN_CAP_KERNEL_SCOPE : RN_CAP_KERNEL), -1;
	if (kc->scope && strlen(kc->scope) > RN_SCOPE_MAX)
		return snprintf(why, size, "the kernel scope is over %u bytes", RN_SCOPE_MAX), -1;
	if (kc_fields(&b, kc) < 0) {
		rn_buf_free(&b);
		return snprintf(why, size, "the code and its environment take more than %u "
				"bytes", RN_MAX_PAYLOAD), -1;
	}
	rc = rn_request(c, RN_KEXEC, b.data, b.len, &r, why, size);
	rn_buf_free(&b);
	if (rc != 0)
		return -1;
	st = kc_wait(r, kc, &s, &ex, rwhy, sizeof(rwhy));
	rn_req_started(r, &res->kernel_pid, NULL);
	rn_req_put(r);
	if (s.oom)
		return snprintf(why, size, "out of memory for the call's output"), -1;
	if (s.late) {
		/* ended like a broken connection: the next call gets a new runner */
		rn_conn_fail(c, "stuck: no end of a kernel call long after its timeout, no answer to a ping");
		return snprintf(why, size, "the runner did not end the %s call long after its "
				"timeout, nor answer a ping: it is stuck, and is replaced by the next "
				"call", kc->language), -1;
	}
	if (st == RN_REQ_RUNNING)
		return snprintf(why, size, "the %s kernel did not answer a cancel", kc->language), -1;
	if (st == RN_REQ_FAILED)
		return snprintf(why, size, "%s", rwhy), -1;
	if (ex.spawn_errno)
		return kc_start_failed(kc, &ex, why, size);
	if ((!res->out && !(res->out = calloc(1, 1))) || (!res->err && !(res->err = calloc(1, 1))))
		return snprintf(why, size, "out of memory"), -1;
	res->timed_out = ex.flags & RN_EXIT_TIMED_OUT;
	res->out_trunc |= (ex.flags & RN_EXIT_OUT_TRUNC) != 0;
	res->err_trunc |= (ex.flags & RN_EXIT_ERR_TRUNC) != 0;
	res->kernel_restarted = ex.restarted[0] != '\0';
	snprintf(res->restart_reason, sizeof(res->restart_reason), "%s", ex.restarted);
	res->kernel_died = (ex.flags & RN_EXIT_KERNEL_DIED) != 0;
	snprintf(res->died_reason, sizeof(res->died_reason), "%s", ex.died);
	return 0;
}

int rn_kernel_end(struct rn_conn *c, const char *scope, const char *language,
		  char *why, size_t size)
{
	struct rn_buf b = { 0 };
	struct rn_req *r = NULL;
	struct rn_exit ex;
	enum rn_req_state st = RN_REQ_RUNNING;
	int64_t until = kc_now_ms() + KC_CANCEL_WAIT_MS;
	int rc;

	if (!rn_conn_has_cap(c, RN_CAP_KERNEL_SCOPE))
		return snprintf(why, size, "the runner has no \"%s\" capability (an older "
				"build)", RN_CAP_KERNEL_SCOPE), -1;
	if (strlen(scope) > RN_SCOPE_MAX)
		return snprintf(why, size, "the kernel scope is over %u bytes", RN_SCOPE_MAX), -1;
	if (language)
		rn_put_str(&b, RN_F_LANG, language);
	rn_put_str(&b, RN_F_SCOPE, scope);
	rn_put_u32(&b, RN_F_KFLAGS, RN_KFLAG_END);
	rc = b.oom ? -1 : rn_request(c, RN_KEXEC, b.data, b.len, &r, why, size);
	rn_buf_free(&b);
	if (rc != 0)
		return rc < 0 ? -1 : (snprintf(why, size, "out of memory"), -1);
	while ((st = rn_req_state(r, &ex, why, size, NULL)) == RN_REQ_RUNNING &&
	       kc_now_ms() < until)
		rn_req_wait(r, (int)(until - kc_now_ms()), -1);
	rn_req_put(r);
	if (st == RN_REQ_RUNNING)
		return snprintf(why, size, "the runner did not answer the end of the kernels"), -1;
	return st == RN_REQ_DONE ? 0 : -1;
}

void rn_kernel_result_free(struct rn_kernel_result *res)
{
	free(res->out);
	free(res->err);
	json_decref(res->results);
	json_decref(res->error);
	json_decref(res->output_files);
	res->out = res->err = NULL;
	res->results = res->error = res->output_files = NULL;
}
