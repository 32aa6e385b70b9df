/* test-hpstream: hpstream.h round-trips every record kind byte for byte through a real file
 * and a real pipe, and turns malformed input into clean errors or skippable records; a
 * reader fed by a source function, and hpzsource.h's on raw and zstd input, read the same. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <zstd.h>

#include "hpstream.h"
#include "hpzsource.h"

struct rec {
	uint32_t type;
	uint8_t body[512];
	uint32_t len;
};

/* Appends a struct and optional trailing bytes as one record body. */
static void rec_set(struct rec *r, uint32_t type, const void *a, size_t alen, const void *b,
		    size_t blen)
{
	assert_true(alen + blen <= sizeof r->body);
	r->type = type;
	memcpy(r->body, a, alen);
	if (blen)
		memcpy(r->body + alen, b, blen);
	r->len = (uint32_t)(alen + blen);
}

static size_t sample_records(struct rec *out)
{
	size_t n = 0;
	struct hp_hello hello = {.pid = 77,
				 .mode = HP_MODE_FULL,
				 .interval_ms = 1000,
				 .max_depth = 64,
				 .start_mono_ns = 123456789};
	rec_set(&out[n++], HP_REC_HELLO, &hello, sizeof hello, NULL, 0);

	const char path[] = "/usr/lib/libfoo.so";
	uint8_t trail[sizeof path - 1 + 4];
	memcpy(trail, path, sizeof path - 1);
	memcpy(trail + sizeof path - 1, "\x01\x02\x03\x04", 4);
	struct hp_module mod = {.id = 1,
				.bias = 0x7f0000000000,
				.start = 0x7f0000001000,
				.end = 0x7f0000100000,
				.path_len = sizeof path - 1,
				.build_id_len = 4};
	rec_set(&out[n++], HP_REC_MODULE, &mod, sizeof mod, trail, sizeof trail);

	uint64_t frames[3] = {0x7f0000001234, 0x401000, 0x402000};
	struct hp_stack st = {.id = 1, .depth = 3};
	rec_set(&out[n++], HP_REC_STACK, &st, sizeof st, frames, sizeof frames);

	struct hp_site_delta d[2] = {
	    {.stack_id = 1, .allocs = 5, .alloc_bytes = 500, .frees = 1, .freed_bytes = 100},
	    {.stack_id = 2, .allocs = UINT64_MAX, .alloc_bytes = 1},
	};
	struct hp_sites sites = {.count = 2};
	rec_set(&out[n++], HP_REC_SITES, &sites, sizeof sites, d, sizeof d);

	struct hp_round round = {.seq = 1,
				 .time_ns = 1000000000,
				 .allocs = 5,
				 .live_bytes = 400,
				 .payload_bytes = 1 << 20};
	rec_set(&out[n++], HP_REC_ROUND, &round, sizeof round, NULL, 0);

	struct hp_end end = {.reason = HP_END_DETACH};
	rec_set(&out[n++], HP_REC_END, &end, sizeof end, NULL, 0);
	return n;
}

static void write_records(int fd, const struct rec *recs, size_t n)
{
	assert_int_equal(hp_write_header(fd), 0);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(hp_write_record(fd, recs[i].type, recs[i].body, recs[i].len), 0);
}

/* The exact bytes the format defines for recs. */
static size_t expected_bytes(const struct rec *recs, size_t n, uint8_t *buf)
{
	struct hp_file_header h = {.version = HP_FORMAT_VERSION};
	memcpy(h.magic, HP_MAGIC, 8);
	memcpy(buf, &h, sizeof h);
	size_t o = sizeof h;
	for (size_t i = 0; i < n; i++) {
		o += hp_rec_put_hdr(buf + o, recs[i].type, recs[i].len);
		memcpy(buf + o, recs[i].body, recs[i].len);
		o += recs[i].len;
	}
	return o;
}

/* Reads recs back from an open reader, then the clean end; closes the reader. */
static void read_recs(struct hp_reader *r, const struct rec *recs, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint32_t type, len;
		const uint8_t *body;
		assert_int_equal(hp_read_record(r, &type, &body, &len), 1);
		assert_int_equal(type, recs[i].type);
		assert_int_equal(len, recs[i].len);
		assert_memory_equal(body, recs[i].body, len);
	}
	uint32_t type, len;
	const uint8_t *body;
	assert_int_equal(hp_read_record(r, &type, &body, &len), 0);
	hp_reader_close(r);
}

static void read_back(int fd, const struct rec *recs, size_t n)
{
	struct hp_reader r;
	assert_int_equal(hp_reader_open(&r, fd), 0);
	read_recs(&r, recs, n);
}

static int temp_fd(void)
{
	FILE *f = tmpfile();
	assert_non_null(f);
	int fd = dup(fileno(f));
	fclose(f);
	assert_true(fd >= 0);
	return fd;
}

static void test_roundtrip_file(void **state)
{
	(void)state;
	struct rec recs[8];
	size_t n = sample_records(recs);
	int fd = temp_fd();
	write_records(fd, recs, n);

	uint8_t want[4096], got[4096];
	size_t wlen = expected_bytes(recs, n, want);
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	ssize_t glen = read(fd, got, sizeof got);
	assert_int_equal(glen, (ssize_t)wlen);
	assert_memory_equal(got, want, wlen);

	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	read_back(fd, recs, n);
	close(fd);
}

static void test_roundtrip_pipe(void **state)
{
	(void)state;
	struct rec recs[8];
	size_t n = sample_records(recs);
	int p[2];
	assert_int_equal(pipe(p), 0);
	/* The whole stream is far below the pipe's capacity, so one process suffices. */
	write_records(p[1], recs, n);
	close(p[1]);
	read_back(p[0], recs, n);
	close(p[0]);
}

/* A file holding exactly the given bytes, positioned at its start. */
static int file_with(const void *bytes, size_t len)
{
	int fd = temp_fd();
	assert_int_equal(hp_write_all(fd, bytes, len), 0);
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	return fd;
}

static size_t good_header(uint8_t *buf)
{
	struct hp_file_header h = {.version = HP_FORMAT_VERSION};
	memcpy(h.magic, HP_MAGIC, 8);
	memcpy(buf, &h, sizeof h);
	return sizeof h;
}

static void expect_open_error(const void *bytes, size_t len, const char *what)
{
	int fd = file_with(bytes, len);
	struct hp_reader r;
	assert_int_equal(hp_reader_open(&r, fd), -1);
	assert_non_null(strstr(r.err, what));
	hp_reader_close(&r);
	close(fd);
}

static void test_bad_header(void **state)
{
	(void)state;
	uint8_t buf[64];
	good_header(buf);
	memcpy(buf, "HEAPPROX", 8);
	expect_open_error(buf, 16, "not a heapprof");

	good_header(buf);
	uint32_t v = HP_FORMAT_VERSION + 1;
	memcpy(buf + 8, &v, 4);
	expect_open_error(buf, 16, "version");

	good_header(buf);
	expect_open_error(buf, 10, "not a heapprof");
	expect_open_error(buf, 0, "not a heapprof");
}

/* Reads one record after a good header from a file holding tail; returns the result. */
static int read_one(const void *tail, size_t len, struct hp_reader *r, uint32_t *type,
		    uint32_t *rlen, int *fd)
{
	uint8_t buf[256];
	size_t o = good_header(buf);
	assert_true(o + len <= sizeof buf);
	memcpy(buf + o, tail, len);
	*fd = file_with(buf, o + len);
	assert_int_equal(hp_reader_open(r, *fd), 0);
	const uint8_t *body;
	return hp_read_record(r, type, &body, rlen);
}

static void test_truncated(void **state)
{
	(void)state;
	struct hp_reader r;
	uint32_t type, len;
	int fd;
	uint8_t rec[64];

	/* Half a record header. */
	hp_rec_put_hdr(rec, HP_REC_ROUND, 96);
	assert_int_equal(read_one(rec, 4, &r, &type, &len, &fd), -1);
	assert_non_null(strstr(r.err, "truncated record header"));
	assert_true(r.cut);
	hp_reader_close(&r);
	close(fd);

	/* A header announcing 96 bytes followed by 40. */
	memset(rec + 8, 0xab, 40);
	assert_int_equal(read_one(rec, 48, &r, &type, &len, &fd), -1);
	assert_non_null(strstr(r.err, "truncated record"));
	assert_true(r.cut);
	hp_reader_close(&r);
	close(fd);
}

static void test_oversized(void **state)
{
	(void)state;
	struct hp_reader r;
	uint32_t type, len;
	int fd;
	uint8_t rec[8];
	hp_rec_put_hdr(rec, HP_REC_STACK, HP_REC_MAX + 1);
	assert_int_equal(read_one(rec, sizeof rec, &r, &type, &len, &fd), -1);
	assert_non_null(strstr(r.err, "exceeds"));
	assert_false(r.cut);
	/* Rejected before any buffer was sized for it. */
	assert_true(r.cap <= HP_REC_MAX);
	hp_reader_close(&r);
	close(fd);

	hp_rec_put_hdr(rec, HP_REC_STACK, UINT32_MAX);
	assert_int_equal(read_one(rec, sizeof rec, &r, &type, &len, &fd), -1);
	assert_non_null(strstr(r.err, "exceeds"));
	hp_reader_close(&r);
	close(fd);
}

static void test_zero_length_and_unknown(void **state)
{
	(void)state;
	int fd = temp_fd();
	assert_int_equal(hp_write_header(fd), 0);
	assert_int_equal(hp_write_record(fd, HP_REC_ROUND, NULL, 0), 0);
	assert_int_equal(hp_write_record(fd, 999, "future", 6), 0);
	assert_int_equal(hp_write_record(fd, 1000, NULL, 0), 0);
	struct hp_end end = {.reason = HP_END_DETACH};
	assert_int_equal(hp_write_record(fd, HP_REC_END, &end, sizeof end), 0);
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);

	struct hp_reader r;
	uint32_t type, len;
	const uint8_t *body;
	assert_int_equal(hp_reader_open(&r, fd), 0);
	assert_int_equal(hp_read_record(&r, &type, &body, &len), 1);
	assert_int_equal(type, HP_REC_ROUND);
	assert_int_equal(len, 0);
	/* Unknown types come through whole, so a reader can skip them and go on. */
	assert_int_equal(hp_read_record(&r, &type, &body, &len), 1);
	assert_int_equal(type, 999);
	assert_int_equal(len, 6);
	assert_memory_equal(body, "future", 6);
	assert_int_equal(hp_read_record(&r, &type, &body, &len), 1);
	assert_int_equal(type, 1000);
	assert_int_equal(len, 0);
	assert_int_equal(hp_read_record(&r, &type, &body, &len), 1);
	assert_int_equal(type, HP_REC_END);
	assert_int_equal(len, sizeof end);
	assert_int_equal(hp_read_record(&r, &type, &body, &len), 0);
	hp_reader_close(&r);
	close(fd);
}

static void test_take_bounds(void **state)
{
	(void)state;
	uint8_t body[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
	const uint8_t *q = body;
	uint64_t v;
	assert_int_equal(hp_take(&q, body + sizeof body, &v, 8), 1);
	assert_ptr_equal(q, body + 8);
	assert_int_equal(hp_take(&q, body + sizeof body, &v, 8), 0);
	assert_ptr_equal(q, body + 8);
}

/* Record i of the read-ahead stream: its length (one of them larger than the read-ahead
 * buffer, the rest small, some empty) and its bytes. */
#define RA_RECORDS 4000
#define RA_BIG 3000

static uint32_t ra_len(uint32_t i)
{
	return i == RA_BIG ? 3 * HP_READ_AHEAD + 5 : (i * 37) % 301;
}

static uint8_t ra_byte(uint32_t i, uint32_t k)
{
	return (uint8_t)(i * 131 + k * 7);
}

/* The child writes the stream in pieces of 1 to 9000 bytes, so records and headers
 * straddle both the writes and the reader's buffer in every way. */
static void ra_write(int fd)
{
	size_t len = 0;
	for (uint32_t i = 0; i < RA_RECORDS; i++)
		len += sizeof(struct hp_rec_hdr) + ra_len(i);
	uint8_t *buf = malloc(len);
	if (!buf)
		_exit(2);
	size_t o = 0;
	for (uint32_t i = 0; i < RA_RECORDS; i++) {
		o += hp_rec_put_hdr(buf + o, 100 + i, ra_len(i));
		for (uint32_t k = 0; k < ra_len(i); k++)
			buf[o++] = ra_byte(i, k);
	}
	uint32_t seed = 1;
	for (o = 0; o < len;) {
		seed = seed * 1103515245u + 12345u;
		size_t piece = 1 + (seed >> 8) % 9000;
		if (piece > len - o)
			piece = len - o;
		if (hp_write_all(fd, buf + o, piece) != 0)
			_exit(3);
		o += piece;
	}
	_exit(0);
}

static void test_read_ahead(void **state)
{
	(void)state;
	int p[2];
	assert_int_equal(pipe(p), 0);
	assert_int_equal(hp_write_header(p[1]), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(p[0]);
		ra_write(p[1]);
	}
	close(p[1]);
	struct hp_reader r;
	assert_int_equal(hp_reader_open(&r, p[0]), 0);
	for (uint32_t i = 0; i < RA_RECORDS; i++) {
		uint32_t type, len;
		const uint8_t *body;
		assert_int_equal(hp_read_record(&r, &type, &body, &len), 1);
		assert_int_equal(type, 100 + i);
		assert_int_equal(len, ra_len(i));
		for (uint32_t k = 0; k < len; k++)
			if (body[k] != ra_byte(i, k))
				fail_msg("record %u byte %u is %u, expected %u", i, k, body[k],
					 ra_byte(i, k));
	}
	uint32_t type, len;
	const uint8_t *body;
	assert_int_equal(hp_read_record(&r, &type, &body, &len), 0);
	assert_false(hp_reader_buffered(&r));
	hp_reader_close(&r);
	close(p[0]);
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* Records that arrived together are handed out without another read: the viewer must not
 * poll() for them. */
static void test_buffered(void **state)
{
	(void)state;
	int p[2];
	assert_int_equal(pipe(p), 0);
	assert_int_equal(hp_write_header(p[1]), 0);
	assert_int_equal(hp_write_record(p[1], HP_REC_ROUND, "one", 3), 0);
	assert_int_equal(hp_write_record(p[1], HP_REC_ROUND, "two", 3), 0);
	struct hp_reader r;
	uint32_t type, len;
	const uint8_t *body;
	assert_int_equal(hp_reader_open(&r, p[0]), 0);
	assert_false(hp_reader_buffered(&r));
	assert_int_equal(hp_read_record(&r, &type, &body, &len), 1);
	assert_memory_equal(body, "one", 3);
	assert_true(hp_reader_buffered(&r));
	assert_int_equal(hp_read_record(&r, &type, &body, &len), 1);
	assert_memory_equal(body, "two", 3);
	assert_false(hp_reader_buffered(&r));
	hp_reader_close(&r);
	close(p[0]);
	close(p[1]);
}

/* A source that hands out a buffer one byte per call, then fails. */
struct drip {
	const uint8_t *bytes;
	size_t len, pos;
};

static ssize_t drip_read(void *src, void *buf, size_t len, char *err, size_t err_len)
{
	struct drip *d = src;
	assert_true(len > 0);
	if (d->pos == d->len) {
		snprintf(err, err_len, "the drip ran dry");
		return -1;
	}
	memcpy(buf, d->bytes + d->pos++, 1);
	return 1;
}

static void test_source(void **state)
{
	(void)state;
	struct rec recs[8];
	size_t n = sample_records(recs);
	uint8_t bytes[4096];
	struct drip d = {.bytes = bytes, .len = expected_bytes(recs, n, bytes)};
	struct hp_reader r;
	assert_int_equal(hp_reader_open_source(&r, drip_read, &d), 0);
	for (size_t i = 0; i < n; i++) {
		uint32_t type, len;
		const uint8_t *body;
		assert_int_equal(hp_read_record(&r, &type, &body, &len), 1);
		assert_int_equal(type, recs[i].type);
		assert_memory_equal(body, recs[i].body, len);
	}
	uint32_t type, len;
	const uint8_t *body;
	assert_int_equal(hp_read_record(&r, &type, &body, &len), -1);
	assert_string_equal(r.err, "the drip ran dry");
	assert_false(r.cut);
	hp_reader_close(&r);

	/* A rejected header is there for the caller to explain. */
	memcpy(bytes + 8, "\x09\0\0\0", 4);
	d.pos = 0;
	assert_int_equal(hp_reader_open_source(&r, drip_read, &d), -1);
	assert_int_equal(r.header_len, sizeof r.header);
	assert_int_equal(r.header.version, 9);
	hp_reader_close(&r);
}

/* hp_zsource hands on a raw stream as it is and decompresses a zstd one, from a file and
 * from a pipe, whose reads may end anywhere. */
static void test_zsource(void **state)
{
	(void)state;
	struct rec recs[8];
	size_t n = sample_records(recs);
	uint8_t raw[4096], packed[4096];
	size_t raw_len = expected_bytes(recs, n, raw);
	size_t packed_len = ZSTD_compress(packed, sizeof packed, raw, raw_len, 1);
	assert_false(ZSTD_isError(packed_len));
	const uint8_t *inputs[] = {raw, packed};
	const size_t lens[] = {raw_len, packed_len};
	for (size_t i = 0; i < 2; i++) {
		int fd = file_with(inputs[i], lens[i]);
		struct hp_zsource z;
		hp_zsource_init(&z, fd);
		struct hp_reader r;
		assert_int_equal(hp_reader_open_source(&r, hp_zsource_read, &z), 0);
		read_recs(&r, recs, n);
		assert_int_equal(z.compressed, i == 1);
		hp_zsource_free(&z);
		close(fd);

		int p[2];
		assert_int_equal(pipe(p), 0);
		pid_t pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			/* Three bytes at a time: the magic, like everything, comes in pieces. */
			for (size_t o = 0; o < lens[i]; o += 3) {
				size_t k = lens[i] - o < 3 ? lens[i] - o : 3;
				if (hp_write_all(p[1], inputs[i] + o, k) < 0)
					_exit(1);
				usleep(100);
			}
			_exit(0);
		}
		close(p[1]);
		hp_zsource_init(&z, p[0]);
		assert_int_equal(hp_reader_open_source(&r, hp_zsource_read, &z), 0);
		read_recs(&r, recs, n);
		hp_zsource_free(&z);
		close(p[0]);
		int st;
		assert_int_equal(waitpid(pid, &st, 0), pid);
		assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_roundtrip_file), cmocka_unit_test(test_roundtrip_pipe),
	    cmocka_unit_test(test_bad_header),	   cmocka_unit_test(test_truncated),
	    cmocka_unit_test(test_oversized),	   cmocka_unit_test(test_zero_length_and_unknown),
	    cmocka_unit_test(test_take_bounds),	   cmocka_unit_test(test_read_ahead),
	    cmocka_unit_test(test_buffered),	   cmocka_unit_test(test_source),
	    cmocka_unit_test(test_zsource),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
