/*
 * Inside docker.so's file operations (files.c and files_meta.c only): the
 * path rule, the small fixed scripts both run with exec when the container
 * has no runner (defined in files.c), and the exit codes the scripts
 * answer with.
 */
#ifndef SG_DOCKER_FILES_INT_H
#define SG_DOCKER_FILES_INT_H

#include "plugins/docker/docker.h"

#define DOCKER_SCRIPT_CAP (64u * 1024u)   /* output of small scripts */

/* Exit codes of the scripts, mapped to errors. */
enum {
	DOCKER_X_EXISTS = 20,
	DOCKER_X_ISDIR = 21,
	DOCKER_X_OWNER = 22,
	DOCKER_X_MOVE = 23,
	DOCKER_X_NOENT = 24,
	DOCKER_X_NOTDIR = 25
};

/* A script's first line when $1 may be a dangling link: exit
 * DOCKER_X_NOENT (24) unless $1 exists or is a link. */
#define DOCKER_SH_NOENT_UNLESS_LINK "if [ ! -e \"$1\" ] && [ ! -L \"$1\" ]; then exit 24; fi\n"

/* Makes path absolute (relative ones are under m's workspace) and drops
 * trailing slashes, into the caller's out[DOCKER_PATH_MAX].  Returns 0, or
 * -1 with err (SG_E_INVAL: empty, or longer than DOCKER_PATH_MAX - 1). */
int docker_abs(struct docker_ctx *ctx, const struct sg_machine *m, const char *path,
	       char *out, struct sg_err *err);

/* Runs `sh -c script sg args...` (args NULL-terminated, at most 3, all
 * borrowed) in m, from "/", keeping at most cap bytes of each output, within
 * [docker] api_timeout; call may be NULL.  res is the caller's, zeroed
 * before, released with docker_res_free() on every path.  Returns 0 when the
 * script ran (its exit code in res->exit_code), or -1 with err (SG_E_TIMEOUT,
 * SG_E_GONE, the exec's errors). */
int docker_script(struct docker_ctx *ctx, const struct sg_machine *m,
		  const char *script, const char *const *args, size_t cap,
		  struct sg_call *call, struct sg_exec_result *res,
		  struct sg_err *err);

/* Releases the output buffers of res (from docker_script). */
void docker_res_free(struct docker_ctx *ctx, struct sg_exec_result *res);

/* Fills err for a script's unexpected exit: "<what> <path> failed (exit N):
 * <first line of its stderr>", SG_E_PERM when that line says so, else
 * SG_E_IO.  Returns -1. */
int docker_sh_fail(struct docker_ctx *ctx, const struct sg_exec_result *res,
		   const char *what, const char *path, struct sg_err *err);

#endif
