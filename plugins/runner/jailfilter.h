/* The jails' seccomp filter (jailfilter.c). */
#ifndef SG_RUNNER_JAILFILTER_H
#define SG_RUNNER_JAILFILTER_H

#include <stddef.h>

/* A classic BPF program for bwrap's --seccomp: *len bytes, static, for
 * this build's architecture (a jail's runner is this build's too).
 * add_key, request_key and keyctl fail with ENOSYS; a system call of a
 * foreign ABI (not x86_64, x32 or i386 on x86_64; not AArch64 on aarch64)
 * with ENOSYS too.  On an architecture it does not know, *len is 0: no
 * filter (the caller passes none). */
const void *rn_jail_filter(size_t *len);

#endif
