/*
 * The jails' system call filter (a local sandbox's on this host, a jailed
 * SSH sandbox's there), handed to bwrap (--seccomp FD) and in force from
 * the runner on.  Namespaces leave the kernel's keyrings shared:
 * a jail inherited sandgate's session keyring (whatever the operator's login
 * or service manager had put there, readable), and every sandbox of a root
 * sandgate runs as the one sandbox user, whose user keyring any of them can
 * write and read (a channel between sessions).  So add_key, request_key and
 * keyctl fail with ENOSYS, as under Docker's default profile, Flatpak and
 * systemd's SystemCallFilter=~@keyring.  A classic BPF program
 * (linux/filter.h, Documentation/userspace-api/seccomp_filter.rst): the
 * architecture is checked first, so that a call of another ABI (i386 on
 * x86_64) is judged by its own numbers.
 */
#include "config.h"

#include "plugins/runner/jailfilter.h"

#include <errno.h>
#include <stddef.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/syscall.h>

#define LOAD(field) BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, field))
#define IS(k, yes, no) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (k), (yes), (no))
#define RET(v) BPF_STMT(BPF_RET | BPF_K, (v))
#define DENY RET(SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA))

/* Jumps are relative (the next instruction is 0); each line says where
 * it goes by the instruction's index in its own comment. */
#if defined(__x86_64__)
static const struct sock_filter filter[] = {
	/*  0 */ LOAD(arch),
	/*  1 */ IS(AUDIT_ARCH_X86_64, 0, 6),        /* x86_64 (and x32): 2, else 8 */
	/*  2 */ LOAD(nr),
	/*  3 */ BPF_STMT(BPF_ALU | BPF_AND | BPF_K, ~0x40000000u), /* x32's bit off: same numbers */
	/*  4 */ IS(__NR_add_key, 9, 0),             /* 14 */
	/*  5 */ IS(__NR_request_key, 8, 0),         /* 14 */
	/*  6 */ IS(__NR_keyctl, 7, 0),              /* 14 */
	/*  7 */ RET(SECCOMP_RET_ALLOW),
	/*  8 */ IS(AUDIT_ARCH_I386, 0, 5),          /* i386: 9, any other ABI: 14 */
	/*  9 */ LOAD(nr),
	/* 10 */ IS(286, 3, 0),                      /* add_key: 14 */
	/* 11 */ IS(287, 2, 0),                      /* request_key: 14 */
	/* 12 */ IS(288, 1, 0),                      /* keyctl: 14 */
	/* 13 */ RET(SECCOMP_RET_ALLOW),
	/* 14 */ DENY,
};
#elif defined(__aarch64__)
static const struct sock_filter filter[] = {
	/*  0 */ LOAD(arch),
	/*  1 */ IS(AUDIT_ARCH_AARCH64, 0, 6),       /* 2, else (AArch32) 8 */
	/*  2 */ LOAD(nr),
	/*  3 */ IS(__NR_add_key, 4, 0),             /* 8 */
	/*  4 */ IS(__NR_request_key, 3, 0),         /* 8 */
	/*  5 */ IS(__NR_keyctl, 2, 0),              /* 8 */
	/*  6 */ RET(SECCOMP_RET_ALLOW),
	/*  7 */ RET(SECCOMP_RET_ALLOW),             /* not reached */
	/*  8 */ DENY,
};
#else
/* Another architecture: no filter yet (its numbers and ABIs to add here);
 * the jails run without one, and doc/security.md says so. */
#define SG_NO_JAIL_FILTER 1
#endif

const void *rn_jail_filter(size_t *len)
{
#ifdef SG_NO_JAIL_FILTER
	*len = 0;
	return "";
#else
	*len = sizeof(filter);
	return filter;
#endif
}
