/*
 * local.so internals: sandboxes on this host, each a bubblewrap jail over
 * its own directory with sandgate-runner as its first process.
 *
 *   local.c    descriptor, init/fini, configuration, probe
 *   machine.c  create, attach, destroy, release, list; owner tag files
 *   jail.c     the jail: bwrap's arguments, starting it as the sandbox
 *              user, its keeper thread, ending it (the runner client's ops)
 *   limits.c   cgroups (v2, or the v1 pids and memory controllers) and
 *              rlimits
 *   slots.c    exec, streams and files: the one runner client's calls
 *   spare.c    sandboxes made ahead of create_sandbox, their jail running
 *   beneath.c  the host side of a sandbox directory: resolving beneath it
 *              in one step, removing it without following links
 */
#ifndef SG_LOCAL_LOCAL_H
#define SG_LOCAL_LOCAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <sandgate/plugin.h>

#include "plugins/runner/binary.h"
#include "plugins/runner/rclient.h"
#include "plugins/runner/rcode.h"

#define LOCAL_PLUGIN    "local"
#define LOCAL_WORKSPACE "/workspace"
#define LOCAL_RUNNER_AT "/.sandgate-runner" /* the runner's path in the jail */
#define LOCAL_PATH_MAX  4096
#define LOCAL_ID_MAX    64

/* Limits of one jail.  0 means none. */
struct local_limits {
	unsigned long pids;          /* cgroup pids.max (else RLIMIT_NPROC of the user) */
	unsigned long memory_mb;     /* cgroup memory.max */
	unsigned long cpu_seconds;   /* RLIMIT_CPU, per process */
	unsigned long as_mb;         /* RLIMIT_AS, per process */
	unsigned long open_files;    /* RLIMIT_NOFILE, per process */
	unsigned long tmp_mb;        /* size of the jail's /tmp tmpfs */
	unsigned long shm_mb;        /* size of the jail's /dev/shm tmpfs */
};

/* Where sandgate may make cgroups, found once (limits.c). */
enum local_cg_kind { LOCAL_CG_NONE = 0, LOCAL_CG_V2, LOCAL_CG_V1 };

struct local_cgroups {
	enum local_cg_kind kind;
	char v2_base[LOCAL_PATH_MAX];    /* v2: the parent of the jails' cgroups */
	char pids_base[LOCAL_PATH_MAX];  /* v1: the parents in each controller */
	char mem_base[LOCAL_PATH_MAX];
	char why[400];                   /* NONE: why not */
};

/* The plugin's priv: made by init(), freed by fini().  Read-only after init
 * except what the locks guard. */
struct local_ctx {
	const struct sg_host_api *host;  /* borrowed, process lifetime */
	char root[LOCAL_PATH_MAX];       /* [local] root: the sandbox directories */
	char bwrap[LOCAL_PATH_MAX];      /* [local] bwrap, as configured ("bwrap") */
	bool network_host;               /* [local] network = host */
	char user[64];                   /* [local] user, resolved: the jail's */
	uid_t uid;                       /* its host uid and gid */
	gid_t gid;
	bool switch_user;                /* sandgate is root: jails run as uid */
	char user_why[300];              /* why the user cannot be used, or "" */
	struct local_limits lim;
	bool faults;                     /* SANDGATE_RUNNER_FAULTS=1: tests only */

	pthread_mutex_t lock;            /* guards what follows */
	bool bin_tried;
	struct rn_binary bin;            /* the runner, read once; freed by fini */
	char bin_why[300];
	bool cg_tried;
	struct local_cgroups cg;         /* found once (limits.c) */
	unsigned jail_seq;               /* names the jails' cgroups */

	struct local_spare *spare;       /* spare.c, owned; NULL: none (set by
					    init, cleared by fini) */
};

/* One jail: a bwrap process and its keeper thread (jail.c). */
struct local_jail;

/* m->handle: made by create()/attach(), freed by machine_release(). */
struct local_machine {
	struct local_ctx *ctx;           /* borrowed */
	char id[LOCAL_ID_MAX];
	char dir[LOCAL_PATH_MAX];        /* the sandbox directory on this host */
	struct rnc_site site;            /* its runner: the jail's first process */
	struct local_jail *jail;         /* the current jail (guarded by the site's
					    lock: its ops run under it), or NULL */
	struct rnc_kstate code;          /* its kernels' runners (code.c) */
};

/* ---- local.c ----------------------------------------------------------------- */

/* The machine's handle, or NULL with err. */
struct local_machine *local_machine_of(const struct sg_machine *m, struct sg_err *err);
/* Reads the runner binary once.  0, or -1 with err naming the fix. */
int local_runner_binary(struct local_ctx *ctx, struct sg_err *err);
sg_probe_fn local_probe;

/* ---- code.c ------------------------------------------------------------------- */

/* run_code on the sandbox's runner kernels (python, javascript); other
 * languages are SG_E_NOTSUP (the core runs them once with exec). */
sg_run_code_fn local_run_code;

/* ---- jail.c ------------------------------------------------------------------- */

/* The runner client's ops for a sandbox's site (ud: struct local_machine). */
extern const struct rnc_ops local_site_ops;
/* Ends lm's jail, if any, and every process in it; waits for its keeper. */
void local_jail_end(struct local_machine *lm);
/* Runs `bwrap <the jail's options> -- /usr/bin/true` as the sandbox user:
 * 0 when this host can make jails, -1 with err naming the fix. */
int local_jail_check(struct local_ctx *ctx, unsigned timeout_ms, struct sg_err *err);
/* The facts of lm's jail for create_sandbox's details: a new object. */
json_t *local_jail_facts(struct local_ctx *ctx);

/* ---- limits.c ----------------------------------------------------------------- */

/* What a jail's limits are made of, found on first use and logged once. */
const struct local_cgroups *local_cgroups(struct local_ctx *ctx);

/* The cgroups of one jail: made before it starts, removed after it ended. */
struct local_cg {
	char v2[LOCAL_PATH_MAX];         /* "" when not made */
	char pids[LOCAL_PATH_MAX];
	char mem[LOCAL_PATH_MAX];
	int procs_fd[2];                 /* cgroup.procs to join, -1 when none */
};

/* Makes the cgroups of a jail named `name` with ctx's limits.  0 (also when
 * the host has none: then procs_fd are -1), -1 with err when making them
 * failed where they should work. */
int local_cg_make(struct local_ctx *ctx, const char *name, struct local_cg *cg,
		  struct sg_err *err);
/* RLIMIT_NPROC for a jail, 0 for none (no pids limit, or a pids cgroup,
 * have_pids_cg, holds it): [local] pids for the sandbox user of a root
 * sandgate; else sandgate's own user's tasks now plus pids (the jails run as
 * that user, who runs other things too).  Before the fork: it reads /proc. */
unsigned long local_nproc_cap(const struct local_ctx *ctx, bool have_pids_cg);
/* In the jail's child before exec, only async-signal-safe calls: joins the
 * cgroups (while their fds are open), and sets the rlimits (after the fds
 * were moved: RLIMIT_NOFILE may be small); nproc: RLIMIT_NPROC, 0 none
 * (local_nproc_cap).  Each returns 0 or -1 (errno). */
int local_cg_join(const struct local_cg *cg);
int local_rlimits_apply(const struct local_ctx *ctx, unsigned long nproc);
/* Kills whatever is left in the cgroups and removes them; closes fds. */
void local_cg_remove(struct local_cg *cg);
/* The limits as JSON for create_sandbox's details: a new object. */
json_t *local_limits_json(struct local_ctx *ctx);

/* ---- machine.c ---------------------------------------------------------------- */

sg_machine_create_fn local_machine_create;

/* For spare.c: a sandbox in steps.  local_sandbox_new() chooses the id,
 * makes the directory and writes the owner tag (owner, persistent,
 * lifetime_s; in local/spares when spare, else local/owners); *out (its
 * jail starts on first use) is the caller's: local_sandbox_bind() gives it
 * to m, local_sandbox_drop() ends its jail, removes the directory and the
 * tag (spare: which one) and frees it.  0 or -1 with err. */
int local_sandbox_new(struct local_ctx *ctx, bool spare, const char *owner, bool persistent,
		      unsigned lifetime_s, struct local_machine **out, struct sg_err *err);
/* Gives m lm's strings, its handle and the jail's facts; 0, or -1 with err
 * (lm stays the caller's, m->handle unset). */
int local_sandbox_bind(struct local_machine *lm, struct sg_machine *m, struct sg_err *err);
void local_sandbox_drop(struct local_machine *lm, bool spare);
/* Removes the directory dir of sandbox id (beneath [local] root only,
 * following no link) and its tag; 0, or -1 with err (may be NULL). */
int local_sandbox_remove(struct local_ctx *ctx, bool spare, const char *id, const char *dir,
			 struct sg_err *err);
/* The directory of owner tags (spare: of spares), made when missing; 0 or
 * -1 (errno). */
int local_tag_dir(struct local_ctx *ctx, bool spare, char *out, size_t n);
/* Writes the owner tag of sandbox id in dir (created: now) atomically, with
 * an fsync; 0 or -1 (errno). */
int local_tag_write(struct local_ctx *ctx, bool spare, const char *id, const char *dir,
		    const char *owner, bool persistent, unsigned lifetime_s);
sg_machine_attach_fn local_machine_attach;
sg_machine_destroy_fn local_machine_destroy;
sg_machine_release_fn local_machine_release;
sg_machine_list_fn local_machine_list;

/* ---- spare.c ------------------------------------------------------------------ */

struct local_spare;

/* In a server (host->server), reads [local] spare and starts the thread
 * that removes the spares of sandgates that are gone and keeps N ready.
 * 0, or -1 with err (no thread). */
int local_spare_start(struct local_ctx *ctx, struct sg_err *err);
/* Stops the thread and removes every spare still ready. */
void local_spare_stop(struct local_ctx *ctx);
/* Gives m a ready spare when req fits one (no persistent machine, no create
 * options): 0 (m filled, its handle set, its runner running; its tag now an
 * ordinary owner tag), 1 when none was taken (m untouched). */
int local_spare_take(struct local_ctx *ctx, const struct sg_create_req *req,
		     struct sg_machine *m);
/* For status: in a server {size, ready, hits, misses}, else {size,
 * spares_now: spares of running sandgates in this state directory, -1
 * unknown}.  A new object. */
json_t *local_spare_facts(struct local_ctx *ctx);

/* ---- slots.c ------------------------------------------------------------------ */

sg_exec_fn local_exec;
sg_stream_open_fn local_stream_open;
sg_stream_write_fn local_stream_write;
sg_stream_read_fn local_stream_read;
sg_stream_close_fn local_stream_close;
sg_stream_open_status_fn local_stream_open_status;
sg_stream_read_ch_fn local_stream_read_ch;
sg_file_read_fn local_file_read;
sg_file_read_at_fn local_file_read_at;
sg_file_write_fn local_file_write;
sg_file_list_fn local_file_list;
sg_file_stat_fn local_file_stat;
sg_file_remove_fn local_file_remove;

/* ---- beneath.c ---------------------------------------------------------------- */

/* Opens path (relative, resolved beneath the directory dirfd in one step:
 * no "..", link or mount point may lead out of it) with flags; O_NOFOLLOW
 * applies to the last component.  openat2(RESOLVE_BENEATH |
 * RESOLVE_NO_MAGICLINKS), or, where the kernel lacks it, a walk of O_PATH
 * opens with O_NOFOLLOW that refuses "..".  Returns the fd or -1 (errno;
 * EXDEV or ELOOP for a path that would leave). */
int local_open_beneath(int dirfd, const char *path, int flags, mode_t mode);
/* Removes the directory `name` in parent directory pfd with all it holds,
 * never following links; 0 or -1 (errno). */
int local_remove_tree(int pfd, const char *name);

#endif /* SG_LOCAL_LOCAL_H */
