/* hpzsource.h - the bytes of a profile file for hp_reader, decompressed when they are zstd.
 *
 * Contract: hp_zsource_read (an hp_source_fn) looks at the first four bytes of the fd: the
 * zstd frame magic (28 B5 2F FD) makes it decompress everything from there on, anything
 * else is handed on as it is (a raw profile, or no profile: hp_reader_open judges the
 * header). Compressed input that stops inside a frame ends there, as a raw file cut short
 * does; corrupt compressed data, a frame asking for a window over
 * 2^HP_ZSOURCE_WINDOW_LOG_MAX bytes or a checksum that does not match is a read error with
 * corrupt set. The file stays the caller's to close.
 * Only heapprof-view's side uses this: the payload never compiles it or links libzstd.
 */
#ifndef HEAPPROF_HPZSOURCE_H
#define HEAPPROF_HPZSOURCE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define HP_ZSOURCE_WINDOW_LOG_MAX 24 /* 16 MiB: what a hostile frame may make us allocate */

struct ZSTD_DCtx_s;

struct hp_zsource {
	int fd;
	int compressed; /* the input began with the zstd magic */
	int failed;	/* hp_zsource_read returned -1: a read error, or corrupt */
	int corrupt;	/* the compressed data cannot be decoded */
	struct ZSTD_DCtx_s *dctx;
	uint8_t *in; /* compressed bytes read: [in_pos, in_len) not yet decoded */
	size_t in_pos, in_len, in_cap;
	uint64_t in_offset; /* file offset of in[0], for error messages */
	uint8_t magic[4];   /* the first bytes, looked at before anything is handed on */
	size_t nmagic, magic_pos;
	int started;
	int held; /* the decoder may hold decoded bytes not handed out yet */
};

void hp_zsource_init(struct hp_zsource *z, int fd);
/* An hp_source_fn; src is a struct hp_zsource. */
ssize_t hp_zsource_read(void *src, void *buf, size_t len, char *err, size_t err_len);
void hp_zsource_free(struct hp_zsource *z);

#endif
