/*
 * The machine registry: every machine this process holds, whichever backend
 * made it, with its owner, lifetime and last use, backed by the machine
 * record (core/registry/record.h) that every sandgate process of the user shares.
 * One registry serves both tool families (machine.c; expiry and the sweep
 * of machines whose record was lost in sweep.c).  Also the one dispatch
 * wrapper per backend operation (dispatch.c): only the registry calls a
 * plugin's machine slots.
 *
 * Visibility (security), the same on every backend: a session sees its own
 * ephemeral sandboxes, the persistent machines of its credential, and the
 * operator's shared machines ([server] shared_machines).  An explicit id
 * this process does not hold is looked up in the record: a sandbox whose
 * sandgate is gone (`sandgate call --keep`, a crash) is adopted by a
 * session of the same credential until it expires; one whose sandgate is
 * alive, or of another credential, is "not found", with no hint that it
 * exists.
 */
#ifndef SG_CORE_MACHINE_H
#define SG_CORE_MACHINE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <sandgate/plugin.h>

#include "core/base/util.h"

struct sg_call;
struct sg_plugin;
struct sg_session;

struct sg_entry {
	struct sg_machine m;    /* first: the host API finds the entry from &m */
	struct sg_plugin *plugin;
	bool bound;             /* create or attach succeeded: release it */
	char *str[4];           /* the strings of m (enum sg_machine_field), owned */
	char session_hash[17];  /* creating session, "" for adopted orphans */
	char cred[96];          /* credential key of the creator */
	bool quota_held;        /* holds one of cred's [server] quota_sandboxes (reg lock) */
	bool ephemeral;         /* destroyed with its session or at expiry */
	bool adopted;           /* its sandgate died; ours until it expires */
	unsigned lifetime_s;    /* idle lifetime; 0: none */
	int64_t created;        /* unix seconds */
	_Atomic int64_t last_used; /* unix seconds */
	_Atomic int64_t last_saved; /* last_used as written to the record */
	atomic_int inflight;    /* slot calls running on it (core/registry/dispatch.c) */
	int refs;               /* registry's + borrowers' (guarded by the registry lock) */
	bool dead;              /* destroyed or being destroyed */
	char name[SG_ID_MAX];   /* persistent machine name, "" when none */
	char purpose[128];      /* what the machine is for (sandbox_env), "" when none */
	char **env;             /* create-time "KEY=VALUE" vector, or NULL; owned */
	json_t *kept;           /* what the plugin kept (host->machine_keep), or NULL */
	json_t *report;         /* what the plugin reported (host->machine_report), or NULL */
	struct sg_entry *next;
};

/* Ties the registry to the sessions: a session's end destroys its
 * ephemeral machines.  Once, before the first session. */
void sg_machine_init(void);

/* Makes a sandbox on `backend` (NULL: the default backend, see
 * sg_plugin_default()) for session s and records it.  Returns 0 and a
 * reference in *out (release with sg_machine_put()), or -1 with err. */
int sg_machine_create(struct sg_session *s, const char *backend,
		      const struct sg_create_req *req, struct sg_call *call,
		      struct sg_entry **out, struct sg_err *err);

/* A persistent machine named req->name on `backend` (NULL: the default)
 * for the credential of s, as sandbox_env machine_create makes it;
 * `purpose` may be NULL.  SG_E_EXISTS when s already reaches a machine of
 * that name.  Returns 0 and a reference in *out, or -1 with err. */
int sg_machine_create_persistent(struct sg_session *s, const char *backend,
				 const struct sg_create_req *req, const char *purpose,
				 struct sg_call *call, struct sg_entry **out,
				 struct sg_err *err);

/* {name, status, backend, sandbox_id, workspace} of a persistent machine,
 * the result of machine_create.  New reference. */
json_t *sg_machine_summary(const struct sg_entry *e);

/* Finds a machine visible to s by id, persistent name, or an unambiguous
 * id prefix of at least 8 characters, in the registry and then in the
 * record (see the top of this file).  Returns a reference, or NULL with
 * SG_E_NOTFOUND (or SG_E_INVAL for an ambiguous prefix) in err. */
struct sg_entry *sg_machine_get(struct sg_session *s, const char *id, struct sg_err *err);

/* Whether session s may see machine e (its own, its credential's, a shared
 * one), e being alive: the check sg_machine_get() makes, for an entry the
 * caller holds (a shell's).  Lookup by e's id would not do: a persistent
 * name may equal it. */
bool sg_machine_visible(const struct sg_entry *e, const struct sg_session *s);

/* Every machine visible to s but adopted orphans (addressable by id only),
 * oldest first, each a reference: *out is a new array (free() it after
 * sg_machine_put() on each).  Persistent machines of s's credential that
 * another process made are bound first.  Returns the count. */
size_t sg_machine_list_visible(struct sg_session *s, struct sg_entry ***out);

/* Called with each machine just before it is destroyed (kill, expiry,
 * session end) and for host->shells_close, so per-machine state such as
 * shells ends first.  One hook. */
void sg_machine_set_shells_hook(void (*fn)(struct sg_entry *e));

/* Sets what a machine is for (sandbox_env); a persistent machine's record
 * is updated too. */
void sg_machine_set_purpose(struct sg_entry *e, const char *purpose);

/* How results name a machine: its name, else its id.  Borrowed from e. */
const char *sg_machine_label(const struct sg_entry *e);

/* Takes another reference on e (the caller already holds one). */
void sg_machine_ref(struct sg_entry *e);

/* Drops a reference; the last one frees the entry (releasing the plugin's
 * handle, not destroying the machine). */
void sg_machine_put(struct sg_entry *e);

/* Records a use: expiry becomes now + lifetime (and pushes the backend's
 * own expiry when it has one). */
void sg_machine_touch(struct sg_entry *e);

/* A use of e from begin to end (each begin has one end, on the same
 * entry): e does not expire meanwhile, and both record a use
 * (sg_machine_touch).  The sg_m_* wrappers do this around every slot call;
 * a call that waits on a machine otherwise (a persistent shell's command)
 * does it itself. */
void sg_machine_use_begin(struct sg_entry *e);
void sg_machine_use_end(struct sg_entry *e);

/* Destroys the machine, its shells and its record, and unregisters it.
 * Consumes the caller's reference on every path.  Returns 0 or -1 with err. */
int sg_machine_kill(struct sg_entry *e, struct sg_call *call, struct sg_err *err);

/* sg_machine_kill() on behalf of session s (NULL: the server itself), which
 * may remove only what its credential made: a machine another credential
 * made that s sees because [server] shared_machines (or [default_machine])
 * opens it is usable, not removable (SG_E_PERM, naming it as the caller
 * did: label).  Consumes the caller's reference on every path. */
int sg_machine_kill_by(struct sg_session *s, struct sg_entry *e, const char *label,
		       struct sg_call *call, struct sg_err *err);

/* Destroys every ephemeral machine of session s (session end). */
void sg_machine_session_end(struct sg_session *s);

/* Startup of a server: machines whose record was lost (a crash between
 * create and record) are found through each backend's machine_list and
 * removed when their sandgate is gone and their lifetime passed; expired
 * orphans of the record are reaped. */
void sg_machine_sweep_lost(void);

/* Runs sg_machine_sweep_lost() on a thread of its own, so a server
 * serves while backends are listed; sg_machine_sweep_join() waits for it
 * (before the plugins are unloaded).  Returns 0 or -1. */
int sg_machine_sweep_async(void);
void sg_machine_sweep_join(void);
/* Joins the sweep's thread when it has ended, never waiting (a stop that
 * ends the process at once: a finished thread is not left unjoined).  Any
 * thread: it skips a join in progress. */
void sg_machine_sweep_reap(void);

/* Writes the last use of each machine used since the last time to the
 * record, where a process adopting it after this one died finds it.  The
 * reaper calls it once a second, so that no call waits on the db. */
void sg_machine_save_touches(void);

/* Destroys every ephemeral machine whose expiry passed, those this process
 * holds and the recorded ones of dead sandgate processes.  Returns how
 * many. */
int sg_machine_reap_expired(void);

/* Releases every handle without destroying machines (process exit). */
void sg_machine_release_all(void);

/* True when (backend, id) can be reached by id from a later process: it
 * has a record.  `sandgate call --keep` says "kept" only then. */
bool sg_machine_recorded(const struct sg_entry *e);

/* This process's owner label "host:pid:starttime".  Borrowed. */
const char *sg_machine_owner_label(void);

/* True when the process named by an owner label is alive (or on another
 * host, where sandgate cannot tell). */
bool sg_machine_owner_alive(const char *label);

/* A machine the backend says is gone (SG_E_GONE): it leaves the registry
 * and the record, so no one addresses it again.  The caller holds a
 * reference. */
void sg_machine_forget(struct sg_entry *e);

/* Host API entries (see struct sg_host_api). */
int sg_machine_host_set(struct sg_machine *m, enum sg_machine_field field, const char *fmt, ...)
	SG_PRINTF(3, 4);
int sg_machine_host_keep(struct sg_machine *m, const json_t *data);
int sg_machine_host_report(struct sg_machine *m, const json_t *facts);
int sg_machine_host_create(struct sg_call *call, const struct sg_backend *self,
			   const struct sg_create_req *req, const char *purpose, json_t **result,
			   struct sg_err *err);
int sg_machine_host_remove(struct sg_call *call, struct sg_machine *m, struct sg_err *err);
void sg_machine_host_shells_close(struct sg_machine *m);
json_t *sg_machine_host_list(struct sg_call *call, const struct sg_backend *self);

/* Dispatch wrappers: check the entry, map a missing optional slot to
 * SG_E_NOTSUP, put the machine's create-time environment in front of the
 * request's, make sure a failure filled err, and record the use. */
int sg_m_exec(struct sg_entry *e, const struct sg_exec_req *req, struct sg_call *call,
	      struct sg_exec_result *res, struct sg_err *err);
int sg_m_file_read(struct sg_entry *e, const char *path, size_t max, struct sg_call *call,
		   struct sg_buf *out, struct sg_err *err);
/* [offset, offset + len) of path into out, *size the file's size;
 * SG_E_NOTSUP when the backend or machine reads only whole files. */
int sg_m_file_read_at(struct sg_entry *e, const char *path, uint64_t offset, size_t len,
		      struct sg_call *call, struct sg_buf *out, uint64_t *size, struct sg_err *err);
int sg_m_file_write(struct sg_entry *e, const char *path, const void *data, size_t len,
		    const struct sg_write_opts *opts, struct sg_call *call, struct sg_err *err);
int sg_m_file_list(struct sg_entry *e, const char *path, struct sg_call *call,
		   json_t **entries, struct sg_err *err);
int sg_m_file_stat(struct sg_entry *e, const char *path, struct sg_call *call,
		   struct sg_stat *st, struct sg_err *err);
int sg_m_file_remove(struct sg_entry *e, const char *path, bool recursive, struct sg_call *call,
		     struct sg_err *err);
/* Persistent shells: the plugin's stream slots (SG_E_NOTSUP without). */
int sg_m_stream_open(struct sg_entry *e, const struct sg_exec_req *req,
		     struct sg_stream **out, struct sg_err *err);
ssize_t sg_m_stream_write(struct sg_entry *e, struct sg_stream *st, const void *p, size_t n,
			  struct sg_err *err);
/* Does not count as a use: a shell's reader polls it all the time. */
ssize_t sg_m_stream_read(struct sg_entry *e, struct sg_stream *st, void *p, size_t n,
			 int timeout_ms, struct sg_err *err);
int sg_m_stream_close(struct sg_entry *e, struct sg_stream *st, int *exit_code);
/* A stream whose process also has `status_fd` open on a channel of its own.
 * SG_E_NOTSUP when the backend lacks the slots or this machine cannot do it
 * now (Docker without its runner): use sg_m_stream_open.  Write and close
 * it with the wrappers above. */
int sg_m_stream_open_status(struct sg_entry *e, const struct sg_exec_req *req, int status_fd,
			    struct sg_stream **out, struct sg_err *err);
/* As sg_m_stream_read, each call returning bytes of one channel, named in
 * *channel (enum sg_stream_channel).  Not a use either. */
ssize_t sg_m_stream_read_ch(struct sg_entry *e, struct sg_stream *st, void *p, size_t n,
			    int timeout_ms, int *channel, struct sg_err *err);
int sg_m_run_code(struct sg_entry *e, const struct sg_code_req *req, struct sg_call *call,
		  struct sg_code_result *res, struct sg_err *err);

#endif
