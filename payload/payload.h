/* payload.h - state and helpers shared by the payload's modules.
 *
 * Contract: the payload never allocates through malloc; all of its memory comes from
 * hp_map/hp_unmap (mmap), which keep hp_mapped_bytes, the payload_bytes of each ROUND.
 * hp_spin is a test-and-set lock for short critical sections that never call out of the
 * payload; a holder may be preempted, so waiters yield after a few spins.
 */
#ifndef HEAPPROF_PAYLOAD_H
#define HEAPPROF_PAYLOAD_H

#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "hpabi.h"

struct hp_payload {
	struct hp_start_args args;
	uintptr_t text_lo, text_hi; /* every PT_LOAD of the payload: frames to drop */
	uintptr_t base;		    /* the payload's dlpi_addr: never patched */
	atomic_int recording;	    /* hooks record only while set */
};

extern struct hp_payload hp;

/* The only exported symbols. */
#define HP_EXPORT __attribute__((visibility("default")))
HP_EXPORT int heapprof_start(const struct hp_start_args *args);
HP_EXPORT int heapprof_stop(void);
extern _Atomic uint64_t hp_mapped_bytes;

void *hp_map(size_t len);
void hp_unmap(void *p, size_t len);
/* Address space whose use its owner accounts for itself (not in hp_mapped_bytes). */
void *hp_reserve(size_t len);
void hp_unreserve(void *p, size_t len);
size_t hp_page_round(size_t len);

typedef atomic_int hp_spin;

static inline void hp_spin_lock(hp_spin *l)
{
	unsigned n = 0;
	while (atomic_exchange_explicit(l, 1, memory_order_acquire)) {
		while (atomic_load_explicit(l, memory_order_relaxed)) {
			if (++n > 64)
				sched_yield();
			else
				__builtin_ia32_pause();
		}
	}
}

static inline void hp_spin_unlock(hp_spin *l)
{
	atomic_store_explicit(l, 0, memory_order_release);
}

static inline uint64_t hp_hash64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return x;
}

#endif
