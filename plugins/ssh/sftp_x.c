/*
 * Files through exec with stdin, for a host whose sshd has no sftp
 * subsystem (minimal images, some appliances) when the runner cannot serve
 * ([ssh] runner = false, or a host it cannot run on).  Each operation is one
 * fixed /bin/sh script; paths reach it as arguments, bytes as stdin.  A
 * write is atomic like SFTP's: a temporary file in the same directory, its
 * size checked against what was sent (a dropped channel ends cat early),
 * the old file's mode and owner, then `mv -f` (rename(2)).  The listing
 * and stat use GNU find's -printf (coreutils and findutils, as the sandbox
 * directory's scripts already assume).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/ssh/sftp_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SSH_X_MS        120000   /* one operation, 64 MB included */
#define SSH_X_LIST_CAP  (16u << 20)

/* Exit statuses the scripts use for what the slot reports by code. */
enum { SSH_X_NOTFOUND = 3, SSH_X_ISDIR = 4, SSH_X_NOTDIR = 5 };

static const char ssh_x_read_sh[] =
	"f=$1\n"
	"[ -e \"$f\" ] || exit 3\n"
	"[ -d \"$f\" ] && exit 4\n"
	"exec cat -- \"$f\"\n";

/* $1 file, $2 bytes coming, $3 mode of a new file, $4 1: make parents.
 * A refusal reads the rest of stdin first ("no"): the bytes are sent whole
 * before the answer is read, and a channel whose reader left would hold
 * the sender until its timeout. */
static const char ssh_x_write_sh[] =
	"no() { cat >/dev/null; exit \"$1\"; }\n"
	"f=$1 n=$2 m=$3\n"
	"d=${f%/*}; [ -n \"$d\" ] || d=/\n"
	"if [ \"$4\" = 1 ]; then mkdir -p -- \"$d\" || no 1; fi\n"
	"[ -d \"$d\" ] || no 3\n"
	"[ -d \"$f\" ] && [ ! -L \"$f\" ] && no 4\n"
	"t=$(mktemp \"$d/.sandgate-XXXXXXXXXXXXXXXX.tmp\") || no 1\n"
	"trap 'rm -f -- \"$t\"' EXIT\n"
	"trap 'exit 1' HUP INT TERM PIPE\n"
	"cat >\"$t\" || no 1\n"
	"s=$(wc -c <\"$t\") || exit 1\n"
	"[ \"$s\" -eq \"$n\" ] || { echo \"got $s of $n bytes\" >&2; exit 1; }\n"
	"if [ -e \"$f\" ]; then\n"
	"  chown --reference=\"$f\" -- \"$t\" 2>/dev/null\n"
	"  chmod --reference=\"$f\" -- \"$t\" || exit 1\n"
	"else\n"
	"  chmod \"$m\" -- \"$t\" || exit 1\n"
	"fi\n"
	"sync -- \"$t\" 2>/dev/null\n"
	"mv -f -- \"$t\" \"$f\" || exit 1\n"
	"trap - EXIT\n";

/* One record per entry: "type size mode mtime uid gid name\0". */
static const char ssh_x_list_sh[] =
	"[ -e \"$1\" ] || [ -L \"$1\" ] || exit 3\n"
	"[ -d \"$1\" ] || exit 5\n"
	"exec find \"$1\" -mindepth 1 -maxdepth 1 -printf '%y %s %m %T@ %U %G %P\\0'\n";

static const char ssh_x_stat_sh[] =
	"[ -e \"$1\" ] || [ -L \"$1\" ] || exit 3\n"
	"exec find \"$1\" -maxdepth 0 -printf '%y %s %m %T@ %U %G \\0'\n";

static const char ssh_x_remove_sh[] =
	"[ -e \"$1\" ] || [ -L \"$1\" ] || exit 3\n"
	"if [ \"$2\" = 1 ]; then exec rm -rf -- \"$1\"; fi\n"
	"if [ -d \"$1\" ] && [ ! -L \"$1\" ]; then exec rmdir -- \"$1\"; fi\n"
	"exec rm -f -- \"$1\"\n";

static const char ssh_x_realpath_sh[] = "exec realpath -zm -- \"$1\" \"$2\"\n";

/* Runs script with args $1.. (at most 4), stdin in[in_len] or none.  0 when
 * it exited 0 (res filled: the caller releases it), else -1 with err. */
static int ssh_x_run(struct ssh_pool *p, const char *script, const char *const *args,
		     const void *in, size_t in_len, size_t cap, const struct sg_call *call,
		     const char *what, const char *path, struct sg_exec_result *res,
		     struct sg_err *err)
{
	const struct sg_host_api *host = p->ctx->host;
	const char *argv[10] = { "/bin/sh", "-c", script, "sg" };
	struct ssh_run r = { .argv = argv, .cwd = "/", .timeout_ms = SSH_X_MS, .cap = cap,
			     .in = in, .in_len = in_len };
	char line[240];

	for (size_t i = 0; args[i] && i < 5; i++)
		argv[4 + i] = args[i];
	memset(res, 0, sizeof(*res));
	if (ssh_run(p, &r, call, res, err) < 0)
		return -1;
	if (!res->timed_out && res->exit_code == 0)
		return 0;
	ssh_first_line(&res->err, line, sizeof(line));
	if (res->timed_out)
		host->errf(err, SG_E_TIMEOUT, "ssh: %s '%s' on %s through exec timed out", what, path,
			   p->target.host);
	else if (res->exit_code == SSH_X_NOTFOUND)
		host->errf(err, SG_E_NOTFOUND, "'%s' does not exist", path);
	else if (res->exit_code == SSH_X_ISDIR)
		host->errf(err, SG_E_INVAL, "'%s' is a directory", path);
	else if (res->exit_code == SSH_X_NOTDIR)
		host->errf(err, SG_E_INVAL, "'%s' is not a directory", path);
	else
		host->errf(err, SG_E_BACKEND, "ssh: %s '%s' through exec on %s (no SFTP subsystem) "
			   "failed (%s %d): %s", what, path, p->target.host,
			   res->signal ? "signal" : "exit", res->signal ? res->signal : res->exit_code,
			   line[0] ? line : "no message");
	host->buf_release(&res->out);
	host->buf_release(&res->err);
	return -1;
}

static void ssh_x_release(struct ssh_pool *p, struct sg_exec_result *res)
{
	p->ctx->host->buf_release(&res->out);
	p->ctx->host->buf_release(&res->err);
}

int ssh_x_read(struct ssh_pool *p, const char *path, size_t max, const struct sg_call *call,
	       struct sg_buf *out, struct sg_err *err)
{
	const char *args[] = { path, NULL };
	struct sg_exec_result res;
	int rc = -1;

	if (ssh_x_run(p, ssh_x_read_sh, args, NULL, 0, max + 1, call, "reading", path, &res,
		      err) < 0)
		return -1;
	if (res.out_truncated || res.out.len > max)
		p->ctx->host->errf(err, SG_E_TOOBIG, "'%s' is larger than %zu bytes", path, max);
	else if (res.out.len && p->ctx->host->buf_append(out, res.out.data, res.out.len) < 0)
		p->ctx->host->errf(err, SG_E_NOMEM, "ssh: out of memory");
	else
		rc = 0;
	ssh_x_release(p, &res);
	return rc;
}

int ssh_x_write(struct ssh_pool *p, const char *path, const void *data, size_t len,
		unsigned mode, bool mkdir, const struct sg_call *call, struct sg_err *err)
{
	char n[24], m[16];
	const char *args[] = { path, n, m, mkdir ? "1" : "0", NULL };
	struct sg_exec_result res;

	snprintf(n, sizeof(n), "%zu", len);
	snprintf(m, sizeof(m), "%o", mode ? mode & 07777 : 0644);
	/* stdin always open for the bytes, even none: cat then reads EOF. */
	if (ssh_x_run(p, ssh_x_write_sh, args, data ? data : "", len, 4096, call, "writing", path,
		      &res, err) < 0)
		return -1;
	ssh_x_release(p, &res);
	return 0;
}

/* Parses "type size mode mtime uid gid " at *q (up to end) into a. */
static bool ssh_x_attrs(const char **q, const char *end, LIBSSH2_SFTP_ATTRIBUTES *a)
{
	char head[160], type;
	unsigned long long size, mtime;
	unsigned mode, uid, gid;
	int used = 0;
	size_t n = 0;

	while (*q + n < end && n + 1 < sizeof(head) && (*q)[n])
		n++;
	memcpy(head, *q, n);
	head[n] = '\0';
	/* Exactly one blank after gid: a name may begin with blanks ("%n"
	 * after " " would skip them all). */
	if (sscanf(head, "%c %llu %o %llu%*[.0-9] %u %u%n", &type, &size, &mode, &mtime, &uid, &gid,
		   &used) < 6 || !used || head[used] != ' ')
		return false;
	used++;
	memset(a, 0, sizeof(*a));
	a->flags = LIBSSH2_SFTP_ATTR_SIZE | LIBSSH2_SFTP_ATTR_PERMISSIONS |
		   LIBSSH2_SFTP_ATTR_ACMODTIME | LIBSSH2_SFTP_ATTR_UIDGID;
	a->filesize = size;
	a->permissions = (mode & 07777) | (type == 'f' ? LIBSSH2_SFTP_S_IFREG :
					   type == 'd' ? LIBSSH2_SFTP_S_IFDIR :
					   type == 'l' ? LIBSSH2_SFTP_S_IFLNK : LIBSSH2_SFTP_S_IFIFO);
	a->mtime = (unsigned long)mtime;
	a->uid = uid;
	a->gid = gid;
	*q += used;
	return true;
}

int ssh_x_stat(struct ssh_pool *p, const char *path, const struct sg_call *call,
	       struct sg_stat *st, struct sg_err *err)
{
	const char *args[] = { path, NULL };
	struct sg_exec_result res;
	LIBSSH2_SFTP_ATTRIBUTES a;
	const char *q;
	int rc = -1;

	if (ssh_x_run(p, ssh_x_stat_sh, args, NULL, 0, 4096, call, "stat", path, &res, err) < 0)
		return -1;
	q = res.out.data ? res.out.data : "";
	if (!ssh_x_attrs(&q, q + res.out.len, &a)) {
		p->ctx->host->errf(err, SG_E_BACKEND, "ssh: stat '%s' through exec on %s: an answer "
				   "find -printf does not give (GNU findutils needed)", path,
				   p->target.host);
	} else {
		memset(st, 0, sizeof(*st));
		st->type = ssh_ftype(&a);
		st->size = a.filesize;
		st->mode = (uint32_t)(a.permissions & 07777);
		st->mtime = (int64_t)a.mtime;
		st->uid = (uint32_t)a.uid;
		st->gid = (uint32_t)a.gid;
		rc = 0;
	}
	ssh_x_release(p, &res);
	return rc;
}

/* The records of ssh_x_list_sh into ents (names owned by the caller). */
static int ssh_x_parse(struct ssh_pool *p, const char *path, const struct sg_buf *b,
		       struct ssh_dirent **ents, size_t *n, struct sg_err *err)
{
	const char *q = b->data ? b->data : "", *end = q + b->len;
	size_t cap = 0;

	*ents = NULL;
	*n = 0;
	while (q < end) {
		struct ssh_dirent d;
		const char *nul;

		if (!ssh_x_attrs(&q, end, &d.a) || !(nul = memchr(q, '\0', (size_t)(end - q))))
			return p->ctx->host->errf(err, SG_E_BACKEND, "ssh: listing '%s' through exec on "
						  "%s: an answer find -printf does not give (GNU "
						  "findutils needed)", path, p->target.host);
		d.len = (size_t)(nul - q);
		d.name = strndup(q, d.len);
		if (*n == cap) {
			size_t nc = cap ? cap * 2 : 32;
			struct ssh_dirent *g = d.name ? realloc(*ents, nc * sizeof(*g)) : NULL;

			if (!g) {
				free(d.name);
				return p->ctx->host->errf(err, SG_E_NOMEM, "ssh: out of memory");
			}
			*ents = g;
			cap = nc;
		}
		if (!d.name)
			return p->ctx->host->errf(err, SG_E_NOMEM, "ssh: out of memory");
		(*ents)[(*n)++] = d;
		q = nul + 1;
	}
	return 0;
}

int ssh_x_list(struct ssh_pool *p, const char *path, const struct sg_call *call,
	       json_t **entries, struct sg_err *err)
{
	const char *args[] = { path, NULL };
	struct sg_exec_result res;
	struct ssh_dirent *ents = NULL;
	size_t n = 0;
	int rc;

	*entries = NULL;
	if (ssh_x_run(p, ssh_x_list_sh, args, NULL, 0, SSH_X_LIST_CAP, call, "listing", path, &res,
		      err) < 0)
		return -1;
	if (res.out_truncated)
		rc = p->ctx->host->errf(err, SG_E_TOOBIG, "listing '%s': more than %u bytes of names",
					path, SSH_X_LIST_CAP);
	else
		rc = ssh_x_parse(p, path, &res.out, &ents, &n, err);
	if (rc == 0 && !(*entries = ssh_dirents_json(path, ents, n)))
		rc = p->ctx->host->errf(err, SG_E_NOMEM, "ssh: out of memory");
	for (size_t i = 0; i < n; i++)
		free(ents[i].name);
	free(ents);
	ssh_x_release(p, &res);
	return rc;
}

int ssh_x_remove(struct ssh_pool *p, const char *path, bool recursive,
		 const struct sg_call *call, struct sg_err *err)
{
	const char *args[] = { path, recursive ? "1" : "0", NULL };
	struct sg_exec_result res;

	if (ssh_x_run(p, ssh_x_remove_sh, args, NULL, 0, 4096, call, "removing", path, &res,
		      err) < 0)
		return -1;
	ssh_x_release(p, &res);
	return 0;
}

int ssh_x_realpath2(struct ssh_pool *p, const char *dir, const char *target,
		    const struct sg_call *call, char *dir_out, char *target_out,
		    struct sg_err *err)
{
	const char *args[] = { dir, target, NULL };
	struct sg_exec_result res;
	const char *q, *end, *nul;
	int rc = -1;

	if (ssh_x_run(p, ssh_x_realpath_sh, args, NULL, 0, 2 * SSH_PATH_MAX + 2, call,
		      "resolving", target, &res, err) < 0)
		return -1;
	q = res.out.data ? res.out.data : "";
	end = q + res.out.len;
	nul = memchr(q, '\0', (size_t)(end - q));
	if (nul && (size_t)(nul - q) < SSH_PATH_MAX) {
		memcpy(dir_out, q, (size_t)(nul - q) + 1);
		q = nul + 1;
		nul = memchr(q, '\0', (size_t)(end - q));
		if (nul && (size_t)(nul - q) < SSH_PATH_MAX) {
			memcpy(target_out, q, (size_t)(nul - q) + 1);
			rc = 0;
		}
	}
	if (rc < 0)
		p->ctx->host->errf(err, SG_E_BACKEND, "ssh: resolving '%s' through exec on %s: no "
				   "answer from realpath -z (GNU coreutils needed)", target,
				   p->target.host);
	ssh_x_release(p, &res);
	return rc;
}
