/* sites.h - each call site's numbers as the rounds come in: totals since attach, the
 * allocation rate of the last round and the growth of its live bytes.
 *
 * Contract: a site is an index handed out by hp_sites_add_site (records.c makes one per
 * address that is some stack's call site). hp_sites_count adds one SITES entry's deltas at
 * any time; hp_sites_round closes a round and, when the table tracks rates, computes for
 * every site the rate over that round and the least-squares slope of its live bytes over
 * the last HP_GROWTH_ROUNDS rounds. Memory is one struct per site, nothing per round.
 */
#ifndef HEAPPROF_VIEWER_SITES_H
#define HEAPPROF_VIEWER_SITES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hpformat.h"

#define HP_GROWTH_ROUNDS 8

struct hp_site {
	const char *label; /* owned by the caller, stable */
	/* since attach */
	uint64_t allocs, alloc_bytes, frees, freed_bytes, temp_frees;
	/* the round being received, then the last closed one */
	uint64_t pending_allocs, pending_bytes;
	uint64_t round_allocs, round_bytes;
	double alloc_rate; /* bytes per second over the last closed round */
	double growth;	   /* live bytes per second over the last rounds (may be < 0) */
	int64_t hist[HP_GROWTH_ROUNDS]; /* live bytes at the end of the last rounds */
};

struct hp_site_table {
	struct hp_site *v;
	size_t n, cap;
	bool track_rates; /* compute alloc_rate, growth and hist at each round */
	uint32_t rounds;
	uint64_t times_ns[HP_GROWTH_ROUNDS]; /* end of the last rounds, as hist */
	uint64_t last_ns;
};

/* Live bytes of a site (estimates may cross below zero under sampling: then 0). */
uint64_t hp_site_live_bytes(const struct hp_site *s);
uint64_t hp_site_live_blocks(const struct hp_site *s);

/* The new site's index, or -1 when out of memory. */
long hp_sites_add_site(struct hp_site_table *t, const char *label);
void hp_sites_count(struct hp_site_table *t, size_t site, const struct hp_site_delta *d);
/* time_ns: the ROUND's time since attach. */
void hp_sites_round(struct hp_site_table *t, uint64_t time_ns);
void hp_sites_free(struct hp_site_table *t);

/* The least-squares slope of y over x for n points (0 when n < 2 or x is constant). */
double hp_slope(const double *x, const double *y, size_t n);

#endif
