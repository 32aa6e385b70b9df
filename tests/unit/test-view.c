/* test-view: a synthetic profile file (every record kind, an allocator frame to skip, an
 * inlined frame, an unresolved one, hostile strings, an unknown record type) loads into the
 * model with the right sites, live numbers, peak and duration; the built heapprof-view
 * prints JSON that python3 parses and that holds those numbers; a truncated copy loads with
 * a warning; bad files and bad arguments give the documented errors and exit codes. The
 * same records through the viewer's writer make one zstd frame that loads the same (from a
 * pipe too); each of its prefixes loads the rounds it holds, as a killed viewer leaves it;
 * damaged compressed data never crashes the load, and the header errors read the same. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <zstd.h>

#include "hpstream.h"
#include "config.h"
#include "hpalloc.h"
#include "profile.h"
#include "profile-writer.h"
#include "view-run.h"

#define MOD_EXE_BIAS 0x400000ull
#define MOD_LIBC_BIAS 0x7f0000000000ull
#define A_MALLOC (MOD_LIBC_BIAS + 0x1234)
#define A_MYFUNC (MOD_EXE_BIAS + 0x1000)
#define A_MAIN (MOD_EXE_BIAS + 0x2000)
#define A_CALLER2 (MOD_EXE_BIAS + 0x2100) /* no SYMBOL record at all */
#define A_OTHER (MOD_EXE_BIAS + 0x1500)	  /* "helper" inlined into a hostile name */
#define A_UNRES (MOD_EXE_BIAS + 0x3000)	  /* SYMBOL with nframes 0 */

/* The real function at A_OTHER: a quote, a backslash, a control byte, invalid UTF-8, é. */
#define HOSTILE "other\"func\\\x01\xff\xc3\xa9"
#define HOSTILE_PY "'other\"func\\\\\\x01\\ufffd\\u00e9'"

static char prof[96], cut[96], zprof[96];

static void put_session(int fd)
{
	static const char comm[] = "myprog", exe[] = "/usr/bin/myprog", args[] = "myprog\0--flag",
			  host[] = "box";
	struct hp_session s = {.pid = 4242,
			       .comm_len = sizeof comm - 1,
			       .exe_len = sizeof exe - 1,
			       .cmdline_len = sizeof args,
			       .host_len = sizeof host - 1};
	uint8_t buf[256];
	size_t o = 0;
	memcpy(buf + o, comm, s.comm_len), o += s.comm_len;
	memcpy(buf + o, exe, s.exe_len), o += s.exe_len;
	memcpy(buf + o, args, s.cmdline_len), o += s.cmdline_len;
	memcpy(buf + o, host, s.host_len), o += s.host_len;
	assert_int_equal(hp_write_record2(fd, HP_REC_SESSION, &s, sizeof s, buf, (uint32_t)o), 0);
}

static void put_module(int fd, uint32_t id, const char *path, uint64_t bias, uint64_t size)
{
	struct hp_module m = {.id = id,
			      .bias = bias,
			      .start = bias,
			      .end = bias + size,
			      .path_len = (uint16_t)strlen(path)};
	assert_int_equal(hp_write_record2(fd, HP_REC_MODULE, &m, sizeof m, path, m.path_len), 0);
}

static void put_stack(int fd, uint32_t id, const uint64_t *frames, uint32_t depth)
{
	struct hp_stack s = {.id = id, .depth = depth};
	assert_int_equal(
	    hp_write_record2(fd, HP_REC_STACK, &s, sizeof s, frames, depth * sizeof *frames), 0);
}

/* funcs/files/lines: nframes entries, innermost first. */
static void put_symbol(int fd, uint64_t addr, uint32_t module, uint32_t nframes,
		       const char *const *funcs, const char *const *files, const uint32_t *lines)
{
	uint8_t buf[1024];
	struct hp_symbol s = {.addr = addr, .module_id = module, .nframes = nframes};
	size_t o = 0;
	memcpy(buf, &s, sizeof s), o += sizeof s;
	for (uint32_t i = 0; i < nframes; i++) {
		struct hp_symbol_frame f = {.line = lines[i],
					    .func_len = (uint16_t)strlen(funcs[i]),
					    .file_len = (uint16_t)strlen(files[i])};
		memcpy(buf + o, &f, sizeof f), o += sizeof f;
		memcpy(buf + o, funcs[i], f.func_len), o += f.func_len;
		memcpy(buf + o, files[i], f.file_len), o += f.file_len;
	}
	assert_int_equal(hp_write_record(fd, HP_REC_SYMBOL, buf, (uint32_t)o), 0);
}

static void put_sym1(int fd, uint64_t addr, uint32_t module, const char *func, const char *file,
		     uint32_t line)
{
	put_symbol(fd, addr, module, 1, &func, &file, &line);
}

static void put_sites(int fd, const struct hp_site_delta *d, uint32_t n)
{
	struct hp_sites s = {.count = n};
	assert_int_equal(hp_write_record2(fd, HP_REC_SITES, &s, sizeof s, d, n * sizeof *d), 0);
}

static void put_round(int fd, uint32_t seq, uint64_t time_ns, uint64_t allocs, uint64_t alloc_bytes,
		      uint64_t frees, uint64_t freed_bytes)
{
	struct hp_round r = {.seq = seq,
			     .time_ns = time_ns,
			     .rss_bytes = seq * (10u << 20),
			     .payload_bytes = seq == 2 ? 5u << 20 : 4u << 20,
			     .allocs = allocs,
			     .alloc_bytes = alloc_bytes,
			     .frees = frees,
			     .freed_bytes = freed_bytes,
			     .untracked_frees = 1,
			     .live_blocks = allocs - frees,
			     .live_bytes = alloc_bytes - freed_bytes};
	assert_int_equal(hp_write_record(fd, HP_REC_ROUND, &r, sizeof r), 0);
}

/* Writes the profile; returns the offset of the last ROUND record. */
static off_t write_profile(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(hp_write_header(fd), 0);
	put_session(fd);
	struct hp_hello h = {
	    .pid = 4242, .mode = HP_MODE_FULL, .interval_ms = 1000, .max_depth = 64};
	assert_int_equal(hp_write_record(fd, HP_REC_HELLO, &h, sizeof h), 0);
	put_module(fd, 1, "/usr/bin/myprog", MOD_EXE_BIAS, 0x100000);
	put_module(fd, 2, "/lib/x86_64-linux-gnu/libc.so.6", MOD_LIBC_BIAS, 0x200000);

	const uint64_t s1[] = {A_MYFUNC, A_MAIN}, s2[] = {A_MYFUNC, A_CALLER2},
		       s3[] = {A_MALLOC, A_MYFUNC, A_MAIN}, s4[] = {A_OTHER, A_MAIN},
		       s5[] = {A_UNRES, A_MAIN};
	put_stack(fd, 1, s1, 2);
	put_stack(fd, 2, s2, 2);
	put_stack(fd, 3, s3, 3);
	put_stack(fd, 4, s4, 2);
	put_stack(fd, 5, s5, 2);
	put_sym1(fd, A_MALLOC, 2, "malloc", "malloc.c", 3287);
	put_sym1(fd, A_MYFUNC, 1, "my_func", "src/my.c", 42);
	put_sym1(fd, A_MAIN, 1, "main", "src/main.c", 10);
	const char *funcs[] = {"helper", HOSTILE}, *files[] = {"src/helper.h", "src/other.c"};
	const uint32_t lines[] = {5, 7};
	put_symbol(fd, A_OTHER, 1, 2, funcs, files, lines);
	put_symbol(fd, A_UNRES, 1, 0, NULL, NULL, NULL);
	/* A record type from the future: skipped. */
	assert_int_equal(hp_write_record(fd, 99, "xyz", 3), 0);

	const struct hp_site_delta r1[] = {
	    {.stack_id = 1, .allocs = 10, .alloc_bytes = 1000, .frees = 2, .freed_bytes = 200},
	    {.stack_id = 2, .allocs = 5, .alloc_bytes = 500},
	    {.stack_id = 3, .allocs = 25, .alloc_bytes = 2500, .frees = 5, .freed_bytes = 500},
	    {.stack_id = 4, .allocs = 3, .alloc_bytes = 300},
	};
	put_sites(fd, r1, 4);
	put_round(fd, 1, 1000000000, 43, 4300, 7, 700);

	const struct hp_site_delta r2[] = {
	    {.stack_id = 1, .allocs = 10, .alloc_bytes = 1000, .frees = 10, .freed_bytes = 1000},
	    {.stack_id = 3, .frees = 15, .freed_bytes = 1500},
	    {.stack_id = 5, .allocs = 1, .alloc_bytes = 4096},
	};
	put_sites(fd, r2, 3);
	put_round(fd, 2, 2000000000, 54, 9396, 32, 3200);

	const struct hp_site_delta r3[] = {{.stack_id = 5, .frees = 1, .freed_bytes = 4096}};
	put_sites(fd, r3, 1);
	off_t last_round = lseek(fd, 0, SEEK_CUR);
	put_round(fd, 3, 3000000000, 54, 9396, 33, 7296);
	struct hp_end e = {.reason = HP_END_DETACH};
	assert_int_equal(hp_write_record(fd, HP_REC_END, &e, sizeof e), 0);
	close(fd);
	return last_round;
}

/* The whole file, malloc'd. */
static uint8_t *slurp(const char *path, size_t *len)
{
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	uint8_t *buf = malloc((size_t)st.st_size + 1);
	assert_non_null(buf);
	int fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(read(fd, buf, (size_t)st.st_size), st.st_size);
	close(fd);
	*len = (size_t)st.st_size;
	return buf;
}

static void spill(const char *path, const void *buf, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(hp_write_all(fd, buf, len), 0);
	close(fd);
}

static void copy_prefix(const char *from, const char *to, off_t len)
{
	size_t have;
	uint8_t *buf = slurp(from, &have);
	assert_true((size_t)len <= have);
	spill(to, buf, (size_t)len);
	free(buf);
}

static off_t last_round_off;

/* The compressed profile's size after each flush point: once the header is written (at
 * open), after SESSION, after ROUND 1, 2 and 3, after END. */
enum { Z_HEADER, Z_SESSION, Z_ROUND1, Z_ROUND3 = Z_ROUND1 + 2, Z_END, Z_POINTS };
static off_t zoff[Z_POINTS];

/* Copies the raw profile's records through the viewer's own writer, as the viewer copies
 * a stream's. */
static void compress_profile(const char *from, const char *to)
{
	int fd = open(from, O_RDONLY);
	assert_true(fd >= 0);
	struct hp_reader r;
	assert_int_equal(hp_reader_open(&r, fd), 0);
	struct hp_profile_writer w;
	struct hp_error e = {0};
	assert_int_equal(hp_pw_open(&w, to, &e), 0);
	zoff[Z_HEADER] = lseek(w.fd, 0, SEEK_CUR);
	int point = Z_SESSION, rc;
	uint32_t type, len;
	const uint8_t *body;
	while ((rc = hp_read_record(&r, &type, &body, &len)) == 1) {
		assert_int_equal(hp_pw_record(&w, type, body, len), 0);
		if (type == HP_REC_SESSION || type == HP_REC_ROUND || type == HP_REC_END)
			zoff[point++] = lseek(w.fd, 0, SEEK_CUR);
	}
	assert_int_equal(rc, 0);
	assert_int_equal(point, Z_POINTS);
	assert_int_equal(hp_pw_close(&w), 0);
	hp_reader_close(&r);
	close(fd);
}

static int setup(void **state)
{
	(void)state;
	if (vr_setup("test-view") < 0)
		return -1;
	snprintf(prof, sizeof prof, "%s/a.hpf", vr_dir);
	snprintf(cut, sizeof cut, "%s/cut.hpf", vr_dir);
	snprintf(zprof, sizeof zprof, "%s/z.hpf", vr_dir);
	last_round_off = write_profile(prof);
	compress_profile(prof, zprof);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	return vr_teardown();
}

static void check_model(const char *path)
{
	struct profile p;
	struct hp_error e = {0};
	assert_int_equal(pf_load(&p, path, &e), 0);
	assert_string_equal(p.warning, "");
	assert_int_equal(p.skipped_records, 1);
	assert_int_equal(p.malformed_records, 0);
	assert_int_equal(p.session.pid, 4242);
	assert_string_equal(p.session.comm, "myprog");
	assert_int_equal(p.nmodules, 2);
	assert_int_equal(p.nstacks, 5);
	assert_int_equal(p.nrounds, 3);
	assert_int_equal(pf_last_round(&p)->time_ns, 3000000000ull);
	assert_int_equal(p.peak_live_bytes, 6196);
	assert_true(p.has_end);
	assert_int_equal(p.end_reason, HP_END_DETACH);

	/* Stacks 1, 2 and 3 (malloc skipped) meet at my_func. */
	assert_int_equal(p.nsites, 3);
	const struct pf_site *s = pf_site_at(&p, A_MYFUNC);
	assert_non_null(s);
	assert_int_equal(s->nstacks, 3);
	assert_int_equal(s->tot.allocs, 50);
	assert_int_equal(s->tot.alloc_bytes, 5000);
	assert_int_equal(s->tot.frees, 32);
	assert_int_equal(pf_live_blocks(&s->tot), 18);
	assert_int_equal(pf_live_bytes(&s->tot), 1800);
	assert_int_equal(p.stacks[s->top_stack].id, 3);
	assert_int_equal(p.stacks[s->top_stack].site_frame, 1);
	assert_null(pf_site_at(&p, A_MALLOC));

	s = pf_site_at(&p, A_UNRES);
	assert_non_null(s);
	assert_int_equal(s->tot.allocs, 1);
	assert_int_equal(pf_live_bytes(&s->tot), 0);
	assert_non_null(pf_site_at(&p, A_OTHER));
	pf_free(&p);
}

static void test_model(void **state)
{
	(void)state;
	check_model(prof);
	assert_true(
	    hp_is_allocator_function("operator new[](unsigned long, std::nothrow_t const&)"));
	assert_true(hp_is_allocator_function("operator delete(void*, unsigned long)"));
	assert_true(hp_is_allocator_function("__libc_malloc"));
	assert_true(hp_is_allocator_function("_int_malloc"));
	assert_false(hp_is_allocator_function("my_malloc"));
	assert_true(hp_is_allocator_function("__GI___strdup"));
	assert_false(hp_is_allocator_function("fopen"));
	assert_false(hp_is_allocator_function(NULL));
}

/* A library unloaded and loaded again at another address: its allocation site has a new
 * return address, and is still one site; another library with the same offset is not. */
static void test_reloaded_module(void **state)
{
	(void)state;
	const uint64_t b1 = 0x7f1000000000ull, b2 = 0x7f2000000000ull, b3 = 0x7f3000000000ull;
	char path[128];
	snprintf(path, sizeof path, "%s/reload.hpf", vr_dir);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(hp_write_header(fd), 0);
	struct hp_hello h = {.pid = 1, .mode = HP_MODE_FULL, .interval_ms = 1000, .max_depth = 64};
	assert_int_equal(hp_write_record(fd, HP_REC_HELLO, &h, sizeof h), 0);
	put_module(fd, 1, "/usr/bin/myprog", MOD_EXE_BIAS, 0x100000);
	put_module(fd, 2, "/opt/lib/plugin.so", b1, 0x10000);
	put_module(fd, 3, "/opt/lib/plugin.so", b2, 0x10000);
	put_module(fd, 4, "/opt/lib/other.so", b3, 0x10000);
	const uint64_t s1[] = {b1 + 0x100, A_MAIN}, s2[] = {b2 + 0x100, A_MAIN},
		       s3[] = {b3 + 0x100, A_MAIN};
	put_stack(fd, 1, s1, 2);
	put_stack(fd, 2, s2, 2);
	put_stack(fd, 3, s3, 2);
	put_sym1(fd, b1 + 0x100, 2, "plug_alloc", "plug.c", 9);
	put_sym1(fd, b2 + 0x100, 3, "plug_alloc", "plug.c", 9);
	put_sym1(fd, b3 + 0x100, 4, "other_alloc", "other.c", 3);
	put_sym1(fd, A_MAIN, 1, "main", "src/main.c", 10);
	const struct hp_site_delta d[] = {
	    {.stack_id = 1, .allocs = 4, .alloc_bytes = 400, .frees = 4, .freed_bytes = 400},
	    {.stack_id = 2, .allocs = 6, .alloc_bytes = 600, .frees = 1, .freed_bytes = 100},
	    {.stack_id = 3, .allocs = 1, .alloc_bytes = 8},
	};
	put_sites(fd, d, 3);
	put_round(fd, 1, 1000000000, 11, 1008, 5, 500);
	close(fd);

	struct profile p;
	struct hp_error e = {0};
	assert_int_equal(pf_load(&p, path, &e), 0);
	assert_int_equal(p.nsites, 2);
	const struct pf_site *s = pf_site_at(&p, b1 + 0x100);
	assert_non_null(s);
	assert_int_equal(s->nstacks, 2);
	assert_int_equal(s->tot.allocs, 10);
	assert_int_equal(s->tot.frees, 5);
	assert_int_equal(pf_live_bytes(&s->tot), 500);
	assert_int_equal(pf_site_of(&p, &p.stacks[1]), s - p.sites);
	assert_ptr_equal(pf_site_at(&p, b2 + 0x100), s);
	s = pf_site_at(&p, b3 + 0x100);
	assert_non_null(s);
	assert_int_equal(s->tot.allocs, 1);
	pf_free(&p);
	unlink(path);
}

/* A profile cut before the third ROUND: the SITES that came before it do not count. */
static void check_two_rounds(const struct profile *p)
{
	assert_int_equal(p->nrounds, 2);
	assert_false(p->has_end);
	const struct pf_site *s = pf_site_at(p, A_UNRES);
	assert_non_null(s);
	assert_int_equal(s->tot.frees, 0);
}

static void test_truncated_model(void **state)
{
	(void)state;
	/* Cut in the middle of the third ROUND. */
	copy_prefix(prof, cut, last_round_off + 50);
	struct profile p;
	struct hp_error e = {0};
	assert_int_equal(pf_load(&p, cut, &e), 0);
	assert_non_null(strstr(p.warning, "cut short"));
	check_two_rounds(&p);
	pf_free(&p);

	/* Cut exactly before END: complete records, but the session did not finish. */
	struct stat st;
	assert_int_equal(stat(prof, &st), 0);
	copy_prefix(prof, cut, st.st_size - 16);
	assert_int_equal(pf_load(&p, cut, &e), 0);
	assert_non_null(strstr(p.warning, "no END"));
	assert_int_equal(p.nrounds, 3);
	pf_free(&p);
}

static void test_hotspots_json(void **state)
{
	(void)state;
	assert_int_equal(vr_view("hotspots --json %s", prof), 0);
	assert_true(vr_json_check("len(d) == 3"));
	assert_true(vr_json_check("d[0]['function'] == 'my_func' and d[0]['file'] == 'src/my.c' "
				  "and d[0]['line'] == 42 and d[0]['module'] == 'myprog'"));
	assert_true(
	    vr_json_check("d[0]['allocations'] == 50 and d[0]['frees'] == 32 and "
			  "d[0]['allocated_bytes'] == 5000 and d[0]['live_blocks'] == 18 "
			  "and d[0]['live_bytes'] == 1800 and d[0]['address'] == '0x401000'"));
	assert_true(vr_json_check("[f['function'] for f in d[0]['stack']] == ['my_func', 'main']"));
	assert_true(vr_json_check("d[1]['function'] == 'helper' and d[1]['line'] == 5 and "
				  "[f['function'] for f in d[1]['stack']] == ['helper', " HOSTILE_PY
				  ", 'main'] and d[1]['stack'][0]['inlined']"));
	assert_true(vr_json_check("d[2]['function'] is None and d[2]['file'] is None and "
				  "d[2]['line'] is None and d[2]['module'] == 'myprog' and "
				  "d[2]['live_bytes'] == 0"));

	assert_int_equal(vr_view("hotspots --json --sort bytes --top 2 %s", prof), 0);
	assert_true(vr_json_check("[s['allocated_bytes'] for s in d] == [5000, 4096]"));
	assert_int_equal(vr_view("hotspots --sort=live %s --json", prof), 0);
	assert_true(vr_json_check("[s['live_bytes'] for s in d] == [1800, 300, 0]"));
}

static void test_overview_json(void **state)
{
	(void)state;
	assert_int_equal(vr_view("overview --json %s", prof), 0);
	assert_true(
	    vr_json_check("d['pid'] == 4242 and d['command'] == 'myprog' and "
			  "d['exe'] == '/usr/bin/myprog' and d['cmdline'] == ['myprog', "
			  "'--flag'] and d['mode'] == 'full' and d['end_reason'] == 'detach'"));
	assert_true(vr_json_check("d['duration_s'] == 3.0 and d['rounds'] == 3 and "
				  "d['allocations'] == 54 and d['frees'] == 33 and "
				  "d['allocated_bytes'] == 9396 and d['freed_bytes'] == 7296"));
	assert_true(vr_json_check("d['live_blocks'] == 21 and d['live_bytes'] == 2100 and "
				  "d['peak_live_bytes'] == 6196 and d['untracked_frees'] == 1 and "
				  "d['lost'] == 0 and d['peak_rss_bytes'] == 3 * 10 * 1048576"));
	assert_true(vr_json_check("d['payload_bytes'] == 4 * 1048576 and "
				  "d['peak_payload_bytes'] == 5 * 1048576"));
}

static void test_text_and_truncated(void **state)
{
	(void)state;
	assert_int_equal(vr_view("hotspots %s", prof), 0);
	assert_true(vr_file_has(vr_out, "ALLOCATIONS"));
	assert_true(vr_file_has(vr_out, "4.88 KiB"));
	assert_true(vr_file_has(vr_out, "src/my.c:42"));
	assert_true(vr_file_has(vr_out, "myprog+0x3000"));
	assert_int_equal(vr_view("overview %s", prof), 0);
	assert_true(vr_file_has(vr_out, "myprog --flag"));
	assert_true(vr_file_has(vr_out, "Profiler memory: 5.00 MiB at most"));

	copy_prefix(prof, cut, last_round_off + 50);
	assert_int_equal(vr_view("overview --json %s", cut), 0);
	assert_true(vr_file_has(vr_err, "heapprof-view: warning: "));
	assert_true(vr_json_check("d['rounds'] == 2 and d['end_reason'] == 'incomplete'"));
}

/* The writer's file is one zstd frame holding the raw profile byte for byte, and loads into
 * the same model, from a file and from a pipe. */
static void test_compressed_model(void **state)
{
	(void)state;
	size_t zlen, rawlen;
	uint8_t *z = slurp(zprof, &zlen), *raw = slurp(prof, &rawlen);
	assert_memory_equal(z, "\x28\xb5\x2f\xfd", 4);
	assert_int_equal(ZSTD_findFrameCompressedSize(z, zlen), zlen);
	uint8_t *back = malloc(rawlen + 1);
	assert_non_null(back);
	assert_int_equal(ZSTD_decompress(back, rawlen + 1, z, zlen), rawlen);
	assert_memory_equal(back, raw, rawlen);
	free(back);
	free(raw);
	free(z);

	check_model(zprof);
	assert_int_equal(vr_view_from(zprof, "overview --json /dev/stdin"), 0);
	assert_true(vr_json_check("d['rounds'] == 3 and d['allocations'] == 54"));
}

/* A viewer killed at any point: every prefix of the compressed file loads the rounds
 * whose flush it holds, and only those. */
static void test_compressed_truncated(void **state)
{
	(void)state;
	size_t zlen;
	uint8_t *z = slurp(zprof, &zlen);
	for (size_t at = 0; at <= zlen; at++) {
		spill(cut, z, at);
		struct profile p;
		struct hp_error e = {0};
		int rc = pf_load(&p, cut, &e);
		if ((off_t)at < zoff[Z_HEADER]) {
			assert_int_equal(rc, -1);
			assert_non_null(strstr(e.msg, "not a heapprof profile"));
			continue;
		}
		assert_int_equal(rc, 0);
		size_t rounds = 0;
		while (rounds < 3 && zoff[Z_ROUND1 + rounds] <= (off_t)at)
			rounds++;
		assert_int_equal(p.nrounds, rounds);
		assert_int_equal(p.has_end, (off_t)at >= zoff[Z_END]);
		assert_int_equal(p.warning[0] != '\0', (off_t)at < zoff[Z_END]);
		if (rounds == 2)
			check_two_rounds(&p);
		pf_free(&p);
	}
	free(z);
}

/* No damage to a compressed file crashes the load or gives more than one line of error; a
 * block the decoder cannot take (reserved type) is a clear error from heapprof-view. */
static void test_compressed_corrupt(void **state)
{
	(void)state;
	size_t zlen;
	uint8_t *z = slurp(zprof, &zlen);
	for (size_t i = 0; i < zlen; i++) {
		z[i] ^= 0xff;
		spill(cut, z, zlen);
		z[i] ^= 0xff;
		struct profile p;
		struct hp_error e = {0};
		if (pf_load(&p, cut, &e) == 0) {
			pf_free(&p);
		} else {
			assert_true(e.msg[0] != '\0');
			assert_null(strchr(e.msg, '\n'));
		}
	}

	/* Round 2's block starts where round 1's flush ended. */
	z[zoff[Z_ROUND1]] |= 0x06;
	spill(cut, z, zlen);
	free(z);
	struct profile p;
	struct hp_error e = {0};
	assert_int_equal(pf_load(&p, cut, &e), -1);
	assert_non_null(strstr(e.msg, "is damaged: corrupt compressed data"));
	assert_int_equal(vr_view("overview %s", cut), 1);
	size_t elen;
	char *text = (char *)slurp(vr_err, &elen);
	assert_true(elen > 0 && text[elen - 1] == '\n' && !memchr(text, '\n', elen - 1));
	assert_non_null(strstr(text, "heapprof-view: "));
	assert_non_null(strstr(text, "is damaged: corrupt compressed data"));
	free(text);
}

static void test_errors(void **state)
{
	(void)state;
	char path[128];
	assert_int_equal(vr_view("overview %s/missing", vr_dir), 1);
	assert_true(vr_file_has(vr_err, "heapprof-view: cannot open"));

	snprintf(path, sizeof path, "%s/text", vr_dir);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs("hello, this is not a profile\n", f);
	fclose(f);
	assert_int_equal(vr_view("hotspots %s", path), 1);
	assert_true(vr_file_has(vr_err, "not a heapprof profile"));

	snprintf(path, sizeof path, "%s/v9", vr_dir);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	struct hp_file_header h = {.version = HP_FORMAT_VERSION + 8};
	memcpy(h.magic, HP_MAGIC, 8);
	assert_int_equal(hp_write_all(fd, &h, sizeof h), 0);
	close(fd);
	assert_int_equal(vr_view("overview %s", path), 1);
	assert_true(vr_file_has(vr_err, "newer"));

	snprintf(path, sizeof path, "%s/empty", vr_dir);
	spill(path, "", 0);
	assert_int_equal(vr_view("overview %s", path), 1);
	assert_true(vr_file_has(vr_err, "is empty"));

	/* The same words when the bytes are compressed. */
	static const char text[] = "hello, this is not a profile\n";
	struct {
		const char *name;
		const void *bytes;
		size_t len;
		const char *says;
	} const zs[] = {
	    {"ztext", text, sizeof text - 1, "is not a heapprof profile"},
	    {"zv9", &h, sizeof h, "newer"},
	    {"zempty", "", 0, "is empty"},
	};
	for (size_t i = 0; i < sizeof zs / sizeof zs[0]; i++) {
		uint8_t packed[256];
		size_t n = ZSTD_compress(packed, sizeof packed, zs[i].bytes, zs[i].len, 1);
		assert_false(ZSTD_isError(n));
		snprintf(path, sizeof path, "%s/%s", vr_dir, zs[i].name);
		spill(path, packed, n);
		assert_int_equal(vr_view("overview %s", path), 1);
		assert_true(vr_file_has(vr_err, zs[i].says));
	}

	assert_int_equal(vr_view("frobnicate x"), 2);
	assert_true(vr_file_has(vr_err, "unknown command 'frobnicate'"));
	assert_true(vr_file_has(vr_err, "overview, timeline, histogram"));
	assert_int_equal(vr_view("%s", ""), 2);
	assert_int_equal(vr_view("hotspots --sort size %s", prof), 2);
	assert_int_equal(vr_view("hotspots --top %s", prof), 2);
	assert_int_equal(vr_view("overview"), 2);

	assert_int_equal(vr_view("--version"), 0);
	assert_true(vr_file_has(vr_out, "heapprof-view " PACKAGE_VERSION));
	assert_int_equal(vr_view("--help"), 0);
	assert_true(vr_file_has(vr_out, "--sort"));
	assert_int_equal(vr_view("hotspots --help"), 0);
	assert_true(vr_file_has(vr_out, "--top"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_model),
	    cmocka_unit_test(test_reloaded_module),
	    cmocka_unit_test(test_truncated_model),
	    cmocka_unit_test(test_hotspots_json),
	    cmocka_unit_test(test_overview_json),
	    cmocka_unit_test(test_text_and_truncated),
	    cmocka_unit_test(test_errors),
	    cmocka_unit_test(test_compressed_model),
	    cmocka_unit_test(test_compressed_truncated),
	    cmocka_unit_test(test_compressed_corrupt),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
