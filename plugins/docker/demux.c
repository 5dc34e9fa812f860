/* Docker attach-stream demultiplexer: see demux.h for the frame format. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/docker/demux.h"

#include <string.h>

void docker_demux_init(struct docker_demux *d)
{
	memset(d, 0, sizeof(*d));
	d->stream = DOCKER_STREAM_STDOUT;
}

/* Validates the gathered header and starts its frame. */
static int docker_demux_start_frame(struct docker_demux *d)
{
	const unsigned char *h = d->hdr;

	/* Bytes 1..3 are always zero: anything else means we lost framing or
	 * are reading a raw (Tty=true) stream, and must not guess. */
	if (h[0] > DOCKER_STREAM_SYSERR || h[1] != 0 || h[2] != 0 || h[3] != 0)
		return -1;
	d->stream = h[0];
	d->left = (uint32_t)h[4] << 24 | (uint32_t)h[5] << 16 |
		  (uint32_t)h[6] << 8 | (uint32_t)h[7];
	d->hdr_len = 0;
	return 0;
}

ssize_t docker_demux_step(struct docker_demux *d, const void *in, size_t n,
			  size_t max, struct docker_demux_piece *piece)
{
	const unsigned char *p = in;
	size_t take;

	piece->stream = d->stream;
	piece->data = NULL;
	piece->len = 0;
	if (n == 0)
		return 0;
	if (d->left == 0) {
		/* Between frames: gather header bytes, as many as we have. */
		take = DOCKER_DEMUX_HDR - d->hdr_len;
		if (take > n)
			take = n;
		memcpy(d->hdr + d->hdr_len, p, take);
		d->hdr_len += take;
		if (d->hdr_len == DOCKER_DEMUX_HDR &&
		    docker_demux_start_frame(d) < 0)
			return -1;
		piece->stream = d->stream;
		return (ssize_t)take;
	}
	take = d->left;
	if (take > n)
		take = n;
	if (max > 0 && take > max)
		take = max;
	d->left -= (uint32_t)take;
	piece->data = p;
	piece->len = take;
	return (ssize_t)take;
}

int docker_demux_feed(struct docker_demux *d, const void *in, size_t n,
		      docker_demux_sink *sink, void *ud)
{
	const unsigned char *p = in;
	struct docker_demux_piece piece;
	ssize_t used;
	int rc;

	while (n > 0) {
		used = docker_demux_step(d, p, n, 0, &piece);
		if (used < 0)
			return -1;
		if (piece.len > 0) {
			rc = sink(piece.stream, piece.data, piece.len, ud);
			if (rc != 0)
				return rc;
		}
		p += used;
		n -= (size_t)used;
	}
	return 0;
}

bool docker_demux_idle(const struct docker_demux *d)
{
	return d->left == 0 && d->hdr_len == 0;
}
