/* export.h - the formats other tools read, one writer per format.
 *
 * Contract: each writer gets the loaded profile (with the display style applied) and an
 * open stream, writes the whole document and returns 0, or -1 after view_error when out of
 * memory or when the stream fails.
 *   collapsed: "outer;...;site VALUE" lines (flamegraph.pl, speedscope), VALUE by a CT_* key.
 *   pprof:     gzipped profile.proto (github.com/google/pprof/proto/profile.proto).
 *   massif:    massif.out, as valgrind's massif writes it (ms_print, massif-visualizer).
 */
#ifndef HEAPPROF_VIEW_EXPORT_H
#define HEAPPROF_VIEW_EXPORT_H

#include <stdio.h>

#include "profile.h"

int export_collapsed(FILE *f, const struct profile *p, int key);
int export_pprof(FILE *f, const struct profile *p);
int export_massif(FILE *f, const struct profile *p);

#endif
