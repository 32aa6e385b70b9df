/* flame.h - the SVG flame graph writer, shared by flame and its tests.
 *
 * Contract: flame_svg writes one well-formed, self-contained SVG document for the forward
 * call tree t (calltree.h) with widths by the CT_* key; labels are XML-escaped. A tree for
 * it must hold no negative values: build it with flame_values.
 */
#ifndef HEAPPROF_VIEW_FLAME_H
#define HEAPPROF_VIEW_FLAME_H

#include <stdio.h>

#include "calltree.h"

/* ct_value_fn: the stack's totals with negative live bytes as 0. */
void flame_values(const struct profile *p, const struct pf_stack *st, int64_t v[CT_NVAL],
		  void *ctx);
/* 0, or -1 when out of memory midway (the document is still closed). */
int flame_svg(FILE *f, const struct calltree *t, int key, const char *title);

#endif
