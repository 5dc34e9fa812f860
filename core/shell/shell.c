/*
 * Persistent shells (see shell.h for the protocol and why it holds).
 *
 * Ownership: the registry holds one reference on each shell and each caller
 * of sg_shell_get/default/new another; a shell holds a reference on its
 * machine entry.  The stream belongs to the shell: the reader thread closes
 * it when it ends by itself, everyone else only after joining that thread.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/protocol/call.h"
#include "core/base/err.h"
#include "core/base/log.h"
#include "core/base/quota.h"
#include "core/registry/machine.h"
#include "core/protocol/session.h"
#include "core/shell/shell.h"
#include "core/base/args.h"
#include "core/base/util.h"

#include "core/shell/internal.h"

static struct sg_shell *shells;
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
/* One shell starts at a time: two first calls share one default shell. */
static pthread_mutex_t create_lock = PTHREAD_MUTEX_INITIALIZER;

/* Takes the undelivered output; when not final, an incomplete last
 * character stays for the next delivery. */
static json_t *ht_take(struct sg_shell *sh, bool final, uint64_t *dropped, uint64_t *total)
{
	size_t len, keep;
	char *text = sg_ht_render(&sh->out, &len, dropped);
	json_t *j;

	*total = sh->out.total;
	keep = final ? len : sg_utf8_cut_back(text, len);
	j = sg_json_bytes(text, keep);
	sg_ht_reset(&sh->out, sh->max_output);
	if (keep < len)
		sg_ht_add(&sh->out, text + keep, len - keep);
	free(text);
	return j;
}


void sg_sh_cond_wait_ms(struct sg_shell *sh, int64_t ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_cond_timedwait(&sh->cond, &sh->lock, &ts);
}

void sg_sh_scan_drop(struct sg_buf *b, size_t k)
{
	if (k >= b->len) {
		b->len = 0;
		return;
	}
	memmove(b->data, b->data + k, b->len - k);
	b->len -= k;
}

const char *sg_sh_find(const struct sg_buf *b, const char *needle)
{
	return b->len ? memmem(b->data, b->len, needle, strlen(needle)) : NULL;
}

/* The length of the longest end of b that is a start of needle (the
 * marker may be arriving): only that much has to wait.  The markers begin
 * with \037, so plain output never waits. */
size_t sg_sh_prefix_suffix(const struct sg_buf *b, const char *needle)
{
	size_t n = strlen(needle);

	for (size_t k = b->len < n - 1 ? b->len : n - 1; k > 0; k--)
		if (!memcmp(b->data + b->len - k, needle, k))
			return k;
	return 0;
}

/* Keeps only what could still be the start of needle. */
void sg_sh_scan_keep_tail(struct sg_buf *b, size_t needle_len)
{
	if (b->len >= needle_len)
		sg_sh_scan_drop(b, b->len - (needle_len - 1));
}

static void uptime_text(int64_t ms, char *buf, size_t size)
{
	int64_t s = ms / 1000;

	if (s <= 60)
		snprintf(buf, size, "%llds", (long long)s);
	else
		snprintf(buf, size, "%lldh%lldm", (long long)(s / 3600), (long long)(s % 3600 / 60));
}

/* ---- process life ---------------------------------------------------------------- */

static int shell_write(struct sg_shell *sh, const char *p, size_t n, struct sg_err *err)
{
	ssize_t w = -1;

	pthread_mutex_lock(&sh->io_lock);
	if (sh->stream)
		w = sg_m_stream_write(sh->e, sh->stream, p, n, err);
	else
		sg_errf(err, SG_E_GONE, "the shell %s has ended", sh->id);
	pthread_mutex_unlock(&sh->io_lock);
	return w < 0 ? -1 : 0;
}

/* Stops the reader and closes the stream.  An idle bash is asked to exit
 * first so the close does not have to kill it. */
static void shell_close(struct sg_shell *sh)
{
	bool idle;

	pthread_mutex_lock(&sh->lock);
	idle = sh->state == SH_IDLE;
	pthread_mutex_unlock(&sh->lock);
	if (idle) {
		struct sg_err ignore;

		shell_write(sh, "exit 0\n", 7, &ignore);
	}
	pthread_mutex_lock(&sh->life_lock);
	atomic_store(&sh->stop, true);
	if (sh->reader_started) {
		pthread_join(sh->reader, NULL);
		sh->reader_started = false;
	}
	pthread_mutex_lock(&sh->io_lock);
	if (sh->stream) {
		int code = -1;

		sg_m_stream_close(sh->e, sh->stream, &code);
		sh->stream = NULL;
		pthread_mutex_lock(&sh->lock);
		/* A restart (SH_BOOT) keeps the reason it already has. */
		if (sh->state == SH_IDLE || sh->state == SH_RUN) {
			sh->dead_code = code;
			snprintf(sh->dead_reason, sizeof(sh->dead_reason), "closed");
			sh->state = SH_DEAD;
		} else if (sh->dead_code < 0) {
			sh->dead_code = code;
		}
		pthread_mutex_unlock(&sh->lock);
	}
	pthread_mutex_unlock(&sh->io_lock);
	pthread_mutex_unlock(&sh->life_lock);
}

/* Opens the shell's stream: with a status fd for the markers when the
 * machine offers one (Docker with its runner), else, on SG_E_NOTSUP, a
 * plain stream with in-band markers (SSH, FC, Docker with `runner = false`).  The stream is
 * the caller's; *status_mode says which it is. */
static int shell_open(struct sg_shell *sh, struct sg_stream **st, bool *status_mode,
		      struct sg_err *err)
{
	struct sg_exec_req req = { .command = SHELL_LAUNCH };
	struct sg_err first;

	*status_mode = true;
	if (sg_m_stream_open_status(sh->e, &req, SHELL_STATUS_FD, st, &first) == 0)
		return 0;
	if (first.code != SG_E_NOTSUP) {
		if (err)
			*err = first;
		return -1;
	}
	SG_DEBUG("shell %s: in-band markers (%s)", sh->id, first.msg);
	*status_mode = false;
	return sg_m_stream_open(sh->e, &req, st, err);
}

/* The line that sets bash up and reports its pid (the boot marker).  New
 * string, the caller's. */
static char *boot_line(const struct sg_shell *sh)
{
	/* stderr into stdout in the shell itself, so the order is the shell's;
	 * job control for process groups; USR2 returns from the sourced file,
	 * but only the command an interrupt was meant for: the interrupt writes
	 * that command's id (int_id, set as __sg_c before each command) to
	 * FILE.int first, so a USR2 that reaches bash late (a slow machine, a
	 * stopped bash) cannot end the next command. */
	static const char setup[] = "exec 2>&1; set -m 2>/dev/null; __sg_c=; ";
	char trap[256];

	snprintf(trap, sizeof(trap), "trap '__sg_i=; IFS= read -r __sg_i < %s.int 2>/dev/null; "
		 "[ \"$__sg_i\" = \"$__sg_c\" ] && return 130 2>/dev/null' USR2; ", sh->file);
	if (sh->status_mode)
		return sg_xasprintf("%s%s: > %s; chmod 600 %s 2>/dev/null; printf '%%s:B:%%s\\n' %s \"$$\" >&%d\n",
				    setup, trap, sh->file, sh->file, sh->nonce, SHELL_STATUS_FD);
	return sg_xasprintf("%s%s: > %s; chmod 600 %s 2>/dev/null; printf '\\037%%s:B:%%s\\n' %s \"$$\"\n",
			    setup, trap, sh->file, sh->file, sh->nonce);
}

/* Opens the stream, starts bash with its settings, learns its pid.  Called
 * with state already SH_BOOT (set by the caller under the lock). */
static int shell_start(struct sg_shell *sh, struct sg_err *err)
{
	struct sg_stream *st = NULL;
	char rnd[13], *line;
	bool status_mode;
	int64_t deadline;
	int rc;

	if (sg_random_hex(rnd, 6) < 0)
		return sg_errf(err, SG_E_INTERNAL, "no random bytes for a shell file name");
	if (shell_open(sh, &st, &status_mode, err) < 0)
		return -1;
	pthread_mutex_lock(&sh->lock);
	sh->stream = st;
	sh->status_mode = status_mode;
	sh->state = SH_BOOT;
	sh->phase = PH_BOOT;
	sh->scan.len = 0;
	sh->sline.len = 0;
	sh->bash_pid = 0;
	sh->killing = false;
	sh->completed = false;
	sh->dead_code = -1;
	sh->dead_reason[0] = '\0';
	sg_random_hex(sh->nonce, 16);
	snprintf(sh->file, sizeof(sh->file), "/tmp/.sandgate-shell-%s", rnd);
	pthread_mutex_unlock(&sh->lock);
	pthread_mutex_lock(&sh->life_lock);
	atomic_store(&sh->stop, false);
	if (pthread_create(&sh->reader, NULL, sg_sh_reader_main, sh) != 0) {
		pthread_mutex_unlock(&sh->life_lock);
		sg_m_stream_close(sh->e, st, NULL);
		sh->stream = NULL;
		return sg_errf(err, SG_E_INTERNAL, "cannot start a reader thread for the shell");
	}
	sh->reader_started = true;
	pthread_mutex_unlock(&sh->life_lock);
	line = boot_line(sh);
	rc = shell_write(sh, line, strlen(line), err);
	free(line);
	pthread_mutex_lock(&sh->lock);
	deadline = sg_now_ms() + SHELL_BOOT_MS;
	while (rc == 0 && sh->state == SH_BOOT && sg_now_ms() < deadline)
		sg_sh_cond_wait_ms(sh, 200);
	if (rc == 0 && sh->state != SH_IDLE)
		rc = sg_errf(err, SG_E_BACKEND, "the shell did not start on sandbox '%s' within %d s (%s)",
			     sh->e->m.id, SHELL_BOOT_MS / 1000,
			     sh->state == SH_DEAD ? "it exited at once" : "no answer");
	pthread_mutex_unlock(&sh->lock);
	if (rc < 0) {
		shell_close(sh);
		pthread_mutex_lock(&sh->lock);
		sh->state = SH_DEAD;
		pthread_mutex_unlock(&sh->lock);
	}
	return rc;
}

/* Replaces a dead shell with a fresh bash; the next result reports the old
 * one as previous_shell.  Called with state set to SH_BOOT by the caller. */
static int shell_restart(struct sg_shell *sh, struct sg_err *err)
{
	json_t *prev;

	shell_close(sh);
	pthread_mutex_lock(&sh->lock);
	prev = json_pack("{s:I, s:s, s:s}", "previous_bash_pid", (json_int_t)sh->bash_pid,
			 "last_command", sh->last_command, "exit_reason",
			 sh->dead_reason[0] ? sh->dead_reason : "unknown");
	json_object_set_new(prev, "exit_code", sh->dead_code >= 0 && strcmp(sh->dead_reason, "interrupted")
						       ? json_integer(sh->dead_code) : json_null());
	sh->state = SH_BOOT;
	pthread_mutex_unlock(&sh->lock);
	if (shell_start(sh, err) < 0) {
		json_decref(prev);
		return -1;
	}
	pthread_mutex_lock(&sh->lock);
	json_decref(sh->previous);
	sh->previous = prev;
	pthread_mutex_unlock(&sh->lock);
	SG_INFO("shell %s on %s replaced (%s), new bash pid %ld", sh->id, sh->e->m.id,
		json_string_value(json_object_get(prev, "exit_reason")), sh->bash_pid);
	return 0;
}

/* Waits out a start in progress and replaces a dead shell.  Called and
 * returns with the lock held. */
int sg_sh_alive_locked(struct sg_shell *sh, struct sg_err *err)
{
	while (sh->state == SH_BOOT)
		sg_sh_cond_wait_ms(sh, 200);
	if (sh->state != SH_DEAD)
		return 0;
	sh->state = SH_BOOT;
	pthread_mutex_unlock(&sh->lock);
	if (shell_restart(sh, err) < 0) {
		pthread_mutex_lock(&sh->lock);
		sh->state = SH_DEAD;
		pthread_cond_broadcast(&sh->cond);
		return -1;
	}
	pthread_mutex_lock(&sh->lock);
	pthread_cond_broadcast(&sh->cond);
	return 0;
}

/* ---- registry ------------------------------------------------------------------- */

static void shell_free(struct sg_shell *sh)
{
	shell_close(sh);
	sg_buf_release(&sh->scan);
	sg_buf_release(&sh->sline);
	sg_buf_release(&sh->out.head);
	sg_buf_release(&sh->out.tail);
	json_decref(sh->previous);
	sg_machine_put(sh->e);
	pthread_mutex_destroy(&sh->lock);
	pthread_mutex_destroy(&sh->life_lock);
	pthread_mutex_destroy(&sh->io_lock);
	pthread_cond_destroy(&sh->cond);
	free(sh);
}

void sg_shell_put(struct sg_shell *sh)
{
	int left;

	if (!sh)
		return;
	pthread_mutex_lock(&reg_lock);
	left = --sh->refs;
	pthread_mutex_unlock(&reg_lock);
	if (left == 0)
		shell_free(sh);
}

const char *sg_shell_id(const struct sg_shell *sh)
{
	return sh->id;
}

struct sg_entry *sg_shell_machine(const struct sg_shell *sh)
{
	return sh->e;
}

/* Makes and starts a shell on e and registers it.  Returns a reference. */
static struct sg_shell *shell_create(struct sg_entry *e, const char *purpose, bool is_default,
				     const char *owner, struct sg_err *err)
{
	struct sg_shell *sh;
	pthread_condattr_t ca;
	char hex[13];

	/* Counted before bash starts: concurrent creations of one credential
	 * cannot pass the quota together. */
	if (sg_quota_take(owner, SG_QUOTA_SHELLS, err) < 0)
		return NULL;
	sh = sg_xcalloc(1, sizeof(*sh));
	snprintf(sh->quota_owner, sizeof(sh->quota_owner), "%s", owner);
	sg_random_hex(hex, 6);
	snprintf(sh->id, sizeof(sh->id), "sh_%s", hex);
	sg_machine_ref(e);
	sh->e = e;
	snprintf(sh->purpose, sizeof(sh->purpose), "%s", purpose && *purpose ? purpose : "manual");
	sh->created_ms = sg_now_ms();
	sh->refs = 1;
	sh->dead_code = -1;
	sh->max_output = 50000;
	pthread_mutex_init(&sh->lock, NULL);
	pthread_mutex_init(&sh->life_lock, NULL);
	pthread_mutex_init(&sh->io_lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&sh->cond, &ca);
	pthread_condattr_destroy(&ca);
	atomic_init(&sh->stop, false);
	sg_ht_reset(&sh->out, sh->max_output);
	sh->state = SH_BOOT;
	if (shell_start(sh, err) < 0) {
		shell_free(sh);
		sg_quota_give(owner, SG_QUOTA_SHELLS);
		return NULL;
	}
	pthread_mutex_lock(&reg_lock);
	sh->quota_held = true;
	sh->is_default = is_default;
	sh->refs++; /* the registry's */
	sh->next = shells;
	shells = sh;
	pthread_mutex_unlock(&reg_lock);
	SG_INFO("shell %s started on %s (bash pid %ld)", sh->id, e->m.id, sh->bash_pid);
	return sh;
}

/* Takes sh out of the registry.  Returns true when this call did. */
static bool shell_unlink(struct sg_shell *sh)
{
	bool did = false;

	pthread_mutex_lock(&reg_lock);
	for (struct sg_shell **pp = &shells; *pp; pp = &(*pp)->next) {
		if (*pp == sh) {
			*pp = sh->next;
			sh->removed = true;
			did = true;
			if (sh->quota_held)
				sg_quota_give(sh->quota_owner, SG_QUOTA_SHELLS);
			sh->quota_held = false;
			break;
		}
	}
	pthread_mutex_unlock(&reg_lock);
	return did;
}

/* The credential whose quota a new shell counts in: the caller's, or the
 * machine's creator when no call asks (a session's own clean-up). */
static const char *shell_owner(const struct sg_entry *e, const struct sg_call *call)
{
	return call && call->session ? call->session->owner : e->cred;
}

struct sg_shell *sg_shell_new(struct sg_entry *e, const char *purpose, struct sg_call *call,
			      struct sg_err *err)
{
	struct sg_shell *sh;

	pthread_mutex_lock(&create_lock);
	sh = shell_create(e, purpose, false, shell_owner(e, call), err);
	pthread_mutex_unlock(&create_lock);
	return sh;
}

struct sg_shell *sg_shell_default(struct sg_entry *e, struct sg_call *call, struct sg_err *err)
{
	struct sg_shell *sh = NULL;

	pthread_mutex_lock(&create_lock);
	pthread_mutex_lock(&reg_lock);
	for (struct sg_shell *s = shells; s; s = s->next) {
		if (s->e == e && s->is_default) {
			sh = s;
			sh->refs++;
			break;
		}
	}
	pthread_mutex_unlock(&reg_lock);
	if (!sh)
		sh = shell_create(e, "default", true, shell_owner(e, call), err);
	pthread_mutex_unlock(&create_lock);
	return sh;
}

struct sg_shell *sg_shell_get(struct sg_session *s, const char *id, struct sg_err *err)
{
	struct sg_shell *sh = NULL;

	pthread_mutex_lock(&reg_lock);
	for (struct sg_shell *x = shells; x; x = x->next) {
		if (strcmp(x->id, id) == 0 && !x->e->dead) {
			sh = x;
			sh->refs++;
			break;
		}
	}
	pthread_mutex_unlock(&reg_lock);
	/* A shell is visible exactly when its machine is: that entry, not one
	 * its id names (a persistent name of another credential's may equal it). */
	if (!sh || !sg_machine_visible(sh->e, s)) {
		sg_shell_put(sh);
		sg_errf(err, SG_E_NOTFOUND,
			"shell_id '%s' not found: it was removed or its machine is gone; sandbox_env shell_list shows the shells",
			id);
		return NULL;
	}
	return sh;
}

void sg_shell_make_default(struct sg_shell *sh)
{
	pthread_mutex_lock(&reg_lock);
	for (struct sg_shell *s = shells; s; s = s->next)
		if (s->e == sh->e)
			s->is_default = s == sh;
	pthread_mutex_unlock(&reg_lock);
}

unsigned sg_shell_count(const struct sg_entry *e)
{
	unsigned n = 0;

	pthread_mutex_lock(&reg_lock);
	for (struct sg_shell *s = shells; s; s = s->next)
		n += s->e == e;
	pthread_mutex_unlock(&reg_lock);
	return n;
}

/* ---- results ------------------------------------------------------------------- */

static const char *state_name(const struct sg_shell *sh)
{
	switch (sh->state) {
	case SH_BOOT: return "starting";
	case SH_IDLE: return "idle";
	case SH_RUN: return sh->completed ? "finished" : "running";
	default: return "terminated";
	}
}

/* The output since the last delivery and the state; a finished command is
 * acknowledged (the shell is idle again).  Called with the lock held. */
json_t *sg_sh_snapshot_locked(struct sg_shell *sh)
{
	json_t *r = json_object(), *exit_code = json_null();
	const char *status;
	uint64_t dropped = 0, total = 0;
	bool final = true;

	if (sh->state == SH_RUN && sh->completed) {
		status = "completed";
		exit_code = json_integer(sh->exit_code);
		sh->state = SH_IDLE;
		sh->phase = PH_NONE;
	} else if (sh->state == SH_RUN) {
		status = "running";
		final = false;
	} else if (sh->state == SH_DEAD) {
		status = "terminated";
		if (sh->dead_code >= 0 && !sh->killing)
			exit_code = json_integer(sh->dead_code);
	} else {
		status = "idle";
	}
	json_object_set_new(r, "output", ht_take(sh, final, &dropped, &total));
	json_object_set_new(r, "exit_code", exit_code);
	json_object_set_new(r, "status", json_string(status));
	json_object_set_new(r, "shell_id", json_string(sh->id));
	json_object_set_new(r, "bash_pid", sh->bash_pid ? json_integer(sh->bash_pid) : json_null());
	if (dropped) {
		json_object_set_new(r, "output_bytes", json_integer((json_int_t)total));
		json_object_set_new(r, "dropped_bytes", json_integer((json_int_t)dropped));
	}
	if (sh->state == SH_DEAD)
		json_object_set_new(r, "hint", json_string("the shell exited (exit, or set -e); the next "
							    "command starts a fresh one, without this one's cwd and variables"));
	if (sh->previous) {
		json_object_set_new(r, "previous_shell", sh->previous);
		sh->previous = NULL;
	}
	return r;
}

/* Octal escapes for everything but plain characters, so the text survives
 * a single-quoted printf format whatever it holds. */
static void escape_printf(struct sg_buf *b, const char *s)
{
	static const char plain[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789 ,._+:@/=-";
	char oct[5];

	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (strchr(plain, *p)) {
			sg_buf_append(b, p, 1);
		} else {
			snprintf(oct, sizeof(oct), "\\%03o", *p);
			sg_buf_append(b, oct, 4);
		}
	}
}

/* The line bash reads for one command: the start markers with the job
 * list, the command into the file, the file sourced, the end marker.  In
 * status_fd mode the markers and the job list go to fd 3 and the command
 * runs with fd 3 closed, so nothing it does reaches that channel.  New
 * string, the caller's. */
static char *command_line(const struct sg_shell *sh, const char *command)
{
	struct sg_buf b = { 0 };
	char *head, *tail;

	if (sh->status_mode) {
		head = sg_xasprintf("__sg_c=%s; { printf '%s:S\\n'; jobs -p; printf '%s:J\\n'; } >&%d; printf '",
				    sh->int_id, sh->nonce, sh->nonce, SHELL_STATUS_FD);
		tail = sg_xasprintf("\\n' > %s && . %s %d>&- < /dev/null; printf '%s:E:%%d\\n' \"$?\" >&%d\n",
				    sh->file, sh->file, SHELL_STATUS_FD, sh->nonce, SHELL_STATUS_FD);
	} else {
		head = sg_xasprintf("__sg_c=%s; printf '\\037%s:S\\n'; jobs -p; printf '\\037%s:J\\n'; printf '",
				    sh->int_id, sh->nonce, sh->nonce);
		tail = sg_xasprintf("\\n' > %s && . %s < /dev/null; printf '\\037%s:E:%%d\\n' \"$?\"\n",
				    sh->file, sh->file, sh->nonce);
	}
	sg_buf_append(&b, head, strlen(head));
	escape_printf(&b, command);
	sg_buf_append(&b, tail, strlen(tail));
	free(head);
	free(tail);
	return b.data;
}

static void one_line(char *dst, size_t size, const char *cmd)
{
	size_t i = 0;

	for (; *cmd && i + 1 < size; cmd++)
		dst[i++] = *cmd == '\n' || *cmd == '\r' ? ' ' : *cmd;
	dst[i] = '\0';
}

/* Waits until the command finishes (or, with started, has begun), the shell
 * dies, the deadline passes or the call is cancelled.  Lock held.  Returns
 * 1 when the condition holds, 0 at the deadline, -1 when cancelled. */
int sg_sh_wait_locked(struct sg_shell *sh, int64_t deadline, struct sg_call *call, bool started)
{
	for (;;) {
		int64_t left = deadline - sg_now_ms();

		if (sh->completed || sh->state == SH_DEAD ||
		    (started && (sh->phase == PH_CMD || sh->phase == PH_DONE)))
			return 1;
		if (call && sg_call_cancelled(call))
			return -1;
		if (left <= 0)
			return 0;
		sg_sh_cond_wait_ms(sh, left < 100 ? left : 100);
	}
}

static int begin_locked(struct sg_shell *sh, const struct sg_shell_exec *req, json_t **unread,
			struct sg_err *err)
{
	int64_t now = sg_now_ms();

	if (sh->state == SH_RUN && !sh->completed)
		return sg_errf(err, SG_E_BUSY,
			       "shell %s is busy: '%.80s' has been running for %llds; follow it with sandbox_shell_read "
			       "(shell_id %s), stop it with sandbox_env shell_interrupt, or open another shell with "
			       "sandbox_env shell_new",
			       sh->id, sh->last_command, (long long)((now - sh->cmd_started_ms) / 1000), sh->id);
	if (sh->state == SH_RUN)
		*unread = sg_sh_snapshot_locked(sh); /* finished, never read: hand it over */
	sh->max_output = req->max_output;
	sg_ht_reset(&sh->out, req->max_output);
	sh->scan.len = 0;
	sg_random_hex(sh->nonce, 16);
	sg_random_hex(sh->int_id, 8);
	sh->phase = PH_START;
	sh->state = SH_RUN;
	sh->completed = false;
	sh->jobs[0] = '\0';
	sh->cmd_started_ms = now;
	one_line(sh->last_command, sizeof(sh->last_command), req->command);
	return 0;
}

static int shell_exec(struct sg_shell *sh, const struct sg_shell_exec *req, struct sg_call *call,
		      json_t **result, struct sg_err *err)
{
	json_t *unread = NULL;
	char *line = NULL;
	int w;

	if (strlen(req->command) > SHELL_CMD_MAX)
		return sg_errf(err, SG_E_TOOBIG,
			       "command is %zu bytes, more than %u: write it to a file with sandbox_file_write and run that",
			       strlen(req->command), SHELL_CMD_MAX);
	for (int attempt = 0;; attempt++) {
		pthread_mutex_lock(&sh->lock);
		if (sg_sh_alive_locked(sh, err) < 0 || begin_locked(sh, req, &unread, err) < 0) {
			pthread_mutex_unlock(&sh->lock);
			json_decref(unread);
			return -1;
		}
		/* Under the lock: a restart by another caller changes nonce and mode. */
		line = command_line(sh, req->command);
		pthread_mutex_unlock(&sh->lock);
		w = shell_write(sh, line, strlen(line), err);
		free(line);
		if (w == 0)
			break;
		/* bash died since the last call: start a new one and try again. */
		pthread_mutex_lock(&sh->lock);
		if (sh->state != SH_DEAD) {
			snprintf(sh->dead_reason, sizeof(sh->dead_reason), "broken_pipe");
			sh->state = SH_DEAD;
		}
		pthread_mutex_unlock(&sh->lock);
		if (attempt >= 1) {
			json_decref(unread);
			return -1;
		}
	}
	pthread_mutex_lock(&sh->lock);
	w = sg_sh_wait_locked(sh, sg_now_ms() + (req->wait ? (int64_t)req->timeout_ms : SHELL_CONFIRM_MS),
			call, !req->wait);
	if (w < 0) {
		pthread_mutex_unlock(&sh->lock);
		json_decref(unread);
		sg_sh_interrupt_command(sh, NULL);
		return sg_errf(err, SG_E_CANCELLED, "cancelled: the command was interrupted");
	}
	if (req->wait) {
		*result = sg_sh_snapshot_locked(sh);
	} else {
		*result = json_pack("{s:s, s:b, s:s, s:I}", "status",
				    sh->state == SH_DEAD ? "terminated" : "running", "confirmed", w > 0 &&
				    sh->state != SH_DEAD, "shell_id", sh->id, "bash_pid",
				    (json_int_t)sh->bash_pid);
		if (sh->previous) {
			json_object_set_new(*result, "previous_shell", sh->previous);
			sh->previous = NULL;
		}
	}
	pthread_mutex_unlock(&sh->lock);
	if (unread)
		json_object_set_new(*result, "unread_previous", unread);
	return 0;
}

/* The wait is a use of the machine: it does not expire under a command. */
int sg_shell_exec(struct sg_shell *sh, const struct sg_shell_exec *req, struct sg_call *call,
		  json_t **result, struct sg_err *err)
{
	int rc;

	sg_machine_use_begin(sh->e);
	rc = shell_exec(sh, req, call, result, err);
	sg_machine_use_end(sh->e);
	return rc;
}

int sg_shell_read(struct sg_shell *sh, size_t max_output, json_t **result, struct sg_err *err)
{
	(void)err;
	pthread_mutex_lock(&sh->lock);
	while (sh->state == SH_BOOT)
		sg_sh_cond_wait_ms(sh, 200);
	if (max_output && sh->state != SH_RUN)
		sh->max_output = max_output;
	*result = sg_sh_snapshot_locked(sh);
	pthread_mutex_unlock(&sh->lock);
	return 0;
}

int sg_shell_remove(struct sg_shell *sh, struct sg_err *err)
{
	long pid;
	bool alive;

	(void)err;
	if (shell_unlink(sh))
		sg_shell_put(sh); /* the registry's reference */
	pthread_mutex_lock(&sh->lock);
	pid = sh->bash_pid;
	alive = sh->state == SH_RUN || sh->state == SH_IDLE;
	pthread_mutex_unlock(&sh->lock);
	/* Background jobs too: nothing the shell started outlives it. */
	if (alive)
		sg_sh_kill_jobs(sh, pid, "", "KILL");
	shell_close(sh);
	sg_shell_put(sh);
	return 0;
}

json_t *sg_shell_list(struct sg_session *s, const char *machine)
{
	struct sg_entry **vis = NULL, *only = NULL;
	size_t n = sg_machine_list_visible(s, &vis);
	json_t *rows = json_array();
	int64_t now = sg_now_ms();

	if (machine && *machine)
		only = sg_machine_get(s, machine, NULL);
	pthread_mutex_lock(&reg_lock);
	for (struct sg_shell *sh = shells; sh; sh = sh->next) {
		bool seen = false;
		char up[32];
		json_t *row;

		for (size_t i = 0; i < n && !seen; i++)
			seen = vis[i] == sh->e;
		if (!seen || (machine && *machine && sh->e != only))
			continue;
		uptime_text(now - sh->created_ms, up, sizeof(up));
		pthread_mutex_lock(&sh->lock);
		row = json_pack("{s:s, s:s, s:s, s:s, s:s, s:b}", "shell_id", sh->id, "machine",
				sh->e->name[0] ? sh->e->name : sh->e->m.id, "purpose", sh->purpose,
				"status", state_name(sh), "uptime", up, "is_default", sh->is_default);
		json_object_set_new(row, "last_command", sh->last_command[0]
								 ? json_string(sh->last_command) : json_null());
		json_object_set_new(row, "bash_pid", sh->bash_pid ? json_integer(sh->bash_pid) : json_null());
		json_object_set_new(row, "completion", json_string(sh->status_mode ? "status_fd" : "in_band"));
		if (sh->state == SH_DEAD)
			json_object_set_new(row, "hint", json_string("bash exited: the next command on it starts a fresh one"));
		pthread_mutex_unlock(&sh->lock);
		json_array_append_new(rows, row);
	}
	pthread_mutex_unlock(&reg_lock);
	sg_machine_put(only);
	for (size_t i = 0; i < n; i++)
		sg_machine_put(vis[i]);
	free(vis);
	return rows;
}

/* ---- lifecycle ---------------------------------------------------------------------- */

/* Machine e is about to be destroyed (or disconnected): its shells end. */
void sg_shell_close_machine(struct sg_entry *e)
{
	for (;;) {
		struct sg_shell *sh = NULL;

		pthread_mutex_lock(&reg_lock);
		for (struct sg_shell *x = shells; x; x = x->next) {
			if (x->e == e) {
				sh = x;
				sh->refs++;
				break;
			}
		}
		pthread_mutex_unlock(&reg_lock);
		if (!sh)
			return;
		if (shell_unlink(sh))
			sg_shell_put(sh);
		shell_close(sh);
		sg_shell_put(sh);
	}
}

void sg_shell_init(void)
{
	sg_machine_set_shells_hook(sg_shell_close_machine);
}

void sg_shell_fini(void)
{
	for (;;) {
		struct sg_shell *sh;

		pthread_mutex_lock(&reg_lock);
		sh = shells;
		if (sh) {
			shells = sh->next;
			sh->removed = true;
		}
		pthread_mutex_unlock(&reg_lock);
		if (!sh)
			return;
		shell_close(sh);
		sg_shell_put(sh);
	}
}
