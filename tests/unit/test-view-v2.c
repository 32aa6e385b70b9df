/* test-view-v2: a synthetic format-2 profile (size keys, temporary frees, LIVE records, a
 * sampled round, an inlined frame, a C++ template name, an extended-mode entry without a
 * stack) gives the expected numbers in every heapprof-view command: per-round series and
 * the peak, the growth slope and r2 against a plain least-squares fit, leak ages merged over
 * stacks, the size histogram, filter --size, temporary shares, call trees that sum to the
 * totals, -j and -t, sites inside an inline wrapper named with what they are inlined into.
 * The outputs other tools read are checked by those tools: JSON and the
 * SVG parse in python3, collapsed lines sum to the totals, ms_print reads the massif file,
 * a protobuf wire decoder (python3, no packages) reads the pprof file, and go tool pprof
 * when Go is installed. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include <cmocka.h>

#include "growth-fit.h"
#include "hpstream.h"
#include "profile.h"
#include "view-run.h"

#define EXE_BIAS 0x400000ull
#define LIBC_BIAS 0x7f0000000000ull
#define A_MALLOC (LIBC_BIAS + 0x1234)
#define A_LEAK (EXE_BIAS + 0x1000)
#define A_TEMP (EXE_BIAS + 0x1100)
#define A_TPL (EXE_BIAS + 0x1200)
#define A_RUN (EXE_BIAS + 0x2000) /* run() inlined into main() */
#define A_MAIN (EXE_BIAS + 0x2100)
#define TPL_NAME "std::vector<int, std::allocator<int> >::push_back(int const&)"
#define NROUNDS 5

static char prof[96];

static void put_module(int fd, uint32_t id, const char *path, uint64_t bias, uint64_t size,
		       const uint8_t *bid, uint16_t bid_len)
{
	struct hp_module m = {.id = id,
			      .bias = bias,
			      .start = bias,
			      .end = bias + size,
			      .path_len = (uint16_t)strlen(path),
			      .build_id_len = bid_len};
	uint8_t buf[256];
	memcpy(buf, path, m.path_len);
	if (bid_len)
		memcpy(buf + m.path_len, bid, bid_len);
	assert_int_equal(
	    hp_write_record2(fd, HP_REC_MODULE, &m, sizeof m, buf, m.path_len + bid_len), 0);
}

static void put_stack(int fd, uint32_t id, const uint64_t *frames, uint32_t depth)
{
	struct hp_stack s = {.id = id, .depth = depth};
	assert_int_equal(
	    hp_write_record2(fd, HP_REC_STACK, &s, sizeof s, frames, depth * sizeof *frames), 0);
}

static void put_symbol(int fd, uint64_t addr, uint32_t nframes, const char *const *funcs,
		       const char *const *files, const uint32_t *lines)
{
	uint8_t buf[1024];
	struct hp_symbol s = {
	    .addr = addr, .module_id = addr >= LIBC_BIAS ? 2 : 1, .nframes = nframes};
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

static void put_sym1(int fd, uint64_t addr, const char *func, const char *file, uint32_t line)
{
	put_symbol(fd, addr, 1, &func, &file, &line);
}

/* Writes the SITES of a round and its ROUND, with totals accumulated from the deltas. */
static void put_round(int fd, struct hp_round *acc, const struct hp_site_delta *d, uint32_t n,
		      uint32_t flags)
{
	struct hp_sites s = {.count = n};
	assert_int_equal(hp_write_record2(fd, HP_REC_SITES, &s, sizeof s, d, n * sizeof *d), 0);
	for (uint32_t i = 0; i < n; i++) {
		acc->allocs += d[i].allocs;
		acc->alloc_bytes += d[i].alloc_bytes;
		acc->frees += d[i].frees;
		acc->freed_bytes += d[i].freed_bytes;
	}
	acc->seq++;
	acc->flags = flags;
	acc->time_ns = acc->seq * 1000000000ull;
	acc->rss_bytes = (20ull + acc->seq) << 20;
	acc->live_blocks = acc->allocs - acc->frees;
	acc->live_bytes = acc->alloc_bytes - acc->freed_bytes;
	assert_int_equal(hp_write_record(fd, HP_REC_ROUND, acc, sizeof *acc), 0);
}

#define EX(stack, sz, n, nbytes, f, fb, t)                                                         \
	{                                                                                          \
		.stack_id = (stack), .size_kind = HP_SIZE_EXACT, .size = (sz), .allocs = (n),      \
		.alloc_bytes = (nbytes), .frees = (f), .freed_bytes = (fb), .temp_frees = (t)      \
	}

static void write_profile(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(hp_write_header(fd), 0);
	static const char comm[] = "srv", exe[] = "/usr/bin/srv", args[] = "srv\0--port\0080",
			  host[] = "box";
	struct hp_session ss = {.pid = 77,
				.comm_len = sizeof comm - 1,
				.exe_len = sizeof exe - 1,
				.cmdline_len = sizeof args,
				.host_len = sizeof host - 1,
				.attach_real_ns = 1700000000000000000ull};
	char sb[128];
	size_t o = 0;
	memcpy(sb + o, comm, ss.comm_len), o += ss.comm_len;
	memcpy(sb + o, exe, ss.exe_len), o += ss.exe_len;
	memcpy(sb + o, args, ss.cmdline_len), o += ss.cmdline_len;
	memcpy(sb + o, host, ss.host_len), o += ss.host_len;
	assert_int_equal(hp_write_record2(fd, HP_REC_SESSION, &ss, sizeof ss, sb, (uint32_t)o), 0);
	struct hp_hello h = {.pid = 77, .mode = HP_MODE_FULL, .interval_ms = 1000, .max_depth = 64};
	assert_int_equal(hp_write_record(fd, HP_REC_HELLO, &h, sizeof h), 0);
	static const uint8_t bid[] = {0xab, 0xcd, 0x01};
	put_module(fd, 1, "/usr/bin/srv", EXE_BIAS, 0x100000, bid, sizeof bid);
	put_module(fd, 2, "/lib/x86_64-linux-gnu/libc.so.6", LIBC_BIAS, 0x200000, NULL, 0);

	const uint64_t s1[] = {A_MALLOC, A_LEAK, A_RUN}, s2[] = {A_TEMP, A_RUN},
		       s3[] = {A_TPL, A_MAIN}, s4[] = {A_TPL, A_RUN};
	put_stack(fd, 1, s1, 3);
	put_stack(fd, 2, s2, 2);
	put_stack(fd, 3, s3, 2);
	put_stack(fd, 4, s4, 2);
	put_sym1(fd, A_MALLOC, "malloc", "malloc.c", 3287);
	put_sym1(fd, A_LEAK, "leaky_func", "leak.c", 10);
	put_sym1(fd, A_TEMP, "temp_func", "temp.c", 20);
	put_sym1(fd, A_TPL, TPL_NAME, "vec.h", 5);
	put_sym1(fd, A_MAIN, "main", "main.c", 1);
	const char *funcs[] = {"run", "main"}, *files[] = {"main.c", "main.c"};
	const uint32_t lines[] = {5, 7};
	put_symbol(fd, A_RUN, 2, funcs, files, lines);

	struct hp_round acc = {0};
	/* Live bytes at the rounds: the sites' plus 56 bytes without a stack. Stack 1 leaks 10 x 64
	 * bytes a round; stack 2 churns 100 x 64 bytes a round (90 of the frees temporary) and
	 * holds two 5000-byte blocks in round 1; stacks 3 and 4 (one site, the template) take 5 x
	 * 24 bytes in rounds 1 and 3; an extended-mode entry has no stack. */
	const struct hp_site_delta r1[] = {
	    EX(1, 64, 10, 640, 0, 0, 0),
	    EX(2, 64, 100, 6400, 100, 6400, 90),
	    {.stack_id = 2,
	     .size_kind = HP_SIZE_POW2,
	     .size = 4096,
	     .allocs = 2,
	     .alloc_bytes = 10000},
	    EX(3, 24, 5, 120, 0, 0, 0),
	    EX(0, 8, 7, 56, 0, 0, 0),
	};
	put_round(fd, &acc, r1, 5, 0);
	const struct hp_site_delta r2[] = {
	    EX(1, 64, 10, 640, 0, 0, 0),
	    EX(2, 64, 100, 6400, 100, 6400, 90),
	    {.stack_id = 2,
	     .size_kind = HP_SIZE_POW2,
	     .size = 4096,
	     .frees = 2,
	     .freed_bytes = 10000},
	};
	put_round(fd, &acc, r2, 3, 0);
	const struct hp_site_delta r3[] = {
	    EX(1, 64, 10, 640, 0, 0, 0),
	    EX(2, 64, 100, 6400, 100, 6400, 90),
	    EX(4, 24, 5, 120, 0, 0, 0),
	};
	put_round(fd, &acc, r3, 3, 0);
	const struct hp_site_delta r4[] = {
	    EX(1, 64, 10, 640, 0, 0, 0),
	    EX(2, 64, 100, 6400, 100, 6400, 90),
	};
	put_round(fd, &acc, r4, 2, 0);
	const struct hp_live_site live[] = {
	    {.stack_id = 1,
	     .blocks = 50,
	     .bytes = 3200,
	     .oldest_age_ms = 4500,
	     .mean_age_ms = 2500},
	    {.stack_id = 3, .blocks = 5, .bytes = 120, .oldest_age_ms = 4000, .mean_age_ms = 4000},
	    {.stack_id = 4, .blocks = 5, .bytes = 120, .oldest_age_ms = 2000, .mean_age_ms = 1000},
	};
	struct hp_live lh = {.count = 3};
	assert_int_equal(hp_write_record2(fd, HP_REC_LIVE, &lh, sizeof lh, live, sizeof live), 0);
	put_round(fd, &acc, r4, 2, HP_ROUND_FINAL | HP_ROUND_SAMPLED);
	struct hp_end e = {.reason = HP_END_DETACH};
	assert_int_equal(hp_write_record(fd, HP_REC_END, &e, sizeof e), 0);
	close(fd);
}

static int setup(void **state)
{
	(void)state;
	if (vr_setup("test-view-v2") < 0)
		return -1;
	snprintf(prof, sizeof prof, "%s/a.hpf", vr_dir);
	write_profile(prof);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	return vr_teardown();
}

/* A plain least-squares fit, to check the step-function one against. */
static void naive_fit(const double *x, const double *y, size_t n, double *slope, double *r2)
{
	double mx = 0, my = 0, sxy = 0, sxx = 0, syy = 0;
	for (size_t i = 0; i < n; i++)
		mx += x[i] / (double)n, my += y[i] / (double)n;
	for (size_t i = 0; i < n; i++) {
		sxy += (x[i] - mx) * (y[i] - my);
		sxx += (x[i] - mx) * (x[i] - mx);
		syy += (y[i] - my) * (y[i] - my);
	}
	*slope = sxy / sxx;
	*r2 = sxy * sxy / (sxx * syy);
}

static void test_model(void **state)
{
	(void)state;
	struct profile p;
	struct hp_error e = {0};
	assert_int_equal(pf_load(&p, prof, &e), 0);
	assert_string_equal(p.warning, "");
	assert_int_equal(p.malformed_records, 0);
	assert_int_equal(p.nrounds, NROUNDS);
	assert_true(p.has_live);
	assert_int_equal(p.first_sampled, 5);
	assert_int_equal(pf_peak_round(&p), 0);
	assert_int_equal(p.rounds[0].live_bytes, 10816);
	assert_int_equal(p.nsites, 3);

	const struct pf_site *leak = pf_site_at(&p, A_LEAK), *temp = pf_site_at(&p, A_TEMP),
			     *tpl = pf_site_at(&p, A_TPL);
	assert_non_null(leak);
	assert_non_null(temp);
	assert_non_null(tpl);
	assert_int_equal(temp->tot.temp_frees, 450);
	assert_int_equal(temp->tot.allocs, 502);
	assert_int_equal(leak->live.blocks, 50);
	/* Merged over stacks 3 and 4: oldest is the max, the mean weighted by blocks. */
	assert_int_equal(tpl->live.blocks, 10);
	assert_int_equal(tpl->live.bytes, 240);
	assert_int_equal(tpl->live.oldest_age_ms, 4000);
	assert_int_equal(tpl->live.mean_age_ms, 2500);

	/* Series: only rounds with entries are stored; reads in between see the last one. */
	long s4 = u64map_get(&p.stack_by_id, 4);
	assert_true(s4 >= 0);
	assert_int_equal(p.stacks[s4].nseries, 1);
	assert_int_equal(pf_stack_live_at(&p.stacks[s4], 1).live_bytes, 0);
	assert_int_equal(pf_stack_live_at(&p.stacks[s4], 4).live_bytes, 120);

	/* Sizes: every key once, the stackless entry in the histogram only. */
	assert_int_equal(p.nsizes, 4);
	assert_int_equal(p.nstack_sizes, 5);
	struct pf_size k = pf_size_key(5000);
	assert_int_equal(k.kind, HP_SIZE_POW2);
	assert_int_equal(k.size, 4096);
	k = pf_size_key(4096);
	assert_int_equal(k.kind, HP_SIZE_EXACT);

	struct gf_fit fit[3];
	assert_int_equal(gf_fit_sites(&p, fit), 0);
	const double x[] = {1, 2, 3, 4, 5}, yt[] = {120, 120, 240, 240, 240},
		     yp[] = {10000, 0, 0, 0, 0};
	double slope, r2;
	assert_true(fabs(fit[leak - p.sites].slope - 640) < 1e-6);
	assert_true(fabs(fit[leak - p.sites].r2 - 1) < 1e-9);
	naive_fit(x, yt, 5, &slope, &r2);
	assert_true(fabs(fit[tpl - p.sites].slope - slope) < 1e-6);
	assert_true(fabs(fit[tpl - p.sites].r2 - r2) < 1e-9);
	naive_fit(x, yp, 5, &slope, &r2);
	assert_true(slope < 0);
	assert_true(fabs(fit[temp - p.sites].slope - slope) < 1e-6);
	pf_free(&p);
}

static void test_templates(void **state)
{
	(void)state;
	static const char *const cases[][2] = {
	    {"std::vector<int, std::allocator<int> >", "std::vector<\xe2\x80\xa6>"},
	    {TPL_NAME, "std::vector<\xe2\x80\xa6>::push_back(int const&)"},
	    {"bool operator< <Foo>(Foo const&, Foo const&)",
	     "bool operator< <\xe2\x80\xa6>(Foo const&, Foo const&)"},
	    {"std::ostream::operator<<(int)", "std::ostream::operator<<(int)"},
	    {"a<b<c>, d>::f<e>()", "a<\xe2\x80\xa6>::f<\xe2\x80\xa6>()"},
	    {"broken<name", "broken<name"},
	    {"plain_c", "plain_c"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char *s = pf_short_templates(cases[i][0]);
		assert_non_null(s);
		assert_string_equal(s, cases[i][1]);
		free(s);
	}
}

static void test_timeline_peak(void **state)
{
	(void)state;
	assert_int_equal(vr_view("timeline --json %s", prof), 0);
	assert_true(vr_json_check("len(d) == 5 and [r['live_bytes'] for r in d] == "
				  "[10816, 1456, 2216, 2856, 3496]"));
	assert_true(
	    vr_json_check("d[1]['allocations'] == 110 and d[1]['frees'] == 102 and "
			  "d[1]['allocated_bytes'] == 7040 and d[0]['total_allocations'] == "
			  "124 and d[4]['total_allocations'] == 124 + 110 + 115 + 110 + 110"));
	assert_true(vr_json_check("d[0]['time_s'] == 1.0 and d[2]['rss_bytes'] == 23 << 20 and "
				  "d[1]['live_bytes_change'] == -9360 and d[4]['sampled'] and "
				  "not d[3]['sampled'] and d[4]['final']"));
	assert_int_equal(vr_view("timeline %s", prof), 0);
	assert_true(vr_file_has(vr_out, "sampled"));

	assert_int_equal(vr_view("peak --json %s", prof), 0);
	assert_true(vr_json_check("d['round'] == 1 and d['live_bytes'] == 10816 and "
				  "[(s['function'], s['peak_live_bytes']) for s in d['sites']] == "
				  "[('temp_func', 10000), ('leaky_func', 640), ("
				  "'" TPL_NAME "', 120)]"));
	assert_int_equal(vr_view("peak %s", prof), 0);
	assert_true(vr_file_has(vr_out, "Peak: 10.56 KiB"));
}

static void test_growth_leaks(void **state)
{
	(void)state;
	assert_int_equal(vr_view("growth --json %s", prof), 0);
	assert_true(vr_json_check("[s['function'] for s in d] == ['leaky_func', '" TPL_NAME "']"));
	assert_true(vr_json_check("d[0]['slope_bytes_per_s'] == 640 and d[0]['r2'] == 1 and "
				  "abs(d[1]['slope_bytes_per_s'] - 36) < 1e-3 and "
				  "abs(d[1]['r2'] - 0.75) < 1e-3"));
	assert_int_equal(vr_view("growth %s", prof), 0);
	assert_true(vr_file_has(vr_out, "640 B/s"));

	assert_int_equal(vr_view("leaks --json %s", prof), 0);
	assert_true(vr_json_check("[(s['function'], s['live_blocks'], s['live_bytes'], "
				  "s['oldest_age_s'], s['mean_age_s']) for s in d] == "
				  "[('leaky_func', 50, 3200, 4.5, 2.5), ('" TPL_NAME
				  "', 10, 240, 4.0, 2.5)]"));
	/* The same fields as hotspots --json, plus the ages. */
	char keys[96];
	snprintf(keys, sizeof keys, "%s/keys", vr_dir);
	assert_int_equal(vr_view("hotspots --json %s", prof), 0);
	assert_true(vr_py("import json,sys; open(sys.argv[2],'w').write(' '.join(sorted(json.load("
			  "open(sys.argv[1]))[0])))",
			  keys));
	assert_int_equal(vr_view("leaks --json %s", prof), 0);
	assert_true(vr_py("import json,sys; k=open(sys.argv[2]).read().split(); "
			  "sys.exit(sorted(json.load(open(sys.argv[1]))[0]) != "
			  "sorted(k + ['oldest_age_s', 'mean_age_s']))",
			  keys));
	assert_int_equal(vr_view("leaks %s", prof), 0);
	assert_true(vr_file_has(vr_out, "4.5 s"));
}

static void test_sizes_temporary(void **state)
{
	(void)state;
	assert_int_equal(vr_view("histogram --json %s", prof), 0);
	assert_true(vr_json_check("[(s['kind'], s['size'], s['allocations'], s['allocated_bytes']) "
				  "for s in d] == [('exact', 8, 7, 56), ('exact', 24, 10, 240), "
				  "('exact', 64, 550, 35200), ('pow2', 4096, 2, 10000)]"));
	assert_true(vr_json_check("d[3]['size_max'] == 8191 and d[2]['temporary_frees'] == 450"));
	assert_int_equal(vr_view("histogram %s", prof), 0);
	assert_true(vr_file_has(vr_out, "49 - 64"));
	assert_true(vr_file_has(vr_out, "4.00 KiB - 8.00 KiB"));

	assert_int_equal(vr_view("filter --size 64 --json %s", prof), 0);
	assert_true(
	    vr_json_check("d['allocations'] == 550 and [(s['function'], s['allocations']) "
			  "for s in d['stacks']] == [('temp_func', 500), ('leaky_func', 50)]"));
	assert_true(vr_json_check("[f['function'] for f in d['stacks'][0]['stack']] == "
				  "['temp_func', 'run', 'main']"));
	assert_int_equal(vr_view("filter --size 5000 --json %s", prof), 0);
	assert_true(vr_json_check("d['kind'] == 'pow2' and d['size'] == 4096 and "
				  "d['stacks'][0]['allocations'] == 2"));
	assert_int_equal(vr_view("filter --size 8 --json %s", prof), 0);
	assert_true(vr_json_check("d['allocations'] == 0 and d['stacks'] == []"));
	assert_int_equal(vr_view("filter --size 64 %s", prof), 0);
	assert_true(vr_file_has(vr_out, "temp_func (temp.c:20)"));
	assert_int_equal(vr_view("filter %s", prof), 2);

	assert_int_equal(vr_view("temporary --json %s", prof), 0);
	assert_true(vr_json_check("len(d) == 1 and d[0]['function'] == 'temp_func' and "
				  "d[0]['temporary_frees'] == 450 and "
				  "abs(d[0]['temporary_share'] - 450 / 502) < 1e-4"));
	assert_int_equal(vr_view("hotspots --sort temporary --json %s", prof), 0);
	assert_true(vr_json_check("d[0]['function'] == 'temp_func'"));
}

static void test_tree(void **state)
{
	(void)state;
	/* Every node is the sum of its children down to the sites; the root is the total. */
	static const char sums[] =
	    "all(sum(c[k] for c in d if c['parent'] == n['id']) == n[k] for n in d "
	    "if any(c['parent'] == n['id'] for c in d) for k in "
	    "('allocations', 'allocated_bytes', 'live_bytes'))";
	assert_int_equal(vr_view("tree --json %s", prof), 0);
	assert_true(
	    vr_json_check("d[0]['name'] == 'all' and d[0]['allocations'] == 562 and "
			  "d[0]['allocated_bytes'] == 45440 and d[0]['live_bytes'] == 3440"));
	assert_true(vr_json_check(sums));
	assert_true(vr_json_check("[n['name'] for n in d if n['depth'] == 1] == "
				  "['main (main.c:7)', 'main (main.c:1)']"));
	assert_true(vr_json_check("[n['name'] for n in d if n['depth'] == 2] == "
				  "['run (main.c:5)', '" TPL_NAME " (vec.h:5)']"));
	assert_int_equal(vr_view("tree -r --json %s", prof), 0);
	assert_true(vr_json_check(sums));
	assert_true(vr_json_check("[(n['name'], n['allocations']) for n in d if n['depth'] == 1] "
				  "== [('temp_func (temp.c:20)', 502), ('leaky_func (leak.c:10)', "
				  "50), ('" TPL_NAME " (vec.h:5)', 10)]"));
	assert_int_equal(vr_view("tree -j -t --json %s", prof), 0);
	assert_true(vr_json_check("'std::vector<\\u2026>::push_back(int const&)' in "
				  "[n['name'] for n in d] and 'main' in [n['name'] for n in d]"));
	assert_int_equal(vr_view("tree %s", prof), 0);
	assert_true(vr_file_has(vr_out, "leaky_func (leak.c:10)"));
	assert_int_equal(vr_view("hotspots -j -t --json %s", prof), 0);
	assert_true(
	    vr_json_check("d[0]['file'] is None and d[0]['line'] is None and "
			  "d[2]['function'] == 'std::vector<\\u2026>::push_back(int const&)'"));
}

static void test_flame_collapsed(void **state)
{
	(void)state;
	char svg[128];
	snprintf(svg, sizeof svg, "%s/f.svg", vr_dir);
	assert_int_equal(vr_view("flame -o %s %s", svg, prof), 0);
	assert_true(vr_py("import xml.dom.minidom,sys; d=xml.dom.minidom.parse(sys.argv[2]); "
			  "t=[x.firstChild.data for x in d.getElementsByTagName('title')]; "
			  "s=d.getElementsByTagName('script'); "
			  "sys.exit(not (s and any(x.startswith('leaky_func (leak.c:10) (50 "
			  "allocations') for x in t) and not d.getElementsByTagName('image')))",
			  svg));
	assert_int_equal(vr_view("flame --type live %s", prof), 0);
	assert_true(vr_py("import xml.dom.minidom,sys; xml.dom.minidom.parse(sys.argv[1])", ""));
	assert_int_equal(vr_view("flame --json %s", prof), 2);

	static const char sum[] = "import sys; t=0\n"
				  "for l in open(sys.argv[1]):\n"
				  "  s, v = l.rstrip('\\n').rsplit(' ', 1); t += int(v)\n"
				  "  assert s.split(';')[0].startswith('main')\n"
				  "sys.exit(t != int(sys.argv[2]))";
	assert_int_equal(vr_view("export --format collapsed %s", prof), 0);
	assert_true(vr_py(sum, "562"));
	assert_true(
	    vr_file_has(vr_out, "main (main.c:7);run (main.c:5);leaky_func (leak.c:10) 50"));
	assert_int_equal(vr_view("export --format collapsed --type bytes %s", prof), 0);
	assert_true(vr_py(sum, "45440"));
	assert_int_equal(vr_view("export --format collapsed --type live -j %s", prof), 0);
	assert_true(vr_py(sum, "3440"));
	assert_true(vr_file_has(vr_out, "main;run;leaky_func 3200"));
	assert_int_equal(vr_view("export %s", prof), 2);
}

static void test_massif(void **state)
{
	(void)state;
	char ms[128], cmd[512];
	snprintf(ms, sizeof ms, "%s/massif.out", vr_dir);
	assert_int_equal(vr_view("export --format massif -o %s %s", ms, prof), 0);
	snprintf(cmd, sizeof cmd, "ms_print %s >%s 2>%s", ms, vr_out, vr_err);
	assert_int_equal(system(cmd), 0);
	assert_true(vr_file_has(vr_out, "10,816"));
	assert_true(vr_file_has(vr_out, "temp_func (temp.c:20)"));
	assert_true(vr_file_has(vr_out, "srv --port 80"));
}

/* profile.proto read with nothing but the wire format: varints and length-delimited. */
static const char pb_decode[] =
    "import gzip,sys\n"
    "def rd(b):\n"
    "  i=0; out=[]\n"
    "  while i<len(b):\n"
    "    k,i=vi(b,i); f,w=k>>3,k&7\n"
    "    if w==0: v,i=vi(b,i)\n"
    "    elif w==2:\n"
    "      n,i=vi(b,i); v=b[i:i+n]; i+=n\n"
    "    else: raise Exception('wire type %d' % w)\n"
    "    out.append((f,v))\n"
    "  return out\n"
    "def vi(b,i):\n"
    "  r=s=0\n"
    "  while True:\n"
    "    c=b[i]; i+=1; r|=(c&0x7f)<<s; s+=7\n"
    "    if c<0x80: return r,i\n"
    "def packed(b):\n"
    "  i=0; o=[]\n"
    "  while i<len(b):\n"
    "    v,i=vi(b,i); o.append(v)\n"
    "  return o\n"
    "p=rd(gzip.open(sys.argv[2]).read())\n"
    "st=[v.decode() for f,v in p if f==6]\n"
    "assert st[0]==''\n"
    "types=[(st[dict(rd(v))[1]],st[dict(rd(v))[2]]) for f,v in p if f==1]\n"
    "assert types==[('alloc_objects','count'),('alloc_space','bytes'),"
    "('inuse_objects','count'),('inuse_space','bytes')], types\n"
    "tot=[0]*4\n"
    "for f,v in p:\n"
    "  if f==2:\n"
    "    vals=packed(dict(rd(v))[2]); tot=[a+b for a,b in zip(tot,vals)]\n"
    "assert tot==[562,45440,60,3440], tot\n"
    "maps=[dict(rd(v)) for f,v in p if f==3]\n"
    "assert st[maps[0][6]]=='abcd01' and st[maps[0][5]]=='/usr/bin/srv', maps\n"
    "funcs={dict(rd(v))[1]:dict(rd(v)) for f,v in p if f==5}\n"
    "names={st[fn[2]]:st[fn.get(4,0)] for fn in funcs.values()}\n"
    "assert names['leaky_func']=='leak.c' and names['run']=='main.c', names\n"
    "locs=[rd(v) for f,v in p if f==4]\n"
    "assert any(len([1 for f,x in l if f==4])==2 for l in locs)\n";

static void test_pprof(void **state)
{
	(void)state;
	char pp[128], cmd[512];
	snprintf(pp, sizeof pp, "%s/p.pb.gz", vr_dir);
	assert_int_equal(vr_view("export --format pprof -o %s %s", pp, prof), 0);
	assert_true(vr_py(pb_decode, pp));
	if (system("command -v go >/dev/null 2>&1") != 0) {
		fprintf(stderr, "go not installed: go tool pprof not tried\n");
		return;
	}
	snprintf(cmd, sizeof cmd,
		 "HOME=%s GOFLAGS=-mod=mod go tool pprof -top -symbolize=none "
		 "-sample_index=alloc_space %s >%s 2>%s",
		 vr_dir, pp, vr_out, vr_err);
	assert_int_equal(system(cmd), 0);
	assert_true(vr_file_has(vr_out, "temp_func"));
	assert_true(vr_file_has(vr_out, "44.38kB"));
}

/* An always_inline allocation wrapper: three sites at the same line of xmalloc, inlined twice
 * into cache_store and once into parse_request in another file. Each row must say which. */
static void test_inlined_sites(void **state)
{
	(void)state;
	char ip[96];
	snprintf(ip, sizeof ip, "%s/inl.hpf", vr_dir);
	int fd = open(ip, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(hp_write_header(fd), 0);
	struct hp_hello h = {.pid = 7, .mode = HP_MODE_FULL, .interval_ms = 1000, .max_depth = 64};
	assert_int_equal(hp_write_record(fd, HP_REC_HELLO, &h, sizeof h), 0);
	put_module(fd, 1, "/usr/bin/srv", EXE_BIAS, 0x100000, NULL, 0);
	put_module(fd, 2, "/lib/x86_64-linux-gnu/libc.so.6", LIBC_BIAS, 0x200000, NULL, 0);
	const uint64_t a[] = {EXE_BIAS + 0x3000, EXE_BIAS + 0x3100, EXE_BIAS + 0x3200};
	const char *callers[] = {"cache_store", "cache_store", "parse_request"};
	const char *call_files[] = {"/src/demo.c", "/src/demo.c", "/src/req.c"};
	const uint32_t call_lines[] = {308, 311, 150};
	put_sym1(fd, A_MALLOC, "malloc", "malloc.c", 3287);
	put_sym1(fd, A_MAIN, "main", "main.c", 1);
	struct hp_site_delta d[3];
	for (uint32_t i = 0; i < 3; i++) {
		const uint64_t frames[] = {A_MALLOC, a[i], A_MAIN};
		put_stack(fd, i + 1, frames, 3);
		const char *funcs[] = {"xmalloc", callers[i]},
			   *files[] = {"/src/demo.c", call_files[i]};
		const uint32_t lines[] = {88, call_lines[i]};
		put_symbol(fd, a[i], 2, funcs, files, lines);
		d[i] = (struct hp_site_delta)EX(i + 1, 32, 30 - i, 32 * (30 - i), 0, 0, 0);
	}
	struct hp_round acc = {0};
	put_round(fd, &acc, d, 3, HP_ROUND_FINAL);
	struct hp_end e = {.reason = HP_END_DETACH};
	assert_int_equal(hp_write_record(fd, HP_REC_END, &e, sizeof e), 0);
	close(fd);

	assert_int_equal(vr_view("hotspots %s", ip), 0);
	assert_true(
	    vr_py("import re,sys; rows=[re.sub(' +', ' ', l).strip() for l in "
		  "open(sys.argv[1])][1:]; sys.exit(rows != ["
		  "'30 960 B 960 B xmalloc (inlined into cache_store) /src/demo.c:88, called at "
		  "line 308', "
		  "'29 928 B 928 B xmalloc (inlined into cache_store) /src/demo.c:88, called at "
		  "line 311', "
		  "'28 896 B 896 B xmalloc (inlined into parse_request) /src/demo.c:88, called at "
		  "/src/req.c:150'])",
		  ""));
	/* The sites' own report, like every per-site table. */
	assert_int_equal(vr_view("leaks %s", ip), 0);
	assert_true(vr_file_has(vr_out, "xmalloc (inlined into parse_request)"));
	/* -j keeps the names that tell the rows apart. */
	assert_int_equal(vr_view("hotspots -j %s", ip), 0);
	assert_true(vr_file_has(vr_out, "xmalloc (inlined into parse_request)"));
	assert_int_equal(vr_view("hotspots --json %s", ip), 0);
	assert_true(
	    vr_json_check("[(s['function'], s['inlined_into'], s['line']) for s in d] == "
			  "[('xmalloc', 'cache_store', 88), ('xmalloc', 'cache_store', 88), "
			  "('xmalloc', 'parse_request', 88)] and "
			  "[s['stack'][1]['line'] for s in d] == [308, 311, 150]"));
	/* A site that is no inline: null. */
	assert_int_equal(vr_view("hotspots --json %s", prof), 0);
	assert_true(vr_json_check("all(s['inlined_into'] is None for s in d)"));
}

static void test_all_json_and_help(void **state)
{
	(void)state;
	static const char *const cmds[] = {"overview", "timeline",  "histogram", "filter --size 64",
					   "tree",     "tree -r",   "hotspots",	 "leaks",
					   "growth",   "temporary", "peak"};
	for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
		assert_int_equal(vr_view("%s --json %s", cmds[i], prof), 0);
		assert_true(vr_json_check("True"));
		assert_int_equal(vr_view("%s -j -t %s", cmds[i], prof), 0);
	}
	static const char *const names[] = {"overview",	 "timeline", "histogram", "filter",
					    "tree",	 "hotspots", "leaks",	  "growth",
					    "temporary", "peak",     "flame",	  "export"};
	assert_int_equal(vr_view("--help"), 0);
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		char line[64];
		snprintf(line, sizeof line, "  %s ", names[i]);
		assert_true(vr_file_has(vr_out, line));
	}
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		assert_int_equal(vr_view("%s --help", names[i]), 0);
		assert_true(vr_file_has(vr_out, "Usage: heapprof-view"));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_model),	    cmocka_unit_test(test_templates),
	    cmocka_unit_test(test_timeline_peak),   cmocka_unit_test(test_growth_leaks),
	    cmocka_unit_test(test_sizes_temporary), cmocka_unit_test(test_tree),
	    cmocka_unit_test(test_flame_collapsed), cmocka_unit_test(test_massif),
	    cmocka_unit_test(test_pprof),	    cmocka_unit_test(test_all_json_and_help),
	    cmocka_unit_test(test_inlined_sites),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
