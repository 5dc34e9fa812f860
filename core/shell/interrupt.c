/*
 * Stopping a shell's command: bash is told to return from the sourced file
 * (its USR2 trap) and the process groups the command made get TERM, then
 * KILL, each round from a separate one-shot exec, never through the shell,
 * which is the thing that may be stuck.  bash itself is killed (and replaced
 * by the next call) at once only when it is busy: it used CPU between the
 * first and the last round (a builtin loop that ignores the trap), or the
 * last round still found a live child of its, after two rounds of KILL (a
 * child in D, waiting in the kernel, is not counted).  A bash that is
 * neither and has not reported yet is slow (a loaded machine, a stopped
 * process), not stuck: it gets SHELL_REPORT_GRACE_MS more before it goes.
 */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/base/err.h"
#include "core/base/log.h"
#include "core/base/util.h"
#include "core/registry/machine.h"

#include "core/shell/internal.h"

/* $1 the shell's pid, $2 the job groups to spare, $3 the signal, $4 the
 * shell's interrupt file and $5 the id of the command to interrupt, written
 * there before the USR2 (bash's trap returns only for that command: see
 * boot_line in shell.c).  USR2 first;
 * then every process group of the shell's children that is not a spared
 * background job gets the signal; a child in the shell's own group (no job
 * control) is signalled alone.  Last it prints what it saw of bash: "view
 * STATE TICKS PROCS", bash's state letter and CPU time (utime + stime,
 * fields 14 and 15 of /proc/PID/stat, in clock ticks), and how many live
 * children it had (a zombie waits only for bash; a child in D, in the
 * kernel, waits for its I/O, and KILL takes it when that ends). */
static const char kill_script[] =
	"bp=$1 keep=\" $2 \" sig=$3 n=0\n"
	"printf '%s\\n' \"$5\" > \"$4\" 2>/dev/null\n"
	"kill -USR2 \"$bp\" 2>/dev/null || exit 0\n"
	"for d in /proc/[0-9]*; do\n"
	"  IFS= read -r st < \"$d/stat\" 2>/dev/null || continue\n"
	"  rest=${st##*\")\"}\n"
	"  set -- $rest\n"
	"  [ \"$2\" = \"$bp\" ] || continue\n"
	"  case $keep in *\" $3 \"*) continue ;; esac\n"
	"  case $1 in Z|D) ;; *) n=$((n + 1)) ;; esac\n"
	"  if [ \"$3\" = \"$bp\" ]; then kill -\"$sig\" \"${d#/proc/}\" 2>/dev/null\n"
	"  else kill -\"$sig\" \"-$3\" 2>/dev/null; fi\n"
	"done\n"
	"IFS= read -r st < \"/proc/$bp/stat\" 2>/dev/null || exit 0\n"
	"rest=${st##*\")\"}\n"
	"set -- $rest\n"
	"echo \"view $1 $((${12} + ${13})) $n\"\n";

static const char kill_shell_script[] =
	"kill -KILL \"-$1\" 2>/dev/null; kill -KILL \"$1\" 2>/dev/null; exit 0\n";

/* What one round's script saw of bash after its signals. */
struct bash_view {
	bool ok;           /* the script printed its view */
	long long ticks;   /* CPU time bash has used, clock ticks */
	int procs;         /* bash's live children that were signalled */
};

/* Runs a fixed script with a one-shot exec; its standard output goes to
 * out (may be NULL: dropped; else the caller releases it). */
static int run_script(struct sg_shell *sh, const char *script, const char *const a[5],
		      struct sg_buf *out, struct sg_err *err)
{
	const char *argv[] = { "/bin/sh", "-c", script, "sandgate-shell", a[0], a[1], a[2], a[3], a[4],
			       NULL };
	struct sg_exec_req req = { .argv = argv, .cwd = "/", .timeout_ms = 15000,
				   .output_cap = 4096 };
	struct sg_exec_result res = { 0 };
	int rc = sg_m_exec(sh->e, &req, NULL, &res, err);

	if (out && rc == 0)
		*out = res.out;
	else
		sg_buf_release(&res.out);
	sg_buf_release(&res.err);
	return rc;
}

/* One round for the command int_id ("": none): signals, and reads the
 * script's view of bash into view (may be NULL). */
static void kill_round(struct sg_shell *sh, long pid, const char *keep, const char *sig,
		       const char *int_id, struct bash_view *view)
{
	char spid[24], intf[sizeof(sh->file) + 8], state;
	struct sg_buf out = { 0 };
	struct sg_err err;
	const char *line;

	if (view)
		*view = (struct bash_view){ 0 };
	if (pid <= 1)
		return;
	snprintf(spid, sizeof(spid), "%ld", pid);
	snprintf(intf, sizeof(intf), "%s.int", sh->file);
	if (run_script(sh, kill_script, (const char *[5]){ spid, keep, sig, intf, int_id },
		       view ? &out : NULL, &err) < 0) {
		SG_WARN("shell %s: interrupting failed: %s", sh->id, err.msg);
		return;
	}
	sg_buf_append(&out, "", 1);
	line = strstr(out.data, "view ");
	if (view && line &&
	    sscanf(line, "view %c %lld %d", &state, &view->ticks, &view->procs) == 3)
		view->ok = true;
	sg_buf_release(&out);
}

void sg_sh_kill_jobs(struct sg_shell *sh, long pid, const char *keep, const char *sig)
{
	kill_round(sh, pid, keep, sig, "", NULL);
}

/* Whether bash is busy rather than slow: it used CPU between the first and
 * the last round, or the last round still found a live child of its (after
 * two rounds of KILL), or it could not be seen (then it is treated as stuck,
 * as before there were views). */
static bool bash_busy(const struct bash_view *first, const struct bash_view *last)
{
	return !first->ok || !last->ok || last->procs > 0 ||
	       last->ticks - first->ticks >= SHELL_BUSY_TICKS;
}

/* Kills bash and marks the shell dead; the next call starts a new one. */
static void kill_bash(struct sg_shell *sh, long pid)
{
	char spid[24];
	struct sg_err err;

	pthread_mutex_lock(&sh->lock);
	sh->killing = true;
	pthread_mutex_unlock(&sh->lock);
	snprintf(spid, sizeof(spid), "%ld", pid);
	if (run_script(sh, kill_shell_script, (const char *[5]){ spid, "", "", "", "" }, NULL, &err) < 0)
		SG_WARN("shell %s: killing bash failed: %s", sh->id, err.msg);
	pthread_mutex_lock(&sh->lock);
	sg_sh_wait_locked(sh, sg_now_ms() + 5000, NULL, false);
	if (sh->state != SH_DEAD) {
		snprintf(sh->dead_reason, sizeof(sh->dead_reason), "interrupted");
		sh->state = SH_DEAD;
	}
	pthread_mutex_unlock(&sh->lock);
}

/* Waits for the command's end until deadline; true when it came. */
static bool ended_by(struct sg_shell *sh, int64_t deadline)
{
	bool done;

	pthread_mutex_lock(&sh->lock);
	done = sg_sh_wait_locked(sh, deadline, NULL, false) > 0;
	pthread_mutex_unlock(&sh->lock);
	return done;
}

void sg_sh_interrupt_command(struct sg_shell *sh, bool *replaced)
{
	char jobs[sizeof(sh->jobs)], int_id[sizeof(sh->int_id)];
	long pid;
	bool done = false;
	struct bash_view first = { 0 }, last = { 0 };

	if (replaced)
		*replaced = false;
	pthread_mutex_lock(&sh->lock);
	/* The job list arrives right after the start; without it every
	 * background job would be signalled too.  Slow only on a slow machine. */
	sg_sh_wait_locked(sh, sg_now_ms() + SHELL_JOBS_WAIT_MS, NULL, true);
	pid = sh->bash_pid;
	memcpy(jobs, sh->jobs, sizeof(jobs));
	memcpy(int_id, sh->int_id, sizeof(int_id));
	done = sh->completed || sh->state != SH_RUN;
	pthread_mutex_unlock(&sh->lock);
	for (int round = 0; !done && round < SHELL_KILL_ROUNDS; round++) {
		kill_round(sh, pid, jobs, round < 2 ? "TERM" : "KILL", int_id,
			   round == 0 ? &first : &last);
		done = ended_by(sh, sg_now_ms() + (round == 0 ? 1000 : 500));
	}
	if (!done && !bash_busy(&first, &last)) {
		SG_INFO("shell %s: bash %ld has not reported its interrupted command yet, and is idle: "
			"waiting up to %d s more", sh->id, pid, SHELL_REPORT_GRACE_MS / 1000);
		done = ended_by(sh, sg_now_ms() + SHELL_REPORT_GRACE_MS);
	}
	if (done)
		return;
	/* A builtin loop that ignores the trap, or a child that KILL cannot end. */
	kill_bash(sh, pid);
	if (replaced)
		*replaced = true;
}

int sg_shell_interrupt(struct sg_shell *sh, json_t **result, struct sg_err *err)
{
	bool running, replaced = false;
	json_t *r;

	pthread_mutex_lock(&sh->lock);
	while (sh->state == SH_BOOT)
		sg_sh_cond_wait_ms(sh, 200);
	running = sh->state == SH_RUN && !sh->completed;
	pthread_mutex_unlock(&sh->lock);
	if (running)
		sg_sh_interrupt_command(sh, &replaced);
	pthread_mutex_lock(&sh->lock);
	r = sg_sh_snapshot_locked(sh);
	pthread_mutex_unlock(&sh->lock);
	json_object_set_new(r, "interrupted", json_boolean(running));
	if (!running)
		json_object_set_new(r, "note", json_string("no command was running"));
	if (replaced) {
		/* The old output is in r; now the new bash. */
		pthread_mutex_lock(&sh->lock);
		if (sg_sh_alive_locked(sh, err) < 0) {
			pthread_mutex_unlock(&sh->lock);
			json_decref(r);
			return -1;
		}
		json_object_set_new(r, "bash_pid", json_integer(sh->bash_pid));
		json_object_set_new(r, "status", json_string("completed"));
		json_object_del(r, "hint");
		json_object_set_new(r, "shell_replaced", json_true());
		if (sh->previous) {
			json_object_set_new(r, "previous_shell", sh->previous);
			sh->previous = NULL;
		}
		pthread_mutex_unlock(&sh->lock);
	}
	*result = r;
	return 0;
}
