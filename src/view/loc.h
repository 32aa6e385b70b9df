/* loc.h - what a frame address means, for display.
 *
 * Contract: an address in a stack is described by one or more *levels*: its symbol's frames
 * (innermost inlined function first, the real function last), or a single unresolved level
 * shown as module+offset. Strings point into the profile and live as long as it does; they
 * are raw file bytes, so text output must pass them through text_clean and JSON output
 * through json.h.
 */
#ifndef HEAPPROF_VIEW_LOC_H
#define HEAPPROF_VIEW_LOC_H

#include <stdint.h>

#include "json.h"
#include "profile.h"

struct pf_loc {
	uint64_t addr;
	const char *module;   /* basename, NULL if in no known module */
	uint64_t offset;      /* addr - module bias, when module is set */
	const char *function; /* NULL if unresolved */
	const char *file;     /* NULL if unknown */
	uint32_t line;	      /* 0 if unknown */
	int inlined;	      /* this level is inlined into the next */
	/* When inlined: the function it is inlined into and where that one calls it. */
	const char *caller;    /* NULL if unknown */
	const char *call_file; /* NULL if unknown */
	uint32_t call_line;    /* 0 if unknown */
};

/* Levels describing addr: its symbol's nframes, or 1 when unresolved. */
uint32_t loc_levels(const struct profile *p, uint64_t addr);
void loc_get(const struct profile *p, uint64_t addr, uint32_t level, struct pf_loc *out);
/* {function, file, line, module, address, inlined}; unknown fields are null. */
void loc_json(struct json *j, const struct pf_loc *l);
/* A stack's frames from index first outwards, every inline level expanded, as an array. */
void loc_json_stack(struct json *j, const struct profile *p, const struct pf_stack *s,
		    uint32_t first);

#endif
