/* report.h - what the viewer tells the user: one line per round and the final summary.
 *
 * Contract: the session logic keeps struct hp_stats and calls a struct hp_display at the
 * start, once per ROUND and at the end; the display only prints. The line display
 * writes the documented batch format (tests parse it) and stops printing, without
 * failing, once stdout is gone (EPIPE). A full-screen display plugs in as another
 * struct hp_display.
 */
#ifndef HEAPPROF_VIEWER_REPORT_H
#define HEAPPROF_VIEWER_REPORT_H

#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "hpformat.h"

struct hp_stats {
	uint32_t rounds;
	struct hp_round last; /* the latest ROUND; zero before the first */
	uint64_t peak_live_bytes;
};

/* A call site: the innermost frame of a stack that is not allocator code. */
struct hp_site_stat {
	const char *label; /* "function (file:line)", or "module+0x..." */
	uint64_t allocs;
	uint64_t bytes;
};

void hp_stats_round(struct hp_stats *st, const struct hp_round *r);

struct hp_display {
	void (*start)(struct hp_display *d, pid_t pid, const char *comm, const char *file);
	void (*round)(struct hp_display *d, const struct hp_stats *st, const struct hp_round *r);
	/* sites: the top ones, most allocations first */
	void (*finish)(struct hp_display *d, const struct hp_stats *st,
		       const struct hp_site_stat *sites, size_t nsites, const char *file);
	FILE *out;
	int broken; /* out failed: print nothing more */
};

/* The line-oriented display (batch mode, and the terminal until a full-screen one). */
void hp_display_lines_init(struct hp_display *d, FILE *out);

#endif
