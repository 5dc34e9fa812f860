/*
 * The insides of a persistent shell, shared by its files: shell.c (the
 * registry, the process, results), reader.c (the thread that reads the
 * stream), inband.c and statusfd.c (the two ways of seeing a command end:
 * nonce markers in the output, or lines on the status channel), interrupt.c
 * (stopping a command, and its background jobs when the shell goes).  Only
 * core/shell/ includes this header.
 */
#ifndef SG_CORE_SHELL_INTERNAL_H
#define SG_CORE_SHELL_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/base/buf.h"
#include "core/shell/headtail.h"
#include "core/shell/shell.h"

#define SHELL_CHUNK        65536
#define SHELL_POLL_MS      250      /* reader wakes this often to see stop */
#define SHELL_BOOT_MS      20000
#define SHELL_CONFIRM_MS   2000     /* wait=false: wait this long for the start */
#define SHELL_CMD_MAX      (1u << 20)
#define SHELL_KILL_ROUNDS  5
#define SHELL_REPORT_GRACE_MS 10000 /* an interrupted bash that is not busy: wait this long */
#define SHELL_BUSY_TICKS   5        /* CPU an interrupted bash may use, in clock ticks (1/100 s) */
#define SHELL_JOBS_WAIT_MS 10000    /* an interrupt waits this long for the command's job list */
#define SHELL_SCAN_MAX     8192     /* junk kept while looking for a marker */
#define SHELL_STATUS_FD    3        /* the shell's completion channel (status_fd mode) */
#define SHELL_LINE_MAX     256      /* a status line longer than this is junk */

/* bash when there is one; job control needs it.  Else the shell this runs
 * in ($0: /bin/sh, or the one a backend uses instead, as docker.so does for
 * a machine made with `shell`). */
#define SHELL_LAUNCH \
	"if command -v bash >/dev/null 2>&1; then exec bash --noprofile --norc; fi; exec \"$0\""

enum sh_state { SH_BOOT, SH_IDLE, SH_RUN, SH_DEAD };
enum sh_phase { PH_NONE, PH_BOOT, PH_START, PH_JOBS, PH_CMD, PH_DONE };

struct sg_shell {
	char id[20];
	struct sg_entry *e;         /* reference */
	char purpose[64];
	bool is_default;            /* guarded by reg_lock */
	bool removed;               /* guarded by reg_lock */
	int refs;                   /* guarded by reg_lock */
	char quota_owner[96];       /* credential holding one of its [server] quota_shells for it */
	bool quota_held;            /* guarded by reg_lock */
	int64_t created_ms;
	struct sg_shell *next;

	pthread_mutex_t lock;       /* guards the fields below */
	pthread_cond_t cond;
	enum sh_state state;
	enum sh_phase phase;
	/* Markers on fd 3 (the stream's status channel) rather than in the
	 * output; set by shell_start before the reader runs. */
	bool status_mode;
	long bash_pid;
	char file[48];              /* where commands are written in the machine */
	char nonce[33];
	char int_id[17];            /* the running command's, for its interrupt (interrupt.c) */
	struct sg_buf scan;         /* bytes not yet classified (in-band mode) */
	struct sg_buf sline;        /* status channel bytes short of a line */
	struct sg_headtail out;
	size_t max_output;
	bool completed;
	int exit_code;
	char jobs[512];             /* background job groups when the command began */
	char last_command[256];
	int64_t cmd_started_ms;
	bool killing;               /* sandgate is ending the shell itself */
	char dead_reason[24];
	int dead_code;
	json_t *previous;           /* previous_shell, reported once */

	pthread_mutex_t life_lock;  /* one close or reader start at a time */
	pthread_mutex_t io_lock;    /* guards stream against write/close races */
	struct sg_stream *stream;
	pthread_t reader;
	bool reader_started;
	atomic_bool stop;
};

/* ---- helpers (shell.c) ---- */

/* Waits on sh->cond for up to ms (sh->lock held). */
void sg_sh_cond_wait_ms(struct sg_shell *sh, int64_t ms);
/* Drops the first k bytes of b. */
void sg_sh_scan_drop(struct sg_buf *b, size_t k);
/* The first needle in b, or NULL. */
const char *sg_sh_find(const struct sg_buf *b, const char *needle);
/* The length of the longest end of b that is a start of needle. */
size_t sg_sh_prefix_suffix(const struct sg_buf *b, const char *needle);
/* Keeps only what could still be the start of a needle of needle_len. */
void sg_sh_scan_keep_tail(struct sg_buf *b, size_t needle_len);

/* Waits out a start in progress and replaces a dead shell (sh->lock held;
 * it is released and taken again while a new bash starts).  0, or -1 with
 * err when no shell could be started. */
int sg_sh_alive_locked(struct sg_shell *sh, struct sg_err *err);
/* The output since the last delivery and the state, as a result object
 * (new reference, the caller's); a finished command is acknowledged (the
 * shell is idle again).  sh->lock held. */
json_t *sg_sh_snapshot_locked(struct sg_shell *sh);
/* Waits (sh->lock held) until the command finishes (or, with started, has
 * begun), the shell dies, deadline (sg_now_ms() clock) passes or call (may
 * be NULL) is cancelled.  1 when the condition holds, 0 at the deadline,
 * -1 when cancelled. */
int sg_sh_wait_locked(struct sg_shell *sh, int64_t deadline, struct sg_call *call, bool started);

/* ---- interrupt.c ---- */

/* Stops the running command (see interrupt.c); *replaced (may be NULL) is
 * set when bash itself had to be killed and is now SH_DEAD.  sh->lock not
 * held. */
void sg_sh_interrupt_command(struct sg_shell *sh, bool *replaced);
/* Sends sig ("TERM", "KILL") to the process groups of bash pid's children
 * but the groups listed in keep (space-separated); failures are logged. */
void sg_sh_kill_jobs(struct sg_shell *sh, long pid, const char *keep, const char *sig);

/* ---- the reader (reader.c, inband.c, statusfd.c); sh->lock held for the feeds ---- */

/* The reader thread of sh: reads the stream until it ends or sh->stop. */
void *sg_sh_reader_main(void *arg);
/* In-band mode: classifies stream bytes by the nonce markers. */
void sg_sh_feed_inband(struct sg_shell *sh, const char *p, size_t n);
/* Status-fd mode: output channel bytes, and status channel bytes. */
void sg_sh_feed_output(struct sg_shell *sh, const char *p, size_t n);
void sg_sh_feed_status(struct sg_shell *sh, const char *p, size_t n);

#endif
