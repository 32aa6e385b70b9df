/* report.h - what the per-site commands (hotspots, leaks, growth, temporary, peak, filter)
 * print alike, and how those whose one option is --top start and end.
 *
 * Contract: every per-site JSON object starts with the fields of hotspots --json, written by
 * report_site_json; a command adds its own after them. Text tables name a site by its
 * function and location through report_names, cleaned for the terminal, in a function
 * column as wide as report_func_width says; equal rows go by address (report_cmp_addr).
 */
#ifndef HEAPPROF_VIEW_REPORT_H
#define HEAPPROF_VIEW_REPORT_H

#include <stddef.h>
#include <stdint.h>

#include "json.h"
#include "profile.h"
#include "view.h"

#define REPORT_TEXT_TOP 20
#define REPORT_FUNC_WIDTH_MAX 60

/* Parses a --top value into *top (0 = all); 0 or VIEW_EXIT_USAGE after saying why. */
int report_parse_top(const struct view_cmd *c, const char *arg, long *top);
/* calloc of p's sites' rows (one spare, for none); NULL after saying so. */
void *report_rows(const struct profile *p, size_t size);

/* The start and end of a command whose one option is --top (REPORT_TOP_HELP). */
#define REPORT_TOP_HELP                                                                            \
	"  --top N          show the first N sites (default 20 in text, all in JSON)\n"
struct report_run {
	long top; /* -1: not given */
	struct view_args args;
	struct profile p;
	void *rows; /* report_rows' */
};
/* Parses argv, loads the profile and makes the rows: 0 to go on, -1 when --help was printed
 * (exit 0), else the exit status after saying why. */
int report_start(struct report_run *r, const struct view_cmd *c, int argc, char **argv,
		 size_t row_size);
/* Frees what report_start made; 0. */
int report_end(struct report_run *r);
/* How many of n rows to show: top if given (>= 0 and not 0), else all in JSON and
 * REPORT_TEXT_TOP in text. */
size_t report_count(long top, int json, size_t n);

/* function, file, line, module, address, inlined_into (or null), allocations, frees,
 * allocated_bytes, freed_bytes, temporary_frees, live_blocks, live_bytes, stacks, stack: the caller
 * opens the object. */
void report_site_json(struct json *j, const struct profile *p, const struct pf_site *s,
		      int64_t live_blocks, int64_t live_bytes);
/* The same for one stack (filter): its own site location and frames. */
void report_stack_json(struct json *j, const struct profile *p, const struct pf_stack *st);

/* The function column and "file:line" of the frame at addr. */
void report_names(const struct profile *p, uint64_t addr, char *func, size_t nf, char *where,
		  size_t nw);
/* Width of the function column for n rows of size bytes, each beginning with its site, a
 * const struct pf_site * (an array of them is such rows). */
int report_func_width(const struct profile *p, const void *rows, size_t n, size_t size);
/* The rows' order where their numbers are equal: by address, the same on every run. */
int report_cmp_addr(const struct pf_site *x, const struct pf_site *y);
/* "N of M sites shown, sorted by KEY: --top 0 shows all." when rows were left out. */
void report_shown(size_t shown, size_t total, const char *what, const char *key);

/* Seconds as text with a unit, or "?" when unknown. */
char *report_age(char *buf, size_t n, int known, uint64_t ms);

#endif
