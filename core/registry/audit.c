/*
 * The audit log (see audit.h).  One connection per process, guarded by a
 * mutex; SQLite's WAL and busy timeout let other sandgate processes of the
 * same user write the same file at the same time.
 *
 * Locks: q_lock (the queue) and db_lock (the connection) are never held
 * together: the writer takes the queue's rows under q_lock, lets it go,
 * then writes them under db_lock; a query waits for the queue under q_lock
 * (flush_wait), lets it go, then reads under db_lock.  Nothing else is taken
 * while either is held, except SQLite's own locks under db_lock and, for
 * the busy timeout, other processes' file locks (at most 5 s).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "core/registry/audit.h"
#include "core/base/conf.h"
#include "core/base/err.h"
#include "core/registry/hostapi.h"
#include "core/base/log.h"
#include "core/protocol/bulk.h"
#include "core/protocol/session.h"
#include "core/registry/redact.h"
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

/* Two indexes: the queries select a credential's rows (owner) and a shared
 * machine's (machine), newest first, and filter that window; indexes on
 * ts, action and status (earlier versions) cost every insert and served no
 * query, so they are dropped.  The id is the rowid without AUTOINCREMENT
 * (rows are never deleted, so ids still only grow), which spared each
 * insert an update of sqlite_sequence; tables made before keep theirs. */
static const char schema[] =
	"PRAGMA journal_mode=WAL;"
	"PRAGMA synchronous=NORMAL;"
	"CREATE TABLE IF NOT EXISTS audit ("
	" id INTEGER PRIMARY KEY, ts REAL NOT NULL, session TEXT, owner TEXT,"
	" machine TEXT, tool TEXT NOT NULL, action TEXT NOT NULL, status TEXT NOT NULL,"
	" duration_ms INTEGER, details TEXT, error TEXT);"
	"CREATE INDEX IF NOT EXISTS audit_owner ON audit(owner);"
	"CREATE INDEX IF NOT EXISTS audit_machine ON audit(machine);"
	"DROP INDEX IF EXISTS audit_ts;"
	"DROP INDEX IF EXISTS audit_action;"
	"DROP INDEX IF EXISTS audit_status;";

/* The database and its -wal and -shm are 0600: SQLite gives the latter two
 * the database's mode when it makes them, and files an older sandgate left
 * readable by others are tightened here.  Returns 0 or -1 (errno). */
static int make_private(const char *path)
{
	static const char *const sidecars[] = { "-wal", "-shm", "-journal" };
	int fd = sg_file_open_private(path, O_RDWR, true);

	if (fd < 0)
		return -1;
	close(fd);
	for (size_t i = 0; i < sizeof(sidecars) / sizeof(sidecars[0]); i++) {
		char *p = sg_xasprintf("%s%s", path, sidecars[i]);
		struct stat st;

		fd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (fd >= 0) {
			if (fstat(fd, &st) == 0 && st.st_uid == geteuid() && (st.st_mode & 077))
				fchmod(fd, st.st_mode & 0600);
			close(fd);
		}
		free(p);
	}
	return 0;
}

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

/* Whether rows go to a file: asked for every row, so kept (1 yes, 0 no, -1
 * not known yet; sg_audit_close() forgets it). */
static atomic_int backed = -1;

bool sg_audit_file_backed(void)
{
	char buf[SG_PATH_MAX + 16];
	int b = atomic_load(&backed);

	if (b < 0) {
		b = *audit_path(buf, sizeof(buf)) != '\0';
		atomic_store(&backed, b);
	}
	return b;
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
	if (make_private(path) < 0) {
		SG_ERROR("cannot create the audit database '%s' mode 0600: %s", path, strerror(errno));
		db_failed = true;
		return NULL;
	}
	/* NOMUTEX: every use is under db_lock already, and SQLite's own
	 * mutex around each call cost more than some of the calls. */
	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
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

/* One row waiting for the writer thread.  The row owns args (contents
 * and secrets included, in memory only until it is written, within the
 * batch window), machine and error; tool is the tool table's name and
 * status a literal (both static), action the tool's or a string inside
 * args.  details is made by the writer from args (redacted, then
 * serialised), off the call's path. */
struct row {
	double ts;
	char session[17];
	char owner[96];
	const char *tool, *action, *status;
	char *machine, *details, *error;
	json_t *args;
	struct sg_bulk *bulk;    /* the call's large argument, hashed from here */
	int64_t duration_ms;
	struct row *next;
};

/* Rows are written by one thread, in batches: a row waits at most
 * AUDIT_BATCH_MS for the ones after it, then they all go into one
 * transaction, off every call's path.  A query (flush_wait) ends the
 * window at once and waits until what was queued before it is written; a
 * clean stop writes what is queued.  A crash loses at most the rows of the
 * last window (doc/design.md "The audit writer").
 *
 * Under q_lock: the queue, the counts, the flags. */
#define AUDIT_BATCH_MS 100
static pthread_mutex_t q_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t q_cond = PTHREAD_COND_INITIALIZER;   /* rows came, a flush, a stop */
static pthread_cond_t w_cond = PTHREAD_COND_INITIALIZER;   /* q_written grew */
static struct row *q_head, **q_tail = &q_head;
static unsigned long long q_added, q_written, q_flush; /* q_flush: written up to here now */
static pthread_t writer;
static bool writer_started, writer_stop;

static void row_free(struct row *r)
{
	free(r->machine);
	free(r->details);
	free(r->error);
	json_decref(r->args);
	sg_bulk_free(r->bulk);
	free(r);
}

/* Appends the JSON string s[0..n) (valid UTF-8: a jansson string). */
static void dump_string(struct sg_buf *b, const char *s, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	size_t run = 0;

	sg_buf_append(b, "\"", 1);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		char esc[6] = { '\\', 'u', '0', '0', hex[c >> 4], hex[c & 15] };

		if (c >= 0x20 && c != '"' && c != '\\')
			continue;
		sg_buf_append(b, s + run, i - run);
		run = i + 1;
		if (c == '"' || c == '\\') {
			esc[1] = (char)c;
			sg_buf_append(b, esc, 2);
		} else if (c == '\n') {
			sg_buf_append(b, "\\n", 2);
		} else {
			sg_buf_append(b, esc, 6);
		}
	}
	sg_buf_append(b, s + run, n - run);
	sg_buf_append(b, "\"", 1);
}

/* Appends v as compact JSON, in jansson's member order, unless it holds a
 * value sg_redact() would replace: returns false then (b is the caller's
 * to drop).  jansson's json_dumps() cost more than the rest of a row's
 * making, for the small arguments most rows have. */
static bool dump_clean(struct sg_buf *b, json_t *v)
{
	const char *k;
	json_t *x;
	size_t i;
	char num[32];
	bool first = true;

	switch (json_typeof(v)) {
	case JSON_OBJECT:
		sg_buf_append(b, "{", 1);
		json_object_foreach(v, k, x) {
			if (!strcmp(k, "envs") || !strcmp(k, "env") || sg_redact_key_is_secret(k))
				return false;
			if (!first)
				sg_buf_append(b, ",", 1);
			first = false;
			dump_string(b, k, strlen(k));
			sg_buf_append(b, ":", 1);
			if (!dump_clean(b, x))
				return false;
		}
		sg_buf_append(b, "}", 1);
		return true;
	case JSON_ARRAY:
		sg_buf_append(b, "[", 1);
		json_array_foreach(v, i, x) {
			if (i)
				sg_buf_append(b, ",", 1);
			if (!dump_clean(b, x))
				return false;
		}
		sg_buf_append(b, "]", 1);
		return true;
	case JSON_STRING:
		dump_string(b, json_string_value(v), json_string_length(v));
		return true;
	case JSON_INTEGER:
		sg_buf_append(b, num, (size_t)snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT,
						       json_integer_value(v)));
		return true;
	case JSON_TRUE:
		sg_buf_append(b, "true", 4);
		return true;
	case JSON_FALSE:
		sg_buf_append(b, "false", 5);
		return true;
	case JSON_NULL:
		sg_buf_append(b, "null", 4);
		return true;
	default: { /* a real: jansson's own format */
		char *t = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);

		if (!t)
			abort(); /* out of memory: the sg_xmalloc policy */
		sg_buf_append(b, t, strlen(t));
		free(t);
		return true;
	}
	}
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
 * (sandbox_env: its params).  Most rows have none (a command, a path):
 * their arguments are written as they are, without a redacted copy. */
static void row_details(struct row *r)
{
	json_t *src = NULL, *details;
	struct sg_buf b = { 0 };

	if (r->details)
		return;
	if (r->args)
		src = !strcmp(r->tool, "sandbox_env") ? env_details_src(r->args) : json_incref(r->args);
	if (src && !r->bulk && dump_clean(&b, src)) {
		r->details = b.data;
		goto done;
	}
	sg_buf_release(&b);
	details = src ? sg_redact(src) : json_object();
	/* a large argument came apart from the others: its hash from its bytes */
	for (const struct sg_bulk *k = r->bulk; k; k = k->next)
		json_object_set_new(details, k->key,
				    k->digest ? json_incref(k->digest) : sg_redact_digest(k->data, k->len));
	r->details = json_dumps(details, JSON_COMPACT);
	json_decref(details);
done:
	/* r->args stays: the row's action points into it */
	json_decref(src);
	sg_bulk_free(r->bulk);
	r->bulk = NULL;
}

/* The row's strings live until the batch is committed: bound without a
 * copy. */
static void bind_text(sqlite3_stmt *st, int i, const char *v)
{
	if (v)
		sqlite3_bind_text(st, i, v, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(st, i);
}

static void insert(sqlite3_stmt *st, struct row *r)
{
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
	json_decref(r->args); /* action may point into it until here */
	r->args = NULL;
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
	if (run(st_commit) != SQLITE_OK) {
		SG_WARN("audit: cannot commit rows: %s", sqlite3_errmsg(db));
		run(st_rollback);
	}
	/* the bindings point into rows about to be freed */
	sqlite3_clear_bindings(st_insert);
	pthread_mutex_unlock(&db_lock);
}

/* Waits out the batch window that the first queued row opened, unless a
 * flush or a stop ends it.  q_lock held. */
static void window_locked(void)
{
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_nsec += AUDIT_BATCH_MS * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	while (!writer_stop && q_flush <= q_written &&
	       pthread_cond_timedwait(&q_cond, &q_lock, &until) != ETIMEDOUT)
		;
}

static void *writer_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&q_lock);
	for (;;) {
		struct row *list;
		unsigned long long n = 0;

		while (!q_head && !writer_stop)
			pthread_cond_wait(&q_cond, &q_lock);
		if (!q_head)
			break; /* stopping, and everything is written */
		window_locked();
		list = q_head;
		q_head = NULL;
		q_tail = &q_head;
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
		pthread_cond_broadcast(&w_cond);
	}
	pthread_mutex_unlock(&q_lock);
	return NULL;
}

static void enqueue(struct row *r)
{
	bool first;

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
	first = !q_head;
	*q_tail = r;
	q_tail = &r->next;
	q_added++;
	pthread_mutex_unlock(&q_lock);
	/* The first row of a window wakes the writer, which then waits out
	 * the window; the others need no wake-up (signalled after the unlock,
	 * so that the writer does not wake only to wait for the lock). */
	if (first)
		pthread_cond_signal(&q_cond);
}

/* Waits until every row queued so far is in the database (the window is
 * ended at once), at most timeout_ms (-1: as long as it takes).  Returns 0,
 * or -1 when the time ran out. */
static int flush_wait(int timeout_ms)
{
	unsigned long long target;
	struct timespec until;
	int rc = 0;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += timeout_ms / 1000;
	until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&q_lock);
	target = q_added;
	if (q_flush < target) {
		q_flush = target;
		pthread_cond_signal(&q_cond);
	}
	while (rc == 0 && writer_started && q_written < target)
		rc = timeout_ms < 0 ? pthread_cond_wait(&w_cond, &q_lock)
				    : pthread_cond_timedwait(&w_cond, &q_lock, &until);
	pthread_mutex_unlock(&q_lock);
	return rc == 0 ? 0 : -1;
}

int sg_audit_flush(int timeout_ms)
{
	return flush_wait(timeout_ms);
}

void sg_audit_tool_call(struct sg_session *s, const char *tool, json_t *args,
			struct sg_bulk *bulk, json_t *call_result, int64_t duration_ms,
			bool cancelled)
{
	bool is_env = !strcmp(tool, "sandbox_env");
	json_t *structured = json_object_get(call_result, "structuredContent");
	const char *action = is_env ? json_string_value(json_object_get(args, "action")) : tool;
	const char *status = cancelled ? "cancelled"
			     : json_is_true(json_object_get(call_result, "isError")) ? "error" : "ok";
	const char *machine = call_machine(args, structured);
	struct row *r;

	if (!strcmp(tool, "sandbox_audit_query")) {
		json_decref(args);
		sg_bulk_free(bulk);
		return; /* reading the log is not an event in it */
	}
	r = sg_xmalloc(sizeof(*r));
	r->ts = now_s();
	memcpy(r->session, s->hash, sizeof(r->session));
	memcpy(r->owner, s->owner, sizeof(r->owner));
	r->tool = tool;
	r->action = action ? action : "";
	r->status = status;
	r->machine = machine ? sg_xstrdup(machine) : NULL;
	r->details = NULL;
	r->error = NULL;
	r->args = args;
	r->bulk = bulk;
	r->duration_ms = duration_ms;
	r->next = NULL;
	if (status[0] == 'e') {
		const char *text = json_string_value(json_object_get(json_array_get(
			json_object_get(call_result, "content"), 0), "text"));

		if (text && *text)
			r->error = sg_xasprintf("%.*s", AUDIT_ERROR_MAX, text);
	}
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
	flush_wait(-1);
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
	atomic_store(&backed, -1);
	pthread_mutex_unlock(&db_lock);
}
