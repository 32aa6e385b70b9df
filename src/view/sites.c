#include "profile.h"

#include "hpalloc.h"

#include <stdlib.h>
#include <string.h>

/* A frame is allocator code when the real function it lies in (the last symbol frame, not an
 * inlined one) is. An unresolved frame cannot be told apart, so it counts as a site. */
static int frame_is_allocator(const struct profile *p, uint64_t addr)
{
	const struct pf_symbol *s = pf_symbol_at(p, addr);
	return s && s->nframes && hp_is_allocator_function(s->frames[s->nframes - 1].function);
}

static int stack_has_numbers(const struct pf_stack *s)
{
	return s->tot.allocs || s->tot.alloc_bytes || s->tot.frees || s->tot.freed_bytes ||
	       s->has_live;
}

int pf_build_sites(struct profile *p)
{
	free(p->sites);
	u64map_free(&p->site_by_addr);
	p->sites = NULL;
	p->nsites = 0;
	if (!p->nstacks)
		return 0;
	/* At most one site per stack, so one allocation up front suffices. */
	p->sites = calloc(p->nstacks, sizeof *p->sites);
	if (!p->sites)
		return -1;
	for (size_t i = 0; i < p->nstacks; i++) {
		struct pf_stack *st = &p->stacks[i];
		if (!st->depth || !stack_has_numbers(st))
			continue;
		uint32_t f = 0;
		while (f + 1 < st->depth && frame_is_allocator(p, st->frames[f]))
			f++;
		st->site_frame = f;
		uint64_t addr = st->frames[f];
		long si = u64map_get(&p->site_by_addr, addr);
		struct pf_site *site;
		if (si < 0) {
			if (u64map_put(&p->site_by_addr, addr, p->nsites) < 0)
				return -1;
			site = &p->sites[p->nsites++];
			site->addr = addr;
			site->top_stack = i;
		} else {
			site = &p->sites[si];
			if (st->tot.allocs > p->stacks[site->top_stack].tot.allocs)
				site->top_stack = i;
		}
		site->nstacks++;
		site->tot.allocs += st->tot.allocs;
		site->tot.alloc_bytes += st->tot.alloc_bytes;
		site->tot.frees += st->tot.frees;
		site->tot.freed_bytes += st->tot.freed_bytes;
		site->tot.temp_frees += st->tot.temp_frees;
		if (st->has_live) {
			pf_live_merge(&site->live, &st->live);
			site->has_live = 1;
		}
	}
	return 0;
}

long pf_site_of(const struct profile *p, const struct pf_stack *st)
{
	if (!st->depth || !stack_has_numbers(st))
		return -1;
	return u64map_get(&p->site_by_addr, st->frames[st->site_frame]);
}
