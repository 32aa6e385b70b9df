#include "late-symbols.h"

#include <stdlib.h>
#include <string.h>

#include "symbolize.h"

struct unnamed {
	uint64_t addr;
	size_t module; /* index in p->modules */
};

static int by_module(const void *a, const void *b)
{
	const struct unnamed *x = a, *y = b;
	if (x->module != y->module)
		return x->module < y->module ? -1 : 1;
	return (x->addr > y->addr) - (x->addr < y->addr);
}

/* The unnamed frames of modules with a build-id, each address once; -1 when out of memory. */
static ssize_t collect(const struct profile *p, struct unnamed **out)
{
	struct u64map seen = {0};
	struct unnamed *v = NULL;
	size_t n = 0, cap = 0;
	for (size_t i = 0; i < p->nstacks; i++) {
		const struct pf_stack *st = &p->stacks[i];
		for (uint32_t k = 0; k < st->depth; k++) {
			uint64_t a = st->frames[k];
			const struct pf_module *m;
			if (pf_symbol_at(p, a) || u64map_get(&seen, a) >= 0 ||
			    !(m = pf_module_of(p, a)) || !m->build_id_len)
				continue;
			if (n == cap) {
				size_t ncap = cap ? 2 * cap : 64;
				struct unnamed *nv = realloc(v, ncap * sizeof *nv);
				if (!nv)
					goto oom;
				v = nv;
				cap = ncap;
			}
			if (u64map_put(&seen, a, n) < 0)
				goto oom;
			v[n++] = (struct unnamed){.addr = a, .module = (size_t)(m - p->modules)};
		}
	}
	u64map_free(&seen);
	*out = v;
	return (ssize_t)n;
oom:
	u64map_free(&seen);
	free(v);
	return -1;
}

/* r's frames as a profile symbol of module m at addr; 0, or -1 when out of memory. */
static int take_result(struct pf_symbol *s, uint64_t addr, const struct pf_module *m,
		       const struct hp_sym_result *r)
{
	*s = (struct pf_symbol){.addr = addr, .module_id = m->id};
	s->frames = calloc(r->nframes, sizeof *s->frames);
	if (!s->frames)
		return -1;
	s->nframes = r->nframes;
	for (uint32_t i = 0; i < r->nframes; i++) {
		const struct hp_sym_frame *f = &r->frames[i];
		struct pf_symframe *g = &s->frames[i];
		g->line = f->line;
		g->column = f->column;
		if ((f->function && !(g->function = strdup(f->function))) ||
		    (f->file && !(g->file = strdup(f->file))))
			return -1;
	}
	return 0;
}

/* Names v[0..n) of module m into p; how many, or -1 when out of memory. */
static ssize_t name_module(struct profile *p, const struct pf_module *m, const struct unnamed *v,
			   size_t n)
{
	/* The main program may be reported with an empty path (loc.c). */
	const char *path = m->path && *m->path ? m->path : p->session.exe;
	struct hp_symbolizer *s = hp_sym_new(0);
	if (!s)
		return -1;
	ssize_t named = 0;
	if (!path || hp_sym_add_module(s, m->id, path, m->bias, m->start, m->end, m->build_id,
				       m->build_id_len) != 0) {
		hp_sym_free(s);
		return 0;
	}
	for (size_t i = 0; i < n && named >= 0; i++) {
		struct hp_sym_result r;
		if (hp_sym_resolve(s, v[i].addr, &r) > 0) {
			struct pf_symbol *sym = &p->symbols[p->nsymbols];
			if (take_result(sym, v[i].addr, m, &r) < 0 ||
			    u64map_put(&p->symbol_by_addr, v[i].addr, p->nsymbols) < 0) {
				pf_symbol_free(sym);
				named = -1;
			} else {
				p->nsymbols++;
				named++;
			}
		}
		hp_sym_result_clear(&r);
	}
	hp_sym_free(s);
	return named;
}

ssize_t pf_name_unnamed(struct profile *p)
{
	struct unnamed *v;
	ssize_t n = collect(p, &v);
	if (n <= 0)
		return n;
	/* Room for all of them at once: name_module appends without growing. */
	struct pf_symbol *grown = realloc(p->symbols, (p->nsymbols + (size_t)n) * sizeof *grown);
	if (!grown) {
		free(v);
		return -1;
	}
	p->symbols = grown;
	/* One symbolizer per module, so that a module loaded where an unloaded one was does not
	 * name the other's addresses. */
	qsort(v, (size_t)n, sizeof *v, by_module);
	ssize_t named = 0;
	for (size_t i = 0, j; i < (size_t)n && named >= 0; i = j) {
		for (j = i; j < (size_t)n && v[j].module == v[i].module; j++)
			;
		ssize_t k = name_module(p, &p->modules[v[i].module], v + i, j - i);
		named = k < 0 ? -1 : named + k;
	}
	free(v);
	return named;
}
