/*
 * The one runner client of the plugins (docker.so, ssh.so, local.so): the
 * life of a runner at one place (a container, an SSH target, a jail) and
 * everything done through it, one-shot commands, interactive streams and
 * file operations, with errors in struct sg_err like the rest of sandgate.
 *
 * A plugin describes the place with a small ops struct (how to start a
 * runner there, how to kill a process group there without one, a log tag)
 * and embeds a struct rnc_site in its per-place state.  The client starts
 * the runner lazily on the first call, starts a new one on the next call
 * after one died (one log line each), and, where the plugin has a plain way
 * to run commands (rnc_ops.plain), falls back to it for good when the runner
 * cannot run there (said once in the log).
 *
 * Below it: client.h (the connection, its reader thread and frames).
 * Thread-safe: every function may be called from several threads at once
 * on one site.
 */
#ifndef SG_RUNNER_RCLIENT_H
#define SG_RUNNER_RCLIENT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <sandgate/plugin.h>

#include "plugins/runner/client.h"

/* An error code of this client's own, never returned to the core: the
 * runner connection broke before the request could have had any effect, so
 * it may run once more on a new runner.  The client retries once; what is
 * left after that becomes SG_E_UNAVAILABLE or SG_E_IO. */
#define RNC_E_RETRY 1000

#define RNC_GRACE_MS      1000  /* TERM -> KILL, as the runner counts it */
#define RNC_SLACK_MS      5000  /* beyond timeout + grace: the runner is stuck */
#define RNC_SLOW_STARTS   3     /* starts in a row too slow: the plain way for good */
#define RNC_ANSWER_MS     700   /* beyond a command's timeout: the caller is answered
				   (timed out) while the runner ends the group */
#define RNC_CLOSE_WAIT_MS 1000  /* a stream's process may end by itself */

/* How one kind of place starts and treats its runner.  Static data of the
 * plugin; every function gets the `ud` of its site. */
struct rnc_ops {
	/* The plugin's log tag, which also starts messages: "docker". */
	const char *tag;
	/* What commands use when the runner cannot run at a site ("plain
	 * docker exec"), or NULL when there is no other way (a start failure
	 * is then the call's error, every time). */
	const char *plain;
	/* Optional: what a user can do where /bin/sh is missing, added to the
	 * error of a shell that cannot start ("an image without it needs ..."). */
	const char *no_sh;
	/* Starts a runner at the site: puts the binary in place when needed and
	 * runs it as `<its path there> <arg>` (arg is "--stdio", or "--fault"
	 * under the test hook), its stdin and stdout the connection.  Copies
	 * the runner's path there into path[size] (for status and the log).
	 * Returns 0 with the opener's reference in *out; -1 with err, where
	 * SG_E_NOTSUP means it cannot run at this site at all (another CPU,
	 * noexec everywhere: the site falls back to `plain` for good),
	 * SG_E_TIMEOUT that it was too slow to start (a loaded machine: this
	 * call uses `plain` when there is one, else fails; RNC_SLOW_STARTS in a
	 * row count as SG_E_NOTSUP), and any other code fails this call only.
	 * After anything but SG_E_NOTSUP the next call tries again. */
	int (*start)(void *ud, const char *arg, struct rn_conn **out, char *path,
		     size_t size, struct sg_err *err);
	/* Optional: how the last runner ended, words for the log line of a
	 * restart ("exit status 1"), asked after its connection was closed. */
	void (*ended)(void *ud, char *how, size_t size);
	/* Kills process group pgid (> 1) at the site without the runner (it
	 * may be dead): a command whose runner connection broke while it ran
	 * must not run on.  Best effort. */
	void (*kill_group)(void *ud, long pgid);
	/* Optional: after a runner connection broke under a request, true
	 * (with err filled, SG_E_UNAVAILABLE) when the site itself went away
	 * (an SSH connection that dropped), so the error says that instead. */
	bool (*lost)(void *ud, struct sg_err *err);
};

enum rnc_state {
	RNC_IDLE = 0,   /* not started yet */
	RNC_ACTIVE,     /* a connection exists (maybe just died) */
	RNC_FALLBACK,   /* cannot run here: the plugin's plain path, for good */
	RNC_OFF         /* turned off by configuration */
};

/* One place a runner lives.  Embedded in the plugin's per-place state;
 * rnc_site_init() before use, rnc_site_fini() at the end. */
struct rnc_site {
	const struct sg_host_api *host;  /* borrowed, process lifetime */
	const struct rnc_ops *ops;       /* borrowed, static */
	void *ud;                        /* handed to every op */
	char where[200];                 /* "in container 0123456789ab", "on u@h:22" */
	bool faults;                     /* start runners with --fault (tests) */
	unsigned start_ms_max;           /* a stream's STARTED must come within this */

	pthread_mutex_t lock;            /* one start at a time; guards the rest */
	enum rnc_state state;
	struct rn_conn *conn;            /* the opener's reference, or NULL */
	char path[1024];                 /* the runner's path at the site */
	char why[640];                   /* why FALLBACK, or how the last one ended */
	unsigned restarts;
	long long start_ms;              /* how long the last start took */
	unsigned slow_starts;            /* starts in a row that timed out */
	unsigned long long file_ops;     /* file operations answered (status) */
	bool sweep;                      /* a write broke with its runner: the next
					    operation sweeps its directory first (or
					    a write there by its flag) */
	char sweep_dir[1024];            /* that write's directory */
	unsigned sweep_gen;              /* bumped by each mark: an older sweep's
					    answer does not end a newer mark */
	struct rn_req *overdue;          /* a timed-out command answered before its
					    EXIT (a reference), or NULL */
	struct rn_conn *overdue_conn;    /* its connection (a reference) */
	long long overdue_by;            /* no EXIT by then (ms): the runner is stuck */
};

/* Sets s up: where ("in container X") words messages; on false makes the
 * site RNC_OFF (commands use ops->plain); faults from the test hook
 * SANDGATE_RUNNER_FAULTS=1, read by the plugin. */
void rnc_site_init(struct rnc_site *s, const struct sg_host_api *host,
		   const struct rnc_ops *ops, void *ud, const char *where, bool on,
		   bool faults);
/* Ends the runner (it sees EOF, kills what still runs and exits) and frees
 * what s holds.  The struct itself is the caller's. */
void rnc_site_fini(struct rnc_site *s);
/* Ends the current runner now, if any (the next call starts a new one). */
void rnc_site_stop(struct rnc_site *s);

/* A command answered as timed out before the runner reported its end (q on
 * c, both borrowed; the site takes references): if no EXIT has come
 * after_ms from now, the next use of the site (rnc_site_get) ends that
 * runner and kills the command's group, so a frozen runner is replaced, as
 * one whose connection broke, and what its connection held is freed.  One
 * such command is watched at a time. */
void rnc_site_overdue(struct rnc_site *s, struct rn_conn *c, struct rn_req *q, unsigned after_ms);

/* The site uses the plugin's plain path from now on, for `why` (shown by
 * status), unless a runner already ran there or configuration turned it
 * off.  For a place the runner cannot serve that the plugin knows of at
 * once (a container whose commands need another shell than /bin/sh). */
void rnc_site_fallback(struct rnc_site *s, const char *why);

/* How many times the site's runner was started again (what ran in the one
 * before, kernels too, ended with it). */
unsigned rnc_site_restarts(struct rnc_site *s);

/* A working connection, started (or restarted) on demand.  Returns 0 with
 * a reference in *out (rn_conn_put), 1 when the site uses the plugin's
 * plain path (off, or the runner cannot run there), -1 with err. */
int rnc_site_get(struct rnc_site *s, struct rn_conn **out, struct sg_err *err);

/* The site's connection when a runner runs now, never starting one:
 * 0 with a reference in *out (rn_conn_put), 1 when none runs. */
int rnc_site_peek(struct rnc_site *s, struct rn_conn **out);

/* A connection of s broke: when it is still the site's, it is closed now
 * (its runner sees EOF and ends what it still runs) and the next call
 * starts a new one, rather than waiting for that call. */
void rnc_site_drop(struct rnc_site *s, struct rn_conn *c);

/* The site's runner state as JSON: runner (active, fallback, off, not
 * started), connected, path, reason, restarts, start_ms, and pid, build_id,
 * arch while connected.  A new reference, or NULL (out of memory). */
json_t *rnc_site_status(struct rnc_site *s);

/* ---- commands ------------------------------------------------------------------ */

/* One command.  Exactly one of command (run as /bin/sh -c) and argv. */
struct rnc_cmd {
	const char *command;
	const char *const *argv;
	const char *const *env;   /* "K=V", NULL-terminated, or NULL */
	const char *cwd;          /* required */
	unsigned timeout_ms;      /* 0: none */
	size_t cap;               /* bytes kept per stream; 0: SG_OUTPUT_CAP_DEFAULT */
};

/* Runs c through the site's runner and fills res like a plugin's exec slot:
 * 0 when it ran (any exit status, a timeout too; a program that cannot be
 * run exits 127 or 126 with the shell's kind of message); -1 with err:
 * SG_E_NOTFOUND (the cwd cannot be entered), SG_E_CANCELLED (the group was
 * killed first), SG_E_IO or SG_E_UNAVAILABLE (the runner or the site went
 * away under it); 1 when the site has no runner (use the plain path).  A
 * command that surely never started is tried once more on a new runner. */
int rnc_exec(struct rnc_site *s, const struct rnc_cmd *c, const struct sg_call *call,
	     struct sg_exec_result *res, struct sg_err *err);

/* ---- streams ------------------------------------------------------------------- */

/* An interactive stream through the runner: stdin open, output merged, and
 * with status_fd 3..9 a status channel.  Owned by the caller from
 * rnc_stream_open() to rnc_stream_close(). */
struct rnc_stream;

/* Returns 0 with *out, -1 with err (SG_E_NOTFOUND: the cwd), or 1 when the
 * site has no runner.  c->timeout_ms and c->cap are not used. */
int rnc_stream_open(struct rnc_site *s, const struct rnc_cmd *c, int status_fd,
		    struct rnc_stream **out, struct sg_err *err);
/* As the stream slots: write returns n or -1 (SG_E_GONE: the process ended);
 * read returns bytes, 0 at the end, or -1 (SG_E_TIMEOUT when nothing came
 * within timeout_ms, < 0: wait forever); *channel (may be NULL) gets
 * SG_STREAM_OUTPUT or SG_STREAM_STATUS. */
ssize_t rnc_stream_write(struct rnc_stream *st, const void *p, size_t n, struct sg_err *err);
ssize_t rnc_stream_read(struct rnc_stream *st, void *p, size_t n, int timeout_ms,
			int *channel, struct sg_err *err);
/* Closes stdin, waits a moment for the end (else kills the group), frees st.
 * Returns the exit code, 128 + signal, or -1 when unknown.  NULL: -1. */
int rnc_stream_close(struct rnc_stream *st);

/* ---- file operations (capability "files", see doc/runner-protocol.md) ------------ */

/* Each runs inside the site, as its runner's user, on the path as the
 * site's processes see it, and returns 0, -1 with err, or 1 when the site
 * has no runner or its runner lacks the capability (use another way).
 * root (borrowed; NULL: none) is a directory the operation must keep to:
 * what it touches (the path, links followed; for stat, remove and rename
 * the directory the name is in; for a write the directory of the file it
 * replaces, a link at path followed) must lead beneath root, checked by
 * the runner in the same round trip (capability "files-beneath"), else
 * SG_E_PERM naming where the path leads.  For a sandbox without a jail of
 * its own (its commands are not kept in, so this keeps the file tools to
 * its directory; it is no barrier against its own processes).
 * Errors: SG_E_NOTFOUND, SG_E_PERM, SG_E_EXISTS, SG_E_INVAL (a directory
 * where a file is wanted, or the other way), SG_E_TOOBIG, SG_E_IO. */

/* Reads up to max bytes of path from offset into out (appended), in bounded
 * chunks straight into out (no other copy of the bytes); SG_E_TOOBIG when
 * the file holds more than max bytes from offset and whole is set (a file
 * to read whole).  A file replaced while it is read is read again from
 * offset, so out never mixes two versions.  On failure out is back at its
 * old length. */
int rnc_file_read(struct rnc_site *s, const char *root, const char *path, uint64_t offset,
		  size_t max, bool whole, const struct sg_call *call, struct sg_buf *out,
		  struct sg_err *err);
/* Up to len bytes of path from offset into out (appended), as rnc_file_read
 * without whole; *size gets the file's size as read (0 on failure).  For a
 * page of a large file. */
int rnc_file_read_at(struct rnc_site *s, const char *root, const char *path, uint64_t offset,
		     size_t len, const struct sg_call *call, struct sg_buf *out, uint64_t *size,
		     struct sg_err *err);
/* Replaces path atomically with data (a temporary file in the same
 * directory, fsync, rename): an existing file keeps its mode and owner, a
 * new one gets mode (0: 0644); missing parents are made when mkdir. */
int rnc_file_write(struct rnc_site *s, const char *root, const char *path, const void *data,
		   size_t len, uint32_t mode, bool mkdir, const struct sg_call *call,
		   struct sg_err *err);
/* lstat of path. */
int rnc_file_stat(struct rnc_site *s, const char *root, const char *path,
		  const struct sg_call *call, struct sg_stat *st, struct sg_err *err);
/* One level of directory path, sorted by name: *entries gets a new array of
 * {name, path, type, size, mode, mtime} (the caller's reference). */
int rnc_file_list(struct rnc_site *s, const char *root, const char *path,
		  const struct sg_call *call, json_t **entries, struct sg_err *err);
/* Makes directory path (mode 0: 0755), parents too when parents. */
int rnc_file_mkdir(struct rnc_site *s, const char *root, const char *path, uint32_t mode,
		   bool parents, const struct sg_call *call, struct sg_err *err);
/* Removes a file, a link, an empty directory, or with recursive a tree
 * (never following links). */
int rnc_file_remove(struct rnc_site *s, const char *root, const char *path, bool recursive,
		    const struct sg_call *call, struct sg_err *err);
/* Renames from to to (rename(2): replaces a file at `to`). */
int rnc_file_rename(struct rnc_site *s, const char *root, const char *from, const char *to,
		    const struct sg_call *call, struct sg_err *err);
#endif /* SG_RUNNER_RCLIENT_H */
