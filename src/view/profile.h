/* profile.h - a heapprof profile file loaded into memory, shared by every view command.
 *
 * Contract: pf_load reads a whole profile (hpformat.h) as untrusted input: every count is
 * checked against its record's length, unknown record types are skipped, malformed records
 * are counted and skipped, and memory grows only with the file's size. A file that ends in
 * the middle of a record, or without END, loads what is complete and sets p->warning.
 * Numbers of a round count only once its ROUND record is there. After loading, p->sites
 * holds the allocation sites (see hpalloc.h), each with the sums of its stacks.
 * Everything is read-only for the commands; pf_free releases it all.
 */
#ifndef HEAPPROF_VIEW_PROFILE_H
#define HEAPPROF_VIEW_PROFILE_H

#include <stddef.h>
#include <stdint.h>

#include "hperror.h"
#include "hpformat.h"
#include "u64map.h"

struct pf_session {
	int present;
	uint32_t pid;
	char *comm;
	char *exe;
	char *cmdline; /* arguments separated by NUL */
	size_t cmdline_len;
	char *host;
	uint64_t attach_real_ns;
};

struct pf_module {
	uint32_t id;
	uint32_t flags; /* enum hp_module_flags */
	uint64_t bias, start, end;
	char *path;
	uint8_t *build_id;
	size_t build_id_len;
};

struct pf_symframe {
	char *function; /* NULL if unknown */
	char *file;	/* NULL if unknown */
	uint32_t line;	/* 0 if unknown */
	uint32_t column;
};

struct pf_symbol {
	uint64_t addr;
	uint32_t module_id;
	uint32_t nframes; /* innermost inline first, real function last; 0 = unresolved */
	struct pf_symframe *frames;
};

struct pf_totals {
	uint64_t allocs, alloc_bytes, frees, freed_bytes;
};

struct pf_stack {
	uint32_t id;
	uint32_t depth;
	uint64_t *frames; /* innermost first */
	struct pf_totals tot;
	uint32_t site_frame; /* index in frames of the stack's site */
};

struct pf_site {
	uint64_t addr;
	struct pf_totals tot;
	size_t top_stack; /* index in p->stacks of the stack with the most allocations */
	size_t nstacks;
};

struct profile {
	struct pf_session session;
	int has_hello;
	struct hp_hello hello;

	struct pf_module *modules;
	size_t nmodules;
	struct pf_stack *stacks;
	size_t nstacks;
	struct pf_symbol *symbols;
	size_t nsymbols;
	struct hp_round *rounds;
	size_t nrounds;
	struct pf_site *sites;
	size_t nsites;

	int has_end;
	uint32_t end_reason; /* enum hp_end_reason when has_end */

	struct pf_totals unattributed; /* SITES deltas naming no known stack (e.g. id 0) */
	uint64_t records;
	uint64_t skipped_records;   /* unknown types */
	uint64_t malformed_records; /* known types whose body did not check out */
	uint64_t peak_live_bytes;   /* max live_bytes over the rounds */
	char warning[256];	    /* one line, empty if the file is complete */

	struct u64map module_by_id, stack_by_id, symbol_by_addr, site_by_addr;
};

/* 0, or -1 with err set to a line that says what is wrong and what to do. */
int pf_load(struct profile *p, const char *path, struct hp_error *err);
void pf_free(struct profile *p);

const struct hp_round *pf_last_round(const struct profile *p);
const struct pf_symbol *pf_symbol_at(const struct profile *p, uint64_t addr);
/* The module holding addr: the symbol's module if it names one, else by address range. */
const struct pf_module *pf_module_of(const struct profile *p, uint64_t addr);
/* Fills p->sites from the stacks' totals; pf_load calls it. 0, or -1 when out of memory. */
int pf_build_sites(struct profile *p);

static inline int64_t pf_live_blocks(const struct pf_totals *t)
{
	return (int64_t)(t->allocs - t->frees);
}

static inline int64_t pf_live_bytes(const struct pf_totals *t)
{
	return (int64_t)(t->alloc_bytes - t->freed_bytes);
}

#endif
