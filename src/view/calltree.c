#include "calltree.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loc.h"
#include "text.h"

void ct_totals(const struct profile *p, const struct pf_stack *st, int64_t v[CT_NVAL], void *ctx)
{
	(void)p;
	(void)ctx;
	v[CT_ALLOCS] = (int64_t)st->tot.allocs;
	v[CT_BYTES] = (int64_t)st->tot.alloc_bytes;
	v[CT_LIVE] = pf_live_bytes(&st->tot);
}

static uint64_t key_of(size_t parent, const char *label)
{
	uint64_t h = 1469598103934665603ull ^ (parent * 0x9e3779b97f4a7c15ull);
	for (const unsigned char *s = (const unsigned char *)label; *s; s++)
		h = (h ^ *s) * 1099511628211ull;
	return h;
}

static size_t new_node(struct calltree *t, size_t parent, char *label, uint64_t addr)
{
	if (t->n == t->cap) {
		size_t ncap = t->cap ? t->cap * 2 : 64;
		struct ct_node *nn = reallocarray(t->nodes, ncap, sizeof *nn);
		if (!nn)
			return CT_NONE;
		t->nodes = nn;
		t->cap = ncap;
	}
	size_t i = t->n++;
	t->nodes[i] = (struct ct_node){.label = label,
				       .addr = addr,
				       .parent = parent,
				       .first_child = CT_NONE,
				       .next_sibling = CT_NONE};
	if (parent != CT_NONE) {
		t->nodes[i].next_sibling = t->nodes[parent].first_child;
		t->nodes[parent].first_child = i;
	}
	return i;
}

/* The child of parent labelled label, created if needed; CT_NONE when out of memory. */
static size_t child(struct calltree *t, size_t parent, const char *label, uint64_t addr)
{
	uint64_t key = key_of(parent, label);
	long hit = u64map_get(&t->by_key, key);
	if (hit >= 0 && t->nodes[hit].parent == parent && strcmp(t->nodes[hit].label, label) == 0)
		return (size_t)hit;
	if (hit >= 0) /* a hash collision: rare enough for a scan */
		for (size_t c = t->nodes[parent].first_child; c != CT_NONE;
		     c = t->nodes[c].next_sibling)
			if (strcmp(t->nodes[c].label, label) == 0)
				return c;
	char *l = strdup(label);
	if (!l)
		return CT_NONE;
	size_t i = new_node(t, parent, l, addr);
	if (i == CT_NONE || (hit < 0 && u64map_put(&t->by_key, key, i) < 0)) {
		if (i == CT_NONE)
			free(l);
		return CT_NONE;
	}
	return i;
}

static void label_of(const struct profile *p, uint64_t addr, uint32_t level, char *buf, size_t n)
{
	struct pf_loc l;
	char func[512], where[512];
	loc_get(p, addr, level, &l);
	text_function(func, sizeof func, &l);
	text_where(where, sizeof where, &l);
	if (where[0])
		snprintf(buf, n, "%s (%s)", func, where);
	else
		snprintf(buf, n, "%s", func);
}

/* Adds one frame level to the path; CT_NONE when out of memory. */
static size_t step(struct calltree *t, const struct profile *p, size_t at, uint64_t addr,
		   uint32_t level, const int64_t v[CT_NVAL])
{
	char label[1100];
	label_of(p, addr, level, label, sizeof label);
	size_t c = child(t, at, label, addr);
	if (c != CT_NONE)
		for (int k = 0; k < CT_NVAL; k++)
			t->nodes[c].v[k] = pf_sat_add(t->nodes[c].v[k], v[k]);
	return c;
}

static int add_stack(struct calltree *t, const struct profile *p, const struct pf_stack *st,
		     int reversed, const int64_t v[CT_NVAL])
{
	size_t at = 0;
	for (int k = 0; k < CT_NVAL; k++)
		t->nodes[0].v[k] = pf_sat_add(t->nodes[0].v[k], v[k]);
	if (reversed) {
		for (uint32_t f = st->site_frame; f < st->depth; f++) {
			uint32_t nl = loc_levels(p, st->frames[f]);
			for (uint32_t lv = 0; lv < nl && at != CT_NONE; lv++)
				at = step(t, p, at, st->frames[f], lv, v);
		}
	} else {
		for (uint32_t f = st->depth; f-- > st->site_frame;) {
			uint32_t nl = loc_levels(p, st->frames[f]);
			for (uint32_t lv = nl; lv-- > 0 && at != CT_NONE;)
				at = step(t, p, at, st->frames[f], lv, v);
		}
	}
	return at == CT_NONE ? -1 : 0;
}

int ct_build(struct calltree *t, const struct profile *p, int reversed, ct_value_fn fn, void *ctx)
{
	memset(t, 0, sizeof *t);
	char *root = strdup("all");
	if (!root || new_node(t, CT_NONE, root, 0) == CT_NONE) {
		free(root);
		return -1;
	}
	if (!fn)
		fn = ct_totals;
	for (size_t i = 0; i < p->nstacks; i++) {
		const struct pf_stack *st = &p->stacks[i];
		if (pf_site_of(p, st) < 0)
			continue;
		int64_t v[CT_NVAL] = {0};
		fn(p, st, v, ctx);
		if (!v[CT_ALLOCS] && !v[CT_BYTES] && !v[CT_LIVE])
			continue;
		if (add_stack(t, p, st, reversed, v) < 0) {
			ct_free(t);
			return -1;
		}
	}
	return 0;
}

void ct_free(struct calltree *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->nodes[i].label);
	free(t->nodes);
	u64map_free(&t->by_key);
	memset(t, 0, sizeof *t);
}

static const struct calltree *sort_tree;
static int sort_key;

static int cmp_child(const void *a, const void *b)
{
	const struct ct_node *x = &sort_tree->nodes[*(const size_t *)a],
			     *y = &sort_tree->nodes[*(const size_t *)b];
	if (x->v[sort_key] != y->v[sort_key])
		return x->v[sort_key] > y->v[sort_key] ? -1 : 1;
	return strcmp(x->label, y->label);
}

size_t *ct_children(const struct calltree *t, size_t i, int key, size_t *n)
{
	*n = 0;
	for (size_t c = t->nodes[i].first_child; c != CT_NONE; c = t->nodes[c].next_sibling)
		(*n)++;
	if (!*n)
		return NULL;
	size_t *out = malloc(*n * sizeof *out), k = 0;
	if (!out)
		return NULL;
	for (size_t c = t->nodes[i].first_child; c != CT_NONE; c = t->nodes[c].next_sibling)
		out[k++] = c;
	sort_tree = t;
	sort_key = key;
	qsort(out, *n, sizeof *out, cmp_child);
	return out;
}
