/*
 * The audit log (see audit.h).  One connection per process, guarded by a
 * mutex; SQLite's WAL and busy timeout let other sandgate processes of the
 * same user write the same file at the same time.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sqlite3.h>

#include "core/registry/audit.h"
#include "core/base/conf.h"
#include "core/base/err.h"
#include "core/registry/hostapi.h"
#include "core/base/log.h"
#include "core/protocol/session.h"
#include "core/base/args.h"
#include "core/base/util.h"

#define AUDIT_TAIL_MAX 100000
#define AUDIT_ERROR_MAX 300

static sqlite3 *db;
static bool db_failed;
static pthread_mutex_t db_lock = PTHREAD_MUTEX_INITIALIZER;
/* The writer's statements, prepared once with the connection: parsing them
 * for every row cost more than the insert itself. */
static sqlite3_stmt *st_begin, *st_insert, *st_commit, *st_rollback;

static const char schema[] =
	"PRAGMA journal_mode=WAL;"
	"PRAGMA synchronous=NORMAL;"
	"CREATE TABLE IF NOT EXISTS audit ("
	" id INTEGER PRIMARY KEY AUTOINCREMENT, ts REAL NOT NULL, session TEXT, owner TEXT,"
	" machine TEXT, tool TEXT NOT NULL, action TEXT NOT NULL, status TEXT NOT NULL,"
	" duration_ms INTEGER, details TEXT, error TEXT);"
	"CREATE INDEX IF NOT EXISTS audit_ts ON audit(ts);"
	"CREATE INDEX IF NOT EXISTS audit_owner ON audit(owner);"
	"CREATE INDEX IF NOT EXISTS audit_action ON audit(action);"
	"CREATE INDEX IF NOT EXISTS audit_machine ON audit(machine);"
	"CREATE INDEX IF NOT EXISTS audit_status ON audit(status);";

/* The database file, or "" when rows go to the log.  Borrowed. */
static const char *audit_path(char *buf, size_t size)
{
	const char *p = sg_config_get("audit", "log_path");
	const char *dir;

	if (p)
		return p;
	dir = sg_state_dir();
	if (!dir)
		return "";
	snprintf(buf, size, "%s/audit.db", dir);
	return buf;
}

bool sg_audit_file_backed(void)
{
	char buf[SG_PATH_MAX + 16];

	return *audit_path(buf, sizeof(buf)) != '\0';
}

static const char insert_sql[] =
	"INSERT INTO audit (ts, session, owner, machine, tool, action, status, duration_ms, details, error)"
	" VALUES (?,?,?,?,?,?,?,?,?,?)";

/* Called with db_lock held. */
static void finalize_statements(void)
{
	sqlite3_finalize(st_begin);
	sqlite3_finalize(st_insert);
	sqlite3_finalize(st_commit);
	sqlite3_finalize(st_rollback);
	st_begin = st_insert = st_commit = st_rollback = NULL;
}

/* Called with db_lock held. */
static sqlite3 *audit_db(void)
{
	char buf[SG_PATH_MAX + 16], *msg = NULL;
	const char *path;

	if (db || db_failed)
		return db;
	path = audit_path(buf, sizeof(buf));
	if (!*path) {
		db_failed = true;
		return NULL;
	}
	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
			    NULL) != SQLITE_OK) {
		SG_ERROR("cannot open the audit database '%s': %s", path, sqlite3_errmsg(db));
		goto fail;
	}
	sqlite3_busy_timeout(db, 5000);
	if (sqlite3_exec(db, schema, NULL, NULL, &msg) != SQLITE_OK) {
		SG_ERROR("cannot set up the audit database '%s': %s", path, msg ? msg : "");
		sqlite3_free(msg);
		goto fail;
	}
	if (sqlite3_prepare_v2(db, "BEGIN", -1, &st_begin, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(db, insert_sql, -1, &st_insert, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(db, "COMMIT", -1, &st_commit, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(db, "ROLLBACK", -1, &st_rollback, NULL) != SQLITE_OK) {
		SG_ERROR("cannot set up the audit database '%s': %s", path, sqlite3_errmsg(db));
		goto fail;
	}
	return db;
fail:
	finalize_statements();
	sqlite3_close(db);
	db = NULL;
	db_failed = true;
	return NULL;
}


/* ---- redaction --------------------------------------------------------------- */

static bool content_key(const char *k)
{
	static const char *const keys[] = { "content", "code", "old_string", "new_string", "patch",
					    "password", "passphrase", "secret", "token", "private_key",
					    NULL };

	for (size_t i = 0; keys[i]; i++)
		if (!strcmp(k, keys[i]))
			return true;
	return false;
}

static json_t *digest(const json_t *v)
{
	char hex[65], *text = NULL;
	const char *p;
	size_t n;

	if (json_is_string(v)) {
		p = json_string_value(v);
		n = json_string_length(v);
	} else {
		text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
		p = text ? text : "";
		n = strlen(p);
	}
	sg_sha256_hex(p, n, hex);
	free(text);
	return json_pack("{s:s, s:I}", "sha256", hex, "len", (json_int_t)n);
}

static json_t *redact(json_t *v, bool all_values)
{
	json_t *out, *x;
	const char *k;
	size_t i;

	if (all_values && !json_is_object(v))
		return digest(v);
	if (json_is_object(v)) {
		out = json_object();
		json_object_foreach(v, k, x) {
			bool env = !strcmp(k, "envs") || !strcmp(k, "env");

			json_object_set_new(out, k, content_key(k) || (all_values && !json_is_object(x))
							    ? digest(x) : redact(x, env));
		}
		return out;
	}
	if (json_is_array(v)) {
		out = json_array();
		json_array_foreach(v, i, x)
			json_array_append_new(out, redact(x, false));
		return out;
	}
	return json_incref(v);
}

json_t *sg_audit_redact(json_t *args)
{
	return args ? redact(args, false) : json_object();
}

/* ---- recording --------------------------------------------------------------------- */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The machine a call addressed: its explicit argument, else what the
 * result says it used. */
static const char *call_machine(json_t *args, json_t *structured)
{
	const char *m = json_string_value(json_object_get(args, "machine"));

	if (!m)
		m = json_string_value(json_object_get(args, "sandbox_id"));
	if (!m)
		m = json_string_value(json_object_get(json_object_get(args, "params"), "machine"));
	if (!m)
		m = json_string_value(json_object_get(structured, "sandbox_id"));
	return m && *m ? m : NULL;
}

static void bind_text(sqlite3_stmt *st, int i, const char *v)
{
	if (v)
		sqlite3_bind_text(st, i, v, -1, SQLITE_TRANSIENT);
	else
		sqlite3_bind_null(st, i);
}

/* One row waiting for the writer thread.  All strings owned (freed by
 * row_free).  details is made by the writer from args (redacted, then
 * serialised), off the call's path; the row owns args, contents and
 * secrets included, in memory only and until it is written (within a
 * second). */
struct row {
	double ts;
	char *session, *owner, *machine, *tool, *action, *status, *details, *error;
	json_t *args;
	int64_t duration_ms;
	struct row *next;
};

/* Rows are written by one thread, so a call never waits on the disk; a
 * query first waits until everything queued before it is written.  A row is
 * queued before the call's reply goes out but written once sg_audit_kick()
 * says the reply is out: woken earlier, the writer would compete with the
 * reply for the CPU (on a busy machine it runs first, and the reply waits
 * for the insert).  A row nobody kicks is written within a second anyway. */
#define AUDIT_UNKICKED_S 1
static pthread_mutex_t q_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t q_cond = PTHREAD_COND_INITIALIZER;
static struct row *q_head, **q_tail = &q_head;
static unsigned long long q_added, q_written;
static bool q_kicked;
static pthread_t writer;
static bool writer_started, writer_stop;

static char *dup_or_null(const char *s)
{
	return s ? sg_xstrdup(s) : NULL;
}

static void row_free(struct row *r)
{
	free(r->session);
	free(r->owner);
	free(r->machine);
	free(r->tool);
	free(r->action);
	free(r->status);
	free(r->details);
	free(r->error);
	json_decref(r->args);
	free(r);
}

/* sandbox_env's params: those under "params" and those given flat next to
 * "action", as {"params": {...}}.  New reference. */
static json_t *env_details_src(json_t *args)
{
	json_t *p = json_object_get(args, "params"), *all, *v;
	const char *k;

	all = json_is_object(p) ? json_copy(p) : json_object();
	json_object_foreach(args, k, v)
		if (strcmp(k, "action") && strcmp(k, "params") && !json_object_get(all, k))
			json_object_set(all, k, v);
	return json_pack("{s:o}", "params", all);
}

/* The details column: the arguments with contents and secrets replaced
 * (sandbox_env: its params). */
static void row_details(struct row *r)
{
	json_t *src = NULL, *details;

	if (r->details)
		return;
	if (r->args)
		src = !strcmp(r->tool, "sandbox_env") ? env_details_src(r->args) : json_incref(r->args);
	details = src ? sg_audit_redact(src) : json_object();
	r->details = json_dumps(details, JSON_COMPACT);
	json_decref(details);
	json_decref(src);
	json_decref(r->args);
	r->args = NULL;
}

static void insert(sqlite3_stmt *st, const struct row *r)
{
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	sqlite3_bind_double(st, 1, r->ts);
	bind_text(st, 2, r->session);
	bind_text(st, 3, r->owner);
	bind_text(st, 4, r->machine);
	bind_text(st, 5, r->tool);
	bind_text(st, 6, r->action);
	bind_text(st, 7, r->status);
	sqlite3_bind_int64(st, 8, r->duration_ms);
	bind_text(st, 9, r->details);
	bind_text(st, 10, r->error);
	if (sqlite3_step(st) != SQLITE_DONE)
		SG_WARN("audit: cannot write a row: %s", sqlite3_errmsg(db));
	sqlite3_reset(st);
}

/* Runs a prepared statement that returns no rows. */
static int run(sqlite3_stmt *st)
{
	int rc = sqlite3_step(st);

	sqlite3_reset(st);
	return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/* Writes a batch of rows in one transaction. */
static void write_rows(struct row *list)
{
	pthread_mutex_lock(&db_lock);
	if (!audit_db()) {
		pthread_mutex_unlock(&db_lock);
		return;
	}
	run(st_begin);
	for (struct row *r = list; r; r = r->next) {
		row_details(r);
		insert(st_insert, r);
	}
	sqlite3_clear_bindings(st_insert); /* drop the copies of the last row */
	if (run(st_commit) != SQLITE_OK) {
		SG_WARN("audit: cannot commit rows: %s", sqlite3_errmsg(db));
		run(st_rollback);
	}
	pthread_mutex_unlock(&db_lock);
}

/* The writer's state is q_head and q_kicked under q_lock.  q_kicked means
 * "write what is queued now"; it is only ever true while rows are queued,
 * so a kick or a flush can never be swallowed by a queue that was empty
 * (a flush while a batch was being written once left it set on an empty
 * queue, and every later kick saw it set and woke nobody). */
static void *writer_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&q_lock);
	for (;;) {
		struct row *list;
		unsigned long long n = 0;

		while (!writer_stop && !(q_head && q_kicked)) {
			struct timespec until;

			if (!q_head) {
				pthread_cond_wait(&q_cond, &q_lock);
				continue;
			}
			clock_gettime(CLOCK_REALTIME, &until);
			until.tv_sec += AUDIT_UNKICKED_S;
			if (pthread_cond_timedwait(&q_cond, &q_lock, &until) == ETIMEDOUT && q_head)
				q_kicked = true;
		}
		if (!q_head) {
			if (writer_stop)
				break;
			continue;
		}
		list = q_head;
		q_head = NULL;
		q_tail = &q_head;
		q_kicked = false;
		pthread_mutex_unlock(&q_lock);
		write_rows(list);
		while (list) {
			struct row *next = list->next;

			row_free(list);
			list = next;
			n++;
		}
		pthread_mutex_lock(&q_lock);
		q_written += n;
		pthread_cond_broadcast(&q_cond);
	}
	pthread_mutex_unlock(&q_lock);
	return NULL;
}

static void enqueue(struct row *r)
{
	pthread_mutex_lock(&q_lock);
	if (!writer_started && !writer_stop) {
		writer_started = pthread_create(&writer, NULL, writer_main, NULL) == 0;
		if (!writer_started) {
			pthread_mutex_unlock(&q_lock);
			write_rows(r); /* no thread: write it here */
			row_free(r);
			return;
		}
	}
	*q_tail = r;
	q_tail = &r->next;
	q_added++;
	pthread_mutex_unlock(&q_lock);
}

/* Marks the queue for writing now and wakes the writer.  Called with
 * q_lock held; returns whether a broadcast is due (after the unlock, so the
 * writer does not wake only to wait for the lock). */
static bool kick_locked(void)
{
	if (!q_head || q_kicked)
		return false;
	q_kicked = true;
	return true;
}

void sg_audit_kick(void)
{
	bool wake;

	pthread_mutex_lock(&q_lock);
	wake = kick_locked();
	pthread_mutex_unlock(&q_lock);
	if (wake)
		pthread_cond_broadcast(&q_cond);
}

/* Waits until every row queued so far is in the database: the queued ones
 * are kicked, a batch being written is waited for. */
static void flush(void)
{
	unsigned long long target;

	pthread_mutex_lock(&q_lock);
	target = q_added;
	if (kick_locked())
		pthread_cond_broadcast(&q_cond);
	while (writer_started && q_written < target)
		pthread_cond_wait(&q_cond, &q_lock);
	pthread_mutex_unlock(&q_lock);
}

void sg_audit_tool_call(struct sg_session *s, const char *tool, json_t *args,
			json_t *call_result, int64_t duration_ms, bool cancelled)
{
	bool is_env = !strcmp(tool, "sandbox_env");
	json_t *structured = json_object_get(call_result, "structuredContent");
	const char *action = is_env ? json_string_value(json_object_get(args, "action")) : tool;
	const char *status = cancelled ? "cancelled"
			     : json_is_true(json_object_get(call_result, "isError")) ? "error" : "ok";
	const char *machine = call_machine(args, structured);
	char error[AUDIT_ERROR_MAX + 1] = "";
	struct row *r;

	if (!strcmp(tool, "sandbox_audit_query")) {
		json_decref(args);
		return; /* reading the log is not an event in it */
	}
	if (!strcmp(status, "error")) {
		const char *text = json_string_value(json_object_get(json_array_get(
			json_object_get(call_result, "content"), 0), "text"));

		snprintf(error, sizeof(error), "%s", text ? text : "");
	}
	r = sg_xcalloc(1, sizeof(*r));
	r->args = args;
	r->ts = now_s();
	r->session = sg_xstrdup(s->hash);
	r->owner = sg_xstrdup(s->owner);
	r->machine = dup_or_null(machine);
	r->tool = sg_xstrdup(tool);
	r->action = sg_xstrdup(action ? action : "");
	r->status = sg_xstrdup(status);
	r->error = error[0] ? sg_xstrdup(error) : NULL;
	r->duration_ms = duration_ms;
	if (!sg_audit_file_backed()) {
		row_details(r);
		SG_INFO("audit: {\"tool\":\"%s\",\"action\":\"%s\",\"machine\":\"%s\",\"status\":\"%s\","
			"\"duration_ms\":%lld,\"session\":\"%s\",\"details\":%s}",
			r->tool, r->action, r->machine ? r->machine : "", r->status,
			(long long)duration_ms, r->session, r->details ? r->details : "{}");
		row_free(r);
		return;
	}
	enqueue(r);
}

/* ---- querying ----------------------------------------------------------------------- */

/* An integer argument as the reference checks it. */
static int int_arg(json_t *args, const char *name, long long def, long long *out, struct sg_err *err)
{
	json_t *v = json_object_get(args, name);
	double d;

	*out = def;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_number(v))
		return sg_errf(err, SG_E_INVAL, "argument '%s' must be a whole number", name);
	d = json_number_value(v);
	if (d != floor(d))
		return sg_errf(err, SG_E_INVAL, "argument '%s' must be a whole number", name);
	/* Past 2^53 a double holds no exact whole number, and past 2^63 its
	 * conversion would be undefined. */
	if (d < -9007199254740992.0 || d > 9007199254740992.0)
		return sg_errf(err, SG_E_INVAL, "argument '%s' is out of range: at most 2^53 (9007199254740992)",
			       name);
	*out = (long long)d;
	return 0;
}

static int num_arg(json_t *args, const char *name, double *out, bool *set, struct sg_err *err)
{
	json_t *v = json_object_get(args, name);

	*set = v && !json_is_null(v);
	if (!*set)
		return 0;
	if (!json_is_number(v))
		return sg_errf(err, SG_E_INVAL, "argument '%s' must be a number (unix seconds)", name);
	*out = json_number_value(v);
	return 0;
}

struct query {
	long long tail, start, end;
	const char *action, *machine, *status, *tool;
	double since, until;
	bool has_since, has_until;
};

static int parse_query(json_t *args, struct query *q, struct sg_err *err)
{
	json_t *end;

	memset(q, 0, sizeof(*q));
	if (int_arg(args, "tail", 5000, &q->tail, err) < 0 || int_arg(args, "start", 0, &q->start, err) < 0)
		return -1;
	end = json_object_get(args, "end");
	if (int_arg(args, "end", q->start + 100, &q->end, err) < 0)
		return -1;
	if (q->tail <= 0 || q->tail > AUDIT_TAIL_MAX)
		return sg_errf(err, SG_E_INVAL, "tail must be in (0, %d], got %lld", AUDIT_TAIL_MAX, q->tail);
	if (q->start < 0)
		return sg_errf(err, SG_E_INVAL, "start must be >= 0, got %lld", q->start);
	if (end && !json_is_null(end) && q->end < 1)
		return sg_errf(err, SG_E_INVAL, "end must be >= 1, got %lld", q->end);
	if (q->end <= q->start)
		return sg_errf(err, SG_E_INVAL, "end (%lld) must be > start (%lld)", q->end, q->start);
	if (sg_arg_str(args, "action", false, &q->action, err) < 0 ||
	    sg_arg_str(args, "machine", false, &q->machine, err) < 0 ||
	    sg_arg_str(args, "status", false, &q->status, err) < 0 ||
	    sg_arg_str(args, "tool", false, &q->tool, err) < 0 ||
	    num_arg(args, "since", &q->since, &q->has_since, err) < 0 ||
	    num_arg(args, "until", &q->until, &q->has_until, err) < 0)
		return -1;
	return 0;
}

/* The visible window: the caller's rows and those of shared machines, the
 * newest `tail` of them.  Appends SQL to b and binds nothing: the owner is
 * parameter 1, the tail parameter 2, shared ids follow from 3. */
static void window_sql(struct sg_buf *b, size_t *n_shared, const char *shared)
{
	static const char head[] = "SELECT * FROM (SELECT * FROM audit WHERE (owner = ?1";
	size_t n = 0;

	sg_buf_append(b, head, strlen(head));
	for (const char *p = shared; p && *p;) {
		size_t len = strcspn(p, ", ");

		if (len) {
			char frag[48];

			snprintf(frag, sizeof(frag), " OR machine = ?%zu", n + 3);
			sg_buf_append(b, frag, strlen(frag));
			n++;
		}
		p += len;
		p += strspn(p, ", ");
	}
	sg_buf_append(b, ") ORDER BY id DESC LIMIT ?2)", 28);
	*n_shared = n;
}

static void bind_window(sqlite3_stmt *st, const char *owner, long long tail, const char *shared)
{
	int i = 3;

	sqlite3_bind_text(st, 1, owner, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 2, tail);
	for (const char *p = shared; p && *p;) {
		size_t len = strcspn(p, ", ");

		if (len)
			sqlite3_bind_text(st, i++, p, (int)len, SQLITE_TRANSIENT);
		p += len;
		p += strspn(p, ", ");
	}
}

/* Binds the filters after the window's parameters. */
static int bind_filters(sqlite3_stmt *st, int i, const struct query *q)
{
	if (q->action)
		sqlite3_bind_text(st, i++, q->action, -1, SQLITE_TRANSIENT);
	if (q->machine)
		sqlite3_bind_text(st, i++, q->machine, -1, SQLITE_TRANSIENT);
	if (q->status)
		sqlite3_bind_text(st, i++, q->status, -1, SQLITE_TRANSIENT);
	if (q->tool)
		sqlite3_bind_text(st, i++, q->tool, -1, SQLITE_TRANSIENT);
	if (q->has_since)
		sqlite3_bind_double(st, i++, q->since);
	if (q->has_until)
		sqlite3_bind_double(st, i++, q->until);
	return i;
}

static void filter_sql(struct sg_buf *b, const struct query *q)
{
	const char *w = " WHERE 1";

	sg_buf_append(b, w, strlen(w));
	if (q->action)
		sg_buf_append(b, " AND action = ?", 15);
	if (q->machine)
		sg_buf_append(b, " AND machine = ?", 16);
	if (q->status)
		sg_buf_append(b, " AND status = ?", 15);
	if (q->tool)
		sg_buf_append(b, " AND tool = ?", 13);
	if (q->has_since)
		sg_buf_append(b, " AND ts >= ?", 12);
	if (q->has_until)
		sg_buf_append(b, " AND ts < ?", 11);
}

static long long count_rows(const char *win, const char *owner, const struct query *q,
			    const char *shared, size_t n_shared, bool filtered)
{
	struct sg_buf b = { 0 };
	sqlite3_stmt *st = NULL;
	long long n = 0;

	sg_buf_append(&b, "SELECT COUNT(*) FROM (", 22);
	sg_buf_append(&b, win, strlen(win));
	sg_buf_append(&b, ")", 1);
	if (filtered)
		filter_sql(&b, q);
	if (sqlite3_prepare_v2(db, b.data, -1, &st, NULL) == SQLITE_OK) {
		bind_window(st, owner, q->tail, shared);
		if (filtered)
			bind_filters(st, (int)n_shared + 3, q);
		if (sqlite3_step(st) == SQLITE_ROW)
			n = sqlite3_column_int64(st, 0);
	}
	sqlite3_finalize(st);
	sg_buf_release(&b);
	return n;
}

static json_t *row_json(sqlite3_stmt *st)
{
	json_t *r = json_object();
	const char *details = (const char *)sqlite3_column_text(st, 9);
	const char *machine = (const char *)sqlite3_column_text(st, 4);
	const char *error = (const char *)sqlite3_column_text(st, 10);

	json_object_set_new(r, "id", json_integer(sqlite3_column_int64(st, 0)));
	json_object_set_new(r, "ts", json_real(sqlite3_column_double(st, 1)));
	json_object_set_new(r, "machine", machine ? json_string(machine) : json_null());
	json_object_set_new(r, "tool", json_string((const char *)sqlite3_column_text(st, 5)));
	json_object_set_new(r, "action", json_string((const char *)sqlite3_column_text(st, 6)));
	json_object_set_new(r, "status", json_string((const char *)sqlite3_column_text(st, 7)));
	json_object_set_new(r, "duration_ms", sqlite3_column_type(st, 8) == SQLITE_NULL
						      ? json_null() : json_integer(sqlite3_column_int64(st, 8)));
	json_object_set_new(r, "session", json_string((const char *)sqlite3_column_text(st, 2)));
	if (details) {
		json_t *d = json_loads(details, 0, NULL);

		if (d && json_object_size(d))
			json_object_set_new(r, "details", d);
		else
			json_decref(d);
	}
	if (error)
		json_object_set_new(r, "error", json_string(error));
	return r;
}

int sg_audit_query(struct sg_session *s, json_t *args, json_t **result, struct sg_err *err)
{
	const char *shared = sg_config_get("server", "shared_machines");
	struct sg_buf win = { 0 }, b = { 0 };
	sqlite3_stmt *st = NULL;
	struct query q;
	size_t n_shared;
	long long total, tail_size;
	json_t *records;
	int i, ret = -1;

	if (!sg_audit_file_backed())
		return sg_errf(err, SG_E_NOTSUP,
			       "audit log is not file-backed: set [audit] log_path to a database file");
	if (parse_query(args, &q, err) < 0)
		return -1;
	window_sql(&win, &n_shared, shared);
	flush();
	pthread_mutex_lock(&db_lock);
	if (!audit_db()) {
		sg_errf(err, SG_E_UNAVAILABLE, "the audit database cannot be opened: see sandgate's log");
		goto out;
	}
	tail_size = count_rows(win.data, s->owner, &q, shared, n_shared, false);
	total = count_rows(win.data, s->owner, &q, shared, n_shared, true);
	sg_buf_append(&b, "SELECT * FROM (", 15);
	sg_buf_append(&b, win.data, win.len);
	sg_buf_append(&b, ")", 1);
	filter_sql(&b, &q);
	sg_buf_append(&b, " ORDER BY id ASC LIMIT ? OFFSET ?", 33);
	if (sqlite3_prepare_v2(db, b.data, -1, &st, NULL) != SQLITE_OK) {
		sg_errf(err, SG_E_INTERNAL, "audit query: %s", sqlite3_errmsg(db));
		goto out;
	}
	bind_window(st, s->owner, q.tail, shared);
	i = bind_filters(st, (int)n_shared + 3, &q);
	sqlite3_bind_int64(st, i++, q.end - q.start);
	sqlite3_bind_int64(st, i, q.start);
	records = json_array();
	while (sqlite3_step(st) == SQLITE_ROW)
		json_array_append_new(records, row_json(st));
	*result = json_pack("{s:o, s:I, s:I, s:[II]}", "records", records, "total", (json_int_t)total,
			    "tail_size", (json_int_t)tail_size, "window",
			    (json_int_t)(q.start < total ? q.start : total),
			    (json_int_t)(q.end < total ? q.end : total));
	ret = 0;
out:
	sqlite3_finalize(st);
	pthread_mutex_unlock(&db_lock);
	sg_buf_release(&win);
	sg_buf_release(&b);
	return ret;
}

/* Writes what is queued, stops the writer and closes the database. */
void sg_audit_close(void)
{
	pthread_mutex_lock(&q_lock);
	writer_stop = true;
	pthread_cond_broadcast(&q_cond);
	pthread_mutex_unlock(&q_lock);
	if (writer_started)
		pthread_join(writer, NULL);
	pthread_mutex_lock(&q_lock);
	writer_started = false;
	writer_stop = false;
	pthread_mutex_unlock(&q_lock);
	pthread_mutex_lock(&db_lock);
	finalize_statements();
	sqlite3_close(db);
	db = NULL;
	db_failed = false;
	pthread_mutex_unlock(&db_lock);
}
