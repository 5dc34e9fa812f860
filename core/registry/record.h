/*
 * The machine record: one row per machine, on every backend, in the SQLite
 * file <state dir>/state.db (mode 0600).  It is what lets an explicit
 * sandbox_id reach a machine this process did not make (another `sandgate
 * call`, a restarted server), what ownership is checked against, and where
 * the last use of a machine lives (a container's labels cannot change; an
 * SSH directory has none).  Several sandgate processes of one user share
 * the file (WAL mode and a busy timeout).  Opened on first use, so cold
 * start does not pay for it.
 *
 * The create-time environment is kept here (its values never leave this
 * file and the machine); so is an opaque JSON value per machine that its
 * plugin keeps (host->machine_keep).
 *
 * The first open migrates the records of persistent machines that earlier
 * versions kept in <state dir>/machines.json, then removes that file.
 */
#ifndef SG_CORE_RECORD_H
#define SG_CORE_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

struct sg_record {
	char *backend;       /* plugin name */
	char *id;            /* backend id */
	char *name;          /* persistent machine name, "" when none */
	bool persistent;     /* survives its session */
	char *owner;         /* "host:pid:starttime" of the sandgate that holds it */
	char *session_hash;  /* the creating session's hash, "" when none */
	char *credential;    /* credential key: "local:UID" or "token:DIGEST", never a token */
	char *template_name;
	char *workspace;
	char *url;
	char *purpose;
	int64_t created;     /* unix seconds */
	unsigned lifetime_s; /* idle lifetime, 0: none */
	int64_t last_used;   /* unix seconds */
	char **env;          /* create-time "KEY=VALUE" vector, or NULL */
	json_t *data;        /* the plugin's kept object, or NULL */
};

/* Frees r's strings, vector and JSON, and r itself.  NULL is fine. */
void sg_record_free(struct sg_record *r);
/* Frees n records and the array. */
void sg_record_free_all(struct sg_record **v, size_t n);

/* Inserts or replaces the row of (r->backend, r->id); NULL strings are
 * stored as "".  Returns 0, or -1 (logged) when the database fails. */
int sg_record_put(const struct sg_record *r);
/* Updates one column of (backend, id).  Each returns 0, or -1 (logged). */
int sg_record_touch(const char *backend, const char *id, int64_t last_used);
int sg_record_set_owner(const char *backend, const char *id, const char *owner);
int sg_record_set_purpose(const char *backend, const char *id, const char *purpose);
/* data borrowed; NULL clears it. */
int sg_record_set_data(const char *backend, const char *id, const json_t *data);
/* Forgets (backend, id).  Returns 0, or -1 (logged). */
int sg_record_delete(const char *backend, const char *id);

/* The record of (backend, id), a new one owned by the caller, or NULL when
 * there is none (or the database fails, logged). */
struct sg_record *sg_record_get(const char *backend, const char *id);

/* The records a machine reference `key` may mean: id equal to key, name
 * equal to key, or (key of 8 characters or more) id starting with key.
 * *out gets a new array of new records (sg_record_free_all); returns the
 * count. */
size_t sg_record_find(const char *key, struct sg_record ***out);

/* The machines that are not persistent whose expiry (last use plus
 * lifetime) is at or before `now`, and every persistent machine of
 * `credential` (NULL: of every credential), as sg_record_find. */
size_t sg_record_expired(int64_t now, struct sg_record ***out);
size_t sg_record_persistent(const char *credential, struct sg_record ***out);

/* True when (backend, id) has a record.  A failing database says false. */
bool sg_record_exists(const char *backend, const char *id);

/* Closes the database (process exit, tests). */
void sg_record_close(void);

#endif
