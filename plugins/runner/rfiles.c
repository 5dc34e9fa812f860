/*
 * File operations through a site's runner (capability "files"): see
 * rclient.h and doc/runner-protocol.md.
 *
 * Each operation is one FILE request on the site's connection (a read or a
 * list of more than one answer's worth is several, each asking from where
 * the last ended; a write sends its bytes as STDIN frames of 64 KiB and
 * commits with STDIN_CLOSE).  A request whose connection broke before it
 * could have had an effect is tried once more on a new runner; a write that
 * broke midway never replaced the file (the runner drops its temporary
 * file when it ends), so it is tried again whole; a runner killed outright
 * could not drop it, so the write sent again asks the new runner to sweep
 * such files from the target's directory (RN_FFLAG_SWEEP), and when it
 * could not be sent the site marks the directory and its next operation
 * of any kind sweeps it first (RN_FOP_SWEEP).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/runner/rclient.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RNC_FILE_WAIT_MS 120000 /* a file operation on a stuck filesystem */

/* The answer of one FILE request, parsed.  data points into the frame's
 * copy (valid until rnc_answer_free()). */
struct rnc_answer {
	unsigned char *raw;      /* the payload, malloc'd */
	size_t raw_len;
	int err;                 /* ERRNO, 0 on success */
	char text[200];          /* TEXT: where it failed */
	struct sg_stat st;
	bool has_stat;
	uint64_t size;
	uint64_t inode, dev;     /* READ: which file was read (0: not said) */
	uint32_t flags;
	const unsigned char *data;
	size_t data_len;
	const unsigned char *path; /* a refusal by ROOT: where the path leads (not NUL-ended) */
	size_t path_len;
};

static void rnc_answer_free(struct rnc_answer *a)
{
	free(a->raw);
	a->raw = NULL;
}

static void rnc_take_answer(int chan, const void *p, size_t n, void *ud)
{
	struct rnc_answer *a = ud;
	unsigned char *raw;

	if (chan != RN_R_FILE || a->raw)
		return;
	raw = malloc(n ? n : 1); /* rnc_answer_free() */
	if (!raw) {
		a->err = ENOMEM;
		return;
	}
	memcpy(raw, p, n);
	a->raw = raw;
	a->raw_len = n;
}

/* Fills st-like fields of one field; true when it was one. */
static bool rnc_stat_field(const struct rn_field *f, struct sg_stat *st, int *bad)
{
	uint32_t v;
	uint64_t w;

	switch (f->tag) {
	case RN_F_FTYPE:
		*bad |= rn_field_u32(f, &v);
		st->type = v <= RN_FT_OTHER ? (int)v : SG_FT_OTHER;
		return true;
	case RN_F_SIZE:
		*bad |= rn_field_u64(f, &w);
		st->size = w;
		return true;
	case RN_F_FMODE:
		*bad |= rn_field_u32(f, &v);
		st->mode = v & 07777;
		return true;
	case RN_F_MTIME:
		*bad |= rn_field_u64(f, &w);
		st->mtime = (int64_t)w;
		return true;
	case RN_F_UID:
		*bad |= rn_field_u32(f, &st->uid);
		return true;
	case RN_F_GID:
		*bad |= rn_field_u32(f, &st->gid);
		return true;
	default:
		return false;
	}
}

/* Parses a->raw.  -1 when it is malformed. */
static int rnc_answer_parse(struct rnc_answer *a)
{
	struct rn_iter it;
	struct rn_field f;
	uint32_t v;
	int rc, bad = 0;

	rn_iter_init(&it, a->raw, a->raw_len);
	while ((rc = rn_iter_next(&it, &f)) > 0) {
		if (rnc_stat_field(&f, &a->st, &bad)) {
			a->has_stat = true;
			if (f.tag == RN_F_SIZE)
				a->size = a->st.size;
		} else if (f.tag == RN_F_ERRNO) {
			bad |= rn_field_u32(&f, &v);
			a->err = v ? (int)(v & 0xffff) : EIO;
		} else if (f.tag == RN_F_TEXT) {
			size_t n = f.len < sizeof(a->text) - 1 ? f.len : sizeof(a->text) - 1;

			for (size_t i = 0; i < n; i++)
				a->text[i] = f.val[i] < 0x20 ? ' ' : (char)f.val[i];
			a->text[n] = '\0';
		} else if (f.tag == RN_F_FFLAGS) {
			bad |= rn_field_u32(&f, &a->flags);
		} else if (f.tag == RN_F_DATA) {
			a->data = f.val;
			a->data_len = f.len;
		} else if (f.tag == RN_F_INODE) {
			bad |= rn_field_u64(&f, &a->inode);
		} else if (f.tag == RN_F_DEV) {
			bad |= rn_field_u64(&f, &a->dev);
		} else if (f.tag == RN_F_PATH) {
			a->path = f.val;
			a->path_len = f.len;
		}
	}
	return rc < 0 || bad ? -1 : 0;
}

/* ---- errors ----------------------------------------------------------------------- */

static int rnc_errno_code(int e)
{
	switch (e) {
	case ENOENT:
		return SG_E_NOTFOUND;
	case EACCES:
	case EPERM:
	case EROFS:
		return SG_E_PERM;
	case EEXIST:
	case ENOTEMPTY:
		return SG_E_EXISTS;
	case EISDIR:
	case ENOTDIR:
	case EINVAL:
	case ELOOP:
	case ENAMETOOLONG:
		return SG_E_INVAL;
	case EFBIG:
	case ENOSPC:
	case EDQUOT:
		return SG_E_TOOBIG;
	case ENOMEM:
		return SG_E_NOMEM;
	case ECANCELED:
		return SG_E_CANCELLED;
	default:
		return SG_E_IO;
	}
}

/* The causes a caller can fix are worded as every backend words them
 * (doc/errors.md): what is wrong with the path, then what to do. */
static int rnc_file_fail(struct rnc_site *s, const char *op, const char *root,
			 const char *path, const struct rnc_answer *a, struct sg_err *err)
{
	const struct sg_host_api *h = s->host;
	int rc;

	if (root && a->err == EPERM && a->path)
		rc = h->errf(err, SG_E_PERM, "%s: '%s' leads to %.*s, outside sandbox directory %s: "
			     "the file tools keep to the sandbox's directory", s->ops->tag, path,
			     (int)a->path_len, (const char *)a->path, root);
	else if (root && strcmp(a->text, root) == 0) /* the root itself failed */
		rc = h->errf(err, rnc_errno_code(a->err), "%s: sandbox directory %s: %s", s->ops->tag,
			     root, strerror(a->err));
	else if (a->err == ENOENT)
		rc = h->errf(err, SG_E_NOTFOUND, "no such file: %s", path);
	else if (a->err == ENOTDIR)
		rc = h->errf(err, SG_E_INVAL, "%s: not a directory: check each directory of the path", path);
	else if (a->err == ELOOP)
		rc = h->errf(err, SG_E_INVAL, "%s: too many levels of symbolic links (a symbolic link loop): "
			     "fix or remove the link", path);
	else if (a->err == EISDIR && !strcmp(op, "read"))
		rc = h->errf(err, SG_E_INVAL, "%s is a directory: list it instead of reading it", path);
	else
		rc = h->errf(err, rnc_errno_code(a->err), "%s: %s %s: %s%s%s%s", s->ops->tag, op, path,
			     strerror(a->err), a->text[0] ? " (" : "", a->text, a->text[0] ? ")" : "");

	if (err)
		err->sys_errno = a->err;
	return rc;
}

/* ---- one request --------------------------------------------------------------------- */

/* What a request sends: its fields, and for a write the bytes. */
struct rnc_freq {
	const char *op_name;     /* for messages: "read" */
	const char *cap;         /* the capability it needs: RN_CAP_FILES */
	const char *path;
	const char *root;        /* ROOT, or NULL */
	struct rn_buf fields;
	const void *data;        /* a write's bytes, or NULL */
	size_t data_len;
	uint32_t fflags;         /* a write's FFLAGS, RN_FFLAG_SWEEP added when sent again */
};

/* Waits for the answer of q, cancelling on the call's cancellation. */
static int rnc_file_wait(struct rnc_site *s, struct rn_req *q, const struct sg_call *call,
			 struct rnc_answer *a, struct sg_err *err)
{
	int cfd = call ? s->host->cancel_fd(call) : -1;
	int waited = 0, w;
	char why[256];
	enum rn_req_state st;

	for (;;) {
		st = rn_req_drain(q, rnc_take_answer, a, NULL, why, sizeof(why));
		if (st == RN_REQ_DONE)
			return 0;
		if (st == RN_REQ_FAILED)
			return s->host->errf(err, strstr(why, "refused") ? SG_E_PROTO : RNC_E_RETRY,
					     "%s: %s", s->ops->tag, why);
		if (waited >= RNC_FILE_WAIT_MS) {
			rn_req_kill(q, 0);
			return s->host->errf(err, SG_E_TIMEOUT, "%s: the runner did not answer "
					     "a file operation within %d s", s->ops->tag,
					     RNC_FILE_WAIT_MS / 1000);
		}
		w = rn_req_wait(q, 1000, cfd);
		waited += 1000;
		if (w == 2 || (call && s->host->cancelled(call))) {
			rn_req_kill(q, 0); /* drops a write */
			return s->host->errf(err, SG_E_CANCELLED, "%s: cancelled", s->ops->tag);
		}
		if (w == 1)
			waited -= 1000; /* news: the runner is alive */
	}
}

/* Waits for q's answer into *a (zeroed), parsed, and drops q: 0, or -1
 * with err. */
static int rnc_file_answer(struct rnc_site *s, struct rn_req *q, const struct sg_call *call,
			   struct rnc_answer *a, struct sg_err *err)
{
	int rc = rnc_file_wait(s, q, call, a, err);

	rn_req_put(q);
	if (rc == 0 && a->raw && rnc_answer_parse(a) < 0) {
		rnc_answer_free(a);
		return s->host->errf(err, SG_E_PROTO, "%s: a malformed file answer from the runner",
				     s->ops->tag);
	}
	return rc;
}

/* One request on connection c: 0 with *a, -1 with err.  With sweep, a
 * write first has the runner remove the temporary files of dead runners. */
static int rnc_file_once(struct rnc_site *s, struct rn_conn *c, const struct rnc_freq *f,
			 bool sweep, const struct sg_call *call, struct rnc_answer *a,
			 struct sg_err *err)
{
	struct rn_buf fields = { 0 };
	struct rn_req *q = NULL;
	char why[256];
	int rc;

	memset(a, 0, sizeof(*a));
	if (f->data && sweep) {
		/* a later FFLAGS field is the one the runner takes */
		rn_buf_add(&fields, f->fields.data, f->fields.len);
		rn_put_u32(&fields, RN_F_FFLAGS, f->fflags | RN_FFLAG_SWEEP);
		if (fields.oom) {
			rn_buf_free(&fields);
			return s->host->errf(err, SG_E_NOMEM, "%s: out of memory", s->ops->tag);
		}
	}
	if (f->data) /* a WRITE: its bytes follow, then STDIN_CLOSE commits */
		rc = rn_request_stdin(c, RN_FILE, fields.data ? fields.data : f->fields.data,
				      fields.data ? fields.len : f->fields.len, f->data,
				      f->data_len, &q, why, sizeof(why));
	else
		rc = rn_request(c, RN_FILE, f->fields.data, f->fields.len, &q, why, sizeof(why));
	rn_buf_free(&fields);
	if (rc < 0)
		return s->host->errf(err, RNC_E_RETRY, "%s: runner: %s", s->ops->tag, why);
	if (rc > 0)
		return s->host->errf(err, SG_E_TOOBIG, "%s: %s %s: %s", s->ops->tag, f->op_name,
				     f->path, why);
	return rnc_file_answer(s, q, call, a, err);
}

/* The length of path's directory part ("/a/b" of "/a/b/c", "/" of "/c";
 * 0 for none). */
static size_t dir_len(const char *path)
{
	const char *slash = path ? strrchr(path, '/') : NULL;

	return !slash ? 0 : slash == path ? 1 : (size_t)(slash - path);
}

/* Whether write f goes into the directory a broken write left its
 * temporary file in (s->lock held). */
static bool sweep_here(const struct rnc_site *s, const struct rnc_freq *f)
{
	size_t n = dir_len(f->path);

	return s->sweep && f->data && n == strlen(s->sweep_dir) &&
	       strncmp(f->path, s->sweep_dir, n) == 0;
}

/* Starts the fields of an operation; with root, what it touches must lead
 * beneath root (capability "files-beneath"). */
static void rnc_freq_init(struct rnc_freq *f, const char *op_name, uint32_t op,
			  const char *root, const char *path)
{
	memset(f, 0, sizeof(*f));
	f->op_name = op_name;
	f->cap = root ? RN_CAP_BENEATH : RN_CAP_FILES;
	f->path = path;
	f->root = root;
	rn_put_u32(&f->fields, RN_F_FOP, op);
	rn_put_str(&f->fields, RN_F_PATH, path);
	if (root)
		rn_put_str(&f->fields, RN_F_ROOT, root);
}

/* Marks path's directory for a sweep: a write there broke with its
 * runner, which may have left its temporary file behind. */
static void sweep_mark(struct rnc_site *s, const char *path)
{
	size_t n = dir_len(path);

	pthread_mutex_lock(&s->lock);
	if (n > 0 && n < sizeof(s->sweep_dir)) {
		memcpy(s->sweep_dir, path, n);
		s->sweep_dir[n] = '\0';
		s->sweep = true;
		s->sweep_gen++;
	}
	pthread_mutex_unlock(&s->lock);
}

/* Before f, when it is not a write into the marked directory (that one
 * sweeps by its flag): has c's runner sweep it (RN_FOP_SWEEP), so the
 * file is gone once any operation reaches the machine again.  Whatever
 * the runner answers ends the mark (done, the directory gone, or the
 * request refused: asking again before every operation would not change
 * it), unless a write broke again meanwhile (sweep_gen); it stays when
 * there was no answer (an older runner, a broken connection, a cancel). */
static void sweep_first(struct rnc_site *s, struct rn_conn *c, const struct rnc_freq *f,
			const struct sg_call *call)
{
	char dir[sizeof(s->sweep_dir)];
	struct rnc_freq sf;
	struct rnc_answer a;
	struct sg_err e = { 0 };
	unsigned gen = 0;
	bool due;
	int rc = -1;

	pthread_mutex_lock(&s->lock);
	due = s->sweep && !sweep_here(s, f);
	if (due) {
		memcpy(dir, s->sweep_dir, sizeof(dir));
		gen = s->sweep_gen;
	}
	pthread_mutex_unlock(&s->lock);
	if (!due || !rn_conn_has_cap(c, RN_CAP_SWEEP))
		return;
	rnc_freq_init(&sf, "sweep", RN_FOP_SWEEP, NULL, dir);
	if (!sf.fields.oom)
		rc = rnc_file_once(s, c, &sf, false, call, &a, &e);
	if (rc == 0)
		rnc_answer_free(&a);
	if (rc == 0 || (rc < 0 && e.code == SG_E_PROTO)) {
		pthread_mutex_lock(&s->lock);
		if (s->sweep_gen == gen)
			s->sweep = false;
		pthread_mutex_unlock(&s->lock);
	}
	rn_buf_free(&sf.fields);
}

/* Gets a connection with the capability and runs f, once more on a new
 * runner when the connection broke first.  Returns 0 (*a), 1 (no runner or
 * no capability), -1 with err. */
static int rnc_file_do(struct rnc_site *s, const struct rnc_freq *f, const struct sg_call *call,
		       struct rnc_answer *a, struct sg_err *err)
{
	struct sg_err e = { 0 };
	struct rn_conn *c;
	bool sweep;
	int rc = 1;

	if (f->fields.oom)
		return s->host->errf(err, SG_E_NOMEM, "%s: out of memory", s->ops->tag);
	for (int attempt = 0; attempt < 2; attempt++) {
		rc = rnc_site_get(s, &c, err);
		if (rc != 0)
			return rc;
		if (!rn_conn_has_cap(c, f->cap)) {
			rn_conn_put(c);
			if (s->ops->plain)
				return 1;
			return s->host->errf(err, SG_E_NOTSUP, "%s: the runner %s lacks capability "
					     "'%s' (an older build)", s->ops->tag, s->where, f->cap);
		}
		e.code = SG_E_OK;
		sweep_first(s, c, f, call);
		pthread_mutex_lock(&s->lock);
		sweep = sweep_here(s, f);
		if (sweep)
			s->sweep = false;
		sweep = sweep || attempt > 0;
		pthread_mutex_unlock(&s->lock);
		rc = rnc_file_once(s, c, f, sweep, call, a, &e);
		rn_conn_put(c);
		if (rc < 0 && e.code == RNC_E_RETRY && f->data)
			sweep_mark(s, f->path); /* before the retry: it may not connect */
		if (rc == 0) {
			/* Counted for status: which way a plugin's file tools went. */
			pthread_mutex_lock(&s->lock);
			s->file_ops++;
			pthread_mutex_unlock(&s->lock);
		}
		if (rc == 0 || e.code != RNC_E_RETRY)
			break;
	}
	if (rc < 0) {
		if (e.code == RNC_E_RETRY)
			e.code = SG_E_UNAVAILABLE;
		if (err)
			*err = e;
	}
	return rc;
}

/* Runs a request whose answer only says success or failure. */
static int rnc_file_simple(struct rnc_site *s, struct rnc_freq *f, const struct sg_call *call,
			   struct sg_err *err)
{
	struct rnc_answer a;
	int rc = rnc_file_do(s, f, call, &a, err);

	rn_buf_free(&f->fields);
	if (rc != 0)
		return rc;
	rc = a.err ? rnc_file_fail(s, f->op_name, f->root, f->path, &a, err) : 0;
	rnc_answer_free(&a);
	return rc;
}

/* ---- the operations ------------------------------------------------------------------- */

/* The fields of READ(at, want), want cut to one answer's RN_FILE_CHUNK. */
static void rnc_read_freq(struct rnc_freq *f, const char *root, const char *path, uint64_t at,
			  size_t want)
{
	rnc_freq_init(f, "read", RN_FOP_READ, root, path);
	rn_put_u64(&f->fields, RN_F_OFFSET, at);
	rn_put_u32(&f->fields, RN_F_LENGTH, want < RN_FILE_CHUNK ? (uint32_t)want : RN_FILE_CHUNK);
}

/* One READ of up to want bytes at `at`, with rnc_file_do's retries: 0 with
 * *a (its ERRNO for the caller: rnc_read_take), else as rnc_file_do. */
static int rnc_read_once(struct rnc_site *s, const char *root, const char *path, uint64_t at,
			 size_t want, const struct sg_call *call, struct rnc_answer *a,
			 struct sg_err *err)
{
	struct rnc_freq f;
	int rc;

	rnc_read_freq(&f, root, path, at, want);
	rc = rnc_file_do(s, &f, call, a, err);
	rn_buf_free(&f.fields);
	return rc;
}

/* Each READ opens the file anew: a file replaced (renamed over) between two
 * of them is read again from the start, so a reader never gets the head of
 * one version and the tail of another.  After this many, the last error. */
#define RNC_READ_RESTARTS 8

/* READs in flight at once past a large read's first: the runner finds the
 * next request waiting as it sends an answer, rather than idling for a
 * round trip through the engine after each (128 of them for 64 MiB). */
#define RNC_READ_AHEAD 4

/* What a read has so far: the bytes go to out from base; at is the next
 * offset; inode and dev say which file (0: none read yet). */
struct rnc_reading {
	const char *root, *path;
	uint64_t offset, at, inode, dev, size;
	size_t max, base;
	bool whole;
	bool serial;       /* an answer came short: one READ at a time to the end */
	struct sg_buf *out;
};

/* How a step of a read ended, past the first READ's 0 (read on), 1 (no
 * runner: the plugin's own way) and -1 (err). */
enum {
	RD_REPLACED = 2,  /* the file was replaced: read it again */
	RD_SERIAL = 3,    /* one READ at a time from here (rnc_read_window) */
	RD_DONE = 4
};

/* Takes answer a of READ(at, want) into r.  Returns 0 to read on,
 * RD_DONE, RD_REPLACED, or -1 with err.  Frees a. */
static int rnc_read_take(struct rnc_site *s, struct rnc_reading *r, struct rnc_answer *a,
			 size_t want, struct sg_err *err)
{
	int rc = 0;

	if (a->err) {
		rc = rnc_file_fail(s, "read", r->root, r->path, a, err);
	} else if (r->at > r->offset && (a->inode != r->inode || a->dev != r->dev)) {
		rc = RD_REPLACED;
	} else if (r->whole && a->size > r->offset && a->size - r->offset > r->max) {
		rc = s->host->errf(err, SG_E_TOOBIG, "%s: read %s: the file holds %llu bytes, "
				   "more than the %zu allowed", s->ops->tag, r->path,
				   (unsigned long long)(a->size - r->offset), r->max);
	} else if (a->data_len > want) {
		rc = s->host->errf(err, SG_E_PROTO, "%s: the runner sent more than asked", s->ops->tag);
	} else if (a->data_len && s->host->buf_append(r->out, a->data, a->data_len) < 0) {
		rc = s->host->errf(err, SG_E_NOMEM, "%s: out of memory", s->ops->tag);
	} else {
		r->inode = a->inode;
		r->dev = a->dev;
		r->size = a->size;
		r->at += a->data_len;
		if (r->at - r->offset >= r->max || r->at >= r->size || a->data_len == 0)
			rc = RD_DONE;
	}
	rnc_answer_free(a);
	return rc;
}

/* How much the READ at r->at asks for. */
static size_t rnc_read_want(const struct rnc_reading *r, uint64_t at)
{
	size_t want = r->max - (size_t)(at - r->offset);

	return want < RN_FILE_CHUNK ? want : RN_FILE_CHUNK;
}

/* Sends READ(at, want) on c: 0 with *q, else as rn_request. */
static int rnc_read_send(struct rn_conn *c, const struct rnc_reading *r, uint64_t at, size_t want,
			 struct rn_req **q, char *why, size_t size)
{
	struct rnc_freq f;
	int rc = -1;

	rnc_read_freq(&f, r->root, r->path, at, want);
	if (!f.fields.oom)
		rc = rn_request(c, RN_FILE, f.fields.data, f.fields.len, q, why, size);
	else
		snprintf(why, size, "out of memory");
	rn_buf_free(&f.fields);
	return rc;
}

/* Reads on from r->at, up to RNC_READ_AHEAD READs in flight on one
 * connection, until the size the last answer gave.  Returns RD_DONE,
 * RD_REPLACED, -1 with err, or RD_SERIAL when the window cannot go on (no
 * connection, a broken one, a short answer): the one-at-a-time way reads
 * on from r->at, with its retries.  The READs still in flight when it
 * stops are dropped. */
static int rnc_read_window(struct rnc_site *s, struct rnc_reading *r, const struct sg_call *call,
			   struct sg_err *err)
{
	struct rn_req *q[RNC_READ_AHEAD];
	size_t want[RNC_READ_AHEAD];
	uint64_t next = r->at, end = r->size < r->offset + r->max ? r->size : r->offset + r->max;
	struct sg_err e = { 0 };
	struct rnc_answer a;
	struct rn_conn *c;
	unsigned head = 0, n = 0;
	char why[256];
	int rc = 0;

	if (rnc_site_get(s, &c, NULL) != 0)
		return RD_SERIAL;
	if (!rn_conn_has_cap(c, r->root ? RN_CAP_BENEATH : RN_CAP_FILES)) {
		rn_conn_put(c);
		return RD_SERIAL;
	}
	while (rc == 0) {
		while (n < RNC_READ_AHEAD && next < end) {
			unsigned i = (head + n) % RNC_READ_AHEAD;

			want[i] = rnc_read_want(r, next);
			if (rnc_read_send(c, r, next, want[i], &q[i], why, sizeof(why)) != 0)
				break;
			next += want[i];
			n++;
		}
		if (n == 0) {
			rc = r->at < end ? RD_SERIAL : RD_DONE;
			break;
		}
		memset(&a, 0, sizeof(a));
		rc = rnc_file_answer(s, q[head], call, &a, &e);
		if (rc == 0) {
			uint64_t from = r->at;

			rc = rnc_read_take(s, r, &a, want[head], &e);
			/* short of what was asked, not at the end: the READs
			 * after it would leave a hole, so one at a time on */
			if (rc == 0 && r->at - from < want[head]) {
				r->serial = true;
				rc = RD_SERIAL;
			}
		} else if (e.code == RNC_E_RETRY) {
			rc = RD_SERIAL; /* the connection broke: a new runner reads on */
		}
		head = (head + 1) % RNC_READ_AHEAD;
		n--;
		if (rc == 0 && r->at >= end)
			rc = RD_DONE;
	}
	for (; n > 0; n--, head = (head + 1) % RNC_READ_AHEAD)
		rn_req_put(q[head]);
	rn_conn_put(c);
	if (rc < 0 && err)
		*err = e;
	return rc;
}

static int file_read(struct rnc_site *s, const char *root, const char *path, uint64_t offset,
		     size_t max, bool whole, const struct sg_call *call, struct sg_buf *out,
		     uint64_t *size_out, struct sg_err *err)
{
	struct rnc_reading r = { .root = root, .path = path, .offset = offset, .at = offset, .max = max,
				 .base = out->len, .whole = whole, .out = out };
	struct rnc_answer a;
	int rc, restarts = 0;

	for (;;) {
		size_t want = rnc_read_want(&r, r.at);

		rc = rnc_read_once(s, root, path, r.at, want, call, &a, err);
		if (rc != 0)
			break;
		rc = rnc_read_take(s, &r, &a, want, err);
		/* past the first READ, the rest is known: asked for ahead */
		if (rc == 0 && !r.serial && r.size > r.at && r.size - r.at > RN_FILE_CHUNK)
			rc = rnc_read_window(s, &r, call, err);
		if (rc == RD_REPLACED) {
			if (++restarts > RNC_READ_RESTARTS) {
				rc = s->host->errf(err, SG_E_IO, "%s: read %s: the file was replaced "
						   "%d times while it was read: read it again",
						   s->ops->tag, path, RNC_READ_RESTARTS);
				break;
			}
			out->len = r.base;
			r.at = offset;
			r.inode = r.dev = 0;
			r.serial = false;
			continue;
		}
		if (rc != 0 && rc != RD_SERIAL)
			break;
	}
	*size_out = r.size;
	rc = rc == RD_DONE ? 0 : rc;
	if (rc != 0)
		out->len = r.base;
	if (out->data)
		out->data[out->len] = '\0';
	return rc;
}

int rnc_file_read(struct rnc_site *s, const char *root, const char *path, uint64_t offset,
		  size_t max, bool whole, const struct sg_call *call, struct sg_buf *out,
		  struct sg_err *err)
{
	uint64_t size;

	return file_read(s, root, path, offset, max, whole, call, out, &size, err);
}

int rnc_file_read_at(struct rnc_site *s, const char *root, const char *path, uint64_t offset,
		     size_t len, const struct sg_call *call, struct sg_buf *out, uint64_t *size,
		     struct sg_err *err)
{
	int rc;

	*size = 0;
	rc = file_read(s, root, path, offset, len, false, call, out, size, err);
	if (rc != 0)
		*size = 0;
	return rc;
}

int rnc_file_write(struct rnc_site *s, const char *root, const char *path, const void *data,
		   size_t len, uint32_t mode, bool mkdir, const struct sg_call *call,
		   struct sg_err *err)
{
	struct rnc_freq f;

	rnc_freq_init(&f, "write", RN_FOP_WRITE, root, path);
	if (mode)
		rn_put_u32(&f.fields, RN_F_FMODE, mode & 07777);
	if (mkdir) {
		f.fflags = RN_FFLAG_PARENTS;
		rn_put_u32(&f.fields, RN_F_FFLAGS, f.fflags);
	}
	f.data = data ? data : "";
	f.data_len = len;
	return rnc_file_simple(s, &f, call, err);
}

int rnc_file_stat(struct rnc_site *s, const char *root, const char *path,
		  const struct sg_call *call, struct sg_stat *st, struct sg_err *err)
{
	struct rnc_answer a;
	struct rnc_freq f;
	int rc;

	rnc_freq_init(&f, "stat", RN_FOP_STAT, root, path);
	rc = rnc_file_do(s, &f, call, &a, err);
	rn_buf_free(&f.fields);
	if (rc != 0)
		return rc;
	if (a.err)
		rc = rnc_file_fail(s, "stat", root, path, &a, err);
	else if (!a.has_stat)
		rc = s->host->errf(err, SG_E_PROTO, "%s: stat %s: the runner's answer has no "
				   "attributes", s->ops->tag, path);
	else
		*st = a.st;
	rnc_answer_free(&a);
	return rc;
}

static const char *rnc_type_name(int type)
{
	static const char *const names[] = { "file", "dir", "symlink", "other" };

	return type >= 0 && type <= SG_FT_OTHER ? names[type] : "other";
}

/* Length of the valid UTF-8 sequence at p (RFC 3629: no overlong forms, no
 * surrogates, at most U+10FFFF), or 0. */
static size_t rnc_utf8_len(const unsigned char *p, size_t n)
{
	size_t len = p[0] < 0x80 ? 1 : p[0] >= 0xc2 && p[0] <= 0xdf ? 2 :
		     p[0] >= 0xe0 && p[0] <= 0xef ? 3 : p[0] >= 0xf0 && p[0] <= 0xf4 ? 4 : 0;

	if (len == 0 || len > n)
		return 0;
	for (size_t k = 1; k < len; k++)
		if ((p[k] & 0xc0) != 0x80)
			return 0;
	if ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] >= 0xa0) ||
	    (p[0] == 0xf0 && p[1] < 0x90) || (p[0] == 0xf4 && p[1] >= 0x90))
		return 0;
	return len;
}

/* A JSON string of a name, which need not be UTF-8: each byte that is not
 * part of valid UTF-8 becomes U+FFFD rather than losing the entry. */
static json_t *rnc_json_text(const char *s)
{
	size_t n = strlen(s), o = 0, len;
	json_t *j = json_stringn(s, n);
	char *t;

	if (j)
		return j;
	t = malloc(n * 3 + 1); /* freed below */
	if (!t)
		return NULL;
	for (size_t i = 0; i < n; i += len ? len : 1) {
		len = rnc_utf8_len((const unsigned char *)s + i, n - i);
		if (len)
			memcpy(t + o, s + i, len);
		else
			memcpy(t + o, "\xef\xbf\xbd", 3);
		o += len ? len : 3;
	}
	j = json_stringn(t, o);
	free(t);
	return j;
}

/* Appends the entries of one LIST answer to arr; returns how many, or -1. */
static long rnc_list_entries(const struct rnc_answer *a, const char *dir, json_t *arr)
{
	struct rn_iter it, sub;
	struct rn_field f, g;
	long n = 0;
	int rc;

	rn_iter_init(&it, a->raw, a->raw_len);
	while ((rc = rn_iter_next(&it, &f)) > 0) {
		struct sg_stat st = { .type = SG_FT_OTHER };
		char name[1024] = "", *full;
		int bad = 0, src;
		json_t *e;

		if (f.tag != RN_F_ENTRY)
			continue;
		rn_iter_init(&sub, f.val, f.len);
		while ((src = rn_iter_next(&sub, &g)) > 0)
			if (g.tag == RN_F_NAME)
				bad |= rn_field_str(&g, name, sizeof(name));
			else
				rnc_stat_field(&g, &st, &bad);
		if (src < 0 || bad || !name[0] || strchr(name, '/'))
			return -1;
		full = malloc(strlen(dir) + strlen(name) + 2); /* freed below */
		if (!full)
			return -1;
		sprintf(full, "%s%s%s", dir, dir[strlen(dir) - 1] == '/' ? "" : "/", name);
		e = json_pack("{s:o, s:o, s:s, s:I, s:i, s:I}", "name", rnc_json_text(name),
			      "path", rnc_json_text(full), "type", rnc_type_name(st.type),
			      "size", (json_int_t)st.size, "mode", (int)st.mode,
			      "mtime", (json_int_t)st.mtime);
		free(full);
		if (!e || json_array_append_new(arr, e) < 0)
			return -1;
		n++;
	}
	return rc < 0 ? -1 : n;
}

int rnc_file_list(struct rnc_site *s, const char *root, const char *path,
		  const struct sg_call *call, json_t **entries, struct sg_err *err)
{
	json_t *arr = json_array();
	struct rnc_answer a;
	struct rnc_freq f;
	uint64_t at = 0;
	long got;
	int rc;

	*entries = NULL;
	if (!arr)
		return s->host->errf(err, SG_E_NOMEM, "%s: out of memory", s->ops->tag);
	for (;;) {
		rnc_freq_init(&f, "list", RN_FOP_LIST, root, path);
		rn_put_u64(&f.fields, RN_F_OFFSET, at);
		rc = rnc_file_do(s, &f, call, &a, err);
		rn_buf_free(&f.fields);
		if (rc != 0)
			break;
		if (a.err == ENOTDIR) { /* the fix, not just strerror's words */
			rc = s->host->errf(err, SG_E_INVAL, "%s: %s is not a directory: read it "
					   "instead of listing it", s->ops->tag, path);
		} else if (a.err) {
			rc = rnc_file_fail(s, "list", root, path, &a, err);
		} else if ((got = rnc_list_entries(&a, path, arr)) < 0) {
			rc = s->host->errf(err, SG_E_PROTO, "%s: list %s: a malformed entry from "
					   "the runner", s->ops->tag, path);
		} else {
			at += (uint64_t)got;
			if (a.flags & RN_FFLAG_CUT)
				s->host->log(SG_LOG_WARNING, s->ops->tag, "list %s: more than %u "
					     "entries, the rest is not listed", path, RN_LIST_MAX);
			/* A runner looks at RN_LIST_MAX entries at most: one that
			 * says MORE past them (a command speaking in its place) is
			 * not asked on, and the call can end between pages. */
			if (at > RN_LIST_MAX) {
				rc = s->host->errf(err, SG_E_PROTO, "%s: list %s: the runner sent more "
						   "than %u entries", s->ops->tag, path, RN_LIST_MAX);
			} else if ((a.flags & RN_FFLAG_MORE) && got > 0 && call &&
				   s->host->cancelled(call)) {
				rc = s->host->errf(err, SG_E_CANCELLED, "%s: list %s: cancelled",
						   s->ops->tag, path);
			} else if ((a.flags & RN_FFLAG_MORE) && got > 0) {
				rnc_answer_free(&a);
				continue;
			}
		}
		rnc_answer_free(&a);
		break;
	}
	if (rc != 0) {
		json_decref(arr);
		return rc;
	}
	*entries = arr;
	return 0;
}

int rnc_file_mkdir(struct rnc_site *s, const char *root, const char *path, uint32_t mode,
		   bool parents, const struct sg_call *call, struct sg_err *err)
{
	struct rnc_freq f;

	rnc_freq_init(&f, "mkdir", RN_FOP_MKDIR, root, path);
	if (mode)
		rn_put_u32(&f.fields, RN_F_FMODE, mode & 07777);
	if (parents)
		rn_put_u32(&f.fields, RN_F_FFLAGS, RN_FFLAG_PARENTS);
	return rnc_file_simple(s, &f, call, err);
}

int rnc_file_remove(struct rnc_site *s, const char *root, const char *path, bool recursive,
		    const struct sg_call *call, struct sg_err *err)
{
	struct rnc_freq f;

	rnc_freq_init(&f, "remove", RN_FOP_REMOVE, root, path);
	if (recursive)
		rn_put_u32(&f.fields, RN_F_FFLAGS, RN_FFLAG_RECURSIVE);
	return rnc_file_simple(s, &f, call, err);
}

int rnc_file_rename(struct rnc_site *s, const char *root, const char *from, const char *to,
		    const struct sg_call *call, struct sg_err *err)
{
	struct rnc_freq f;

	rnc_freq_init(&f, "rename", RN_FOP_RENAME, root, from);
	rn_put_str(&f.fields, RN_F_PATH2, to);
	return rnc_file_simple(s, &f, call, err);
}
