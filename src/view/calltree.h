/* calltree.h - stacks merged into a call tree, for tree, flame and the export formats.
 *
 * Contract: node 0 is the root (every stack with a site passes through it). A path runs
 * from the outermost frame to the stack's site (or, reversed, from the site outwards),
 * every inlined level its own node; siblings with the same label are one node, so a
 * node's value is the sum over the stacks through it and the root's is the total. Labels
 * are "function (file:line)" or "function" when the location is unknown or -j dropped it,
 * cleaned for text output. Values come from a callback, so a tree can hold the numbers of
 * any round (massif).
 */
#ifndef HEAPPROF_VIEW_CALLTREE_H
#define HEAPPROF_VIEW_CALLTREE_H

#include <stddef.h>
#include <stdint.h>

#include "profile.h"
#include "u64map.h"

enum { CT_ALLOCS, CT_BYTES, CT_LIVE, CT_NVAL };

#define CT_NONE ((size_t)-1)

struct ct_node {
	char *label;
	uint64_t addr;				  /* frame address (0 for the root) */
	size_t parent, first_child, next_sibling; /* CT_NONE when absent */
	int64_t v[CT_NVAL];
};

struct calltree {
	struct ct_node *nodes;
	size_t n, cap;
	struct u64map by_key; /* hash of (parent, label) -> a node with them */
};

/* Fills v with the numbers one stack adds along its path. */
typedef void (*ct_value_fn)(const struct profile *p, const struct pf_stack *st, int64_t v[CT_NVAL],
			    void *ctx);

/* The stack's totals: allocations, allocated bytes, live bytes. */
void ct_totals(const struct profile *p, const struct pf_stack *st, int64_t v[CT_NVAL], void *ctx);

/* 0, or -1 when out of memory (t is then empty). fn NULL means ct_totals. */
int ct_build(struct calltree *t, const struct profile *p, int reversed, ct_value_fn fn, void *ctx);
void ct_free(struct calltree *t);

/* Children of node i sorted by v[key] descending (then label), in a new array of *n
 * indexes; NULL when out of memory or no children (*n says which). */
size_t *ct_children(const struct calltree *t, size_t i, int key, size_t *n);

#endif
