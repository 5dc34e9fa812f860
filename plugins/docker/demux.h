/*
 * Docker attach-stream demultiplexer.
 *
 * With Tty=false the Engine frames every write of the process as an 8-byte
 * header (byte 0: stream 0 stdin, 1 stdout, 2 stderr, 3 daemon error; bytes
 * 1..3 zero; bytes 4..7: big-endian payload length) followed by the payload.
 * Reads off a socket split those frames anywhere, so the parser keeps its
 * position between calls: a header or a payload may arrive one byte at a time.
 *
 * Self-contained (no host API), so the unit test links it alone.
 */
#ifndef SG_DOCKER_DEMUX_H
#define SG_DOCKER_DEMUX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum docker_stream {
	DOCKER_STREAM_STDIN = 0,  /* never sent with Tty=false; treated as stdout */
	DOCKER_STREAM_STDOUT = 1,
	DOCKER_STREAM_STDERR = 2,
	DOCKER_STREAM_SYSERR = 3  /* an error text from the daemon itself */
};

#define DOCKER_DEMUX_HDR 8

/* Parser state; zero it with docker_demux_init().  Not thread-safe: one per
 * stream, used by one reader at a time. */
struct docker_demux {
	unsigned char hdr[DOCKER_DEMUX_HDR];
	size_t hdr_len;  /* header bytes gathered so far (0..8) */
	uint32_t left;   /* payload bytes of the current frame still to come */
	int stream;      /* enum docker_stream of the current frame */
};

/* One payload piece: points into the caller's input buffer. */
struct docker_demux_piece {
	int stream;        /* enum docker_stream */
	const void *data;  /* NULL when the step consumed header bytes only */
	size_t len;
};

void docker_demux_init(struct docker_demux *d);

/* Consumes the next bytes of in[0..n): either header bytes, or at most `max`
 * payload bytes of the current frame (max 0 means no limit), which it then
 * describes in *piece.  Returns the bytes consumed (0 only when n is 0), or
 * -1 on a malformed header (unknown stream byte, non-zero padding). */
ssize_t docker_demux_step(struct docker_demux *d, const void *in, size_t n,
			  size_t max, struct docker_demux_piece *piece);

/* Called for each payload piece; a non-zero return stops the feed. */
typedef int docker_demux_sink(int stream, const void *data, size_t len,
			      void *ud);

/* Feeds all of in[0..n) through the parser, calling sink for each payload
 * piece in order.  Returns 0, -1 on a malformed header, or the sink's
 * non-zero value. */
int docker_demux_feed(struct docker_demux *d, const void *in, size_t n,
		      docker_demux_sink *sink, void *ud);

/* True when the parser sits between frames: an EOF there is clean, an EOF
 * anywhere else means the daemon cut a frame short. */
bool docker_demux_idle(const struct docker_demux *d);

#endif /* SG_DOCKER_DEMUX_H */
