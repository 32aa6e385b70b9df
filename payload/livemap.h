/* livemap.h - the exact map of live blocks: address -> (stack id, size).
 *
 * Contract: sharded by address; each shard is an open-addressed table (linear probing,
 * backward-shift deletion) in mmap'd memory, grown under its own spinlock. Nothing here
 * calls out of the payload while holding a lock. A failed grow drops the insert (the
 * caller counts it lost; its later free is then untracked).
 */
#ifndef HEAPPROF_LIVEMAP_H
#define HEAPPROF_LIVEMAP_H

#include <stddef.h>
#include <stdint.h>

struct hp_live_val {
	uint32_t stack;
	uint64_t size;
};

int hp_live_init(void);
void hp_live_fini(void);
/* 0 = inserted; 1 = addr was already there (its old value in *old, now replaced);
 * -1 = out of memory. */
int hp_live_insert(uintptr_t addr, struct hp_live_val v, struct hp_live_val *old);
/* 1 = removed (*v is what it held); 0 = not there. */
int hp_live_remove(uintptr_t addr, struct hp_live_val *v);

#endif
