#include <inttypes.h>
#include <stdlib.h>

#include "calltree.h"
#include "export.h"
#include "flame.h"
#include "view.h"

struct walk {
	FILE *f;
	const struct calltree *t;
	int key;
	size_t *path;
};

/* ';' separates frames in this format: one inside a name becomes ':'. */
static void put_label(FILE *f, const char *s)
{
	for (; *s; s++)
		fputc(*s == ';' ? ':' : *s, f);
}

static void walk(struct walk *w, size_t i, size_t depth)
{
	const struct ct_node *n = &w->t->nodes[i];
	int64_t self = n->v[w->key];
	w->path[depth] = i;
	for (size_t c = n->first_child; c != CT_NONE; c = w->t->nodes[c].next_sibling) {
		self = pf_sat_sub(self, w->t->nodes[c].v[w->key]);
		walk(w, c, depth + 1);
	}
	if (!i || self <= 0)
		return;
	for (size_t k = 1; k <= depth; k++) {
		if (k > 1)
			fputc(';', w->f);
		put_label(w->f, w->t->nodes[w->path[k]].label);
	}
	fprintf(w->f, " %" PRId64 "\n", self);
}

int export_collapsed(FILE *f, const struct profile *p, int key)
{
	struct calltree t;
	if (ct_build(&t, p, 0, flame_values, NULL) < 0) {
		view_error("out of memory building the call tree: free memory and retry");
		return -1;
	}
	struct walk w = {.f = f, .t = &t, .key = key, .path = malloc(t.n * sizeof(size_t))};
	if (!w.path) {
		ct_free(&t);
		view_error("out of memory building the call tree: free memory and retry");
		return -1;
	}
	walk(&w, 0, 0);
	free(w.path);
	ct_free(&t);
	return 0;
}
