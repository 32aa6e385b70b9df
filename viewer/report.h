/* report.h - what the viewer tells the user: the rounds as they come and the final summary.
 *
 * Contract: the session logic keeps struct hp_stats and the site table and calls a struct
 * hp_display at the start, once per ROUND, when its input is readable, and at the end;
 * the display only shows (and reads keys). Two displays: the line display writes the
 * documented batch format (tests parse it) and stops printing, without failing, once
 * stdout is gone (EPIPE); the full-screen one is live.h's. close is always called last,
 * on errors too, and must leave the terminal as it was.
 */
#ifndef HEAPPROF_VIEWER_REPORT_H
#define HEAPPROF_VIEWER_REPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "hpformat.h"
#include "sites.h"

struct hp_stats {
	struct hp_hello hello; /* zero before HELLO */
	uint32_t rounds;
	struct hp_round last; /* the latest ROUND; zero before the first */
	struct hp_round prev; /* the one before it */
	uint64_t peak_live_bytes;
	bool sampled; /* a round said HP_ROUND_SAMPLED */
	uint64_t cut_stacks; /* stacks ending in HP_FRAME_CUT */
};

/* A call site in the final summary. */
struct hp_site_stat {
	const char *label; /* "function (file:line)", or "0x... (module N)" */
	uint64_t allocs;
	uint64_t bytes;
	uint64_t temp_frees; /* temporary blocks (hpformat.h) */
};

void hp_stats_round(struct hp_stats *st, const struct hp_round *r);

/* What the session is about, for the display's header. */
struct hp_target_desc {
	pid_t pid;
	const char *comm;
	const char *cmdline; /* arguments joined by spaces; may be empty */
	const char *file;    /* the profile */
};

enum hp_input {
	HP_INPUT_NONE,
	HP_INPUT_DETACH, /* the user asked to stop profiling */
};

struct hp_display {
	void (*start)(struct hp_display *d, const struct hp_target_desc *t);
	void (*round)(struct hp_display *d, const struct hp_stats *st,
		      const struct hp_site_table *sites);
	/* Called when input_fd is readable or a wait was interrupted (a resize). */
	enum hp_input (*input)(struct hp_display *d);
	/* A one-line message for the user ("detaching..."). */
	void (*notice)(struct hp_display *d, const char *msg);
	/* sites: the top ones, most allocations first */
	void (*finish)(struct hp_display *d, const struct hp_stats *st,
		       const struct hp_site_stat *sites, size_t nsites, const char *file);
	void (*close)(struct hp_display *d);
	FILE *out;
	int broken;	  /* out failed: print nothing more */
	int input_fd;	  /* -1: no input to watch */
	bool wants_rates; /* round needs the site table's rates and growth */
	void *priv;
};

/* The line-oriented display: batch mode, and whenever there is no terminal. */
void hp_display_lines_init(struct hp_display *d, FILE *out);

#endif
