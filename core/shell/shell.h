/*
 * Persistent shells: one non-interactive bash per shell id, on a machine's
 * interactive stream (Docker through its runner or an attached exec, SSH
 * channel, FC process with stdin), so cwd, exports and functions persist
 * from call to call.
 *
 * Protocol (why it cannot be fooled; doc/sandbox-env.md has the long form):
 *  - A command is written into a per-shell file in the machine with one
 *    printf of octal escapes, then sourced with stdin from /dev/null: reading
 *    stdin, an unterminated quote or a heredoc cannot reach the protocol
 *    line, which bash had parsed in full before the command ran.
 *  - Completion "status_fd" (the machine answers stream_open_status, e.g.
 *    Docker with its runner): bash has fd 3 on a channel of its own and
 *    writes its markers there ("<nonce>:S", the job list, "<nonce>:J",
 *    then "<nonce>:E:<status>"); the command runs with fd 3 closed.  The
 *    output channel is output only, and output written before the end
 *    marker arrives before it, so the result is exact and complete.
 *  - Completion "in_band" (SG_E_NOTSUP there: SSH and FC today, Docker
 *    with runner = false): the shell prints "\037<nonce>:S" before and
 *    "\037<nonce>:E:<status>" after the command in its output.  The nonce
 *    is 128 random bits per command that the command never sees, so its
 *    output cannot fake the end.  The end marker is found anywhere in the
 *    stream, so output without a final newline is exact.
 *  - Job control (set -m) puts each job in its own process group; an
 *    interrupt signals bash (a USR2 trap returns from the sourced file when
 *    the interrupt named the running command) and
 *    kills the groups the command made, through a separate one-shot exec.
 *    A command that will not stop (a builtin loop that ignores the trap)
 *    costs the shell: it is replaced and previous_shell says so; a bash
 *    that is idle but has not reported yet is waited for (interrupt.c).
 *  - A reader thread drains the stream all the time into a head and a tail
 *    buffer, so a command never blocks on output nobody reads yet.
 */
#ifndef SG_CORE_SHELL_H
#define SG_CORE_SHELL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include <sandgate/plugin.h>

struct sg_entry;
struct sg_session;
struct sg_shell;

/* Registers the machine-destroy hook.  Idempotent. */
void sg_shell_init(void);
/* Closes every shell (process exit). */
void sg_shell_fini(void);

/* The shell `id` when its machine is visible to s: a reference
 * (sg_shell_put), or NULL with SG_E_NOTFOUND. */
struct sg_shell *sg_shell_get(struct sg_session *s, const char *id, struct sg_err *err);
/* Machine e's default shell, started on first use.  A reference. */
struct sg_shell *sg_shell_default(struct sg_entry *e, struct sg_call *call, struct sg_err *err);
/* A new shell on e (not the default).  A reference. */
struct sg_shell *sg_shell_new(struct sg_entry *e, const char *purpose, struct sg_call *call,
			      struct sg_err *err);
void sg_shell_put(struct sg_shell *sh);

/* The shell's id and machine entry (borrowed, valid while referenced). */
const char *sg_shell_id(const struct sg_shell *sh);
struct sg_entry *sg_shell_machine(const struct sg_shell *sh);

struct sg_shell_exec {
	const char *command;
	bool wait;
	unsigned timeout_ms;
	size_t max_output;
};

/* Runs a command.  *result (new) has output, exit_code, status
 * ("completed", "running", "terminated"), shell_id, bash_pid, and once
 * previous_shell.  SG_E_BUSY while another command runs; SG_E_CANCELLED
 * when the call was cancelled (the command is interrupted first). */
int sg_shell_exec(struct sg_shell *sh, const struct sg_shell_exec *req, struct sg_call *call,
		  json_t **result, struct sg_err *err);
/* Output new since the last exec or read, and the state ("idle",
 * "running", "completed" with exit_code, "terminated").  Never blocks. */
int sg_shell_read(struct sg_shell *sh, size_t max_output, json_t **result, struct sg_err *err);
/* Stops the running command (see above).  *result as sg_shell_read plus
 * "interrupted". */
int sg_shell_interrupt(struct sg_shell *sh, json_t **result, struct sg_err *err);
/* Kills what the shell runs and removes it.  Consumes the reference. */
int sg_shell_remove(struct sg_shell *sh, struct sg_err *err);
/* Makes sh its machine's default shell. */
void sg_shell_make_default(struct sg_shell *sh);

/* Rows {shell_id, machine, purpose, status, uptime, last_command,
 * is_default, bash_pid, completion ("status_fd" or "in_band")} of the shells on machines visible to s, of
 * `machine` only when not NULL (an id or name).  New reference. */
json_t *sg_shell_list(struct sg_session *s, const char *machine);
/* Ends every shell of machine e (its destruction, ssh_disconnect). */
void sg_shell_close_machine(struct sg_entry *e);

/* How many shells machine e has. */
unsigned sg_shell_count(const struct sg_entry *e);

/* ---- output truncation (pure, unit-tested) -------------------------------- */

/* p[0..n) cut to at most about max bytes: the first max/10 and the last
 * max - max/10 bytes, each cut at a UTF-8 character boundary, joined by a
 * line that says how many bytes were dropped.  Unchanged (copied) when it
 * fits.  Returns a new NUL-terminated string (caller frees), its length in
 * *outlen and the dropped byte count in *dropped. */
char *sg_shell_truncate(const char *p, size_t n, size_t max, size_t *outlen, uint64_t *dropped);

#endif
