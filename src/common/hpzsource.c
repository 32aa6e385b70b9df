#include "hpzsource.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "hpstream.h"

static const uint8_t zstd_magic[4] = {0x28, 0xb5, 0x2f, 0xfd};

void hp_zsource_init(struct hp_zsource *z, int fd)
{
	memset(z, 0, sizeof *z);
	z->fd = fd;
}

void hp_zsource_free(struct hp_zsource *z)
{
	ZSTD_freeDCtx(z->dctx);
	free(z->in);
	z->dctx = NULL;
	z->in = NULL;
}

/* Reads as much of the magic as the input has (a pipe may give it a byte at a time). */
static int start(struct hp_zsource *z, char *err, size_t err_len)
{
	while (z->nmagic < sizeof z->magic) {
		ssize_t n = hp_read_fd(z->fd, z->magic + z->nmagic, sizeof z->magic - z->nmagic,
				       err, err_len);
		if (n < 0)
			return -1;
		if (n == 0)
			break;
		z->nmagic += (size_t)n;
	}
	if (z->nmagic < sizeof z->magic || memcmp(z->magic, zstd_magic, sizeof z->magic) != 0) {
		z->started = 1;
		return 0;
	}
	z->dctx = ZSTD_createDCtx();
	z->in_cap = ZSTD_DStreamInSize();
	z->in = malloc(z->in_cap);
	if (!z->dctx || !z->in) {
		snprintf(err, err_len, "out of memory");
		hp_zsource_free(z);
		return -1;
	}
	/* Cannot fail: the value is within the parameter's bounds. */
	ZSTD_DCtx_setParameter(z->dctx, ZSTD_d_windowLogMax, HP_ZSOURCE_WINDOW_LOG_MAX);
	memcpy(z->in, z->magic, z->nmagic);
	z->in_len = z->nmagic;
	z->compressed = z->started = 1;
	return 0;
}

static ssize_t decompress(struct hp_zsource *z, void *buf, size_t len, char *err, size_t err_len)
{
	for (;;) {
		if (z->in_pos == z->in_len && !z->held) {
			z->in_offset += z->in_len;
			z->in_pos = z->in_len = 0;
			ssize_t n = hp_read_fd(z->fd, z->in, z->in_cap, err, err_len);
			if (n <= 0)
				return n; /* at the end, a frame left open is a file cut short */
			z->in_len = (size_t)n;
		}
		ZSTD_outBuffer out = {buf, len, 0};
		ZSTD_inBuffer in = {z->in, z->in_len, z->in_pos};
		size_t rc = ZSTD_decompressStream(z->dctx, &out, &in);
		z->in_pos = in.pos;
		if (ZSTD_isError(rc)) {
			z->corrupt = 1;
			snprintf(err, err_len, "corrupt compressed data at byte %llu (zstd: %s)",
				 (unsigned long long)(z->in_offset + z->in_pos),
				 ZSTD_getErrorName(rc));
			return -1;
		}
		/* A full buffer may leave decoded bytes in the decoder, which the next call
		 * must take before reading on. */
		z->held = out.pos == out.size;
		if (out.pos)
			return (ssize_t)out.pos;
	}
}

/* Hands on the bytes start() looked at in an input that is not compressed. */
static size_t give_magic(struct hp_zsource *z, void *buf, size_t len)
{
	size_t n = z->nmagic - z->magic_pos;
	if (n > len)
		n = len;
	memcpy(buf, z->magic + z->magic_pos, n);
	z->magic_pos += n;
	return n;
}

ssize_t hp_zsource_read(void *src, void *buf, size_t len, char *err, size_t err_len)
{
	struct hp_zsource *z = src;
	ssize_t n;
	if (!z->started && start(z, err, err_len) < 0)
		n = -1;
	else if (z->compressed)
		n = decompress(z, buf, len, err, err_len);
	else if (z->magic_pos < z->nmagic)
		n = (ssize_t)give_magic(z, buf, len);
	else
		n = hp_read_fd(z->fd, buf, len, err, err_len);
	if (n < 0)
		z->failed = 1;
	return n;
}
