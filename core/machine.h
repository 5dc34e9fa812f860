/*
 * The machine registry: every sandbox this process knows, whichever backend
 * made it, with its owner, lifetime and last use.  One registry serves both
 * tool families.  Also the one dispatch wrapper per backend operation: only
 * this file calls a plugin's machine slots.
 *
 * Visibility (security): a session sees its own ephemeral sandboxes, the
 * persistent machines of its credential, and the operator's shared machines
 * ([server] shared_machines); over stdio also the orphans of dead sandgate
 * processes of the same user, until they expire.  Anything else is "not
 * found", with no hint that it exists.
 */
#ifndef SG_CORE_MACHINE_H
#define SG_CORE_MACHINE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <sandgate/plugin.h>

struct sg_call;
struct sg_plugin;
struct sg_session;

struct sg_entry {
	struct sg_machine m;
	struct sg_plugin *plugin;
	char session_hash[17];  /* creating session, "" for adopted orphans */
	char owner[96];         /* credential key of the creator */
	bool ephemeral;         /* destroyed with its session or at expiry */
	bool adopted;           /* found at startup, owner process dead */
	unsigned lifetime_s;    /* idle lifetime; 0: none */
	int64_t created;        /* unix seconds */
	_Atomic int64_t last_used; /* unix seconds */
	_Atomic int64_t last_saved; /* last_used as written to the state db */
	int refs;               /* registry's + borrowers' (guarded by the registry lock) */
	bool dead;              /* destroyed or being destroyed */
	char name[SG_ID_MAX];   /* persistent machine name, "" when none */
	char purpose[128];      /* what the machine is for (sandbox_env), "" when none */
	struct sg_entry *next;
};

/* Makes a sandbox on `backend` (NULL: [sandbox] default_backend) for session
 * s and registers it.  Returns 0 and a reference in *out (release with
 * sg_machine_put()), or -1 with err. */
int sg_machine_create(struct sg_session *s, const char *backend,
		      const struct sg_create_req *req, struct sg_call *call,
		      struct sg_entry **out, struct sg_err *err);

/* Finds a machine visible to s by id (or an unambiguous prefix of at least 8
 * characters).  Returns a reference or NULL with SG_E_NOTFOUND. */
struct sg_entry *sg_machine_get(struct sg_session *s, const char *id, struct sg_err *err);

/* Every machine visible to s but adopted orphans (addressable by id only),
 * oldest first, each a reference: *out is a
 * new array (free() it after sg_machine_put() on each).  Returns the count. */
size_t sg_machine_list_visible(struct sg_session *s, struct sg_entry ***out);

/* Called with each machine just before it is destroyed (kill, expiry,
 * session end), so per-machine state such as shells ends first.  One hook. */
void sg_machine_set_destroy_hook(void (*fn)(struct sg_entry *e));

/* Sets what a machine is for (sandbox_env); a persistent machine's record
 * is updated too. */
void sg_machine_set_purpose(struct sg_entry *e, const char *purpose);

/* Takes another reference on e (the caller already holds one). */
void sg_machine_ref(struct sg_entry *e);

/* Drops a reference; the last one frees the entry (releasing the plugin's
 * handle, not destroying the machine). */
void sg_machine_put(struct sg_entry *e);

/* Records a use: expiry becomes now + lifetime (and pushes the backend's
 * own expiry when it has one). */
void sg_machine_touch(struct sg_entry *e);

/* Destroys the machine and unregisters it.  Consumes the caller's
 * reference on every path.  Returns 0 or -1 with err. */
int sg_machine_kill(struct sg_entry *e, struct sg_call *call, struct sg_err *err);

/* Destroys every ephemeral machine of session s (session end). */
void sg_machine_session_end(struct sg_session *s);

/* Startup: for each backend that lists machines, leaves alone those whose
 * owner process is alive, destroys those of dead owners whose expiry passed,
 * and adopts the rest (addressable by explicit id until they expire). */
void sg_machine_adopt_orphans(void);

/* Runs fn (loading backends, adopting orphans) on a thread of its own, so
 * the first protocol messages are answered before backends are up; machine
 * lookups and creations wait until fn returned.  Returns 0 or -1.
 * sg_machine_start_join() waits for the thread. */
int sg_machine_start_async(void (*fn)(void));
void sg_machine_start_join(void);
/* Blocks until that startup function returned (at once when none runs), so
 * a caller that lists the loaded plugins sees all of them. */
void sg_machine_wait_ready(void);

/* Writes the last use of each ephemeral machine used since the last time
 * to the state db (sg_state_touch), where a process adopting it after this
 * one died finds it.  The reaper calls it once a second, so that no call
 * waits on the db. */
void sg_machine_save_touches(void);

/* Destroys every ephemeral machine whose expiry passed.  Returns how many. */
int sg_machine_reap_expired(void);

/* Releases every handle without destroying machines (process exit). */
void sg_machine_release_all(void);

/* This process's owner label "host:pid:starttime".  Borrowed. */
const char *sg_machine_owner_label(void);

/* True when the process named by an owner label is alive (or on another
 * host, where sandgate cannot tell). */
bool sg_machine_owner_alive(const char *label);

/* Dispatch wrappers: check the entry, map a missing optional slot to
 * SG_E_NOTSUP, make sure a failure filled err, and record the use. */
int sg_m_exec(struct sg_entry *e, const struct sg_exec_req *req, struct sg_call *call,
	      struct sg_exec_result *res, struct sg_err *err);
int sg_m_file_read(struct sg_entry *e, const char *path, size_t max, struct sg_call *call,
		   struct sg_buf *out, struct sg_err *err);
int sg_m_file_write(struct sg_entry *e, const char *path, const void *data, size_t len,
		    const struct sg_write_opts *opts, struct sg_call *call, struct sg_err *err);
int sg_m_file_list(struct sg_entry *e, const char *path, struct sg_call *call,
		   json_t **entries, struct sg_err *err);
/* Persistent shells: the plugin's stream slots (SG_E_NOTSUP without). */
int sg_m_stream_open(struct sg_entry *e, const struct sg_exec_req *req,
		     struct sg_stream **out, struct sg_err *err);
ssize_t sg_m_stream_write(struct sg_entry *e, struct sg_stream *st, const void *p, size_t n,
			  struct sg_err *err);
/* Does not count as a use: a shell's reader polls it all the time. */
ssize_t sg_m_stream_read(struct sg_entry *e, struct sg_stream *st, void *p, size_t n,
			 int timeout_ms, struct sg_err *err);
int sg_m_stream_close(struct sg_entry *e, struct sg_stream *st, int *exit_code);
/* A stream whose process also has `status_fd` open on a channel of its own
 * (ABI 1.1).  SG_E_NOTSUP when the backend lacks the slots or this machine
 * cannot do it now (Docker without its runner): use sg_m_stream_open.
 * Write and close it with the wrappers above. */
int sg_m_stream_open_status(struct sg_entry *e, const struct sg_exec_req *req, int status_fd,
			    struct sg_stream **out, struct sg_err *err);
/* As sg_m_stream_read, each call returning bytes of one channel, named in
 * *channel (enum sg_stream_channel).  Not a use either. */
ssize_t sg_m_stream_read_ch(struct sg_entry *e, struct sg_stream *st, void *p, size_t n,
			    int timeout_ms, int *channel, struct sg_err *err);
int sg_m_run_code(struct sg_entry *e, const struct sg_code_req *req, struct sg_call *call,
		  struct sg_code_result *res, struct sg_err *err);

#endif
