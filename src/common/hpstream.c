#include "hpstream.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static ssize_t read_full(int fd, void *buf, size_t len)
{
	size_t got = 0;
	while (got < len) {
		ssize_t n = read(fd, (char *)buf + got, len - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

int hp_reader_open(struct hp_reader *r, int fd)
{
	struct hp_file_header h;
	memset(r, 0, sizeof *r);
	r->fd = fd;
	ssize_t n = read_full(fd, &h, sizeof h);
	if (n < 0) {
		snprintf(r->err, sizeof r->err, "read failed: %s", strerror(errno));
		return -1;
	}
	if ((size_t)n < sizeof h || memcmp(h.magic, HP_MAGIC, sizeof h.magic) != 0) {
		snprintf(r->err, sizeof r->err, "not a heapprof profile or stream");
		return -1;
	}
	if (h.version != HP_FORMAT_VERSION) {
		snprintf(r->err, sizeof r->err,
			 "format version %u is not supported (this build reads version %u)",
			 h.version, HP_FORMAT_VERSION);
		return -1;
	}
	r->offset = sizeof h;
	return 0;
}

int hp_read_record(struct hp_reader *r, uint32_t *type, const uint8_t **body, uint32_t *len)
{
	struct hp_rec_hdr h;
	ssize_t n = read_full(r->fd, &h, sizeof h);
	if (n == 0)
		return 0;
	if (n < 0) {
		snprintf(r->err, sizeof r->err, "read failed: %s", strerror(errno));
		return -1;
	}
	if ((size_t)n < sizeof h) {
		r->cut = 1;
		snprintf(r->err, sizeof r->err, "truncated record header at offset %llu",
			 (unsigned long long)r->offset);
		return -1;
	}
	if (h.len > HP_REC_MAX) {
		snprintf(r->err, sizeof r->err,
			 "record of %u bytes at offset %llu exceeds the limit", h.len,
			 (unsigned long long)r->offset);
		return -1;
	}
	/* An empty first record still needs a buffer: callers read its body pointer. */
	if (h.len > r->cap || !r->buf) {
		size_t cap = r->cap ? r->cap : 4096;
		while (cap < h.len)
			cap *= 2;
		uint8_t *nb = realloc(r->buf, cap);
		if (!nb) {
			snprintf(r->err, sizeof r->err, "out of memory");
			return -1;
		}
		r->buf = nb;
		r->cap = cap;
	}
	n = read_full(r->fd, r->buf, h.len);
	if (n < 0) {
		snprintf(r->err, sizeof r->err, "read failed: %s", strerror(errno));
		return -1;
	}
	if ((size_t)n < h.len) {
		r->cut = 1;
		snprintf(r->err, sizeof r->err, "truncated record at offset %llu",
			 (unsigned long long)r->offset);
		return -1;
	}
	r->offset += sizeof h + h.len;
	*type = h.type;
	*body = r->buf;
	*len = h.len;
	return 1;
}

void hp_reader_close(struct hp_reader *r)
{
	free(r->buf);
	r->buf = NULL;
	r->cap = 0;
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
