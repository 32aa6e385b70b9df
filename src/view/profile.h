/* profile.h - a heapprof profile file loaded into memory, shared by every view command.
 *
 * Contract: pf_load reads a whole profile (hpformat.h), zstd-compressed or raw, as
 * untrusted input: every count is checked against its record's length, unknown record
 * types are skipped, malformed records are counted and skipped, and memory grows only with
 * the records read (plus a bounded zstd window). A file that ends in the middle of a
 * record, or without END, loads what is complete and sets p->warning; compressed data that
 * cannot be decoded fails the load.
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
	uint64_t temp_frees; /* frees of temporary blocks (hpformat.h) */
};

/* A stack's live numbers after a round; a series holds only the rounds where they changed,
 * so it grows with the SITES entries, not with rounds x stacks. */
struct pf_point {
	size_t round; /* index in p->rounds */
	int64_t live_blocks, live_bytes;
};

/* From LIVE records: what was still allocated at the final round. */
struct pf_live {
	uint64_t blocks, bytes;
	uint64_t oldest_age_ms, mean_age_ms;
};

struct pf_stack {
	uint32_t id;
	uint32_t depth;
	uint64_t *frames; /* innermost first */
	struct pf_totals tot;
	uint32_t site_frame; /* index in frames of the stack's site */
	struct pf_point *series;
	size_t nseries, cap_series;
	int has_live;
	struct pf_live live;
};

struct pf_site {
	uint64_t addr;
	struct pf_totals tot;
	size_t top_stack; /* index in p->stacks of the stack with the most allocations */
	size_t nstacks;
	int has_live;	     /* some stack of it has a LIVE entry */
	struct pf_live live; /* sums; oldest is the max, mean weighted by blocks */
};

/* A size key (hpformat.h): kind HP_SIZE_EXACT with the size itself, or HP_SIZE_POW2 with
 * the bucket [size, 2*size). Keys that break the rules are moved to the bucket holding
 * them, so every size lands in exactly one key. */
struct pf_size {
	uint32_t kind;
	uint64_t size;
	struct pf_totals tot;
};

/* The numbers of one stack at one size key: what `filter --size` looks at. */
struct pf_stack_size {
	size_t stack; /* index in p->stacks */
	struct pf_size key;
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
	struct pf_size *sizes; /* the size histogram: sums over every stack, even unknown */
	size_t nsizes;
	struct pf_stack_size *stack_sizes;
	size_t nstack_sizes;
	int has_live;	      /* the profile has LIVE records */
	size_t first_sampled; /* index + 1 of the first HP_ROUND_SAMPLED round, 0 if none */

	int has_end;
	uint32_t end_reason; /* enum hp_end_reason when has_end */

	struct pf_totals unattributed; /* SITES deltas naming no known stack (e.g. id 0) */
	uint64_t records;
	uint64_t skipped_records;   /* unknown types */
	uint64_t malformed_records; /* known types whose body did not check out */
	uint64_t peak_live_bytes;   /* max live_bytes over the rounds */
	char warning[256];	    /* one line, empty if the file is complete */

	uint32_t *module_canon; /* per module: the first with its path and build-id (sites.c) */
	struct u64map module_by_id, stack_by_id, symbol_by_addr, site_by_addr;
	struct u64map size_by_code, stack_size_by_code;
};

/* 0, or -1 with err set to a line that says what is wrong and what to do. */
int pf_load(struct profile *p, const char *path, struct hp_error *err);
void pf_free(struct profile *p);

const struct hp_round *pf_last_round(const struct profile *p);
const struct pf_symbol *pf_symbol_at(const struct profile *p, uint64_t addr);
/* Releases what a symbol of p->symbols holds (its frames and their strings). */
void pf_symbol_free(struct pf_symbol *s);
/* The module holding addr: the symbol's module if it names one, else by address range. */
const struct pf_module *pf_module_of(const struct profile *p, uint64_t addr);
/* Fills p->sites from the stacks' totals; pf_load calls it. A site is the return address
 * into the allocating code, taken as module and offset, so a library loaded again at
 * another address keeps its sites. 0, or -1 when out of memory. */
int pf_build_sites(struct profile *p);
/* Index in p->sites of the site of stack st, or -1 if it has none (no numbers). */
long pf_site_of(const struct profile *p, const struct pf_stack *st);
/* The site of the allocating code at addr (in any load of its module), or NULL. */
const struct pf_site *pf_site_at(const struct profile *p, uint64_t addr);

/* A stack's live numbers after round index r (0 before its first SITES entry). */
struct pf_point pf_stack_live_at(const struct pf_stack *st, size_t r);
/* Index of the round with the most live bytes (the first if tied); 0 when there is none. */
size_t pf_peak_round(const struct profile *p);

/* The size key that size falls in. */
struct pf_size pf_size_key(uint64_t size);

/* Display rewrites applied once after loading, so every command prints the same names:
 * names_only drops files and lines (-j), short_templates turns every template argument
 * list into <…> (-t). 0, or -1 when out of memory. */
int pf_apply_style(struct profile *p, int names_only, int short_templates);
/* name with its template argument lists shortened (a new string), or NULL when out of
 * memory. An unbalanced name is returned unchanged. */
char *pf_short_templates(const char *name);

/* Adds b into a: blocks and bytes sum, the oldest age is the larger, the mean weighted. */
static inline void pf_live_merge(struct pf_live *a, const struct pf_live *b)
{
	uint64_t n = a->blocks + b->blocks;
	if (n)
		a->mean_age_ms = (uint64_t)(((double)a->mean_age_ms * (double)a->blocks +
					     (double)b->mean_age_ms * (double)b->blocks) /
					    (double)n);
	a->blocks = n;
	a->bytes += b->bytes;
	if (b->oldest_age_ms > a->oldest_age_ms)
		a->oldest_age_ms = b->oldest_age_ms;
}

/* Profiles are untrusted: sums of their counters saturate instead of overflowing. */
static inline int64_t pf_sat_add(int64_t a, int64_t b)
{
	int64_t r;
	if (__builtin_add_overflow(a, b, &r))
		return b > 0 ? INT64_MAX : INT64_MIN;
	return r;
}

static inline int64_t pf_sat_sub(int64_t a, int64_t b)
{
	int64_t r;
	if (__builtin_sub_overflow(a, b, &r))
		return b < 0 ? INT64_MAX : INT64_MIN;
	return r;
}

static inline int64_t pf_live_blocks(const struct pf_totals *t)
{
	return (int64_t)(t->allocs - t->frees);
}

static inline int64_t pf_live_bytes(const struct pf_totals *t)
{
	return (int64_t)(t->alloc_bytes - t->freed_bytes);
}

#endif
