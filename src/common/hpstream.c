#include "hpstream.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

ssize_t hp_read_fd(int fd, void *buf, size_t len, char *err, size_t err_len)
{
	for (;;) {
		ssize_t n = read(fd, buf, len);
		if (n >= 0)
			return n;
		if (errno != EINTR) {
			snprintf(err, err_len, "read failed: %s", strerror(errno));
			return -1;
		}
	}
}

static ssize_t input(struct hp_reader *r, void *buf, size_t len)
{
	if (r->source)
		return r->source(r->src, buf, len, r->err, sizeof r->err);
	return hp_read_fd(r->fd, buf, len, r->err, sizeof r->err);
}

static int open_input(struct hp_reader *r)
{
	struct hp_file_header *h = &r->header;
	while (r->header_len < sizeof *h) {
		ssize_t n = input(r, (char *)h + r->header_len, sizeof *h - r->header_len);
		if (n < 0)
			return -1;
		if (n == 0)
			break;
		r->header_len += (size_t)n;
	}
	if (r->header_len < sizeof *h || memcmp(h->magic, HP_MAGIC, sizeof h->magic) != 0) {
		snprintf(r->err, sizeof r->err, "not a heapprof profile or stream");
		return -1;
	}
	if (h->version != HP_FORMAT_VERSION) {
		snprintf(r->err, sizeof r->err,
			 "format version %u is not supported (this build reads version %u)",
			 (unsigned)h->version, (unsigned)HP_FORMAT_VERSION);
		return -1;
	}
	r->offset = sizeof *h;
	return 0;
}

int hp_reader_open_source(struct hp_reader *r, hp_source_fn *source, void *src)
{
	memset(r, 0, sizeof *r);
	r->fd = -1;
	r->source = source;
	r->src = src;
	return open_input(r);
}

int hp_reader_open(struct hp_reader *r, int fd)
{
	memset(r, 0, sizeof *r);
	r->fd = fd;
	return open_input(r);
}

/* Makes need bytes from pos on available in the buffer, reading as much as the input gives
 * each time: 1 when they are, 0 at the end of input before them, -1 on error. */
static int fill(struct hp_reader *r, size_t need)
{
	if (r->cap - r->pos < need) {
		size_t cap = r->cap ? r->cap : HP_READ_AHEAD;
		while (cap < need)
			cap *= 2;
		if (cap > r->cap) {
			uint8_t *nb = malloc(cap);
			if (!nb) {
				snprintf(r->err, sizeof r->err, "out of memory");
				return -1;
			}
			if (r->buf)
				memcpy(nb, r->buf + r->pos, r->len - r->pos);
			free(r->buf);
			r->buf = nb;
			r->cap = cap;
		} else {
			memmove(r->buf, r->buf + r->pos, r->len - r->pos);
		}
		r->len -= r->pos;
		r->pos = 0;
	}
	while (r->len - r->pos < need) {
		ssize_t n = input(r, r->buf + r->len, r->cap - r->len);
		if (n < 0)
			return -1;
		if (n == 0)
			return 0;
		r->len += (size_t)n;
	}
	return 1;
}

int hp_read_record(struct hp_reader *r, uint32_t *type, const uint8_t **body, uint32_t *len)
{
	struct hp_rec_hdr h;
	int f = fill(r, sizeof h);
	if (f < 0)
		return -1;
	if (f == 0 && r->len == r->pos)
		return 0;
	if (f == 0) {
		r->cut = 1;
		snprintf(r->err, sizeof r->err, "truncated record header at offset %llu",
			 (unsigned long long)r->offset);
		return -1;
	}
	memcpy(&h, r->buf + r->pos, sizeof h);
	if (h.len > HP_REC_MAX) {
		snprintf(r->err, sizeof r->err,
			 "record of %u bytes at offset %llu exceeds the limit", h.len,
			 (unsigned long long)r->offset);
		return -1;
	}
	f = fill(r, sizeof h + h.len);
	if (f < 0)
		return -1;
	if (f == 0) {
		r->cut = 1;
		snprintf(r->err, sizeof r->err, "truncated record at offset %llu",
			 (unsigned long long)r->offset);
		return -1;
	}
	*type = h.type;
	*body = r->buf + r->pos + sizeof h;
	*len = h.len;
	r->pos += sizeof h + h.len;
	r->offset += sizeof h + h.len;
	return 1;
}

void hp_reader_close(struct hp_reader *r)
{
	free(r->buf);
	r->buf = NULL;
	r->cap = r->pos = r->len = 0;
}

int hp_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int hp_write_header(int fd)
{
	struct hp_file_header h = {.version = HP_FORMAT_VERSION};
	memcpy(h.magic, HP_MAGIC, sizeof h.magic);
	return hp_write_all(fd, &h, sizeof h);
}

int hp_write_record2(int fd, uint32_t type, const void *a, uint32_t alen, const void *b,
		     uint32_t blen)
{
	uint8_t hdr[sizeof(struct hp_rec_hdr)];
	hp_rec_put_hdr(hdr, type, alen + blen);
	int rc = hp_write_all(fd, hdr, sizeof hdr);
	if (rc == 0 && alen)
		rc = hp_write_all(fd, a, alen);
	if (rc == 0 && blen)
		rc = hp_write_all(fd, b, blen);
	return rc;
}

int hp_write_record(int fd, uint32_t type, const void *body, uint32_t len)
{
	return hp_write_record2(fd, type, body, len, NULL, 0);
}
