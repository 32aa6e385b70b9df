#include "growth-fit.h"

#include <math.h>
#include <stdlib.h>

struct event {
	size_t round;
	int64_t dbytes; /* change of the site's live bytes from this round on */
};

static int cmp_event(const void *a, const void *b)
{
	const struct event *x = a, *y = b;
	return x->round < y->round ? -1 : x->round > y->round;
}

/* Sorted change events of every site, grouped: site s owns ev[off[s]] .. ev[off[s + 1]]. */
static int collect(const struct profile *p, struct event **evp, size_t **offp)
{
	size_t *off = calloc(p->nsites + 1, sizeof *off);
	size_t total = 0;
	if (!off)
		return -1;
	for (size_t i = 0; i < p->nstacks; i++) {
		long s = pf_site_of(p, &p->stacks[i]);
		if (s >= 0) {
			off[s + 1] += p->stacks[i].nseries;
			total += p->stacks[i].nseries;
		}
	}
	for (size_t s = 0; s < p->nsites; s++)
		off[s + 1] += off[s];
	struct event *ev = malloc((total ? total : 1) * sizeof *ev);
	size_t *fill = malloc((p->nsites ? p->nsites : 1) * sizeof *fill);
	if (!ev || !fill) {
		free(ev);
		free(fill);
		free(off);
		return -1;
	}
	for (size_t s = 0; s < p->nsites; s++)
		fill[s] = off[s];
	for (size_t i = 0; i < p->nstacks; i++) {
		const struct pf_stack *st = &p->stacks[i];
		long s = pf_site_of(p, st);
		if (s < 0)
			continue;
		int64_t prev = 0;
		for (size_t k = 0; k < st->nseries; k++) {
			ev[fill[s]++] = (struct event){st->series[k].round,
						       pf_sat_sub(st->series[k].live_bytes, prev)};
			prev = st->series[k].live_bytes;
		}
	}
	for (size_t s = 0; s < p->nsites; s++)
		qsort(ev + off[s], off[s + 1] - off[s], sizeof *ev, cmp_event);
	free(fill);
	*evp = ev;
	*offp = off;
	return 0;
}

/* Runs BODY for every run of rounds [a, b) over which the site's live bytes are y. */
#define FOR_RUNS(ev, lo, hi, nrounds, BODY)                                                        \
	do {                                                                                       \
		double y = 0;                                                                      \
		size_t a = 0, k = (lo);                                                            \
		while (a < (nrounds)) {                                                            \
			while (k < (hi) && ev[k].round <= a)                                       \
				y += (double)ev[k++].dbytes;                                       \
			size_t b = k < (hi) && ev[k].round < (nrounds) ? ev[k].round : (nrounds);  \
			BODY;                                                                      \
			a = b;                                                                     \
		}                                                                                  \
	} while (0)

int gf_fit_sites(const struct profile *p, struct gf_fit *out)
{
	size_t n = p->nrounds;
	for (size_t s = 0; s < p->nsites; s++)
		out[s] = (struct gf_fit){0, NAN};
	if (n < 2 || !p->nsites)
		return 0;
	/* Centred sums keep the precision: times are large, their spread small. */
	double mx = 0, sxx = 0;
	for (size_t r = 0; r < n; r++)
		mx += (double)p->rounds[r].time_ns / 1e9;
	mx /= (double)n;
	double *cx = malloc((n + 1) * sizeof *cx); /* prefix sums of x - mx */
	if (!cx)
		return -1;
	cx[0] = 0;
	for (size_t r = 0; r < n; r++) {
		double dx = (double)p->rounds[r].time_ns / 1e9 - mx;
		cx[r + 1] = cx[r] + dx;
		sxx += dx * dx;
	}
	struct event *ev;
	size_t *off;
	if (collect(p, &ev, &off) < 0) {
		free(cx);
		return -1;
	}
	for (size_t s = 0; s < p->nsites; s++) {
		double sy = 0, sxy = 0, syy = 0;
		FOR_RUNS(ev, off[s], off[s + 1], n, sy += y * (double)(b - a));
		double my = sy / (double)n;
		FOR_RUNS(ev, off[s], off[s + 1], n, {
			sxy += (y - my) * (cx[b] - cx[a]);
			syy += (y - my) * (y - my) * (double)(b - a);
		});
		if (sxx > 0)
			out[s].slope = sxy / sxx;
		if (sxx > 0 && syy > 0)
			out[s].r2 = sxy * sxy / (sxx * syy);
	}
	free(ev);
	free(off);
	free(cx);
	return 0;
}
