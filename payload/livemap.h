/* livemap.h - the exact map of live blocks: address -> (stack id, size, birth, sampled).
 *
 * Contract: two parts, chosen by address. A block at a 16-byte aligned address below 2^47
 * (every block of glibc's malloc, most of any other allocator's) has a word of the direct
 * map at a place computed from the address alone: an insert is a store, a remove a load and
 * a store, with no hash, probe or lock (inline in the callers: directmap.h); the program's
 * own ordering of a block's allocation and its free orders the two. Its memory is reserved
 * per GiB of addresses holding a tracked block and spent per 4 KiB page first written, each
 * page covering 8 KiB of addresses (HP_LIVE_DIRECT_BYTES per 16 bytes; a block over 1022
 * bytes keeps its size in the word after its own). Any other block, and every block when
 * the direct map is off (the target has an address-space limit or strict overcommit, where
 * reserving address space costs it; or only sampled blocks are recorded, too sparse to fill
 * pages), goes to the table: sharded by 2 MB address region (shard_of in livemap.c), each
 * shard an open-addressed table (linear probing, backward-shift deletion) of
 * HP_LIVE_ENTRY_BYTES entries, grown under its own spinlock.
 * Every page and every grow asks hp_mem_admit_live first, which stops an eighth of
 * max_memory short and then switches the session to sampling. From then on a block whose
 * page is refused goes to the table (hp_live_spilled), which may grow into that eighth:
 * sampled blocks are few, and a table entry costs less than the page. A free that misses
 * the direct map then looks in the table too, unless the table's own filter of counters
 * by address (hp_live_unspilled) rules the address out. What is refused even so is
 * dropped (the caller counts it lost; its later free is then a miss). Nothing here calls
 * out of the payload while holding a lock but the mmap of a grow.
 * When sampling from the start, most frees are of blocks never inserted: a filter of
 * saturating counters by address (hp_live_absent, one load) spares them the lookup. A
 * sampling switch mid-run leaves it off, since blocks are already in the map.
 */
#ifndef HEAPPROF_LIVEMAP_H
#define HEAPPROF_LIVEMAP_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define HP_LIVE_SAMPLED (1ull << 63) /* in size: the block was sampled (weighted) */

struct hp_live_val {
	uint32_t stack;
	uint32_t birth_ms; /* hp_round_ms at the allocation */
	uint64_t size;	   /* requested bytes | HP_LIVE_SAMPLED */
};

#include "directmap.h"

/* filtered: every insert from now on is a sampled block (see above); reserve_free:
 * hp_reserve_is_free(), asked once by the caller. */
int hp_live_init(int filtered, int reserve_free);
void hp_live_fini(void);
/* hp_dm_near (directmap.h) made the direct map (on: hp_dm_dir must be) or none (off). */
void hp_dm_near_on(void);
void hp_dm_near_off(void);
/* 0 = inserted; 1 = addr was already there (its old value in *old, now replaced);
 * -1 = out of memory. The common case inline (directmap.h), the rest in
 * hp_live_insert_slow. */
int hp_live_insert_slow(uintptr_t addr, struct hp_live_val v, struct hp_live_val *old);
__attribute__((always_inline)) static inline int
hp_live_insert(uintptr_t addr, struct hp_live_val v, struct hp_live_val *old)
{
	return dm_insert_again(addr, v) ? 0 : hp_live_insert_slow(addr, v, old);
}
/* Counters by address; 255 sticks, since it may stand for more. NULL when off. Blocks
 * are 16-byte aligned, and neighbouring blocks get neighbouring counters, so a run of
 * frees reads one cache line, not one each; the 4 MB window number is mixed in so that
 * regions at aligned distances (each thread's arena) do not share counters. */
#define HP_LIVE_FILTER_BITS 18
#define HP_LIVE_FILTER_SLOTS (1u << HP_LIVE_FILTER_BITS)
extern _Atomic uint8_t *hp_live_filter __attribute__((visibility("hidden")));

/* The counter of addr among the 1 << bits at f: (addr >> 4) ^ (addr >> (4 + bits)),
 * shifted once after the xor, a copy of addr fewer in every free of sampled mode. */
static inline _Atomic uint8_t *hp_live_counter(_Atomic uint8_t *f, unsigned bits, uintptr_t addr)
{
	return &f[((addr ^ addr >> bits) >> 4) & ((1u << bits) - 1)];
}

static inline _Atomic uint8_t *hp_live_filter_slot(uintptr_t addr)
{
	return hp_live_counter(hp_live_filter, HP_LIVE_FILTER_BITS, addr);
}

/* 1 if addr is surely not in the map, the filter being on. A free can only follow its
 * allocation's return through the program's own ordering, which carries the insert's count
 * to the freeing thread. */
static inline int hp_live_absent_on(uintptr_t addr)
{
	return !atomic_load_explicit(hp_live_filter_slot(addr), memory_order_relaxed);
}

/* 1 if the filter is on and addr surely not in the map. */
static inline int hp_live_absent(uintptr_t addr)
{
	return hp_live_filter && hp_live_absent_on(addr);
}

/* With the direct map on, the same counters for the addresses in the table only: after a
 * switch to sampling whose pages were refused, most frees miss the direct map (blocks not
 * sampled), and this says in one load that such a block is not in the table either.
 * Blocks from addresses the direct map never covers count too. NULL when off. */
#define HP_LIVE_SPILL_BITS 14
#define HP_LIVE_SPILL_SLOTS (1u << HP_LIVE_SPILL_BITS)
extern _Atomic uint8_t *hp_live_spill_filter __attribute__((visibility("hidden")));

/* 1 if addr is surely not in the table (the program's ordering carries the count of its
 * insert to the free, as for hp_live_absent_on). */
static inline int hp_live_unspilled(uintptr_t addr)
{
	return hp_live_spill_filter &&
	       !atomic_load_explicit(
		   hp_live_counter(hp_live_spill_filter, HP_LIVE_SPILL_BITS, addr),
		   memory_order_relaxed);
}

/* 1 = removed (*v is what it held); 0 = not there. The direct map's inline, the table's
 * in hp_live_table_remove. */
int hp_live_table_remove(uintptr_t addr, struct hp_live_val *v);
extern _Atomic int hp_live_spilled __attribute__((visibility("hidden")));
__attribute__((always_inline)) static inline int hp_live_remove(uintptr_t addr,
								struct hp_live_val *v)
{
	if (dm_covers(addr)) {
		struct dm_chunk *ch = dm_chunk_at(addr);
		if (ch && dm_remove(dm_word(ch, addr), v))
			return 1;
		if (!atomic_load_explicit(&hp_live_spilled, memory_order_relaxed))
			return 0;
	}
	/* Not v itself: a caller's v whose address no call sees stays in registers. */
	struct hp_live_val tv;
	int found = hp_live_table_remove(addr, &tv);
	*v = tv;
	return found;
}

/* Calls fn for every entry, the table one shard at a time under its lock: fn must not
 * call out. Inserts and removes made meanwhile may or may not be seen. */
typedef void (*hp_live_fn)(const struct hp_live_val *v, void *arg);
void hp_live_each(hp_live_fn fn, void *arg);

#endif
