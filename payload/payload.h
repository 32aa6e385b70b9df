/* payload.h - state and helpers shared by the payload's modules.
 *
 * Contract: the payload never allocates through malloc; all of its memory comes from
 * hp_map/hp_unmap (mmap), which keep hp_mapped_bytes, the payload_bytes of each ROUND.
 * Growth that the payload could do without (live map, site tables) asks hp_mem_admit
 * first: the first refusal (max_memory reached) switches recording to sampling for good.
 * A live block costs the live map (livemap.h) HP_LIVE_DIRECT_BYTES (8) per 16 bytes of
 * addresses in the direct map, spent by 4 KiB page: 8 to 16 bytes a block where blocks
 * are small and dense, up to a page per 8 KiB of addresses holding a tracked block where
 * they are sparse; or HP_LIVE_ENTRY_BYTES (24) in the table, whose shards are kept between
 * 3/8 and 3/4 full: 32 to 64 bytes a block, 43 on average.
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

/* A page a forked child sees zeroed (MADV_WIPEONFORK), so a child of the target, however
 * it was forked, records nothing: its hooks pass straight through. */
struct hp_parent_only {
	atomic_int recording; /* hooks record only while set */
	int parent;	      /* set in the process the payload was started in */
};

struct hp_payload {
	struct hp_start_args args;
	uintptr_t text_lo, text_hi; /* every PT_LOAD of the payload: frames to drop */
	uintptr_t base;		    /* the payload's dlpi_addr: never patched */
	struct hp_parent_only *po;  /* never NULL */
	/* Xored into the thread pointer that a hook compares its record's key with: 0 while
	 * recording, else HP_SELF_STOPPED, which no key matches (keys are even thread
	 * pointers, 0 or odd). The hooks' test of a stop in the one compare they make anyway.
	 * A forked child sees 0 here but every record zeroed (threads.c). */
	_Atomic uintptr_t self_flip;
	/* The same for the common path of full mode's malloc and calloc hooks: 0 only while
	 * recording and not sampling, so that this path needs no test of the rate; else
	 * HP_SELF_STOPPED, and they take the general path, which tests it. */
	_Atomic uintptr_t alloc_flip;
	uint64_t max_memory; /* bytes: the limit hp_mem_admit enforces */
	uint64_t start_ms;   /* CLOCK_MONOTONIC_COARSE at start, in ms */
	/* Mean bytes between sampled allocations; 0 = every one. Set at start, or once by
	 * hp_go_sampled; read by the hooks on every allocation. */
	_Atomic uint64_t rate;
	atomic_int went_sampled; /* max_memory was reached: rounds carry HP_ROUND_SAMPLED */
};
#define HP_SELF_STOPPED ((uintptr_t)2)

#define HP_LIVE_ENTRY_BYTES 24
#define HP_LIVE_DIRECT_BYTES 8
/* The default max_memory: the larger of this and HP_DEFAULT_MAX_MEMORY_PCT% of the RSS. */
#define HP_DEFAULT_MAX_MEMORY (256ull << 20)
#define HP_DEFAULT_MAX_MEMORY_PCT 5

extern struct hp_payload hp __attribute__((visibility("hidden")));

/* The only exported symbols. */
#define HP_EXPORT __attribute__((visibility("default")))
HP_EXPORT int heapprof_start(const struct hp_start_args *args);
HP_EXPORT int heapprof_stop(void);
HP_EXPORT int heapprof_release_pipe(void);
HP_EXPORT int heapprof_free_memory(void);
HP_EXPORT extern struct hp_collector_state heapprof_collector;
extern _Atomic uint64_t hp_mapped_bytes __attribute__((visibility("hidden")));

void *hp_map(size_t len);
void hp_unmap(void *p, size_t len);
/* Address space whose use its owner accounts for itself (not in hp_mapped_bytes). */
void *hp_reserve(size_t len);
void hp_unreserve(void *p, size_t len);
/* 1 if reserving address space costs the target nothing: its address space is not capped
 * (RLIMIT_AS) and not every mapping is charged (vm.overcommit_memory 2 ignores
 * MAP_NORESERVE); else a reservation would be taken from it. */
int hp_reserve_is_free(void);
size_t hp_page_round(size_t len);
/* 1 if the payload may map len more bytes within max_memory; else 0, after switching to
 * sampling (hp_go_sampled). */
int hp_mem_admit(size_t len);
/* hp_mem_admit for the live map, which grows with every block the program holds: it stops
 * an eighth of max_memory short, so that what a round needs to count and send (the site
 * tables, the collector's merged table and buffers) still finds room once it has. */
int hp_mem_admit_live(size_t len);
/* 1 if len more bytes leave a quarter of max_memory free. For memory that only makes
 * recording faster, which must never be what switches a session to sampling. */
int hp_mem_spare(size_t len);
/* 1 if the payload may map len more bytes within max_memory; no switch when not. For the
 * collector's work space at the end, which must not mark the last round sampled. */
int hp_mem_fits(size_t len);
void hp_go_sampled(void);

/* ms since start, from the vDSO's coarse clock (no syscall, a few ns). */
uint32_t hp_now_ms(void);
/* hp_now_ms when the current round began, set by the collector: a block's birth, to the
 * round. Two clock reads per allocation and free were a tenth of full mode's cost on the
 * free+malloc benchmark. */
extern _Atomic uint32_t hp_round_ms __attribute__((visibility("hidden")));

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

/* pthread_self() without the call into libc: on x86-64 the thread pointer is the
 * thread's descriptor, which is what pthread_self() returns. */
static inline uintptr_t hp_self(void)
{
	uintptr_t self;
	__asm__("mov %%fs:0, %0" : "=r"(self));
	return self;
}

/* A table slot that keeps runs, for keys that programs touch in order (stack ids, block
 * addresses): keys with the same `rest` get 2^run_bits consecutive slots, at a Fibonacci
 * hash of rest (one multiply, middle bits, which spreads consecutive rests evenly), taken
 * in pos order from a place in the run that the hash also picks, so that keys differing in
 * rest alone still spread over every slot. Longer runs make linear probing's clusters as
 * long. The caller masks the result. */
static inline uint64_t hp_run_slot(uint64_t rest, uint64_t pos, unsigned run_bits)
{
	uint64_t h = (rest * 0x9e3779b97f4a7c15ull) >> 32, in_run = (1ull << run_bits) - 1;
	return (h & ~in_run) | ((h + pos) & in_run);
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
