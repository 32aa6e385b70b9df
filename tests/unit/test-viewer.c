/* test-viewer.c - runs the built heapprof-viewer on streams written here: a good stream
 * (round line, profile contents, zstd-compressed, SYMBOL for a function of this binary),
 * format v2's size keys, temporary frees and LIVE record, a stream that ends without END or
 * inside a record, and malformed streams (exit 1, one-line error, no crash). */
#include <dlfcn.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "hpstream.h"
#include "hpzsource.h"
#include "symtest-phdr.h"

__attribute__((noinline, noipa, used)) int marker_function(int x);

int marker_function(int x)
{
	return x * 3 + 1;
}

/* An inline allocation wrapper: the return address of the call inside it is a site whose
 * innermost frame is inline_wrapper, inlined into inline_caller. */
__attribute__((noinline, noipa)) static void *return_address(void)
{
	return __builtin_return_address(0);
}

static inline __attribute__((always_inline)) void *inline_wrapper(void)
{
	void *volatile r = return_address();
	return r;
}

__attribute__((noinline, noipa)) static void *inline_caller(void)
{
	void *volatile r = inline_wrapper();
	return r;
}

struct run {
	pid_t pid;
	int wfd; /* the stream goes here */
	char profile[64], outpath[64], errpath[64];
	int status;
	char out[16384];
	char err[4096];
};

static void read_file(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	ssize_t n = read(fd, buf, cap - 1);
	buf[n > 0 ? n : 0] = '\0';
	close(fd);
}

static void start_viewer(struct run *r)
{
	memset(r, 0, sizeof *r);
	snprintf(r->profile, sizeof r->profile, "/tmp/hp-test-viewer-%d.prof", (int)getpid());
	snprintf(r->outpath, sizeof r->outpath, "/tmp/hp-test-viewer-%d.out", (int)getpid());
	snprintf(r->errpath, sizeof r->errpath, "/tmp/hp-test-viewer-%d.err", (int)getpid());
	int p[2];
	assert_int_equal(pipe(p), 0);
	r->pid = fork();
	assert_true(r->pid >= 0);
	if (r->pid == 0) {
		int o = open(r->outpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		int e = open(r->errpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0 || dup2(p[0], 3) < 0)
			_exit(127);
		close(p[1]);
		char pid[32];
		snprintf(pid, sizeof pid, "%d", (int)getppid());
		execl(VIEWER_PATH, VIEWER_PATH, "--fd", "3", "--pid", pid, "--output", r->profile,
		      "--batch", (char *)NULL);
		_exit(127);
	}
	close(p[0]);
	r->wfd = p[1];
}

static void finish_viewer(struct run *r)
{
	close(r->wfd);
	assert_int_equal(waitpid(r->pid, &r->status, 0), r->pid);
	read_file(r->outpath, r->out, sizeof r->out);
	read_file(r->errpath, r->err, sizeof r->err);
	unlink(r->outpath);
	unlink(r->errpath);
}

static void put(int fd, uint32_t type, const void *body, uint32_t len)
{
	assert_int_equal(hp_write_record(fd, type, body, len), 0);
}

static void put_hello(int fd)
{
	struct hp_hello h = {
	    .pid = (uint32_t)getpid(), .mode = HP_MODE_FULL, .interval_ms = 1000, .max_depth = 64};
	put(fd, HP_REC_HELLO, &h, sizeof h);
}

static void put_module(int fd, uint32_t id, const struct symtest_module *m)
{
	struct hp_module h = {.id = id,
			      .bias = m->bias,
			      .start = m->start,
			      .end = m->end,
			      .path_len = (uint16_t)strlen(m->path),
			      .build_id_len = (uint16_t)m->build_id_len};
	uint8_t buf[sizeof h + sizeof m->path + sizeof m->build_id];
	memcpy(buf, &h, sizeof h);
	memcpy(buf + sizeof h, m->path, h.path_len);
	memcpy(buf + sizeof h + h.path_len, m->build_id, h.build_id_len);
	put(fd, HP_REC_MODULE, buf, (uint32_t)(sizeof h + h.path_len + h.build_id_len));
}

static void put_stack(int fd, uint32_t id, const uint64_t *frames, uint32_t depth)
{
	struct hp_stack h = {.id = id, .depth = depth};
	assert_int_equal(hp_write_record2(fd, HP_REC_STACK, &h, sizeof h, frames, depth * 8), 0);
}

static void put_round(int fd, uint32_t seq)
{
	struct hp_round r = {.seq = seq,
			     .time_ns = 1500000000ull,
			     .rss_bytes = 123456,
			     .allocs = 10,
			     .alloc_bytes = 1000,
			     .frees = 4,
			     .freed_bytes = 400,
			     .live_blocks = 6,
			     .live_bytes = 600};
	put(fd, HP_REC_ROUND, &r, sizeof r);
}

struct rec {
	uint32_t type, len;
	uint8_t *body;
};

/* Reads the whole profile, which must be zstd-compressed; returns the record count. */
static size_t load_profile(const char *path, struct rec *recs, size_t max)
{
	int fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	uint8_t magic[4];
	assert_int_equal(pread(fd, magic, sizeof magic, 0), sizeof magic);
	assert_memory_equal(magic, "\x28\xb5\x2f\xfd", sizeof magic);
	struct hp_zsource z;
	hp_zsource_init(&z, fd);
	struct hp_reader rd;
	assert_int_equal(hp_reader_open_source(&rd, hp_zsource_read, &z), 0);
	size_t n = 0;
	uint32_t type, len;
	const uint8_t *body;
	int rc;
	while ((rc = hp_read_record(&rd, &type, &body, &len)) == 1) {
		assert_true(n < max);
		recs[n].type = type;
		recs[n].len = len;
		recs[n].body = malloc(len ? len : 1);
		memcpy(recs[n].body, body, len);
		n++;
	}
	assert_int_equal(rc, 0);
	hp_reader_close(&rd);
	hp_zsource_free(&z);
	close(fd);
	return n;
}

static void free_profile(struct rec *recs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(recs[i].body);
}

/* The real function (last frame) of a SYMBOL record, and its file's basename. */
static void symbol_function(const struct rec *rec, uint64_t *addr, uint32_t *module,
			    uint32_t *nframes, char *func, char *file, size_t cap)
{
	struct hp_symbol h;
	const uint8_t *p = rec->body, *end = rec->body + rec->len;
	assert_true(hp_take(&p, end, &h, sizeof h));
	*addr = h.addr;
	*module = h.module_id;
	*nframes = h.nframes;
	func[0] = file[0] = '\0';
	for (uint32_t i = 0; i < h.nframes; i++) {
		struct hp_symbol_frame f;
		assert_true(hp_take(&p, end, &f, sizeof f));
		assert_true(f.func_len < cap && f.file_len < cap);
		assert_true(hp_take(&p, end, func, f.func_len));
		func[f.func_len] = '\0';
		char path[4096];
		assert_true(hp_take(&p, end, path, f.file_len));
		path[f.file_len] = '\0';
		const char *b = strrchr(path, '/');
		b = b ? b + 1 : path;
		assert_true(strlen(b) < cap);
		memcpy(file, b, strlen(b) + 1);
	}
	assert_ptr_equal(p, end);
}

static void test_good_stream(void **state)
{
	(void)state;
	struct symtest_module m;
	assert_int_equal(symtest_find_module((void *)marker_function, &m), 0);
	uint64_t site = (uintptr_t)marker_function + 1;
	uint64_t frames[2] = {site, 0x10};

	struct run r;
	start_viewer(&r);
	assert_int_equal(hp_write_header(r.wfd), 0);
	put_hello(r.wfd);
	put_module(r.wfd, 1, &m);
	put_stack(r.wfd, 1, frames, 2);
	put_stack(r.wfd, 2, frames, 1);
	struct {
		struct hp_sites h;
		struct hp_site_delta d[2];
	} sites = {{.count = 2},
		   {{.stack_id = 1, .allocs = 7, .alloc_bytes = 700},
		    {.stack_id = 2, .allocs = 3, .alloc_bytes = 300}}};
	put(r.wfd, HP_REC_SITES, &sites, sizeof sites);
	put_round(r.wfd, 1);
	/* Replaces module 1: what it owns must be symbolized before. */
	put_module(r.wfd, 2, &m);
	struct hp_end end = {.reason = HP_END_DETACH};
	put(r.wfd, HP_REC_END, &end, sizeof end);
	finish_viewer(&r);

	assert_true(WIFEXITED(r.status));
	assert_int_equal(WEXITSTATUS(r.status), 0);
	assert_string_equal(r.err, "");
	char first[256];
	snprintf(first, sizeof first, "# heapprof: pid %d (test-viewer), profile %s\n",
		 (int)getpid(), r.profile);
	assert_memory_equal(r.out, first, strlen(first));
	assert_non_null(strstr(r.out, "\nround=1 time=1.500 allocs=10 frees=4 allocated=1000 "
				      "live=600 rss=123456\n"));
	assert_non_null(strstr(r.out, "marker_function (test-viewer.c:"));
	assert_non_null(strstr(r.out, "profile written to "));

	struct rec recs[32];
	size_t n = load_profile(r.profile, recs, 32);
	/* The call site's SYMBOL before the round; the outer frame's before the next MODULE. */
	static const uint32_t want[] = {HP_REC_SESSION, HP_REC_HELLO,  HP_REC_MODULE, HP_REC_STACK,
					HP_REC_SYMBOL,	HP_REC_STACK,  HP_REC_SITES,  HP_REC_ROUND,
					HP_REC_SYMBOL,	HP_REC_MODULE, HP_REC_END};
	assert_int_equal(n, sizeof want / sizeof want[0]);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(recs[i].type, want[i]);

	struct hp_session ses;
	memcpy(&ses, recs[0].body, sizeof ses);
	assert_int_equal(ses.pid, getpid());
	assert_int_equal(ses.comm_len, strlen("test-viewer"));
	assert_memory_equal(recs[0].body + sizeof ses, "test-viewer", ses.comm_len);
	struct hp_round round;
	memcpy(&round, recs[7].body, sizeof round);
	assert_int_equal(round.seq, 1);
	assert_int_equal(round.live_bytes, 600);

	uint64_t addr;
	uint32_t module, nframes;
	char func[256], file[256];
	symbol_function(&recs[4], &addr, &module, &nframes, func, file, sizeof func);
	assert_int_equal(addr, site);
	assert_int_equal(module, 1);
	assert_true(nframes >= 1);
	assert_string_equal(func, "marker_function");
	assert_string_equal(file, "test-viewer.c");
	symbol_function(&recs[8], &addr, &module, &nframes, func, file, sizeof func);
	assert_int_equal(addr, 0x10);
	assert_int_equal(module, 0);
	assert_int_equal(nframes, 0);
	free_profile(recs, n);
	unlink(r.profile);
}

/* A stack whose innermost frame is in libc's malloc counts for the frame below it. */
/* The summary names a site in an inline wrapper with the function it is inlined into. */
static void test_inlined_site(void **state)
{
	(void)state;
	struct symtest_module m;
	assert_int_equal(symtest_find_module((void *)marker_function, &m), 0);
	uint64_t frames[1] = {(uintptr_t)inline_caller()};

	struct run r;
	start_viewer(&r);
	assert_int_equal(hp_write_header(r.wfd), 0);
	put_hello(r.wfd);
	put_module(r.wfd, 1, &m);
	put_stack(r.wfd, 1, frames, 1);
	struct {
		struct hp_sites h;
		struct hp_site_delta d;
	} sites = {{.count = 1}, {.stack_id = 1, .allocs = 5, .alloc_bytes = 500}};
	put(r.wfd, HP_REC_SITES, &sites, sizeof sites);
	put_round(r.wfd, 1);
	finish_viewer(&r);

	assert_true(WIFEXITED(r.status));
	assert_int_equal(WEXITSTATUS(r.status), 0);
	char *line = strstr(r.out, "inline_wrapper (inlined into inline_caller) (test-viewer.c:");
	assert_non_null(line);
	assert_non_null(strstr(line, ", called at line "));
}

static void test_allocator_frames_skipped(void **state)
{
	(void)state;
	void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
	assert_non_null(libc);
	void *malloc_fn = dlsym(libc, "malloc");
	assert_non_null(malloc_fn);
	struct symtest_module self, libc_mod;
	assert_int_equal(symtest_find_module((void *)marker_function, &self), 0);
	assert_int_equal(symtest_find_module(malloc_fn, &libc_mod), 0);
	uint64_t site = (uintptr_t)marker_function + 1;
	uint64_t frames[2] = {(uintptr_t)malloc_fn + 1, site};

	struct run r;
	start_viewer(&r);
	assert_int_equal(hp_write_header(r.wfd), 0);
	put_hello(r.wfd);
	put_module(r.wfd, 1, &self);
	put_module(r.wfd, 2, &libc_mod);
	put_stack(r.wfd, 5, frames, 2);
	put_stack(r.wfd, 6, frames + 1, 1);
	struct {
		struct hp_sites h;
		struct hp_site_delta d[2];
	} sites = {{.count = 2},
		   {{.stack_id = 5, .allocs = 100, .alloc_bytes = 1000},
		    {.stack_id = 6, .allocs = 11, .alloc_bytes = 110}}};
	put(r.wfd, HP_REC_SITES, &sites, sizeof sites);
	put_round(r.wfd, 1);
	finish_viewer(&r);
	dlclose(libc);
	assert_true(WIFEXITED(r.status));
	assert_int_equal(WEXITSTATUS(r.status), 0);
	char *line = strstr(r.out, "marker_function (test-viewer.c:");
	assert_non_null(line);
	while (line > r.out && line[-1] != '\n')
		line--;
	assert_non_null(strstr(line, " 111 allocs "));
	assert_null(strstr(r.out, "malloc"));
	unlink(r.profile);
}

/* Format v2: SITES entries keyed by size with temporary frees, and a final LIVE record,
 * copied verbatim; the summary counts a site's temporary blocks over its size keys. */
static void test_v2_records(void **state)
{
	(void)state;
	struct symtest_module m;
	assert_int_equal(symtest_find_module((void *)marker_function, &m), 0);
	uint64_t frames[1] = {(uintptr_t)marker_function + 1};

	struct run r;
	start_viewer(&r);
	assert_int_equal(hp_write_header(r.wfd), 0);
	put_hello(r.wfd);
	put_module(r.wfd, 1, &m);
	put_stack(r.wfd, 3, frames, 1);
	struct {
		struct hp_sites h;
		struct hp_site_delta d[2];
	} sites = {{.count = 2},
		   {{.stack_id = 3,
		     .size_kind = HP_SIZE_EXACT,
		     .size = 48,
		     .allocs = 5,
		     .alloc_bytes = 240,
		     .frees = 4,
		     .freed_bytes = 192,
		     .temp_frees = 3},
		    {.stack_id = 3,
		     .size_kind = HP_SIZE_POW2,
		     .size = 8192,
		     .allocs = 2,
		     .alloc_bytes = 20000,
		     .frees = 1,
		     .freed_bytes = 9000,
		     .temp_frees = 1}}};
	put(r.wfd, HP_REC_SITES, &sites, sizeof sites);
	struct {
		struct hp_live h;
		struct hp_live_site s[1];
	} live = {{.count = 1},
		  {{.stack_id = 3,
		    .blocks = 2,
		    .bytes = 11048,
		    .oldest_age_ms = 900,
		    .mean_age_ms = 500}}};
	put(r.wfd, HP_REC_LIVE, &live, sizeof live);
	put_round(r.wfd, 1);
	struct hp_end end = {.reason = HP_END_DETACH};
	put(r.wfd, HP_REC_END, &end, sizeof end);
	finish_viewer(&r);

	assert_true(WIFEXITED(r.status));
	assert_int_equal(WEXITSTATUS(r.status), 0);
	assert_string_equal(r.err, "");
	char *line = strstr(r.out, "marker_function (test-viewer.c:");
	assert_non_null(line);
	while (line > r.out && line[-1] != '\n')
		line--;
	assert_non_null(strstr(line, " 7 allocs "));
	assert_non_null(strstr(line, " 20240 bytes "));
	assert_non_null(strstr(line, " 4 temporary "));

	struct rec recs[16];
	size_t n = load_profile(r.profile, recs, 16);
	size_t found = 0;
	for (size_t i = 0; i < n; i++) {
		if (recs[i].type == HP_REC_SITES) {
			assert_int_equal(recs[i].len, sizeof sites);
			assert_memory_equal(recs[i].body, &sites, sizeof sites);
			found++;
		} else if (recs[i].type == HP_REC_LIVE) {
			assert_int_equal(recs[i].len, sizeof live);
			assert_memory_equal(recs[i].body, &live, sizeof live);
			found++;
		}
	}
	assert_int_equal(found, 2);
	free_profile(recs, n);
	unlink(r.profile);
}

static void test_no_end(void **state)
{
	(void)state;
	struct run r;
	start_viewer(&r);
	assert_int_equal(hp_write_header(r.wfd), 0);
	put_hello(r.wfd);
	uint64_t frames[2] = {0x10, 0x20};
	put_stack(r.wfd, 1, frames, 2);
	put_round(r.wfd, 1);
	put_round(r.wfd, 2);
	finish_viewer(&r);
	assert_true(WIFEXITED(r.status));
	assert_int_equal(WEXITSTATUS(r.status), 0);
	assert_non_null(strstr(r.out, "\nround=2 time=1.500 "));

	/* The outer frame's SYMBOL still comes, before the END the viewer adds. */
	struct rec recs[10];
	size_t n = load_profile(r.profile, recs, 10);
	static const uint32_t want[] = {HP_REC_SESSION, HP_REC_HELLO, HP_REC_STACK,  HP_REC_SYMBOL,
					HP_REC_ROUND,	HP_REC_ROUND, HP_REC_SYMBOL, HP_REC_END};
	assert_int_equal(n, sizeof want / sizeof want[0]);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(recs[i].type, want[i]);
	uint64_t addr;
	memcpy(&addr, recs[6].body, sizeof addr);
	assert_int_equal(addr, 0x20);
	struct hp_end e;
	memcpy(&e, recs[7].body, sizeof e);
	assert_int_equal(e.reason, HP_END_TARGET_EXIT);
	free_profile(recs, n);
	unlink(r.profile);
}

/* A malformed stream ends the viewer with status 1 and one line on stderr. */
static void expect_malformed(const void *bytes, size_t len, int with_hello)
{
	struct run r;
	start_viewer(&r);
	if (with_hello) {
		assert_int_equal(hp_write_header(r.wfd), 0);
		put_hello(r.wfd);
	}
	assert_int_equal(hp_write_all(r.wfd, bytes, len), 0);
	finish_viewer(&r);
	assert_true(WIFEXITED(r.status));
	assert_int_equal(WEXITSTATUS(r.status), 1);
	assert_memory_equal(r.err, "heapprof-viewer: ", 17);
	char *nl = strchr(r.err, '\n');
	assert_non_null(nl);
	assert_string_equal(nl + 1, "");
	unlink(r.profile);
}

/* A stream that ends inside a record (the payload gave up a round its reader did not
 * take) is not malformed: the profile keeps the whole rounds and ends "cut short", and
 * the viewer says so in one line and exits 0. */
static void test_truncated_record(void **state)
{
	(void)state;
	struct run r;
	start_viewer(&r);
	assert_int_equal(hp_write_header(r.wfd), 0);
	put_hello(r.wfd);
	put_round(r.wfd, 1);
	uint8_t buf[8 + 10] = {0};
	hp_rec_put_hdr(buf, HP_REC_ROUND, sizeof(struct hp_round));
	assert_int_equal(hp_write_all(r.wfd, buf, sizeof buf), 0);
	finish_viewer(&r);
	assert_true(WIFEXITED(r.status));
	assert_int_equal(WEXITSTATUS(r.status), 0);
	assert_non_null(strstr(r.err, "heapprof-viewer: the stream ended inside a record"));
	assert_int_equal(strchr(r.err, '\n') - r.err + 1, (long)strlen(r.err));

	struct rec recs[8];
	size_t n = load_profile(r.profile, recs, 8);
	assert_int_equal(n, 4);
	assert_int_equal(recs[2].type, HP_REC_ROUND);
	assert_int_equal(recs[3].type, HP_REC_END);
	struct hp_end e;
	memcpy(&e, recs[3].body, sizeof e);
	assert_int_equal(e.reason, HP_END_CUT_SHORT);
	free_profile(recs, n);
	unlink(r.profile);
}

static void test_huge_length(void **state)
{
	(void)state;
	uint8_t buf[8];
	hp_rec_put_hdr(buf, HP_REC_STACK, 0xffffffffu);
	expect_malformed(buf, sizeof buf, 1);
}

static void test_garbage(void **state)
{
	(void)state;
	char junk[256];
	for (size_t i = 0; i < sizeof junk; i++)
		junk[i] = (char)(i * 37 + 11);
	expect_malformed(junk, sizeof junk, 0);
}

static void test_bad_counts(void **state)
{
	(void)state;
	uint8_t buf[8 + 16];
	/* A STACK claiming more frames than its record holds. */
	struct hp_stack st = {.id = 1, .depth = 100};
	hp_rec_put_hdr(buf, HP_REC_STACK, 16);
	memcpy(buf + 8, &st, sizeof st);
	memset(buf + 16, 0, 8);
	expect_malformed(buf, sizeof buf, 1);
	/* A SITES count that would overflow a multiplication. */
	struct hp_sites s = {.count = 0xffffffffu};
	hp_rec_put_hdr(buf, HP_REC_SITES, 16);
	memcpy(buf + 8, &s, sizeof s);
	expect_malformed(buf, sizeof buf, 1);
	/* A LIVE count beyond its record. */
	struct hp_live lv = {.count = 2};
	uint8_t lbuf[8 + sizeof lv + sizeof(struct hp_live_site)] = {0};
	hp_rec_put_hdr(lbuf, HP_REC_LIVE, sizeof lv + sizeof(struct hp_live_site));
	memcpy(lbuf + 8, &lv, sizeof lv);
	expect_malformed(lbuf, sizeof lbuf, 1);
	/* A v1-sized SITES entry (40 bytes) is short of a v2 one. */
	struct hp_sites one = {.count = 1};
	uint8_t v1[8 + sizeof one + 40] = {0};
	hp_rec_put_hdr(v1, HP_REC_SITES, sizeof one + 40);
	memcpy(v1 + 8, &one, sizeof one);
	expect_malformed(v1, sizeof v1, 1);
	/* An unknown size key. */
	uint8_t kbuf[8 + sizeof one + sizeof(struct hp_site_delta)] = {0};
	struct hp_site_delta bad = {.size_kind = 9};
	hp_rec_put_hdr(kbuf, HP_REC_SITES, sizeof one + sizeof bad);
	memcpy(kbuf + 8, &one, sizeof one);
	memcpy(kbuf + 8 + sizeof one, &bad, sizeof bad);
	expect_malformed(kbuf, sizeof kbuf, 1);
	/* A MODULE whose path runs past its end. */
	uint8_t mod[8 + sizeof(struct hp_module)];
	struct hp_module m = {.id = 1, .start = 1, .end = 2, .path_len = 500};
	hp_rec_put_hdr(mod, HP_REC_MODULE, sizeof m);
	memcpy(mod + 8, &m, sizeof m);
	expect_malformed(mod, sizeof mod, 1);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_good_stream),
	    cmocka_unit_test(test_inlined_site),
	    cmocka_unit_test(test_allocator_frames_skipped),
	    cmocka_unit_test(test_v2_records),
	    cmocka_unit_test(test_no_end),
	    cmocka_unit_test(test_truncated_record),
	    cmocka_unit_test(test_huge_length),
	    cmocka_unit_test(test_garbage),
	    cmocka_unit_test(test_bad_counts),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
