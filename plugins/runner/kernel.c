/*
 * The runner's code kernels (capability "kernel", doc/kernel-protocol.md):
 * one long-lived interpreter per scope (a sandbox: capability
 * "kernel-scope") and language, started by the first KEXEC for it and kept
 * until its scope ends (KFLAGS END) or the runner does, so the code's names,
 * imports and working directory persist from call to call.
 *
 * A kernel is `python3 -` or `node -` with its program (embedded in this
 * binary at build time, kernel_src.c) on stdin, its requests on fd 3 and its
 * event lines on fd 4; its stdout and stderr are the code's.  One call runs
 * at a time per kernel; later ones wait in its queue.  A timeout or a KILL
 * frame interrupts the call (SIGINT) and the state survives; a kernel that
 * does not stop within the grace is killed.  A kernel that died is started
 * again by the next call, which says so (RESTARTED) once.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/runner/runner.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define KERNEL_QUEUE_MAX 8                 /* calls waiting per kernel */
#define KERNEL_LINE_MAX  RN_MAX_PAYLOAD    /* one event line, one frame */

/* The kernel programs (kernel_src.c, made from plugins/runner/kernel/). */
extern const unsigned char rn_kernel_python[], rn_kernel_javascript[];
extern const size_t rn_kernel_python_len, rn_kernel_javascript_len;

extern char **environ;

static const char *const lang_names[RN_LANG_N] = { "python", "javascript" };
/* Interpreters tried in order (PATH search in the call's environment). */
static const char *const lang_interps[RN_LANG_N][3] = {
	{ "python3", NULL },
	{ "node", "nodejs", NULL },
};

void kernel_init(struct runner *r)
{
	r->kernels = NULL;
	r->n_kernels = 0;
}

/* ---- calls ------------------------------------------------------------------------ */

static void kcall_free(struct kcall *c)
{
	if (!c)
		return;
	free(c->source);
	for (size_t i = 0; i < c->envc; i++)
		free(c->env[i]);
	free(c->env);
	free(c->cwd);
	free(c->scope);
	free(c);
}

static int kcall_env_add(struct kcall *c, const struct rn_field *f)
{
	char **nv;

	if (!f->len || f->val[0] == '=' || !memchr(f->val, '=', f->len))
		return -1;
	nv = realloc(c->env, (c->envc + 2) * sizeof(*nv));
	if (!nv)
		return -1;
	c->env = nv;
	if (!(nv[c->envc] = rn_field_dup(f)))
		return -1;
	nv[++c->envc] = NULL;
	return 0;
}

static int kcall_lang(struct kcall *c, const struct rn_field *f)
{
	for (int i = 0; i < RN_LANG_N; i++) {
		if (f->len == strlen(lang_names[i]) && !memcmp(f->val, lang_names[i], f->len)) {
			c->lang = (enum rn_lang)i;
			return 1;
		}
	}
	return -1;
}

static int kcall_field(struct kcall *c, const struct rn_field *f)
{
	switch (f->tag) {
	case RN_F_LANG:
		c->has_lang = kcall_lang(c, f) > 0;
		return c->has_lang ? 0 : -1;
	case RN_F_SOURCE:
		free(c->source);
		c->source = malloc(f->len ? f->len : 1);
		if (!c->source)
			return -1;
		memcpy(c->source, f->val, f->len);
		c->source_len = f->len;
		return 0;
	case RN_F_ENV:
		return kcall_env_add(c, f);
	case RN_F_CWD:
		free(c->cwd);
		return (c->cwd = rn_field_dup(f)) ? 0 : -1;
	case RN_F_TIMEOUT_MS:
		return rn_field_u32(f, &c->timeout_ms);
	case RN_F_GRACE_MS:
		return rn_field_u32(f, &c->grace_ms);
	case RN_F_CAP:
		return rn_field_u64(f, &c->cap);
	case RN_F_KFLAGS:
		return rn_field_u32(f, &c->flags);
	case RN_F_RICH_CAP:
		return rn_field_u32(f, &c->rich_cap);
	case RN_F_SCOPE:
		if (f->len > RN_SCOPE_MAX)
			return -1;
		free(c->scope);
		return (c->scope = rn_field_dup(f)) ? 0 : -1;
	default:
		return 0; /* a newer minor's field */
	}
}

/* Returns the call, or NULL with why filled. */
static struct kcall *kcall_parse(uint32_t id, const unsigned char *payload, size_t len,
				 char *why, size_t size)
{
	struct kcall *c = calloc(1, sizeof(*c)); /* kcall_free() */
	struct rn_iter it;
	struct rn_field f;
	int rc;

	if (!c)
		return snprintf(why, size, "out of memory"), NULL;
	c->id = id;
	c->grace_ms = RN_KGRACE_MS_DEFAULT;
	c->rich_cap = RN_RICH_CAP_DEFAULT;
	rn_iter_init(&it, payload, len);
	while ((rc = rn_iter_next(&it, &f)) > 0) {
		if (kcall_field(c, &f) < 0) {
			if (f.tag == RN_F_LANG)
				snprintf(why, size, "KEXEC language '%.*s' is not python or "
					 "javascript", (int)(f.len < 40 ? f.len : 40), f.val);
			else if (f.tag == RN_F_SCOPE && f.len > RN_SCOPE_MAX)
				snprintf(why, size, "KEXEC scope is over %u bytes", RN_SCOPE_MAX);
			else
				snprintf(why, size, "bad KEXEC field %u", f.tag);
			kcall_free(c);
			return NULL;
		}
	}
	if (rc < 0 || (!c->has_lang && !(c->flags & RN_KFLAG_END))) {
		snprintf(why, size, rc < 0 ? "KEXEC fields run past the frame" :
			 "KEXEC has no LANG");
		kcall_free(c);
		return NULL;
	}
	if (!c->scope && !(c->scope = strdup(""))) {
		snprintf(why, size, "out of memory");
		kcall_free(c);
		return NULL;
	}
	return c;
}

static struct kernel *kernel_of_id(struct runner *r, uint32_t id, struct kcall ***queued)
{
	for (struct kernel *k = r->kernels; k; k = k->next) {
		if (k->cur && k->cur->id == id)
			return *queued = NULL, k;
		for (struct kcall **cp = &k->queue; *cp; cp = &(*cp)->next)
			if ((*cp)->id == id)
				return *queued = cp, k;
	}
	return NULL;
}

bool kernel_has_id(struct runner *r, uint32_t id)
{
	struct kcall **q;

	return kernel_of_id(r, id, &q) != NULL;
}

/* ---- frames to sandgate ------------------------------------------------------------- */

static void kernel_forward(struct runner *r, struct kernel *k, uint8_t type,
			   const unsigned char *data, size_t n)
{
	uint64_t *sent = type == RN_R_STDERR ? &k->sent_err : &k->sent_out;
	bool *trunc = type == RN_R_STDERR ? &k->trunc_err : &k->trunc_out;

	if (!k->cur)
		return; /* between calls: dropped */
	if (type != RN_R_KEVENT && k->cur->cap) {
		uint64_t room = *sent < k->cur->cap ? k->cur->cap - *sent : 0;

		if (n > room) {
			*trunc = true;
			n = (size_t)room;
		}
		*sent += n;
		if (n == 0)
			return;
	}
	rn_send(r, type, k->cur->id, data, n);
}

static void send_started(struct runner *r, struct kernel *k)
{
	struct rn_buf b = { 0 };

	rn_put_u32(&b, RN_F_PID, (uint32_t)k->pid);
	rn_put_u32(&b, RN_F_PGID, (uint32_t)k->pid);
	if (!b.oom)
		rn_send(r, RN_R_STARTED, k->cur->id, b.data, b.len);
	rn_buf_free(&b);
}

static void kernel_advance(struct runner *r, struct kernel *k);

/* The current call ends: EXIT, then the next queued call starts. */
static void kernel_finish(struct runner *r, struct kernel *k, const char *died)
{
	struct rn_buf b = { 0 };
	uint32_t flags = (k->timed_out ? RN_EXIT_TIMED_OUT : 0) |
			 (k->cancelled ? RN_EXIT_KILLED : 0) |
			 (k->trunc_out ? RN_EXIT_OUT_TRUNC : 0) |
			 (k->trunc_err ? RN_EXIT_ERR_TRUNC : 0) |
			 (died ? RN_EXIT_KERNEL_DIED : 0);

	rn_put_u32(&b, RN_F_FLAGS, flags);
	if (k->restarted[0])
		rn_put_str(&b, RN_F_RESTARTED, k->restarted);
	if (died)
		rn_put_str(&b, RN_F_DIED, died);
	if (!b.oom)
		rn_send(r, RN_R_EXIT, k->cur->id, b.data, b.len);
	rn_buf_free(&b);
	kcall_free(k->cur);
	k->cur = NULL;
	kernel_advance(r, k);
}

/* ---- the kernel process --------------------------------------------------------------- */

/* An fd to read the program from: a memfd, else a pipe it fits in. */
static int program_fd(enum rn_lang lang)
{
	const unsigned char *p = lang == RN_LANG_PYTHON ? rn_kernel_python : rn_kernel_javascript;
	size_t n = lang == RN_LANG_PYTHON ? rn_kernel_python_len : rn_kernel_javascript_len;
	int fd = memfd_create("sandgate-kernel", MFD_CLOEXEC), fds[2];
	ssize_t w;

	if (fd >= 0) {
		for (size_t off = 0; off < n; off += (size_t)w) {
			w = write(fd, p + off, n - off);
			if (w <= 0) {
				close(fd);
				return -1;
			}
		}
		return lseek(fd, 0, SEEK_SET) == 0 ? fd : (close(fd), -1);
	}
	/* No memfd (an old kernel, a seccomp filter): a pipe holds 64 KiB. */
	if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) < 0)
		return -1;
	w = write(fds[1], p, n);
	close(fds[1]);
	if (w != (ssize_t)n) {
		close(fds[0]);
		errno = EFBIG;
		return -1;
	}
	fcntl(fds[0], F_SETFL, 0);
	return fds[0];
}

/* The child's ends: program, stdout, stderr, requests, events, error pipe. */
struct kchild {
	int fd[5];
	int ep;
};

static void kernel_child(const struct kcall *c, char **envp, struct kchild *ch)
{
	sigset_t none;
	int err = ENOENT;

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_DFL);
	setpgid(0, 0);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	for (int i = 0; i < 5; i++)
		if ((ch->fd[i] = rn_child_lift(ch->fd[i])) < 0)
			rn_child_fail(ch->ep, RN_STAGE_SETUP);
	for (int i = 0; i < 5; i++)
		if (dup2(ch->fd[i], i) < 0)
			rn_child_fail(ch->ep, RN_STAGE_SETUP);
	if (c->cwd && *c->cwd && chdir(c->cwd) < 0)
		rn_child_fail(ch->ep, RN_STAGE_CHDIR);
	/* execvp() searches the PATH of environ: the call's. */
	environ = envp;
	for (int i = 0; lang_interps[c->lang][i]; i++) {
		char *argv[] = { (char *)lang_interps[c->lang][i], (char *)"-", NULL };

		execvp(argv[0], argv);
		if (errno != ENOENT)
			err = errno;
	}
	errno = err;
	rn_child_fail(ch->ep, RN_STAGE_EXEC);
}

static void kchild_close(struct kchild *ch)
{
	for (int i = 0; i < 5; i++)
		rn_close_fd(&ch->fd[i]);
	rn_close_fd(&ch->ep);
}

/* Makes the fds: the runner's ends in k, the child's in ch.  Returns the
 * error pipe's read end, or -1. */
static int kernel_fds(struct kernel *k, enum rn_lang lang, struct kchild *ch)
{
	int fds[2];

	if ((ch->fd[0] = program_fd(lang)) < 0 || rn_make_pipe(fds, false) < 0)
		return -1;
	k->fd_out = fds[0], ch->fd[1] = fds[1];
	if (rn_make_pipe(fds, false) < 0)
		return -1;
	k->fd_err = fds[0], ch->fd[2] = fds[1];
	if (rn_make_pipe(fds, true) < 0)
		return -1;
	k->fd_req = fds[1], ch->fd[3] = fds[0];
	if (rn_make_pipe(fds, false) < 0)
		return -1;
	k->fd_ev = fds[0], ch->fd[4] = fds[1];
	if (pipe2(fds, O_CLOEXEC) < 0)
		return -1;
	ch->ep = fds[1];
	return fds[0];
}

static void kernel_close_fds(struct kernel *k)
{
	rn_close_fd(&k->fd_out);
	rn_close_fd(&k->fd_err);
	rn_close_fd(&k->fd_req);
	rn_close_fd(&k->fd_ev);
}

/* Forgets the process (dead or killed): its output pipes go to the drains,
 * since what it started may still hold them. */
static void kernel_forget(struct runner *r, struct kernel *k)
{
	drain_add(r, &k->fd_out);
	drain_add(r, &k->fd_err);
	kernel_close_fds(k);
	rn_buf_free(&k->reqq);
	rn_buf_free(&k->line);
	k->reqq_off = 0;
	k->hello[0] = '\0';
	k->kill_why[0] = '\0';
	k->pid = 0;
}

/* Starts the kernel for the current call.  Returns 0, or -1 after telling
 * sandgate (a lone EXIT with ERRNO and STAGE). */
static int kernel_start(struct runner *r, struct kernel *k)
{
	struct kchild ch = { { -1, -1, -1, -1, -1 }, -1 };
	struct kcall *c = k->cur;
	char **envp = rn_envp(c->env, c->envc);
	uint32_t stage = RN_STAGE_SETUP;
	int ep = -1, err = 0;
	pid_t pid = -1;

	if (!envp || (ep = kernel_fds(k, c->lang, &ch)) < 0 || (pid = fork()) < 0) {
		err = errno;
		goto fail;
	}
	if (pid == 0) {
		close(ep);
		kernel_child(c, envp, &ch);
	}
	setpgid(pid, pid);
	kchild_close(&ch);
	if (rn_wait_exec(ep, pid, &stage, &err) < 0)
		goto fail;
	close(ep);
	free(envp);
	k->pid = pid;
	return 0;
fail:
	kchild_close(&ch);
	if (ep >= 0)
		close(ep);
	free(envp);
	kernel_close_fds(k);
	rn_send_spawn_error(r, c->id, stage, err ? err : EIO);
	return -1;
}

/* Kills the kernel's whole process group and forgets it (a reset, the
 * runner's end): no death to report. */
static void kernel_discard(struct runner *r, struct kernel *k)
{
	if (k->pid > 1) {
		kill(-k->pid, SIGKILL);
		kill(k->pid, SIGKILL);
	}
	kernel_forget(r, k);
}

static void kernel_flush_req(struct kernel *k)
{
	ssize_t w;

	while (k->fd_req >= 0 && k->reqq_off < k->reqq.len) {
		w = write(k->fd_req, k->reqq.data + k->reqq_off, k->reqq.len - k->reqq_off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN)
			return;
		if (w < 0) { /* it closed fd 3: it is ending, the reap follows */
			rn_close_fd(&k->fd_req);
			break;
		}
		k->reqq_off += (size_t)w;
	}
	k->reqq.len = k->reqq_off = 0;
}

/* Sends the current call to the kernel: a line `exec <bytes> <rich cap>`,
 * then the code. */
static void kernel_request(struct kernel *k)
{
	char head[64];
	int n = snprintf(head, sizeof(head), "exec %zu %u\n", k->cur->source_len,
			 k->cur->rich_cap);

	rn_buf_add(&k->reqq, head, (size_t)n);
	rn_buf_add(&k->reqq, k->cur->source, k->cur->source_len);
	if (k->reqq.oom) {
		/* Cannot happen for a 1 MiB frame unless memory is gone: the
		 * kernel would wait forever, so it goes. */
		snprintf(k->kill_why, sizeof(k->kill_why), "the runner ran out of memory");
		kill(-k->pid, SIGKILL);
		return;
	}
	kernel_flush_req(k);
}

/* Starts k->cur: a kernel first when there is none.  Leaves k->cur NULL
 * when that failed (the call was answered). */
static void kernel_begin(struct runner *r, struct kernel *k)
{
	struct kcall *c = k->cur;

	k->sent_out = k->sent_err = 0;
	k->trunc_out = k->trunc_err = k->timed_out = k->cancelled = false;
	k->deadline = k->kill_at = 0;
	k->kill_extended = false;
	k->restarted[0] = '\0';
	if (c->flags & RN_KFLAG_RESET) {
		if (k->pid)
			kernel_discard(r, k);
		k->dead_why[0] = '\0'; /* a reset is no restart to report */
	}
	if (!k->pid) {
		snprintf(k->restarted, sizeof(k->restarted), "%s", k->dead_why);
		if (kernel_start(r, k) < 0) {
			kcall_free(c);
			k->cur = NULL;
			return;
		}
		k->dead_why[0] = '\0';
	}
	send_started(r, k);
	if (k->hello[0])
		rn_send(r, RN_R_KEVENT, c->id, k->hello, strlen(k->hello));
	if (c->timeout_ms)
		k->deadline = rn_now_ms() + c->timeout_ms;
	kernel_request(k);
}

static void kernel_advance(struct runner *r, struct kernel *k)
{
	while (!k->cur && k->queue && !r->stopping) {
		k->cur = k->queue;
		k->queue = k->cur->next;
		k->cur->next = NULL;
		k->n_queued--;
		kernel_begin(r, k);
	}
}

/* ---- kernels of a scope ------------------------------------------------------------ */

static struct kernel *kernel_find(struct runner *r, const char *scope, enum rn_lang lang)
{
	for (struct kernel *k = r->kernels; k; k = k->next)
		if (k->lang == lang && strcmp(k->scope, scope) == 0)
			return k;
	return NULL;
}

static void kernel_unlink_free(struct runner *r, struct kernel *k)
{
	for (struct kernel **kp = &r->kernels; *kp; kp = &(*kp)->next) {
		if (*kp == k) {
			*kp = k->next;
			r->n_kernels--;
			break;
		}
	}
	free(k->scope);
	free(k);
}

/* Makes room for one more kernel: a dead one with no calls goes (it only
 * held why it died).  False when every one is alive or busy. */
static bool kernel_room(struct runner *r)
{
	if (r->n_kernels < RN_KERNELS_MAX)
		return true;
	for (struct kernel *k = r->kernels; k; k = k->next) {
		if (!k->pid && !k->cur && !k->queue) {
			kernel_unlink_free(r, k);
			return true;
		}
	}
	return false;
}

/* The kernel of c's scope and language, made (without a process) when
 * there is none.  NULL with why when the runner keeps too many. */
static struct kernel *kernel_get(struct runner *r, const struct kcall *c, char *why,
				 size_t size)
{
	struct kernel *k = kernel_find(r, c->scope, c->lang);

	if (k)
		return k;
	if (!kernel_room(r)) {
		snprintf(why, size, "the runner keeps %u kernels already (one per sandbox and "
			 "language): end a sandbox, or reset one of its kernels", RN_KERNELS_MAX);
		return NULL;
	}
	k = calloc(1, sizeof(*k)); /* kernel_unlink_free() */
	if (!k || !(k->scope = strdup(c->scope))) {
		free(k);
		snprintf(why, size, "out of memory");
		return NULL;
	}
	k->lang = c->lang;
	k->fd_out = k->fd_err = k->fd_req = k->fd_ev = -1;
	k->next = r->kernels;
	r->kernels = k;
	r->n_kernels++;
	return k;
}

static void send_lone_exit(struct runner *r, uint32_t id, uint32_t flags)
{
	struct rn_buf b = { 0 };

	rn_put_u32(&b, RN_F_FLAGS, flags);
	if (!b.oom)
		rn_send(r, RN_R_EXIT, id, b.data, b.len);
	rn_buf_free(&b);
}

/* Ends k for good: the calls waiting end KILLED, the one running ends with
 * the kernel's death (DIED: why), the process group is killed. */
static void kernel_end(struct runner *r, struct kernel *k, const char *why)
{
	struct kcall *c;

	while ((c = k->queue)) {
		k->queue = c->next;
		send_lone_exit(r, c->id, RN_EXIT_KILLED);
		kcall_free(c);
	}
	k->n_queued = 0;
	kernel_discard(r, k);
	if (k->cur)
		kernel_finish(r, k, why);
	kernel_unlink_free(r, k);
}

/* KFLAGS END: every kernel of c's scope (of c's language when it has one). */
static void kernel_end_scope(struct runner *r, struct kcall *c)
{
	struct kernel *k = r->kernels, *next;

	for (; k; k = next) {
		next = k->next;
		if (strcmp(k->scope, c->scope) == 0 && (!c->has_lang || k->lang == c->lang))
			kernel_end(r, k, "the kernel was ended: its sandbox ended");
	}
	send_lone_exit(r, c->id, 0);
	kcall_free(c);
}

void kernel_exec(struct runner *r, uint32_t id, const unsigned char *payload, size_t len)
{
	struct kcall *c, **tail;
	struct kernel *k;
	char why[160];

	if (id == 0 || proc_find(r, id) || kernel_has_id(r, id) || file_has_id(r, id)) {
		rn_send_error(r, id, "request id %u is 0 or already running", id);
		return;
	}
	c = kcall_parse(id, payload, len, why, sizeof(why));
	if (!c) {
		rn_send_error(r, id, "%s", why);
		return;
	}
	if (c->flags & RN_KFLAG_END) {
		kernel_end_scope(r, c);
		return;
	}
	k = kernel_get(r, c, why, sizeof(why));
	if (!k) {
		rn_send_error(r, id, "%s", why);
		kcall_free(c);
		return;
	}
	if (k->n_queued >= KERNEL_QUEUE_MAX) {
		rn_send_error(r, id, "the %s kernel is busy: %d calls wait for it already",
			      lang_names[c->lang], KERNEL_QUEUE_MAX);
		kcall_free(c);
		return;
	}
	for (tail = &k->queue; *tail; tail = &(*tail)->next)
		;
	*tail = c;
	k->n_queued++;
	kernel_advance(r, k);
}

/* ---- interrupts and kills --------------------------------------------------------------- */

/* CPU time pid has used, in clock ticks, or -1. */
static long long proc_ticks(pid_t pid)
{
	long long t;

	return rn_proc_stat(pid, NULL, &t) == 0 ? t : -1;
}

static void kernel_interrupt(struct kernel *k)
{
	if (k->kill_at || !k->pid)
		return;
	kill(k->pid, SIGINT);
	k->int_ticks = proc_ticks(k->pid);
	k->kill_at = rn_now_ms() + (k->cur ? k->cur->grace_ms : RN_KGRACE_MS_DEFAULT);
}

/* At kill_at: a kernel that used CPU since its interrupt is busy and goes;
 * one that was idle (a loaded machine left it unscheduled, its answer is
 * on its way) gets RN_KGRACE_SLOW_MS more, once, unless the call was
 * cancelled (its client stops waiting sooner: the kernel must be free for
 * the next call by then).  True when it is to be killed now. */
static bool kernel_kill_due(struct kernel *k, int64_t now)
{
	long long t;

	if (k->kill_extended || k->int_ticks < 0 || k->cancelled)
		return true;
	t = proc_ticks(k->pid);
	if (t < 0 || t - k->int_ticks >= RN_KBUSY_TICKS)
		return true;
	k->kill_extended = true;
	k->kill_at = now + RN_KGRACE_SLOW_MS;
	return false;
}

bool kernel_kill(struct runner *r, uint32_t id, int sig)
{
	struct kcall **queued, *c;
	struct kernel *k = kernel_of_id(r, id, &queued);

	if (!k)
		return false;
	if (queued) { /* never started: ends here */
		c = *queued;
		*queued = c->next;
		k->n_queued--;
		send_lone_exit(r, id, RN_EXIT_KILLED);
		kcall_free(c);
		return true;
	}
	if (sig > 0) {
		kill(k->pid, sig);
		return true;
	}
	k->cancelled = true;
	kernel_interrupt(k);
	/* An extension for an idle kernel ends with the cancel: its client
	 * waits grace and a little, not the extension (kernel_kill_due). */
	if (k->kill_extended && k->cur && k->kill_at > rn_now_ms() + k->cur->grace_ms)
		k->kill_at = rn_now_ms() + k->cur->grace_ms;
	return true;
}

/* ---- events -------------------------------------------------------------------------- */

static void kernel_drain_output(struct runner *r, struct kernel *k)
{
	static unsigned char buf[RN_CHUNK];
	int *fds[2] = { &k->fd_out, &k->fd_err };
	uint8_t types[2] = { RN_R_STDOUT, RN_R_STDERR };

	for (int i = 0; i < 2; i++) {
		ssize_t n;

		while (*fds[i] >= 0) {
			n = read(*fds[i], buf, sizeof(buf));
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0 && errno == EAGAIN)
				break;
			if (n <= 0) {
				rn_close_fd(fds[i]);
				break;
			}
			kernel_forward(r, k, types[i], buf, (size_t)n);
		}
	}
}

static void kernel_line(struct runner *r, struct kernel *k, const char *line, size_t n)
{
	if (n == 4 && memcmp(line, "done", 4) == 0) {
		if (k->cur)
			kernel_finish(r, k, NULL);
		return;
	}
	if (n > 6 && memcmp(line, "hello ", 6) == 0 && n < sizeof(k->hello)) {
		memcpy(k->hello, line, n);
		k->hello[n] = '\0';
	}
	kernel_forward(r, k, RN_R_KEVENT, (const unsigned char *)line, n);
}

/* Splits what came on fd 4 into lines.  Returns -1 when a line is too long
 * (the kernel broke the protocol: it is killed). */
static int kernel_lines(struct runner *r, struct kernel *k, const unsigned char *p, size_t n)
{
	while (n > 0) {
		const unsigned char *nl = memchr(p, '\n', n);
		size_t take = nl ? (size_t)(nl - p) : n;

		if (k->line.len + take > KERNEL_LINE_MAX)
			return -1;
		rn_buf_add(&k->line, p, take);
		if (k->line.oom)
			return -1;
		if (!nl)
			return 0;
		kernel_line(r, k, (const char *)k->line.data, k->line.len);
		k->line.len = 0;
		p += take + 1;
		n -= take + 1;
	}
	return 0;
}

/* Output first: everything the kernel wrote before an event is in its
 * pipes by then, so it reaches sandgate before that event (and before
 * `done`, the end of the call). */
static void kernel_read_events(struct runner *r, struct kernel *k)
{
	static unsigned char buf[RN_CHUNK];
	ssize_t n;

	kernel_drain_output(r, k);
	while (k->fd_ev >= 0) {
		n = read(k->fd_ev, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n <= 0) {
			rn_close_fd(&k->fd_ev);
			return;
		}
		if (kernel_lines(r, k, buf, (size_t)n) < 0) {
			snprintf(k->kill_why, sizeof(k->kill_why), "the kernel sent an event "
				 "line over %u bytes", KERNEL_LINE_MAX);
			kill(-k->pid, SIGKILL);
			rn_close_fd(&k->fd_ev);
			return;
		}
		if ((size_t)n < sizeof(buf))
			return;
	}
}

static struct kernel *kernel_of_fd(struct runner *r, int fd)
{
	for (struct kernel *k = r->kernels; k; k = k->next) {
		if (k->pid && (fd == k->fd_out || fd == k->fd_err || fd == k->fd_ev ||
			       fd == k->fd_req))
			return k;
	}
	return NULL;
}

size_t kernel_pollfds(struct runner *r, struct pollfd *pfd, size_t room)
{
	size_t n = 0;

	for (struct kernel *k = r->kernels; k; k = k->next) {
		int fds[3] = { k->fd_out, k->fd_err, k->fd_ev };

		if (!k->pid)
			continue;
		for (int j = 0; j < 3 && n < room; j++)
			if (fds[j] >= 0)
				pfd[n++] = (struct pollfd){ .fd = fds[j], .events = POLLIN };
		if (k->reqq_off < k->reqq.len && k->fd_req >= 0 && n < room)
			pfd[n++] = (struct pollfd){ .fd = k->fd_req, .events = POLLOUT };
	}
	return n;
}

void kernel_events(struct runner *r, const struct pollfd *pfd, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct kernel *k;

		if (!pfd[i].revents || !(k = kernel_of_fd(r, pfd[i].fd)))
			continue;
		if (pfd[i].fd == k->fd_req)
			kernel_flush_req(k);
		else if (pfd[i].fd == k->fd_ev)
			kernel_read_events(r, k);
		else
			kernel_drain_output(r, k);
	}
}

/* ---- death ------------------------------------------------------------------------------ */

static void death_reason(const struct kernel *k, int wstatus, char *out, size_t size)
{
	if (k->kill_why[0])
		snprintf(out, size, "%s", k->kill_why);
	else if (WIFEXITED(wstatus))
		snprintf(out, size, "the kernel exited with status %d", WEXITSTATUS(wstatus));
	else if (WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGKILL)
		snprintf(out, size, "the kernel was killed (SIGKILL, often the out-of-memory "
			 "killer)");
	else if (WIFSIGNALED(wstatus))
		snprintf(out, size, "the kernel was killed by signal %d (%s)", WTERMSIG(wstatus),
			 strsignal(WTERMSIG(wstatus)));
	else
		snprintf(out, size, "the kernel ended");
}

bool kernel_reaped(struct runner *r, pid_t pid, int wstatus)
{
	struct kcall *waiting;
	char why[200];

	for (struct kernel *k = r->kernels; k; k = k->next) {
		if (!k->pid || k->pid != pid)
			continue;
		/* What it said before it ended still counts, `done` included;
		 * the calls waiting start on a new kernel only after this. */
		waiting = k->queue;
		k->queue = NULL;
		kernel_read_events(r, k);
		kernel_drain_output(r, k);
		k->queue = waiting;
		death_reason(k, wstatus, why, sizeof(why));
		kernel_forget(r, k);
		snprintf(k->dead_why, sizeof(k->dead_why), "%s", why);
		if (k->cur)
			kernel_finish(r, k, why);
		else
			kernel_advance(r, k);
		return true;
	}
	return false;
}

int kernel_tick(struct runner *r)
{
	int64_t now = rn_now_ms();
	int wait = -1;

	for (struct kernel *k = r->kernels; k; k = k->next) {
		int64_t at = 0;

		if (!k->cur || !k->pid)
			continue;
		if (k->deadline && now >= k->deadline && !k->kill_at) {
			k->timed_out = true;
			kernel_interrupt(k);
		}
		if (k->kill_at && now >= k->kill_at && !k->kill_why[0] && kernel_kill_due(k, now)) {
			snprintf(k->kill_why, sizeof(k->kill_why), "the call did not stop within "
				 "%u ms of its interrupt, so the kernel was killed",
				 k->cur->grace_ms + (k->kill_extended ? RN_KGRACE_SLOW_MS : 0));
			kill(-k->pid, SIGKILL);
			kill(k->pid, SIGKILL);
		}
		if (k->kill_at && !k->kill_why[0])
			at = k->kill_at;
		else if (k->deadline && !k->kill_at)
			at = k->deadline;
		if (at) {
			int64_t d = at - now;
			int w = d <= 0 ? 0 : d > 60000 ? 60000 : (int)d;

			wait = wait < 0 || w < wait ? w : wait;
		}
	}
	return wait;
}

void kernel_stop_all(struct runner *r)
{
	struct kernel *k;

	while ((k = r->kernels)) {
		struct kcall *c;

		while ((c = k->queue)) {
			k->queue = c->next;
			kcall_free(c);
		}
		k->n_queued = 0;
		kcall_free(k->cur);
		k->cur = NULL;
		kernel_discard(r, k);
		kernel_unlink_free(r, k);
	}
}
