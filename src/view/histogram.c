/* histogram: allocations and bytes by requested size. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "text.h"
#include "view.h"

/* Text groups exact sizes into ranges growing by half powers of two: 0-8, 9-12, 13-16,
 * 17-24, 25-32, 33-48, ... up to 4096; larger sizes keep their power-of-two bucket. */
static void group_of(uint64_t size, uint64_t *lo, uint64_t *hi)
{
	if (size <= 8) {
		*lo = 0;
		*hi = 8;
		return;
	}
	uint64_t p2 = 16;
	while (p2 < size)
		p2 *= 2;
	uint64_t mid = p2 / 4 * 3;
	if (size <= mid) {
		*lo = p2 / 2 + 1;
		*hi = mid;
	} else {
		*lo = mid + 1;
		*hi = p2;
	}
}

static int cmp_size(const void *a, const void *b)
{
	const struct pf_size *x = a, *y = b;
	uint64_t kx = x->kind == HP_SIZE_POW2, ky = y->kind == HP_SIZE_POW2;
	if (kx != ky)
		return kx < ky ? -1 : 1;
	return x->size < y->size ? -1 : x->size > y->size;
}

static struct pf_size *sorted_sizes(const struct profile *p)
{
	struct pf_size *s = malloc((p->nsizes ? p->nsizes : 1) * sizeof *s);
	if (!s)
		return NULL;
	if (p->nsizes)
		memcpy(s, p->sizes, p->nsizes * sizeof *s);
	qsort(s, p->nsizes, sizeof *s, cmp_size);
	return s;
}

static void print_json(const struct pf_size *s, size_t n)
{
	struct json j;
	json_init(&j, stdout);
	json_array_begin(&j);
	for (size_t i = 0; i < n; i++) {
		if (!s[i].tot.allocs && !s[i].tot.frees)
			continue;
		json_object_begin(&j);
		json_kv_str(&j, "kind", s[i].kind == HP_SIZE_POW2 ? "pow2" : "exact");
		json_kv_u64(&j, "size", s[i].size);
		json_kv_u64(&j, "size_max",
			    s[i].kind == HP_SIZE_POW2 ? s[i].size * 2 - 1 : s[i].size);
		json_kv_u64(&j, "allocations", s[i].tot.allocs);
		json_kv_u64(&j, "allocated_bytes", s[i].tot.alloc_bytes);
		json_kv_u64(&j, "frees", s[i].tot.frees);
		json_kv_u64(&j, "freed_bytes", s[i].tot.freed_bytes);
		json_kv_u64(&j, "temporary_frees", s[i].tot.temp_frees);
		json_kv_i64(&j, "live_blocks", pf_live_blocks(&s[i].tot));
		json_kv_i64(&j, "live_bytes", pf_live_bytes(&s[i].tot));
		json_object_end(&j);
	}
	json_array_end(&j);
}

static void text_row(uint64_t lo, uint64_t hi, const struct pf_totals *t, uint64_t all_allocs,
		     uint64_t all_bytes)
{
	char range[64], a[32], b[32];
	/* Clamped: an untrusted profile may hold a bucket larger than its total. */
	double share = all_allocs ? (double)t->allocs / (double)all_allocs : 0;
	int bar = (int)((share > 1 ? 1 : share) * 30 + 0.5);
	if (lo == hi)
		snprintf(range, sizeof range, "%" PRIu64, lo);
	else if (hi == UINT64_MAX)
		snprintf(range, sizeof range, "%s+", text_bytes(a, sizeof a, lo));
	else if (hi > HP_EXACT_SIZE_MAX)
		snprintf(range, sizeof range, "%s - %s", text_bytes(a, sizeof a, lo),
			 text_bytes(b, sizeof b, hi + 1));
	else
		snprintf(range, sizeof range, "%" PRIu64 " - %" PRIu64, lo, hi);
	printf("%-22s %11" PRIu64 " %5.1f%% %12s %5.1f%%  %.*s\n", range, t->allocs,
	       all_allocs ? 100.0 * (double)t->allocs / (double)all_allocs : 0.0,
	       text_bytes(a, sizeof a, t->alloc_bytes),
	       all_bytes ? 100.0 * (double)t->alloc_bytes / (double)all_bytes : 0.0, bar,
	       "##############################");
}

static void print_text(const struct profile *p, const struct pf_size *s, size_t n)
{
	uint64_t all_allocs = 0, all_bytes = 0;
	for (size_t i = 0; i < n; i++) {
		all_allocs += s[i].tot.allocs;
		all_bytes += s[i].tot.alloc_bytes;
	}
	if (!all_allocs) {
		printf("No sizes in the profile (%s mode records no size histogram).\n",
		       view_mode_name(p) ? view_mode_name(p) : "this");
		return;
	}
	printf("%-22s %11s %6s %12s %6s\n", "SIZE (BYTES)", "ALLOCATIONS", "", "BYTES", "");
	for (size_t i = 0; i < n;) {
		struct pf_totals t = {0};
		uint64_t lo, hi;
		if (s[i].kind == HP_SIZE_POW2) {
			lo = s[i].size;
			hi = s[i].size > UINT64_MAX / 2 ? UINT64_MAX : s[i].size * 2 - 1;
			t = s[i++].tot;
		} else {
			group_of(s[i].size, &lo, &hi);
			for (; i < n && s[i].kind != HP_SIZE_POW2 && s[i].size <= hi; i++) {
				t.allocs += s[i].tot.allocs;
				t.alloc_bytes += s[i].tot.alloc_bytes;
			}
		}
		if (t.allocs)
			text_row(lo, hi, &t, all_allocs, all_bytes);
	}
	view_print_sampling(stdout, p);
}

static int run(int argc, char **argv)
{
	struct view_args args;
	int rc = view_parse(&view_cmd_histogram, argc, argv, NULL, NULL, NULL, &args);
	if (rc)
		return rc < 0 ? 0 : rc;
	struct profile p;
	if (view_load(&args, &p) < 0)
		return VIEW_EXIT_ERROR;
	struct pf_size *s = sorted_sizes(&p);
	if (!s) {
		view_error("out of memory sorting %zu sizes: free memory and retry", p.nsizes);
		pf_free(&p);
		return VIEW_EXIT_ERROR;
	}
	if (args.json)
		print_json(s, p.nsizes);
	else
		print_text(&p, s, p.nsizes);
	free(s);
	pf_free(&p);
	return 0;
}

const struct view_cmd view_cmd_histogram = {
    .name = "histogram",
    .summary = "Show allocations and bytes by requested size (exact up to 4096 bytes in JSON)",
    .options = "",
    .run = run,
};
