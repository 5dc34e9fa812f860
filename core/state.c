#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include <sqlite3.h>

#include "core/hostapi.h"
#include "core/log.h"
#include "core/state.h"

static sqlite3 *db;
static bool db_failed;
static pthread_mutex_t db_lock = PTHREAD_MUTEX_INITIALIZER;

static const char schema[] =
	"PRAGMA journal_mode=WAL;"
	"PRAGMA synchronous=NORMAL;"
	"CREATE TABLE IF NOT EXISTS sandboxes ("
	" backend TEXT NOT NULL, id TEXT NOT NULL, session_hash TEXT,"
	" created INTEGER, lifetime INTEGER, last_used INTEGER,"
	" PRIMARY KEY (backend, id));";

/* Called with db_lock held. */
static sqlite3 *state_db(void)
{
	const char *dir;
	char path[4200];
	char *msg = NULL;

	if (db || db_failed)
		return db;
	dir = sg_state_dir();
	if (!dir) {
		db_failed = true;
		return NULL;
	}
	snprintf(path, sizeof(path), "%s/state.db", dir);
	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
			    SQLITE_OPEN_FULLMUTEX, NULL) != SQLITE_OK) {
		SG_ERROR("cannot open state database '%s': %s", path, sqlite3_errmsg(db));
		sqlite3_close(db);
		db = NULL;
		db_failed = true;
		return NULL;
	}
	sqlite3_busy_timeout(db, 5000);
	if (sqlite3_exec(db, schema, NULL, NULL, &msg) != SQLITE_OK) {
		SG_ERROR("cannot set up state database '%s': %s", path, msg ? msg : "");
		sqlite3_free(msg);
		sqlite3_close(db);
		db = NULL;
		db_failed = true;
	}
	return db;
}

/* Runs one statement with bound text and integer parameters ("t" and "i" in
 * types); for a query, reads column 0 of the first row into *out. */
static int run(const char *sql, const char *types, const void *const *args, int64_t *out)
{
	sqlite3_stmt *st = NULL;
	int rc, ret = -1;

	pthread_mutex_lock(&db_lock);
	if (!state_db())
		goto out;
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		goto fail;
	for (int i = 0; types[i]; i++) {
		if (types[i] == 't')
			sqlite3_bind_text(st, i + 1, args[i], -1, SQLITE_STATIC);
		else
			sqlite3_bind_int64(st, i + 1, *(const int64_t *)args[i]);
	}
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		if (out)
			*out = sqlite3_column_int64(st, 0);
		ret = 1;
	} else if (rc == SQLITE_DONE) {
		ret = 0;
	} else {
		goto fail;
	}
	goto out;
fail:
	SG_WARN("state database: %s", sqlite3_errmsg(db));
out:
	sqlite3_finalize(st);
	pthread_mutex_unlock(&db_lock);
	return ret;
}

int sg_state_put(const char *backend, const char *id, const char *session_hash,
		 int64_t created, unsigned lifetime_s, int64_t last_used)
{
	int64_t life = lifetime_s;
	const void *args[] = { backend, id, session_hash, &created, &life, &last_used };

	return run("INSERT OR REPLACE INTO sandboxes VALUES (?,?,?,?,?,?)", "tttiii", args,
		   NULL) < 0 ? -1 : 0;
}

int sg_state_touch(const char *backend, const char *id, int64_t last_used)
{
	const void *args[] = { &last_used, backend, id };

	return run("UPDATE sandboxes SET last_used=? WHERE backend=? AND id=?", "itt", args,
		   NULL) < 0 ? -1 : 0;
}

int sg_state_last_used(const char *backend, const char *id, int64_t *last_used)
{
	const void *args[] = { backend, id };

	return run("SELECT last_used FROM sandboxes WHERE backend=? AND id=?", "tt", args,
		   last_used);
}

int sg_state_delete(const char *backend, const char *id)
{
	const void *args[] = { backend, id };

	return run("DELETE FROM sandboxes WHERE backend=? AND id=?", "tt", args, NULL) < 0 ? -1
											 : 0;
}

void sg_state_close(void)
{
	pthread_mutex_lock(&db_lock);
	sqlite3_close(db);
	db = NULL;
	db_failed = false;
	pthread_mutex_unlock(&db_lock);
}
