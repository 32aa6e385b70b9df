/* growth-fit.h - how fast each site's live bytes grow: a least-squares line through the
 * site's live bytes at every round, against the round's time.
 *
 * Contract: a site's live bytes at a round are the sums of its stacks' series
 * (profile.h), 0 before a stack's first entry. The fit costs O(points log points + rounds),
 * never rounds x sites, since between two changes the series is constant.
 */
#ifndef HEAPPROF_VIEW_GROWTH_FIT_H
#define HEAPPROF_VIEW_GROWTH_FIT_H

#include <stddef.h>
#include <stdint.h>

#include "profile.h"

struct gf_fit {
	double slope; /* bytes per second */
	double r2;    /* coefficient of determination; NaN when undefined (flat line) */
};

/* Fits every site: out has p->nsites entries. 0, or -1 when out of memory. Fewer than two
 * rounds give slope 0 and r2 NaN. */
int gf_fit_sites(const struct profile *p, struct gf_fit *out);

#endif
