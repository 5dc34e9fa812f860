/* Writing a whole file so that a reader sees either the old bytes or the
 * new ones, never a mix, and a crash leaves one of the two. */
#ifndef SG_CORE_CLI_ATOMIC_H
#define SG_CORE_CLI_ATOMIC_H

#include <stddef.h>
#include <sys/types.h>

#include <sandgate/plugin.h>

/* Writes data[0..len) to path through a temporary file in the same
 * directory (fsync, rename, then fsync of the directory).  mode is applied
 * exactly (no umask), so an existing file's mode can be kept; an existing
 * file's owner is kept where the process may (root).  A symlink at
 * path is replaced, not followed: give its target to keep the link.
 * Returns 0, or -1 with err naming the path and the system error (the
 * temporary file is removed then). */
int sg_write_file_atomic(const char *path, const void *data, size_t len, mode_t mode,
			 struct sg_err *err);

/* Creates path's parent directories that are missing (mode dir_mode, less
 * the umask).  Returns 0 or -1 with err. */
int sg_mkdir_parents(const char *path, mode_t dir_mode, struct sg_err *err);

/* The process umask (read without changing it for good). */
mode_t sg_current_umask(void);

#endif
