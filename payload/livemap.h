/* livemap.h - the exact map of live blocks: address -> (stack id, size, birth, sampled).
 *
 * Contract: sharded by 2 MB address region (see shard_of in livemap.c); each shard is
 * an open-addressed table (linear probing, backward-shift deletion) in mmap'd memory,
 * grown under its own spinlock when hp_mem_admit allows it. An entry is
 * HP_LIVE_ENTRY_BYTES. Nothing here calls out of the payload while holding a lock but the
 * mmap of a grow. A refused or failed grow drops the insert (the caller counts it lost;
 * its later free is then a miss).
 * When sampling from the start, most frees are of blocks never inserted: a filter of
 * saturating counters by address (hp_live_absent, one load) spares them the locked
 * lookup. A sampling switch mid-run leaves it off, since blocks are already in the map.
 */
#ifndef HEAPPROF_LIVEMAP_H
#define HEAPPROF_LIVEMAP_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define HP_LIVE_SAMPLED (1ull << 63) /* in size: the block was sampled (weighted) */

struct hp_live_val {
	uint32_t stack;
	uint32_t birth_ms; /* hp_now_ms at the allocation */
	uint64_t size;	   /* requested bytes | HP_LIVE_SAMPLED */
};

/* filtered: every insert from now on is a sampled block (see above). */
int hp_live_init(int filtered);
void hp_live_fini(void);
/* 0 = inserted; 1 = addr was already there (its old value in *old, now replaced);
 * -1 = out of memory. */
int hp_live_insert(uintptr_t addr, struct hp_live_val v, struct hp_live_val *old);
/* Counters by address; 255 sticks, since it may stand for more. NULL when off. Blocks
 * are 16-byte aligned, and neighbouring blocks get neighbouring counters, so a run of
 * frees reads one cache line, not one each; the 4 MB window number is mixed in so that
 * regions at aligned distances (each thread's arena) do not share counters. */
#define HP_LIVE_FILTER_BITS 18
#define HP_LIVE_FILTER_SLOTS (1u << HP_LIVE_FILTER_BITS)
extern _Atomic uint8_t *hp_live_filter;

static inline _Atomic uint8_t *hp_live_filter_slot(uintptr_t addr)
{
	return &hp_live_filter[((addr >> 4) ^ (addr >> (4 + HP_LIVE_FILTER_BITS))) &
			       (HP_LIVE_FILTER_SLOTS - 1)];
}

/* 1 if the filter is on and addr surely not in the map. A free can only follow its
 * allocation's return through the program's own ordering, which carries the insert's count
 * to the freeing thread. */
static inline int hp_live_absent(uintptr_t addr)
{
	return hp_live_filter &&
	       !atomic_load_explicit(hp_live_filter_slot(addr), memory_order_relaxed);
}

/* 1 = removed (*v is what it held); 0 = not there. */
int hp_live_remove(uintptr_t addr, struct hp_live_val *v);

/* Blocks in the map now (racy sum: a sizing hint). */
uint64_t hp_live_count(void);
/* Calls fn for every entry, one shard at a time under its lock: fn must not call out. */
typedef void (*hp_live_fn)(const struct hp_live_val *v, void *arg);
void hp_live_each(hp_live_fn fn, void *arg);

#endif
