/*
 * The machine record in <state dir>/state.db (see record.h).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "core/registry/hostapi.h"
#include "core/base/log.h"
#include "core/registry/record.h"
#include "core/base/util.h"

static sqlite3 *db;
static bool db_failed;
static pthread_mutex_t db_lock = PTHREAD_MUTEX_INITIALIZER;

/* `sandboxes` was the table of earlier versions (ephemeral sandboxes only,
 * no owner): its machines are found again through machine_list. */
static const char schema[] =
	"PRAGMA journal_mode=WAL;"
	"PRAGMA synchronous=NORMAL;"
	"DROP TABLE IF EXISTS sandboxes;"
	"CREATE TABLE IF NOT EXISTS machines ("
	" backend TEXT NOT NULL, id TEXT NOT NULL, name TEXT NOT NULL DEFAULT '',"
	" persistent INTEGER NOT NULL DEFAULT 0, owner TEXT NOT NULL DEFAULT '',"
	" session_hash TEXT NOT NULL DEFAULT '', credential TEXT NOT NULL DEFAULT '',"
	" template TEXT NOT NULL DEFAULT '', workspace TEXT NOT NULL DEFAULT '',"
	" url TEXT NOT NULL DEFAULT '', purpose TEXT NOT NULL DEFAULT '',"
	" created INTEGER NOT NULL DEFAULT 0, lifetime INTEGER NOT NULL DEFAULT 0,"
	" last_used INTEGER NOT NULL DEFAULT 0, env TEXT, data TEXT,"
	" PRIMARY KEY (backend, id));"
	"CREATE INDEX IF NOT EXISTS machines_name ON machines (name);";

#define COLUMNS \
	"backend, id, name, persistent, owner, session_hash, credential, template, " \
	"workspace, url, purpose, created, lifetime, last_used, env, data"

static void migrate_machines_json(const char *dir);

/* The file is created 0600 before SQLite opens it (it holds environment
 * values and who owns what); SQLite gives its -wal and -shm files the
 * database's mode. */
static int create_private(const char *path)
{
	int fd = sg_file_open_private(path, O_RDWR, true);

	if (fd < 0)
		return -1;
	close(fd);
	return 0;
}

/* Called with db_lock held. */
static sqlite3 *state_db(void)
{
	const char *dir;
	char *path, *msg = NULL;

	if (db || db_failed)
		return db;
	db_failed = true;
	dir = sg_state_dir();
	if (!dir)
		return NULL;
	path = sg_xasprintf("%s/state.db", dir);
	if (create_private(path) < 0) {
		SG_ERROR("cannot create state database '%s': %s", path, strerror(errno));
		free(path);
		return NULL;
	}
	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_FULLMUTEX, NULL) !=
	    SQLITE_OK) {
		SG_ERROR("cannot open state database '%s': %s", path, sqlite3_errmsg(db));
		goto fail;
	}
	sqlite3_busy_timeout(db, 5000);
	if (sqlite3_exec(db, schema, NULL, NULL, &msg) != SQLITE_OK) {
		SG_ERROR("cannot set up state database '%s': %s", path, msg ? msg : "");
		sqlite3_free(msg);
		goto fail;
	}
	db_failed = false;
	free(path);
	migrate_machines_json(dir);
	return db;
fail:
	sqlite3_close(db);
	db = NULL;
	free(path);
	return NULL;
}

/* ---- rows ------------------------------------------------------------------ */

static char *col_text(sqlite3_stmt *st, int i)
{
	const unsigned char *t = sqlite3_column_text(st, i);

	return sg_xstrdup(t ? (const char *)t : "");
}

static char **env_from_json(const char *text)
{
	json_t *a = text && *text ? json_loads(text, 0, NULL) : NULL;
	char **v = NULL;
	size_t n = json_array_size(a), k = 0;

	if (n) {
		v = sg_xcalloc(n + 1, sizeof(*v));
		for (size_t i = 0; i < n; i++) {
			const char *s = json_string_value(json_array_get(a, i));

			if (s)
				v[k++] = sg_xstrdup(s);
		}
	}
	json_decref(a);
	return v;
}

static char *env_to_json(char *const *env)
{
	json_t *a = json_array();
	char *text;

	for (char *const *e = env; e && *e; e++)
		json_array_append_new(a, json_string(*e));
	text = json_dumps(a, JSON_COMPACT);
	json_decref(a);
	if (!text)
		abort();
	return text;
}

static struct sg_record *row(sqlite3_stmt *st)
{
	struct sg_record *r = sg_xcalloc(1, sizeof(*r));
	const unsigned char *data = sqlite3_column_text(st, 15);

	r->backend = col_text(st, 0);
	r->id = col_text(st, 1);
	r->name = col_text(st, 2);
	r->persistent = sqlite3_column_int(st, 3) != 0;
	r->owner = col_text(st, 4);
	r->session_hash = col_text(st, 5);
	r->credential = col_text(st, 6);
	r->template_name = col_text(st, 7);
	r->workspace = col_text(st, 8);
	r->url = col_text(st, 9);
	r->purpose = col_text(st, 10);
	r->created = sqlite3_column_int64(st, 11);
	r->lifetime_s = (unsigned)sqlite3_column_int64(st, 12);
	r->last_used = sqlite3_column_int64(st, 13);
	r->env = env_from_json((const char *)sqlite3_column_text(st, 14));
	r->data = data && *data ? json_loads((const char *)data, 0, NULL) : NULL;
	return r;
}

void sg_record_free(struct sg_record *r)
{
	if (!r)
		return;
	free(r->backend);
	free(r->id);
	free(r->name);
	free(r->owner);
	free(r->session_hash);
	free(r->credential);
	free(r->template_name);
	free(r->workspace);
	free(r->url);
	free(r->purpose);
	sg_strv_free(r->env);
	json_decref(r->data);
	free(r);
}

void sg_record_free_all(struct sg_record **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		sg_record_free(v[i]);
	free(v);
}

/* ---- statements -------------------------------------------------------------- */

/* Binds args by types: 't' text (NULL binds ""), 'i' int64_t *. */
static void bind(sqlite3_stmt *st, const char *types, const void *const *args)
{
	for (int i = 0; types[i]; i++) {
		if (types[i] == 't')
			sqlite3_bind_text(st, i + 1, args[i] ? args[i] : "", -1, SQLITE_STATIC);
		else
			sqlite3_bind_int64(st, i + 1, *(const int64_t *)args[i]);
	}
}

/* Runs a statement that returns no rows.  Returns 0 or -1 (logged). */
static int exec_sql(const char *sql, const char *types, const void *const *args)
{
	sqlite3_stmt *st = NULL;
	int ret = -1;

	pthread_mutex_lock(&db_lock);
	if (!state_db())
		goto out;
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK) {
		bind(st, types, args);
		if (sqlite3_step(st) == SQLITE_DONE)
			ret = 0;
	}
	if (ret < 0)
		SG_WARN("state database: %s", sqlite3_errmsg(db));
out:
	sqlite3_finalize(st);
	pthread_mutex_unlock(&db_lock);
	return ret;
}

/* Runs a query for whole rows.  Returns the count, rows in *out. */
static size_t select_rows(const char *where, const char *types, const void *const *args,
			  struct sg_record ***out)
{
	char *sql = sg_xasprintf("SELECT " COLUMNS " FROM machines WHERE %s ORDER BY created, id",
				 where);
	sqlite3_stmt *st = NULL;
	size_t n = 0, cap = 0;
	int rc;

	*out = NULL;
	pthread_mutex_lock(&db_lock);
	if (!state_db())
		goto out;
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
		SG_WARN("state database: %s", sqlite3_errmsg(db));
		goto out;
	}
	bind(st, types, args);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (n == cap) {
			cap = cap ? 2 * cap : 4;
			*out = sg_xrealloc(*out, cap * sizeof(**out));
		}
		(*out)[n++] = row(st);
	}
	if (rc != SQLITE_DONE)
		SG_WARN("state database: %s", sqlite3_errmsg(db));
out:
	sqlite3_finalize(st);
	pthread_mutex_unlock(&db_lock);
	free(sql);
	return n;
}

int sg_record_put(const struct sg_record *r)
{
	int64_t persistent = r->persistent, created = r->created, life = r->lifetime_s,
		used = r->last_used;
	char *env = env_to_json(r->env);
	char *data = r->data ? json_dumps(r->data, JSON_COMPACT) : NULL;
	const void *args[] = { r->backend, r->id, r->name, &persistent, r->owner, r->session_hash,
			       r->credential, r->template_name, r->workspace, r->url, r->purpose,
			       &created, &life, &used, env, data };
	int ret = exec_sql("INSERT OR REPLACE INTO machines (" COLUMNS ") VALUES "
			   "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
			   "tttitttttttiiitt", args);

	free(env);
	free(data);
	return ret;
}

int sg_record_touch(const char *backend, const char *id, int64_t last_used)
{
	const void *args[] = { &last_used, backend, id };

	return exec_sql("UPDATE machines SET last_used=? WHERE backend=? AND id=?", "itt", args);
}

int sg_record_set_owner(const char *backend, const char *id, const char *owner)
{
	const void *args[] = { owner, backend, id };

	return exec_sql("UPDATE machines SET owner=? WHERE backend=? AND id=?", "ttt", args);
}

int sg_record_set_purpose(const char *backend, const char *id, const char *purpose)
{
	const void *args[] = { purpose, backend, id };

	return exec_sql("UPDATE machines SET purpose=? WHERE backend=? AND id=?", "ttt", args);
}

int sg_record_set_data(const char *backend, const char *id, const json_t *data)
{
	char *text = data ? json_dumps(data, JSON_COMPACT) : NULL;
	const void *args[] = { text, backend, id };
	int ret = exec_sql("UPDATE machines SET data=? WHERE backend=? AND id=?", "ttt", args);

	free(text);
	return ret;
}

int sg_record_delete(const char *backend, const char *id)
{
	const void *args[] = { backend, id };

	return exec_sql("DELETE FROM machines WHERE backend=? AND id=?", "tt", args);
}

struct sg_record *sg_record_get(const char *backend, const char *id)
{
	const void *args[] = { backend, id };
	struct sg_record **v, *r;
	size_t n = select_rows("backend=? AND id=?", "tt", args, &v);

	r = n ? v[0] : NULL;
	for (size_t i = 1; i < n; i++)
		sg_record_free(v[i]);
	free(v);
	return r;
}

size_t sg_record_find(const char *key, struct sg_record ***out)
{
	int64_t len = (int64_t)strlen(key);
	const void *args[] = { key, key, &len, key };

	/* substr(), not LIKE: a '%' or '_' in key is not a pattern. */
	if (len >= 8)
		return select_rows("id=? OR (name<>'' AND name=?) OR substr(id,1,?)=?", "ttit", args,
				   out);
	return select_rows("id=? OR (name<>'' AND name=?)", "tt", args, out);
}

size_t sg_record_expired(int64_t now, struct sg_record ***out)
{
	const void *args[] = { &now };

	return select_rows("persistent=0 AND lifetime>0 AND last_used+lifetime<=?", "i", args, out);
}

size_t sg_record_persistent(const char *credential, struct sg_record ***out)
{
	const void *args[] = { credential };

	if (!credential)
		return select_rows("persistent=1", "", NULL, out);
	return select_rows("persistent=1 AND credential=?", "t", args, out);
}

bool sg_record_exists(const char *backend, const char *id)
{
	struct sg_record *r = sg_record_get(backend, id);

	sg_record_free(r);
	return r != NULL;
}

void sg_record_close(void)
{
	pthread_mutex_lock(&db_lock);
	sqlite3_close(db);
	db = NULL;
	db_failed = false;
	pthread_mutex_unlock(&db_lock);
}

/* ---- migration ------------------------------------------------------------------ */

static const char *text_of(const json_t *o, const char *key)
{
	const char *v = json_string_value(json_object_get(o, key));

	return v ? v : "";
}

/* machines.json of earlier versions: {"machines": [{backend, id, name,
 * owner (the credential key), purpose, template, created}]}.  Called with
 * db_lock held, once the table exists; the rows go in with the statement
 * API directly (exec_sql would take the lock again). */
static void migrate_machines_json(const char *dir)
{
	char *path = sg_xasprintf("%s/machines.json", dir);
	char *lock = sg_xasprintf("%s/machines.json.lock", dir);
	json_t *doc = json_load_file(path, 0, NULL), *rec;
	sqlite3_stmt *st = NULL;
	int64_t now = sg_time_s();
	size_t i, n = 0;
	bool ok = true;

	if (!doc) {
		if (access(path, F_OK) == 0)
			SG_WARN("%s is not valid JSON: its persistent machines were not migrated", path);
		goto out;
	}
	if (sqlite3_prepare_v2(db, "INSERT OR IGNORE INTO machines (backend, id, name, persistent, "
			       "credential, purpose, template, created, last_used) "
			       "VALUES (?,?,?,1,?,?,?,?,?)", -1, &st, NULL) != SQLITE_OK) {
		ok = false;
		goto out;
	}
	json_array_foreach(json_object_get(doc, "machines"), i, rec) {
		int64_t created = json_integer_value(json_object_get(rec, "created"));
		const void *args[] = { text_of(rec, "backend"), text_of(rec, "id"),
				       text_of(rec, "name"), text_of(rec, "owner"),
				       text_of(rec, "purpose"), text_of(rec, "template"), &created,
				       &now };

		if (!*text_of(rec, "backend") || !*text_of(rec, "id"))
			continue;
		sqlite3_reset(st);
		bind(st, "ttttttii", args);
		if (sqlite3_step(st) != SQLITE_DONE) {
			ok = false;
			break;
		}
		n++;
	}
	if (ok) {
		unlink(path);
		unlink(lock);
		SG_INFO("migrated %zu persistent machine record(s) from %s into state.db", n, path);
	}
out:
	if (!ok)
		SG_WARN("migrating %s failed: %s (the file is kept)", path, sqlite3_errmsg(db));
	sqlite3_finalize(st);
	json_decref(doc);
	free(path);
	free(lock);
}
