/* hpformat.h - the heapprof stream and profile format, defined once.
 *
 * Contract: the payload writes a *stream* to the pipe; the viewer copies every record of it,
 * in order, into the profile file and adds its own records (SESSION, SYMBOL). So a profile
 * file and a stream have one grammar and one decoder (hpstream.h):
 *
 *   stream := hp_file_header record*
 *   record := hp_rec_hdr body[len]
 *   file   := one zstd frame (RFC 8878) whose content is a stream
 *
 * The viewer flushes the frame after the header, every SESSION, ROUND and END record and
 * every MiB, so a file cut anywhere decodes to a prefix of its stream. Readers of files
 * also accept the raw stream (what `zstd -dc FILE` gives, and files written before
 * compression), told apart by the frame's magic 28 B5 2F FD. The pipe carries the raw
 * stream.
 *
 * Stream order, as the payload writes it:
 *   HELLO, then per round: MODULE* STACK* SITES* ROUND; the final round also carries
 *   LIVE* (before its ROUND); and at the end: END.
 * SITES records carry the per-site deltas of the ROUND record that follows them. A STACK
 * always precedes the first SITES entry naming it; a MODULE precedes the first STACK whose
 * frames fall in it. The viewer adds SESSION right after the header and SYMBOL records
 * for each new stack's frames: those up to its call site (its first frame outside the
 * allocator) before the round that first uses it, the others before the next MODULE or
 * END record, so a file cut short may lack them.
 *
 * Every integer is little-endian (the format is x86_64 Linux only). Bodies are read with
 * memcpy, never by casting, so records need no alignment. Readers must skip record types
 * they do not know (forward compatibility) and reject lengths above HP_REC_MAX.
 * Bump HP_FORMAT_VERSION on any incompatible change.
 */
#ifndef HEAPPROF_HPFORMAT_H
#define HEAPPROF_HPFORMAT_H

#include <assert.h>
#include <stdint.h>
#include <string.h>

#define HP_MAGIC "HEAPPROF"    /* 8 bytes, no terminator in the file */
#define HP_FORMAT_VERSION 3    /* 3: temporary frees as below, ages to the round */
#define HP_REC_MAX (16u << 20) /* largest record body accepted */
#define HP_MAX_DEPTH 128       /* most frames a stack may carry */

struct hp_file_header {
	char magic[8];
	uint32_t version;
	uint32_t flags; /* none defined yet: 0 */
};

enum hp_rec_type {
	HP_REC_HELLO = 1,
	HP_REC_MODULE = 2,
	HP_REC_STACK = 3,
	HP_REC_SITES = 4,
	HP_REC_ROUND = 5,
	HP_REC_END = 6,
	HP_REC_LIVE = 7,
	/* written by the viewer only */
	HP_REC_SESSION = 16,
	HP_REC_SYMBOL = 17,
};

struct hp_rec_hdr {
	uint32_t type; /* enum hp_rec_type */
	uint32_t len;  /* body bytes that follow */
};

enum hp_mode {
	HP_MODE_BASIC = 1,    /* counts and bytes per round */
	HP_MODE_EXTENDED = 2, /* plus a size histogram */
	HP_MODE_FULL = 3,     /* plus a stack per allocation and an exact live map */
};

/* The mode named s as --mode takes it (basic, extended, full), 0 for no mode. */
static inline uint32_t hp_mode_from_name(const char *s)
{
	return !strcmp(s, "basic")	? HP_MODE_BASIC
	       : !strcmp(s, "extended") ? HP_MODE_EXTENDED
	       : !strcmp(s, "full")	? HP_MODE_FULL
					: 0;
}

/* HELLO: first record of a stream. */
struct hp_hello {
	uint32_t pid;		/* target pid as the target sees it */
	uint32_t mode;		/* enum hp_mode */
	uint32_t interval_ms;	/* round length */
	uint32_t max_depth;	/* frames captured per stack */
	uint64_t sample_rate;	/* mean bytes between sampled allocations; 0 = every one */
	uint64_t start_mono_ns; /* CLOCK_MONOTONIC at attach, in the target */
	uint64_t start_real_ns; /* CLOCK_REALTIME at attach */
};

enum hp_module_flags {
	HP_MODULE_UNLOADED = 1, /* the module with this id was dlclosed */
};

/* MODULE: a loaded ELF object. Followed by path[path_len] and build_id[build_id_len]. */
struct hp_module {
	uint32_t id;	/* small integer, unique within the stream */
	uint32_t flags; /* enum hp_module_flags */
	uint64_t bias;	/* load bias (dlpi_addr) */
	uint64_t start; /* lowest mapped address of its PT_LOAD segments */
	uint64_t end;	/* one past the highest */
	uint16_t path_len;
	uint16_t build_id_len;
	uint32_t reserved;
};

/* STACK: an interned call stack. Followed by uint64_t frames[depth], innermost first.
 * frames[0] is the return address into the caller of the allocation function; the
 * payload's own frames are never included. A last frame of HP_FRAME_CUT (no code address
 * of a user-space process) says the payload's stack table was full: the stack is its
 * allocations' innermost frames only, shared by every stack that begins with them. */
#define HP_FRAME_CUT UINT64_MAX
/* What the viewer's SYMBOL names that frame. */
#define HP_FRAME_CUT_TEXT "[outer frames dropped: heapprof's stack table was full]"
struct hp_stack {
	uint32_t id; /* >= 1; 0 means "no stack" (basic/extended modes, or even cutting failed) */
	uint32_t depth;
};

/* SITES: followed by count entries of struct hp_site_delta. Deltas are what changed since
 * the previous ROUND. An entry is keyed by (stack_id, size key): a site's numbers are the
 * sums over its size keys, and a size histogram the sums over stacks.
 *   full mode:     stack_id >= 1 (0 when the stack table was full), size key as below
 *   extended mode: stack_id 0, size key as below
 *   basic mode:    stack_id 0, HP_SIZE_NONE
 * Size key: the requested size itself when it is at most HP_EXACT_SIZE_MAX
 * (HP_SIZE_EXACT), else the power of two at or below it (HP_SIZE_POW2: the bucket
 * [size, 2*size)). With sampling (HELLO sample_rate > 0) the per-site numbers are
 * estimates scaled from the sampled allocations (ROUND says which totals are). */
struct hp_sites {
	uint32_t count;
	uint32_t reserved;
};

#define HP_EXACT_SIZE_MAX 4096

/* A temporary block, as heaptrack has it: one freed right after its allocation, with no
 * other allocation in between; here, by the thread that allocated it, before it allocated
 * again. The phrase every report uses: */
#define HP_TEMPORARY_TEXT "freed before their thread's next allocation"

enum hp_size_key {
	HP_SIZE_NONE = 0,
	HP_SIZE_EXACT = 1,
	HP_SIZE_POW2 = 2,
};

struct hp_site_delta {
	uint32_t stack_id;
	uint32_t size_kind;   /* enum hp_size_key */
	uint64_t size;	      /* the size key */
	uint64_t allocs;      /* allocations made at this stack */
	uint64_t alloc_bytes; /* bytes requested by them */
	uint64_t frees;	      /* frees of blocks allocated at this stack (since attach) */
	uint64_t freed_bytes; /* their bytes */
	uint64_t temp_frees;  /* of those frees, temporary blocks (HP_TEMPORARY_TEXT) */
};

/* LIVE (final round only, full mode): what is still allocated, per stack, with ages.
 * Followed by count entries of struct hp_live_site. Ages are in ms at the time of the
 * final ROUND, from the start of the round each block was allocated in (so at most one
 * interval too old); an entry covers every live block of its stack whatever its size. */
struct hp_live {
	uint32_t count;
	uint32_t reserved;
};

struct hp_live_site {
	uint32_t stack_id;
	uint32_t reserved;
	uint64_t blocks;
	uint64_t bytes;
	uint64_t oldest_age_ms;
	uint64_t mean_age_ms;
};

/* ROUND: closes a round. Totals are cumulative since attach and exact but under
 * sampling. In basic and extended modes there is no live map: every free is counted, by
 * the allocator's usable size (malloc_usable_size) of the block, so live_bytes counts
 * usable bytes there and the SITES frees of extended mode go to the (0, HP_SIZE_NONE)
 * entry, since a free's requested size is unknown. In full mode live_blocks and
 * live_bytes are what the sites hold, as the LIVE records count it. Under sampling allocs
 * and alloc_bytes stay exact, a live sampled block of weight w stands for w live blocks
 * (the others are unsampled), and frees and freed_bytes are what the live estimate leaves
 * of the allocations. Sampling from the start (--sample-rate), a free that misses the
 * live map is not counted at all (skipping it is what keeps the mode cheap), so
 * untracked_frees is 0. After a switch to sampling (--max-memory) every free is counted,
 * and those that the allocations do not account for are taken for frees of blocks from
 * before attach: frees + untracked_frees is the count. */
struct hp_round {
	uint32_t seq;	  /* 1, 2, ... */
	uint32_t flags;	  /* enum hp_round_flags */
	uint64_t time_ns; /* since start_mono_ns */
	uint64_t rss_bytes;
	uint64_t allocs;
	uint64_t alloc_bytes;
	uint64_t frees;		  /* frees of blocks allocated since attach */
	uint64_t freed_bytes;	  /* their bytes */
	uint64_t untracked_frees; /* frees of blocks allocated before attach: no site's numbers */
	uint64_t live_blocks;
	uint64_t live_bytes;
	uint64_t lost;		/* events that could not be attributed (a bound was reached) */
	uint64_t payload_bytes; /* memory the payload holds */
};

enum hp_round_flags {
	HP_ROUND_FINAL = 1,   /* the last round, written by detach */
	HP_ROUND_SAMPLED = 2, /* --max-memory was reached: per-site numbers from this round
			       * on come from sampling, at HELLO's rate or, when that is 0, at
			       * HP_SWITCH_SAMPLE_RATE */
};

/* The mean bytes between samples after --max-memory switched a session that recorded every
 * allocation to sampling: a reader of the profile needs it to say what the numbers are. */
#define HP_SWITCH_SAMPLE_RATE (512u << 10)

enum hp_end_reason {
	HP_END_DETACH = 1, /* heapprof_stop was called */
	HP_END_ERROR = 2,  /* the payload stopped itself on an internal error */
	/* written by the viewer when the stream ended with no END record */
	HP_END_TARGET_EXIT = 3,
	/* written by the viewer when the stream ended inside a record: the payload gave up
	 * a round its reader did not take in time; the rounds before it are whole */
	HP_END_CUT_SHORT = 4,
};

struct hp_end {
	uint32_t reason; /* enum hp_end_reason */
	uint32_t reserved;
};

/* SESSION (viewer): followed by comm[comm_len], exe[exe_len], cmdline[cmdline_len]
 * (arguments separated by NUL), host[host_len]. */
struct hp_session {
	uint32_t pid;
	uint16_t comm_len;
	uint16_t exe_len;
	uint32_t cmdline_len;
	uint16_t host_len;
	uint16_t reserved;
	uint64_t attach_real_ns; /* CLOCK_REALTIME when the viewer started */
};

/* SYMBOL (viewer): what one frame address resolved to. Followed by nframes entries, the
 * innermost inlined function first and the real function last, each a struct
 * hp_symbol_frame followed by function[func_len] and file[file_len]. nframes == 0 means
 * unresolved: show it as module+offset; more than HP_MAX_INLINE makes the record malformed,
 * which bounds the depth of every call tree built from a profile. */
#define HP_MAX_INLINE 32
struct hp_symbol {
	uint64_t addr;	    /* as it appears in STACK frames (a return address) */
	uint32_t module_id; /* 0 if the address lies in no known module */
	uint32_t nframes;
};

struct hp_symbol_frame {
	uint32_t line; /* 0 if unknown */
	uint32_t column;
	uint16_t func_len; /* demangled name; 0 if unknown */
	uint16_t file_len; /* 0 if unknown */
	uint32_t reserved;
};

static_assert(sizeof(struct hp_file_header) == 16, "format");
static_assert(sizeof(struct hp_rec_hdr) == 8, "format");
static_assert(sizeof(struct hp_hello) == 40, "format");
static_assert(sizeof(struct hp_module) == 40, "format");
static_assert(sizeof(struct hp_stack) == 8, "format");
static_assert(sizeof(struct hp_sites) == 8, "format");
static_assert(sizeof(struct hp_site_delta) == 56, "format");
static_assert(sizeof(struct hp_live) == 8, "format");
static_assert(sizeof(struct hp_live_site) == 40, "format");
static_assert(sizeof(struct hp_round) == 96, "format");
static_assert(sizeof(struct hp_end) == 8, "format");
static_assert(sizeof(struct hp_session) == 24, "format");
static_assert(sizeof(struct hp_symbol) == 16, "format");
static_assert(sizeof(struct hp_symbol_frame) == 16, "format");

#endif
