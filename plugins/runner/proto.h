/*
 * The sandgate runner protocol: frames and fields, shared by the in-sandbox
 * runner (sandgate-runner, a static program) and the plugins that talk to it
 * (docker.so now, ssh.so later).  doc/runner-protocol.md is the long form.
 *
 * One byte stream each way (the runner's stdin and stdout).  Every message is
 * a frame: a 12-byte header and a payload.
 *
 *   0..3   payload length, u32 big-endian, at most RN_MAX_PAYLOAD
 *   4      type (enum rn_type)
 *   5      flags, 0 in version 1
 *   6..7   reserved, 0
 *   8..11  request id, u32 big-endian (0: the connection itself)
 *
 * Structured payloads (HELLO, SPAWN, STARTED, EXIT) are a sequence of fields:
 * u16 tag, u32 length, value; numbers are big-endian u32/u64.  A reader
 * skips tags it does not know, so a minor version may add fields.
 *
 * Self-contained: no host API, no allocation except rn_buf (malloc, owned by
 * whoever declared it), so the runner, the plugins and the unit tests all
 * link this one file.
 */
#ifndef SG_RUNNER_PROTO_H
#define SG_RUNNER_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RN_VERSION_MAJOR 1u /* a peer with another major is refused */
#define RN_VERSION_MINOR 0u /* fields and types added compatibly */

#define RN_HDR_SIZE    12u
#define RN_MAX_PAYLOAD (1024u * 1024u) /* either direction; larger is corrupt */
#define RN_CHUNK       (64u * 1024u)   /* output and stdin data frames */

/* Frame types.  0x0_: sandgate -> runner, 0x8_: runner -> sandgate. */
enum rn_type {
	RN_HELLO = 0x01,       /* id 0: fields VERSION, BUILD_ID */
	RN_SPAWN = 0x02,       /* new id: fields of the command (RN_F_*) */
	RN_STDIN = 0x03,       /* bytes for the process's stdin (RN_MODE_STDIN) */
	RN_STDIN_CLOSE = 0x04, /* close the process's stdin */
	RN_KILL = 0x05,        /* empty: TERM the group, KILL after the grace;
				  a u32 signal number: send only that, once */
	RN_PING = 0x06,        /* answered by PONG with the same id and payload */
	RN_KEXEC = 0x10,       /* new id: code for a kernel (capability "kernel") */
	RN_FILE = 0x11,        /* new id: a file operation (capability "files"); a
				  WRITE's bytes follow as STDIN, STDIN_CLOSE commits */

	RN_R_HELLO = 0x81,     /* id 0: VERSION, BUILD_ID, PID, MAX_PAYLOAD, ARCH */
	RN_R_STARTED = 0x82,   /* the command runs: PID, PGID */
	RN_R_STDOUT = 0x83,    /* output bytes (stdout, or both when merged) */
	RN_R_STDERR = 0x84,
	RN_R_STATUS = 0x85,    /* bytes the process wrote on its status fd */
	RN_R_PONG = 0x86,
	RN_R_EXIT = 0x87,      /* last frame of an id: CODE, SIGNAL, FLAGS, ... */
	RN_R_ERROR = 0x88,     /* a refused frame: TEXT; id 0 ends the runner */
	RN_R_KEVENT = 0x90,    /* one event line of a kernel call (doc/kernel-protocol.md) */
	RN_R_FILE = 0x91       /* the answer to a FILE request, its last frame */
};

/* Field tags.  Numbers: u32 unless said. */
enum rn_tag {
	/* HELLO, both ways */
	RN_F_VERSION = 1,     /* u16 major, u16 minor */
	RN_F_BUILD_ID = 2,    /* text: 16 hex digits, FNV-1a 64 of the binary */
	RN_F_PID = 3,         /* also STARTED */
	RN_F_MAX_PAYLOAD = 4,
	RN_F_ARCH = 5,        /* text: uname -m */
	RN_F_CAPABILITY = 6,  /* runner HELLO, text, repeated: one named capability */

	/* SPAWN */
	RN_F_COMMAND = 10,    /* text: run by a non-login `/bin/sh -c` */
	RN_F_ARG = 11,        /* text, repeated: argv when there is no COMMAND */
	RN_F_ENV = 12,        /* "KEY=VALUE", repeated: set over the runner's own */
	RN_F_CWD = 13,        /* text; absent: the runner's cwd */
	RN_F_TIMEOUT_MS = 14, /* 0 or absent: none */
	RN_F_GRACE_MS = 15,   /* TERM -> KILL; absent: RN_GRACE_MS_DEFAULT */
	RN_F_CAP = 16,        /* u64 bytes forwarded per stream; 0: no cap */
	RN_F_MODE = 17,       /* RN_MODE_* bits */
	RN_F_STATUS_FD = 18,  /* with RN_MODE_STATUS: the fd number (3..9) */

	/* STARTED */
	RN_F_PGID = 20,

	/* EXIT */
	RN_F_CODE = 30,       /* exit status 0..255, absent when signalled */
	RN_F_SIGNAL = 31,     /* the signal that ended it */
	RN_F_FLAGS = 32,      /* RN_EXIT_* bits */
	RN_F_ERRNO = 33,      /* the command could not start: errno ... */
	RN_F_STAGE = 34,      /* ... at this step (enum rn_stage) */
	RN_F_RESTARTED = 35,  /* kernel call, text: its kernel was restarted, why */
	RN_F_DIED = 36,       /* kernel call, text: its kernel ended during it, why */

	/* ERROR */
	RN_F_TEXT = 40,

	/* KEXEC (also ENV, CWD, TIMEOUT_MS, GRACE_MS, CAP) */
	RN_F_LANG = 50,       /* text: "python" or "javascript" */
	RN_F_SOURCE = 51,     /* text: the code (may be empty) */
	RN_F_KFLAGS = 52,     /* RN_KFLAG_* bits */
	RN_F_RICH_CAP = 53,   /* bytes of rich results per call; absent: RN_RICH_CAP_DEFAULT */
	RN_F_SCOPE = 54,      /* text: whose kernel (a sandbox id); absent: "" (capability "kernel-scope") */

	/* FILE (request) */
	RN_F_FOP = 60,        /* enum rn_fop */
	RN_F_PATH = 61,       /* text: the path, as the runner's processes see it */
	RN_F_PATH2 = 62,      /* text: RENAME's new path */
	RN_F_OFFSET = 63,     /* u64: READ's first byte, LIST's first entry */
	RN_F_LENGTH = 64,     /* READ: at most this many bytes (<= RN_FILE_CHUNK) */
	RN_F_FMODE = 65,      /* WRITE and MKDIR: mode of what is made; answers:
				 the permission bits (07777) */
	RN_F_FFLAGS = 66,     /* RN_FFLAG_* bits, both ways */
	RN_F_ROOT = 67,       /* text: what the operation touches must lead beneath
				 this directory, or it is refused with EPERM and
				 PATH, where it leads (capability "files-beneath") */

	/* FILE answer (also ERRNO 33 on failure, with TEXT 40 saying where) */
	RN_F_FTYPE = 70,      /* enum rn_ftype */
	RN_F_SIZE = 71,       /* u64 bytes: STAT, a READ's whole file, a WRITE's bytes */
	RN_F_MTIME = 72,      /* u64 unix seconds (two's complement) */
	RN_F_UID = 73,
	RN_F_GID = 74,
	RN_F_DATA = 75,       /* READ: the bytes */
	RN_F_ENTRY = 76,      /* LIST, repeated: fields NAME, FTYPE, SIZE, FMODE, MTIME */
	RN_F_NAME = 77,       /* text: an entry's name */
	RN_F_INODE = 78,      /* READ: u64 inode of the file read ... */
	RN_F_DEV = 79         /* ... and u64 device: a file replaced between two
				 READs of one file is seen and read again */
};

/* FILE operations (capability "files"). */
enum rn_fop {
	RN_FOP_READ = 1,      /* PATH, OFFSET, LENGTH -> DATA, SIZE */
	RN_FOP_WRITE = 2,     /* PATH, FMODE, FFLAGS(PARENTS); bytes as STDIN,
				 STDIN_CLOSE commits, KILL drops -> SIZE */
	RN_FOP_STAT = 3,      /* PATH -> FTYPE, SIZE, FMODE, MTIME, UID, GID (lstat) */
	RN_FOP_LIST = 4,      /* PATH, OFFSET -> ENTRY..., FFLAGS(MORE, CUT) */
	RN_FOP_MKDIR = 5,     /* PATH, FMODE, FFLAGS(PARENTS) */
	RN_FOP_REMOVE = 6,    /* PATH, FFLAGS(RECURSIVE) */
	RN_FOP_RENAME = 7,    /* PATH, PATH2 */
	/* 8 was REALPATH, dropped for ROOT: not to be reused */
	RN_FOP_SWEEP = 9      /* PATH (a directory): remove the temporary files of
				 runners that are gone from it, as a WRITE's SWEEP
				 does (capability "files-sweep") */
};

enum rn_fflags {
	RN_FFLAG_PARENTS = 1u << 0,   /* make missing parent directories */
	RN_FFLAG_RECURSIVE = 1u << 1, /* REMOVE a tree */
	RN_FFLAG_MORE = 1u << 2,      /* LIST answer: more entries from OFFSET + count */
	RN_FFLAG_CUT = 1u << 3,       /* LIST answer: the directory holds more than
					 RN_LIST_MAX entries; the rest is not listed */
	RN_FFLAG_SWEEP = 1u << 4      /* WRITE: a write broke with its runner: first
					 remove the temporary files of runners that
					 are gone from the target's directory */
};

enum rn_ftype { RN_FT_FILE = 0, RN_FT_DIR, RN_FT_SYMLINK, RN_FT_OTHER };

#define RN_FILE_CHUNK  (512u * 1024u)  /* bytes of one READ answer */
#define RN_LIST_BUDGET (768u * 1024u)  /* bytes of entries in one LIST answer */
#define RN_LIST_MAX    100000u         /* entries a LIST looks at */

/* The runner's named capabilities (HELLO field CAPABILITY). */
#define RN_CAP_KERNEL "kernel" /* KEXEC and KEVENT: stateful code kernels */
#define RN_CAP_KERNEL_SCOPE "kernel-scope" /* KEXEC's SCOPE field and END flag */
#define RN_CAP_FILES "files"   /* FILE and its answer: file operations */
#define RN_CAP_SWEEP "files-sweep" /* FILE's SWEEP operation */
#define RN_CAP_BENEATH "files-beneath" /* FILE's ROOT field */

enum rn_kflags {
	RN_KFLAG_RESET = 1u << 0, /* discard the kernel (and its state) before this call */
	RN_KFLAG_END = 1u << 1    /* end the scope's kernels (LANG's, or all without LANG); run nothing */
};

#define RN_SCOPE_MAX 256      /* bytes of a SCOPE */
#define RN_KERNELS_MAX 32     /* kernels one runner keeps (scopes times languages) */

#define RN_RICH_CAP_DEFAULT (4u * 1024u * 1024u)
#define RN_KGRACE_MS_DEFAULT 2000u /* KEXEC: interrupt -> kill of the kernel */
#define RN_KGRACE_SLOW_MS 8000u    /* ... once more when it was idle, not busy: slow */
#define RN_KBUSY_TICKS 2           /* CPU (1/100 s) that makes an interrupted kernel busy, not idle */

enum rn_mode {
	RN_MODE_STDIN = 1u << 0,  /* stdin is a pipe fed by STDIN frames, not /dev/null */
	RN_MODE_MERGE = 1u << 1,  /* stderr into stdout, in order (STDOUT frames) */
	RN_MODE_STATUS = 1u << 2  /* a status fd, forwarded as STATUS frames */
};

enum rn_exit_flags {
	RN_EXIT_TIMED_OUT = 1u << 0,
	RN_EXIT_KILLED = 1u << 1,    /* ended by a KILL frame */
	RN_EXIT_OUT_TRUNC = 1u << 2,
	RN_EXIT_ERR_TRUNC = 1u << 3,
	RN_EXIT_KERNEL_DIED = 1u << 4 /* KEXEC: the kernel ended during the call (DIED) */
};

enum rn_stage {
	RN_STAGE_SETUP = 1, /* pipes, fork */
	RN_STAGE_CHDIR = 2,
	RN_STAGE_EXEC = 3
};

#define RN_GRACE_MS_DEFAULT 1000u

/* ---- headers ---------------------------------------------------------------- */

struct rn_hdr {
	uint32_t len;
	uint8_t type;
	uint32_t id;
};

void rn_hdr_put(unsigned char out[RN_HDR_SIZE], uint8_t type, uint32_t id,
		uint32_t len);

/* Decodes and checks a header: flags and reserved bytes zero, len <= max.
 * Returns 0, or -1 for a header that cannot be ours. */
int rn_hdr_get(const unsigned char in[RN_HDR_SIZE], uint32_t max, struct rn_hdr *h);

/* True for the types `from_runner` (or the other side) may send. */
bool rn_type_known(uint8_t type, bool from_runner);

/* ---- an incremental frame reader ------------------------------------------------ */

/* Called for each whole frame; payload (never NULL, even for 0 bytes) is
 * valid for the call only.  A non-zero return stops the feed and is
 * returned by rn_reader_feed(). */
typedef int rn_frame_fn(const struct rn_hdr *h, const unsigned char *payload,
			void *ud);

/* State between reads: frames may arrive split anywhere.  payload is
 * malloc'd (grown to the largest frame seen) and freed by rn_reader_free(). */
struct rn_reader {
	unsigned char hdr[RN_HDR_SIZE];
	size_t hdr_len;
	struct rn_hdr h;
	bool in_payload;
	unsigned char *payload;
	size_t got, cap;
	uint32_t max;           /* payload limit */
	char why[96];           /* what was wrong, after a -1 */
};

void rn_reader_init(struct rn_reader *r, uint32_t max);
void rn_reader_free(struct rn_reader *r);

/* Feeds in[0..n).  Returns 0, -1 on a bad header or out of memory (r->why
 * says which; the reader is then unusable), or fn's non-zero value. */
int rn_reader_feed(struct rn_reader *r, const void *in, size_t n, rn_frame_fn *fn,
		   void *ud);

/* True between frames: an EOF there is clean. */
bool rn_reader_idle(const struct rn_reader *r);

/* ---- payload building ------------------------------------------------------------ */

/* A growable buffer.  After a failed allocation `oom` stays set and later
 * puts do nothing, so a builder checks once at the end. */
struct rn_buf {
	unsigned char *data;
	size_t len, cap;
	bool oom;
};

void rn_buf_free(struct rn_buf *b);
void rn_buf_add(struct rn_buf *b, const void *p, size_t n);

/* Starts a frame in b (header space); rn_frame_end() fills in its length.
 * Returns the offset of the frame, for rn_frame_end(). */
size_t rn_frame_begin(struct rn_buf *b, uint8_t type, uint32_t id);
/* Returns 0, or -1 when the payload is larger than RN_MAX_PAYLOAD or the
 * buffer ran out of memory. */
int rn_frame_end(struct rn_buf *b, size_t start);

void rn_put_bytes(struct rn_buf *b, uint16_t tag, const void *v, uint32_t len);
void rn_put_str(struct rn_buf *b, uint16_t tag, const char *s);
void rn_put_u32(struct rn_buf *b, uint16_t tag, uint32_t v);
void rn_put_u64(struct rn_buf *b, uint16_t tag, uint64_t v);

/* ---- payload reading ----------------------------------------------------------- */

struct rn_field {
	uint16_t tag;
	uint32_t len;
	const unsigned char *val;
};

struct rn_iter {
	const unsigned char *p, *end;
};

/* payload may be NULL when len is 0. */
void rn_iter_init(struct rn_iter *it, const void *payload, size_t len);
/* Returns 1 with *f filled, 0 at the end, -1 when a field runs past the
 * payload (corrupt). */
int rn_iter_next(struct rn_iter *it, struct rn_field *f);

/* Typed views of a field; -1 when the length is wrong for the type. */
int rn_field_u32(const struct rn_field *f, uint32_t *v);
int rn_field_u64(const struct rn_field *f, uint64_t *v);
/* Copies a text field into out[size] NUL-terminated; -1 when it does not
 * fit or holds a NUL. */
int rn_field_str(const struct rn_field *f, char *out, size_t size);

uint32_t rn_get_u32(const unsigned char *p);
void rn_set_u32(unsigned char *p, uint32_t v);

/* ---- build ids -------------------------------------------------------------------- */

#define RN_BUILD_ID_LEN 16 /* hex digits */

/* FNV-1a 64 of a file's bytes, in 16 hex digits + NUL.  Both sides hash the
 * same binary: the plugin the file it uploads, the runner /proc/self/exe.
 * Returns 0, or -1 (errno) when the file cannot be read. */
int rn_build_id_file(const char *path, char out[RN_BUILD_ID_LEN + 1]);
void rn_build_id_bytes(const void *p, size_t n, char out[RN_BUILD_ID_LEN + 1]);

/* ---- paths ------------------------------------------------------------------------ */

/* Whether rest (NUL-ended), the part of a path past its nearest existing
 * ancestor, has a ".." component.  A part not there yet cannot be
 * resolved, and ".." past it need not lead back where a name was: x/../..
 * past a missing x stands for the ancestor while a write that makes x goes
 * two levels up, and a dangling link in rest may point to a directory the
 * same request makes first.  Without "..", rest is names made fresh
 * beneath the ancestor (or the operation fails on a name that is not a
 * directory).  The rule of FILE's ROOT, and of ssh.so's check over SFTP. */
bool rn_path_climbs(const char *rest);
/* Whether canonical path canon is dir (canonical) or beneath it, compared
 * whole, component by component (never as a prefix: /a/bc is not beneath
 * /a/b). */
bool rn_path_beneath(const char *canon, const char *dir);

#endif /* SG_RUNNER_PROTO_H */
