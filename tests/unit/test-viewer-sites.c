/* test-viewer-sites.c - the live view's numbers: per-site totals, the last round's rate,
 * the growth slope over the last rounds, and the size, duration and sparkline text. */
#include <locale.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "viewer/livefmt.h"
#include "viewer/sites.h"

static void test_slope(void **state)
{
	(void)state;
	double x[] = {0, 1, 2, 3}, y[] = {5, 7, 9, 11};
	assert_true(fabs(hp_slope(x, y, 4) - 2.0) < 1e-9);
	assert_true(hp_slope(x, y, 1) == 0);
	double flat[] = {1, 1, 1};
	assert_true(hp_slope(flat, y, 3) == 0);
}

static void round_with(struct hp_site_table *t, size_t site, uint64_t allocs, uint64_t bytes,
		       uint64_t frees, uint64_t freed, uint64_t time_ns)
{
	struct hp_site_delta d = {.stack_id = 1,
				  .allocs = allocs,
				  .alloc_bytes = bytes,
				  .frees = frees,
				  .freed_bytes = freed,
				  .temp_frees = frees / 2};
	hp_sites_count(t, site, &d);
	hp_sites_round(t, time_ns);
}

static void test_rates_and_growth(void **state)
{
	(void)state;
	struct hp_site_table t = {.track_rates = true};
	assert_int_equal(hp_sites_add_site(&t, "leaky"), 0);
	assert_int_equal(hp_sites_add_site(&t, "steady"), 1);

	/* leaky keeps 1000 bytes more each second; steady frees what it allocates. The
	 * rounds are half a second long. */
	for (uint64_t i = 1; i <= 20; i++) {
		struct hp_site_delta d = {.allocs = 10,
					  .alloc_bytes = 1000,
					  .frees = 10,
					  .freed_bytes = 1000,
					  .temp_frees = 4};
		hp_sites_count(&t, 1, &d);
		round_with(&t, 0, 1, 500, 0, 0, i * 500000000ull);
	}
	const struct hp_site *leaky = &t.v[0], *steady = &t.v[1];
	assert_int_equal(leaky->allocs, 20);
	assert_int_equal(hp_site_live_bytes(leaky), 10000);
	assert_int_equal(hp_site_live_blocks(leaky), 20);
	assert_true(fabs(leaky->growth - 1000.0) < 1e-6);
	assert_true(fabs(leaky->alloc_rate - 1000.0) < 1e-6);
	assert_int_equal(leaky->round_allocs, 1);

	assert_int_equal(hp_site_live_bytes(steady), 0);
	assert_true(fabs(steady->growth) < 1e-9);
	assert_true(fabs(steady->alloc_rate - 2000.0) < 1e-6);
	assert_int_equal(steady->temp_frees, 80);

	/* A round without activity: no rate, the slope flattens but stays positive. */
	hp_sites_round(&t, 10500000000ull);
	assert_true(leaky->alloc_rate == 0);
	assert_int_equal(leaky->round_allocs, 0);
	assert_true(leaky->growth > 0 && leaky->growth < 1000.0);
	hp_sites_free(&t);
}

/* More freed than allocated (sampling estimates) shows as nothing live, not 2^64. */
static void test_live_clamped(void **state)
{
	(void)state;
	struct hp_site_table t = {0};
	assert_int_equal(hp_sites_add_site(&t, "x"), 0);
	round_with(&t, 0, 1, 10, 2, 20, 1000);
	assert_int_equal(hp_site_live_bytes(&t.v[0]), 0);
	assert_int_equal(hp_site_live_blocks(&t.v[0]), 0);
	/* Without rate tracking nothing but the totals is computed. */
	assert_true(t.v[0].growth == 0 && t.v[0].alloc_rate == 0);
	hp_sites_free(&t);
}

static void test_fmt(void **state)
{
	(void)state;
	char b[16];
	hp_fmt_size(b, sizeof b, 0);
	assert_string_equal(b, "0");
	hp_fmt_size(b, sizeof b, 1023);
	assert_string_equal(b, "1023");
	hp_fmt_size(b, sizeof b, 1536);
	assert_string_equal(b, "1.5K");
	hp_fmt_size(b, sizeof b, 10.0 * 1024 * 1024);
	assert_string_equal(b, "10M");
	hp_fmt_size(b, sizeof b, 1024.0 * 1024 * 1024 - 1);
	assert_string_equal(b, "1023M");
	hp_fmt_signed_size(b, sizeof b, -2048);
	assert_string_equal(b, "-2.0K");
	hp_fmt_signed_size(b, sizeof b, 0.1);
	assert_string_equal(b, "0");
	hp_fmt_signed_size(b, 3, 5000);
	assert_string_equal(b, "+4");
	hp_fmt_duration(b, sizeof b, 83);
	assert_string_equal(b, "1:23");
	hp_fmt_duration(b, sizeof b, 3 * 3600 + 62);
	assert_string_equal(b, "3:01:02");

	char c[64];
	hp_fmt_command(c, sizeof c, "/usr/sbin/server --port 80", 40);
	assert_string_equal(c, "/usr/sbin/server --port 80");
	hp_fmt_command(c, sizeof c, "/usr/sbin/server --port 80", 20);
	assert_string_equal(c, ".../server --port 80");
	hp_fmt_command(c, sizeof c, "/usr/sbin/server --port 80", 12);
	assert_string_equal(c, ".../serve...");
	hp_fmt_command(c, sizeof c, "server --port 80", 10);
	assert_string_equal(c, "server ...");
	hp_fmt_command(c, sizeof c, "/usr/sbin/server", 2);
	assert_string_equal(c, "..");
	hp_fmt_command(c, 8, "/usr/sbin/server --port 80", 40);
	assert_string_equal(c, ".../...");
}

/* In a UTF-8 locale text is measured in columns and cut between characters: a cut by
 * bytes left half an "é" (".../s\xc3\xa9rv\xc3..."). Outside one, a byte is a column. */
static void test_fmt_utf8(void **state)
{
	(void)state;
	char c[64];
	size_t w;
	assert_non_null(setlocale(LC_CTYPE, "C.UTF-8"));
	assert_int_equal(hp_text_fit("a\u00e9\u4e2db", 64, 3, &w), 3);
	assert_int_equal(w, 2);
	assert_int_equal(hp_text_fit("a\u00e9\u4e2db", 64, 4, &w), 6);
	assert_int_equal(w, 4);
	assert_int_equal(hp_text_fit("a\u00e9\u4e2db", 2, 4, &w), 1);
	assert_int_equal(hp_text_fit("a\xff"
				     "b",
				     64, 2, &w),
			 2);
	hp_fmt_command(c, sizeof c, "/srv/\u00e9/s\u00e9rv\u00e9r --n\u00e2me \u00fc", 13);
	assert_string_equal(c, ".../s\u00e9rv\u00e9r...");
	hp_fmt_command(c, sizeof c, "/srv/\u00e9/s\u00e9rv\u00e9r --n\u00e2me \u00fc", 19);
	assert_string_equal(c, ".../s\u00e9rv\u00e9r --n\u00e2me \u00fc");
	hp_fmt_command(c, sizeof c, "/srv/\u00e9/s\u00e9rv\u00e9r --n\u00e2me \u00fc", 22);
	assert_string_equal(c, "/srv/\u00e9/s\u00e9rv\u00e9r --n\u00e2me \u00fc");
	assert_non_null(setlocale(LC_CTYPE, "C"));
	assert_int_equal(hp_text_fit("a\u00e9b", 64, 2, &w), 2);
	assert_int_equal(w, 2);
}

static void test_sparkline(void **state)
{
	(void)state;
	char b[64];
	uint64_t v[] = {0, 10, 20, 30, 40, 50, 60, 70};
	hp_sparkline(b, sizeof b, v, 8, false);
	assert_string_equal(b, "_.:-=+*#");
	hp_sparkline(b, sizeof b, v, 8, true);
	assert_string_equal(b, "\u2581\u2582\u2583\u2584\u2585\u2586\u2587\u2588");
	/* Only the newest fit; a flat line sits in the middle. */
	hp_sparkline(b, 4, v, 8, false);
	assert_string_equal(b, "_=#");
	uint64_t flat[] = {5, 5, 5};
	hp_sparkline(b, sizeof b, flat, 3, false);
	assert_string_equal(b, "---");
	hp_sparkline(b, 7, flat, 3, true);
	assert_string_equal(b, "\u2584\u2584");
	hp_sparkline(b, sizeof b, v, 0, true);
	assert_string_equal(b, "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_slope),	 cmocka_unit_test(test_rates_and_growth),
	    cmocka_unit_test(test_live_clamped), cmocka_unit_test(test_fmt),
	    cmocka_unit_test(test_fmt_utf8),	 cmocka_unit_test(test_sparkline),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
