/* hpstream.h - reading and writing hpformat.h records.
 *
 * Contract: the reader pulls whole records from an fd (pipe or file), or from a source
 * function that produces the bytes (a decompressor), with every length checked against
 * HP_REC_MAX and the bytes actually there; it never trusts the input. It reads ahead (one
 * read() brings many records) into one buffer of HP_READ_AHEAD bytes or the largest record
 * seen, whichever is larger; hp_reader_buffered says whether bytes are waiting there,
 * since a poll() of the fd no longer does. The writer appends records to an fd, retrying
 * short writes. Neither allocates in any way the payload could not: the payload encodes
 * with hp_rec_put only, into memory it owns.
 */
#ifndef HEAPPROF_HPSTREAM_H
#define HEAPPROF_HPSTREAM_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include "hpformat.h"

#define HP_READ_AHEAD (64u << 10)

/* Where a reader's bytes come from when not straight from an fd: fills buf with up to len
 * bytes and returns how many, 0 at the end of input, or -1 with err (err_len bytes) set. */
typedef ssize_t hp_source_fn(void *src, void *buf, size_t len, char *err, size_t err_len);

/* One read(2) of fd as a source does it (retried on EINTR). */
ssize_t hp_read_fd(int fd, void *buf, size_t len, char *err, size_t err_len);

struct hp_reader {
	int fd;		      /* -1 with a source */
	hp_source_fn *source; /* NULL: read(fd) */
	void *src;
	uint8_t *buf; /* bytes read: [pos, len) not yet handed out */
	size_t cap, pos, len;
	uint64_t offset; /* bytes consumed so far, for error messages */
	char err[160];	 /* why hp_read_record returned -1 */
	/* With -1: the input ended inside a record, as when a writer gives up mid-round;
	 * the records before it are whole. */
	int cut;
	/* The header's bytes as read, for a caller to say what is wrong with a rejected one. */
	struct hp_file_header header;
	size_t header_len;
};

/* Checks the file header. 0 on success; -1 with r->err set. */
int hp_reader_open(struct hp_reader *r, int fd);
/* The same, reading through source(src, ...) instead of an fd. */
int hp_reader_open_source(struct hp_reader *r, hp_source_fn *source, void *src);
/* 1 = a record (*type, *body, *len valid until the next call), 0 = clean end of input
 * (at a record boundary), -1 = error or truncated input (r->err says which). */
int hp_read_record(struct hp_reader *r, uint32_t *type, const uint8_t **body, uint32_t *len);
/* Whether read bytes wait in the buffer: then hp_read_record needs no poll() first. */
static inline int hp_reader_buffered(const struct hp_reader *r)
{
	return r->len > r->pos;
}
void hp_reader_close(struct hp_reader *r);

/* Writes header or record; 0 or -errno. */
int hp_write_header(int fd);
int hp_write_record(int fd, uint32_t type, const void *body, uint32_t len);
/* Writes a record whose body is given in two parts (fixed struct + trailing bytes). */
int hp_write_record2(int fd, uint32_t type, const void *a, uint32_t alen, const void *b,
		     uint32_t blen);
int hp_write_all(int fd, const void *buf, size_t len);

/* Encodes a record header at dst; returns the bytes written (sizeof(struct hp_rec_hdr)). */
static inline size_t hp_rec_put_hdr(uint8_t *dst, uint32_t type, uint32_t len)
{
	struct hp_rec_hdr h = {.type = type, .len = len};
	memcpy(dst, &h, sizeof h);
	return sizeof h;
}

/* Takes len bytes from a record body with bounds checking: 0 if they are not there. */
static inline int hp_take(const uint8_t **p, const uint8_t *end, void *dst, size_t len)
{
	if ((size_t)(end - *p) < len)
		return 0;
	memcpy(dst, *p, len);
	*p += len;
	return 1;
}

#endif
