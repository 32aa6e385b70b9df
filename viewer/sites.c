#include "sites.h"

#include <stdlib.h>

uint64_t hp_site_live_bytes(const struct hp_site *s)
{
	return s->alloc_bytes > s->freed_bytes ? s->alloc_bytes - s->freed_bytes : 0;
}

uint64_t hp_site_live_blocks(const struct hp_site *s)
{
	return s->allocs > s->frees ? s->allocs - s->frees : 0;
}

long hp_sites_add_site(struct hp_site_table *t, const char *label)
{
	if (t->n == t->cap) {
		size_t ncap = t->cap ? t->cap * 2 : 64;
		struct hp_site *v = realloc(t->v, ncap * sizeof *v);
		if (!v)
			return -1;
		t->v = v;
		t->cap = ncap;
	}
	t->v[t->n] = (struct hp_site){.label = label};
	return (long)t->n++;
}

void hp_sites_count(struct hp_site_table *t, size_t site, const struct hp_site_delta *d)
{
	struct hp_site *s = &t->v[site];
	s->allocs += d->allocs;
	s->alloc_bytes += d->alloc_bytes;
	s->frees += d->frees;
	s->freed_bytes += d->freed_bytes;
	s->temp_frees += d->temp_frees;
	s->pending_allocs += d->allocs;
	s->pending_bytes += d->alloc_bytes;
}

double hp_slope(const double *x, const double *y, size_t n)
{
	if (n < 2)
		return 0;
	double mx = 0, my = 0;
	for (size_t i = 0; i < n; i++) {
		mx += x[i];
		my += y[i];
	}
	mx /= (double)n;
	my /= (double)n;
	double sxy = 0, sxx = 0;
	for (size_t i = 0; i < n; i++) {
		sxy += (x[i] - mx) * (y[i] - my);
		sxx += (x[i] - mx) * (x[i] - mx);
	}
	return sxx > 0 ? sxy / sxx : 0;
}

void hp_sites_round(struct hp_site_table *t, uint64_t time_ns)
{
	uint64_t dt_ns = time_ns > t->last_ns ? time_ns - t->last_ns : 0;
	t->last_ns = time_ns;
	size_t slot = t->rounds % HP_GROWTH_ROUNDS;
	t->times_ns[slot] = time_ns;
	t->rounds++;
	size_t k = t->rounds < HP_GROWTH_ROUNDS ? t->rounds : HP_GROWTH_ROUNDS;

	/* Seconds before this round, oldest first, so the fit keeps its precision. */
	double x[HP_GROWTH_ROUNDS], y[HP_GROWTH_ROUNDS];
	size_t first = (slot + HP_GROWTH_ROUNDS + 1 - k) % HP_GROWTH_ROUNDS;
	for (size_t i = 0; i < k; i++) {
		size_t j = (first + i) % HP_GROWTH_ROUNDS;
		x[i] = -(double)(time_ns - t->times_ns[j]) / 1e9;
	}

	for (size_t i = 0; i < t->n; i++) {
		struct hp_site *s = &t->v[i];
		s->round_allocs = s->pending_allocs;
		s->round_bytes = s->pending_bytes;
		s->pending_allocs = s->pending_bytes = 0;
		if (!t->track_rates)
			continue;
		s->alloc_rate = dt_ns ? (double)s->round_bytes * 1e9 / (double)dt_ns : 0;
		s->hist[slot] = (int64_t)s->alloc_bytes - (int64_t)s->freed_bytes;
		for (size_t m = 0; m < k; m++)
			y[m] = (double)s->hist[(first + m) % HP_GROWTH_ROUNDS];
		s->growth = hp_slope(x, y, k);
	}
}

void hp_sites_free(struct hp_site_table *t)
{
	free(t->v);
	*t = (struct hp_site_table){0};
}
