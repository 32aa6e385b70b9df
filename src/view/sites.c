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

static uint64_t module_hash(const struct pf_module *m)
{
	uint64_t h = 1469598103934665603ull;
	for (const char *c = m->path ? m->path : ""; *c; c++)
		h = (h ^ (uint8_t)*c) * 1099511628211ull;
	for (size_t i = 0; i < m->build_id_len; i++)
		h = (h ^ m->build_id[i]) * 1099511628211ull;
	return h;
}

static int same_module(const struct pf_module *a, const struct pf_module *b)
{
	return !strcmp(a->path ? a->path : "", b->path ? b->path : "") &&
	       a->build_id_len == b->build_id_len &&
	       (!a->build_id_len || !memcmp(a->build_id, b->build_id, a->build_id_len));
}

/* Each module's first load: the module with its path and build-id that came first. */
static int canon_modules(struct profile *p)
{
	free(p->module_canon);
	p->module_canon = calloc(p->nmodules ? p->nmodules : 1, sizeof *p->module_canon);
	if (!p->module_canon)
		return -1;
	struct u64map first = {0};
	for (size_t i = 0; i < p->nmodules; i++) {
		uint64_t h = module_hash(&p->modules[i]);
		long j = u64map_get(&first, h);
		if (j >= 0 && same_module(&p->modules[j], &p->modules[i])) {
			p->module_canon[i] = (uint32_t)j;
			continue;
		}
		p->module_canon[i] = (uint32_t)i;
		if (j < 0 && u64map_put(&first, h, i) < 0) {
			u64map_free(&first);
			return -1;
		}
	}
	u64map_free(&first);
	return 0;
}

/* A site is the same code wherever its module was loaded: a library unloaded and loaded
 * again at another address gives its call sites new return addresses. The key is the
 * module's first load and the offset in it (bit 63 set: no user address has it); a frame
 * of no known module keys by its address. */
static uint64_t site_key(const struct profile *p, uint64_t addr)
{
	const struct pf_module *m = pf_module_of(p, addr);
	if (!m || !p->module_canon || addr < m->bias || addr - m->bias >= (1ull << 40))
		return addr;
	uint64_t canon = p->module_canon[m - p->modules];
	return 1ull << 63 | canon << 40 | (addr - m->bias);
}

int pf_build_sites(struct profile *p)
{
	free(p->sites);
	u64map_free(&p->site_by_addr);
	p->sites = NULL;
	p->nsites = 0;
	if (!p->nstacks)
		return 0;
	if (canon_modules(p) < 0)
		return -1;
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
		uint64_t addr = st->frames[f], key = site_key(p, addr);
		long si = u64map_get(&p->site_by_addr, key);
		struct pf_site *site;
		if (si < 0) {
			if (u64map_put(&p->site_by_addr, key, p->nsites) < 0)
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
	return u64map_get(&p->site_by_addr, site_key(p, st->frames[st->site_frame]));
}

const struct pf_site *pf_site_at(const struct profile *p, uint64_t addr)
{
	long i = u64map_get(&p->site_by_addr, site_key(p, addr));
	return i >= 0 ? &p->sites[i] : NULL;
}
