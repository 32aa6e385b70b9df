/* threads.h - per-thread records, keyed by pthread_self() and cached in one TLS word.
 *
 * Contract: hp_thread_self returns the calling thread's record from a fixed, mmap'd,
 * open-addressed table (NULL only if the table is full), inserting it on first use and
 * keeping its address in the thread's hp_thread_mine. A
 * record whose thread exited is inherited by the next thread with the same pthread_t;
 * that is exact because records only ever add. Only the owning thread writes a record
 * (hp_own_add on the totals: one unlocked add to memory); records are
 * cache-line aligned so threads never share a line.
 * Each record holds two site tables ((stack id, size key) -> counters in HP_FX fixed
 * point, so sampled events can carry fractional weights), in a hash table and, for a
 * thread with many sites, in counters by stack id (hp_thread_dense): the owner adds to
 * the active one; hp_threads_drain, called by the collector only, swaps each record's
 * tables and hands every counter of the retired one that counted anything to a callback,
 * then empties it (a counter by stack id keeps its key), and sums the totals. The owner
 * takes no lock: it marks its add with an odd sequence number, and the collector, after
 * flipping every record's active table, makes one membarrier() so that each thread
 * either sees the flip or shows its add in progress, and waits for those. Without
 * membarrier (MEMBARRIER_CMD_GLOBAL refused) a spinlock per record does it.
 */
#ifndef HEAPPROF_THREADS_H
#define HEAPPROF_THREADS_H

#include <stdint.h>

#include "hpformat.h"
#include "payload.h"
#include "stacks.h"

/* Site counters are fixed point with HP_FX fractional bits: 2^56 events or bytes per
 * round and entry, with weights resolved to 1/256. */
#define HP_FX 8
#define HP_FX_ONE (1u << HP_FX)

/* A size key as 32 bits: enum hp_size_key << 24 | the exact size or the power's exponent. */
static inline uint32_t hp_size_code(uint64_t n)
{
	if (n <= HP_EXACT_SIZE_MAX)
		return (uint32_t)HP_SIZE_EXACT << 24 | (uint32_t)n;
	return (uint32_t)HP_SIZE_POW2 << 24 | (uint32_t)(63 - __builtin_clzll(n));
}

/* A site key. An exact size the direct map's word holds (at most HP_SITE_INLINE_MAX) is
 * laid out as that word's low bits are (directmap.h: the stack id in bits 0-18, the size in
 * 19-28), with HP_SITE_INLINE (the word's DM_BLOCK) set, so that a free makes its key by
 * masking its block's word and an allocation its word by adding the birth to its key. Any
 * other size code is in bits 30-60, with HP_SITE_OTHER set. No key is 0. */
#define HP_SITE_STACK_BITS 19u
#define HP_SITE_SIZE_BITS 10u
#define HP_SITE_INLINE (1ull << 62)
#define HP_SITE_INLINE_MAX ((1u << HP_SITE_SIZE_BITS) - 2)
#define HP_SITE_OTHER (1ull << 63)
#define HP_SITE_WORD_MASK                                                                          \
	(HP_SITE_INLINE | ((1ull << (HP_SITE_STACK_BITS + HP_SITE_SIZE_BITS)) - 1))

/* The key of an exact size of at most HP_SITE_INLINE_MAX. */
static inline uint64_t hp_site_key_inline(uint32_t stack_id, uint64_t n)
{
	return HP_SITE_INLINE | n << HP_SITE_STACK_BITS | stack_id;
}

static inline uint64_t hp_site_key(uint32_t stack_id, uint32_t size_code)
{
	if (size_code >> 24 == HP_SIZE_EXACT && (size_code & 0xffffff) <= HP_SITE_INLINE_MAX)
		return hp_site_key_inline(stack_id, size_code & 0xffffff);
	return HP_SITE_OTHER | (uint64_t)size_code << 30 | stack_id;
}

static inline uint32_t hp_site_key_stack(uint64_t key)
{
	return (uint32_t)key & ((1u << HP_SITE_STACK_BITS) - 1);
}

static inline uint32_t hp_site_key_code(uint64_t key)
{
	if (key & HP_SITE_INLINE)
		return (uint32_t)HP_SIZE_EXACT << 24 |
		       (uint32_t)(key >> HP_SITE_STACK_BITS & ((1u << HP_SITE_SIZE_BITS) - 1));
	return (uint32_t)(key >> 30) & 0x7fffffff;
}

/* Stack ids go out in the order stacks are first seen, and a program mostly walks the same
 * paths in the same order again: eight consecutive ids of one size key share a run
 * (payload.h, hp_run_slot), so a sweep over many stacks (binary-trees' trees) touches a
 * few lines per eight sites instead of one each. Where a key's search starts in a table of
 * mask + 1 slots: */
#define HP_SITE_RUN_BITS 3
static inline uint32_t hp_site_home(uint64_t key, uint32_t mask)
{
	return (uint32_t)hp_run_slot(key >> HP_SITE_RUN_BITS, key, HP_SITE_RUN_BITS) & mask;
}

/* A site's counters. Where the size key is exact its bytes are not kept: each of its events
 * is of that many bytes with a whole fixed-point weight, so its bytes are its count times
 * the size, exactly. A site of any other key has a companion entry, its key with
 * HP_SITE_BYTES set, whose allocs and frees count its bytes. 32 bytes, where 48 with the
 * bytes straddled two cache lines half the time and took half again the room in tables of
 * many sites (binary-trees: 65535 per thread and table). */
struct hp_site_ctr {
	uint64_t key;			    /* hp_site_key; 0 = empty */
	uint64_t allocs, frees, temp_frees; /* HP_FX fixed point */
};

#define HP_SITE_BYTES (1ull << 61)

/* 1 if the site of key keeps its bytes in a companion entry (see above). */
static inline int hp_site_has_bytes(uint64_t key)
{
	return hp_site_key_code(key) >> 24 != HP_SIZE_EXACT;
}

/* An open-addressed, growable (mmap) table of counters; also the collector's merge. */
struct hp_site_tab {
	struct hp_site_ctr *e;
	uint32_t mask; /* capacity - 1; e == NULL when empty */
	uint32_t count;
};

/* Cumulative since start, written by the owner only, summed by the collector. */
struct hp_totals {
	_Atomic uint64_t allocs, alloc_bytes, frees, freed_bytes;
	_Atomic uint64_t alloc_usable; /* basic/extended: usable bytes of the allocations */
	_Atomic uint64_t untracked;    /* unsampled: frees of blocks not in the live map */
	_Atomic uint64_t missed;       /* sampling: the same, counted in frees too */
	_Atomic uint64_t lost;	       /* events that could not be recorded */
};

struct hp_thread {
	/* pthread_t (0 = free), HP_THREAD_GUARDED set while the thread runs payload code on
	 * its own behalf (below). */
	_Atomic uintptr_t key;
	uint8_t memo_none;  /* no memory for the walk memos (below): walk without */
	uint8_t dense_none; /* the dense counters (below) could not be made: none */
	uint8_t retired;    /* collector: 1 + the table it flipped away from, or 0 */
	uint8_t memo_last;  /* the memo of the last allocation: its walk is that stack */
	uint16_t memo_next; /* memo_last's next (hooks.c, MEMO_SURE) */
	_Atomic unsigned active;
	union {
		_Atomic uint32_t seq; /* odd while the owner adds to tab[active] */
		hp_spin lock;	      /* the same word, used as a lock without membarrier */
	};
	/* Full mode, once the thread has HP_DENSE_AFTER sites of many stacks: each table's
	 * counters of exact size keys by stack id (hp_thread_dense), NULL until then. */
	struct hp_site_ctr *_Atomic dense;
	struct hp_site_tab tab[2];
	struct hp_totals tot;
	int64_t countdown; /* sampling: bytes left before the next sampled allocation */
	uint64_t rng;	   /* xorshift64* state; 0 until the first sampling decision */
	/* Full mode: the thread's last stack walks with the stack ids they got (unwind.h), one
	 * for each of its last few allocation paths (HP_WALK_MEMOS in one mapping: hooks.c). */
	struct hp_unwind_memo *memo;
	struct hp_stack_cache *scache; /* stacks.h: made with the memos, NULL without */
	/* The block of the thread's last allocation: freed before the thread allocates again,
	 * it was a temporary one (hpformat.h). */
	uintptr_t last_alloc;
	/* The counter that the owner's last add went to: a program mostly adds to one site
	 * many times in a row (a loop's blocks, then their frees), and those adds then skip
	 * the hash and the probe. Its address with its table's index + 1 in the low bits
	 * (counters are 32-byte aligned), 0 = none (hp_site_last_of): one word that says both
	 * where the counter is and whether it is the active table's, where slot numbers for
	 * each table cost four instructions more an event to make an address of. Trusted only
	 * when its key is the event's, since the collector empties a retired table in place;
	 * reset when the owner grows the table (its old counters are unmapped). */
	uintptr_t last;
} __attribute__((aligned(64)));

/* Only the owner writes c, so the add need not be locked; one add to memory, since an
 * aligned 8-byte write is whole to any reader on x86-64 (the collector's relaxed loads).
 * A relaxed load and store, which GCC keeps as a load, an add and a store, cost the
 * microbenchmark more (four of them an allocation and its free). */
static inline void hp_own_add(_Atomic uint64_t *c, uint64_t v)
{
	__asm__("addq %1, %0" : "+m"(*(uint64_t *)c) : "er"(v));
}

#define HP_WALK_MEMOS 28u

/* A program that goes through many stacks in the order it first went through them (a
 * recursion: binary-trees' 65535 stacks a tree) finds their counters in a hash table of
 * twice their size, in runs of eight at random places: a cache miss nearly every event
 * once the table outgrows the cache. Stack ids go out in that same order, so counters
 * indexed by stack id are met in order, with nothing to hash or probe, in half the room.
 * A thread gets them once its table holds HP_DENSE_AFTER sites, if they are of a third as
 * many stacks or more (threads.c, dense_pays): one counter per stack id and table, for
 * the first key of an exact size of at most HP_SITE_INLINE_MAX that claims it (most
 * stacks allocate one size), every other key in the hash table as before. The address
 * space is reserved (8 MB a table); pages are admitted one at a time, only while the
 * thread's counters fill its pages to an eighth and a quarter of max_memory stays free
 * (threads.c): sparse ids stay in the hash table, and these pages never switch a session
 * to sampling. */
#define HP_DENSE_AFTER 512u
#define HP_DENSE_SLOTS (HP_STACKS_MAX_IDS + 128u) /* per table: every stack id, paged */

/* The counter of key in the thread's dense counters of table a, or NULL if the key is not
 * an inline exact size key or the thread has none: it is the key's if its key is key,
 * free to claim if 0 (threads.c). */
static inline struct hp_site_ctr *hp_thread_dense(const struct hp_thread *t, unsigned a,
						  uint64_t key)
{
	struct hp_site_ctr *d = atomic_load_explicit(&t->dense, memory_order_relaxed);
	if (!d || !(key & HP_SITE_INLINE))
		return NULL;
	return &d[a * HP_DENSE_SLOTS + hp_site_key_stack(key)];
}

/* reserve_free: hp_reserve_is_free(), asked once by the caller. */
int hp_threads_init(int reserve_free);
void hp_threads_fini(void);
/* At the payload's unload, after the last session's hp_threads_fini. */
void hp_threads_unload(void);

#define HP_THREADS_BITS 14
extern struct hp_thread *hp_threads __attribute__((visibility("hidden")));
/* hp_thread_self's search for the record of self, the calling thread's pointer. */
struct hp_thread *hp_thread_self_slow(uintptr_t self);

/* HP_THREAD_TLS 1 (heapprof-payload.so): the calling thread's record once
 * hp_thread_self_slow has found it, else an empty record whose key no thread pointer
 * matches. Initial-exec: two instructions a hook, where hashing the thread pointer into the
 * table took seven. Records stay mapped, their keys zeroed, from a session's end to the
 * payload's unload (threads.c), so that this never points at memory a hook cannot read.
 * HP_THREAD_TLS 0 (heapprof-payload-hashed.so, for a target with no static TLS left:
 * inject.h): the record at the thread's home slot, the hash's first guess. */
#ifndef HP_THREAD_TLS
#define HP_THREAD_TLS 1
#endif
#if HP_THREAD_TLS
extern __thread struct hp_thread *hp_thread_mine
    __attribute__((tls_model("initial-exec"), visibility("hidden")));
#define HP_THREAD_GUESS(self) ((void)(self), hp_thread_mine)
#define HP_THREAD_FOUND(t) (hp_thread_mine = (t))
#else
#define HP_THREAD_GUESS(self) (&hp_threads[hp_thread_home(self)])
#define HP_THREAD_FOUND(t) (t)
#endif

/* Where the search for a thread's record starts: one multiply (Fibonacci hashing), since
 * pthread_t values are thread descriptors megabytes apart and the high bits of the
 * product spread them well. */
#define HP_THREAD_MULT 0x9e3779b97f4a7c15ull
static inline unsigned hp_thread_home(uintptr_t self)
{
	return (unsigned)((self * HP_THREAD_MULT) >> (64 - HP_THREADS_BITS));
}

/* The guard lives in the key, so that one compare of a record's key with pthread_self()
 * tells a hook both that the record is its thread's and that the thread is not already in
 * the payload: two instructions fewer a hook than a flag of its own. pthread_t values are
 * aligned descriptors, never odd. Only the owner changes its key once it has claimed it,
 * so the owner's set and clear are single unlocked instructions. */
#define HP_THREAD_GUARDED 1u

static inline void hp_thread_guard(struct hp_thread *t)
{
	__asm__("orq $1, %0" : "+m"(*(uintptr_t *)&t->key));
}

static inline void hp_thread_unguard(struct hp_thread *t)
{
	__asm__("andq $-2, %0" : "+m"(*(uintptr_t *)&t->key));
}

static inline int hp_thread_guarded(const struct hp_thread *t)
{
	return atomic_load_explicit(&t->key, memory_order_relaxed) & HP_THREAD_GUARDED;
}

/* The calling thread's record, guarded or not; the common case (found before) is inline. */
static inline struct hp_thread *hp_thread_self(void)
{
	uintptr_t self = hp_self();
	struct hp_thread *t = HP_THREAD_GUESS(self);
	if ((atomic_load_explicit(&t->key, memory_order_acquire) & ~(uintptr_t)HP_THREAD_GUARDED) ==
	    self)
		return t;
	return hp_thread_self_slow(self);
}

int hp_sample_hit_slow(struct hp_thread *t, uint64_t n, uint64_t rate);

/* Sampling by bytes (rate > 0): 1 if this allocation of n bytes is sampled, from the
 * thread's countdown and generator. */
static inline int hp_sample_hit(struct hp_thread *t, uint64_t n, uint64_t rate)
{
	if (t->rng && (t->countdown -= (int64_t)(n ? n : 1)) > 0)
		return 0;
	return hp_sample_hit_slow(t, n, rate);
}
/* How many allocations a sampled block of n bytes stands for, 1 / (1 - exp(-n / rate)),
 * in HP_FX fixed point. */
uint64_t hp_weight_fx(uint64_t n, uint64_t rate);

/* membarrier(MEMBARRIER_CMD_GLOBAL) works: adds take no lock (set once at init). */
extern int hp_threads_fenced __attribute__((visibility("hidden")));

/* Moves the owner's mark on by one. Only the owner writes seq, so an unlocked add to
 * memory is enough: one instruction, where a load, an add and a store took three and GCC
 * spilled the word's address across the add. The clobber keeps the counters' stores on
 * the right side of it; an x86 store is a release. */
static inline void hp_seq_step(struct hp_thread *t)
{
	__asm__ volatile("addl $1, %0" : "+m"(*(uint32_t *)&t->seq) : : "memory");
}

/* hp_thread_add_kind's add to a site neither the last nor near its home slot, inside the
 * owner's mark: a free counter by stack id claimed, else probed for in table a; and its
 * whole add without membarrier, under the record's lock. */
void hp_thread_add_other(struct hp_thread *t, unsigned a, uint64_t key, int free, uint64_t n,
			 uint64_t temp);
/* The bytes of n events (HP_FX fixed point) of size bytes each. */
static inline uint64_t hp_event_bytes(uint64_t n, uint64_t size)
{
	return n == HP_FX_ONE ? size << HP_FX : (uint64_t)((double)n * (double)size);
}

/* The companion's add (HP_SITE_BYTES) of n events of size bytes, which leaves the last
 * counter as it is. */
void hp_thread_add_bytes(struct hp_thread *t, unsigned a, uint64_t key, int free, uint64_t n,
			 uint64_t size);
void hp_thread_add_locked(struct hp_thread *t, uint64_t key, int free, uint64_t n, uint64_t size,
			  uint64_t temp);

static inline void hp_site_ctr_add(struct hp_site_ctr *e, const struct hp_site_ctr *c)
{
	e->allocs += c->allocs;
	e->frees += c->frees;
	e->temp_frees += c->temp_frees;
}

_Static_assert(sizeof(struct hp_site_ctr) == 32, "a counter's address has 5 low bits clear");

/* Counter e of table a as the record's last holds it. */
static inline uintptr_t hp_site_last_of(unsigned a, const struct hp_site_ctr *e)
{
	return (uintptr_t)e | (a + 1);
}

/* Inside the owner's mark, the counter of key in table a when it is found without a call:
 * the last one added to, the dense one or the one at its home slot or the slot after (which
 * becomes the last); else NULL (hp_thread_add_other's). A program that takes turns between
 * a few sites (a server's request) finds each near its home: inline, that add costs no
 * call. The slot after is where a key whose home another took lies (the probe is linear):
 * redis-server's request, 1168.7 payload instructions with the home slot alone, 1120.3
 * with both; request-paths' 733.6 and 719.5 (`make bench-redis-inproc`, bench/inproc.sh).
 * Written as one test of the key after the choice of slot: a function returning the slot
 * or NULL, tested again here, cost microbench's pair 4 instructions more. */
__attribute__((always_inline)) static inline struct hp_site_ctr *
hp_thread_ctr_near(struct hp_thread *t, unsigned a, uint64_t key)
{
	uintptr_t x = t->last ^ (a + 1);
	struct hp_site_ctr *e = (struct hp_site_ctr *)x;
	if (!(x & (sizeof *e - 1)) && e->key == key)
		return e;
	if ((e = hp_thread_dense(t, a, key)) && e->key == key)
		return e;
	const struct hp_site_tab *tab = &t->tab[a];
	if (!tab->e)
		return NULL;
	uint32_t i = hp_site_home(key, tab->mask);
	e = &tab->e[i];
	if (e->key != key)
		e = &tab->e[(i + 1) & tab->mask];
	if (e->key == key) {
		t->last = hp_site_last_of(a, e);
		return e;
	}
	return NULL;
}

/* One event's counters: an allocation's (free = 0: n allocations) or a free's (free = 1:
 * n frees, temp of them temporary). */
static inline struct hp_site_ctr hp_site_event(uint64_t key, int free, uint64_t n, uint64_t temp)
{
	if (free)
		return (struct hp_site_ctr){.key = key, .frees = n, .temp_frees = temp};
	return (struct hp_site_ctr){.key = key, .allocs = n};
}

/* Adds hp_site_event's counters to e without building them. */
static inline void hp_site_event_add(struct hp_site_ctr *e, int free, uint64_t n, uint64_t temp)
{
	if (free) {
		e->frees += n;
		e->temp_frees += temp;
	} else {
		e->allocs += n;
	}
}

/* Adds one event's counters to the caller's active table: an allocation's (free = 0: n
 * allocations of size bytes) or a free's (free = 1: n frees of size bytes, temp of them
 * temporary). Inline so that the counters stay in registers when the event's site is the
 * last one, where only the counters of its kind are touched; the bytes, which only a site
 * with a companion keeps, are worked out out of line. */
__attribute__((always_inline)) static inline void hp_thread_add_kind(struct hp_thread *t,
								     uint64_t key, int free,
								     uint64_t n, uint64_t size,
								     uint64_t temp)
{
	if (!hp_threads_fenced) {
		hp_thread_add_locked(t, key, free, n, size, temp);
		return;
	}
	/* Odd while the add lasts. The compiler must not move the table choice above the
	 * mark (the asm's memory clobber); the CPU may, and the collector's membarrier is
	 * what orders the two. */
	hp_seq_step(t);
	unsigned a = atomic_load_explicit(&t->active, memory_order_relaxed);
	struct hp_site_ctr *e = hp_thread_ctr_near(t, a, key);
	if (e)
		hp_site_event_add(e, free, n, temp);
	else
		hp_thread_add_other(t, a, key, free, n, temp);
	if (hp_site_has_bytes(key))
		hp_thread_add_bytes(t, a, key, free, n, size);
	hp_seq_step(t);
}

__attribute__((always_inline)) static inline void
hp_thread_add_alloc(struct hp_thread *t, uint64_t key, uint64_t n, uint64_t size)
{
	hp_thread_add_kind(t, key, 0, n, size, 0);
}

__attribute__((always_inline)) static inline void
hp_thread_add_free(struct hp_thread *t, uint64_t key, uint64_t n, uint64_t size, uint64_t temp)
{
	hp_thread_add_kind(t, key, 1, n, size, temp);
}

/* Plain sums of every record's totals. */
struct hp_sum {
	uint64_t allocs, alloc_bytes, frees, freed_bytes, alloc_usable, untracked, missed, lost;
};

typedef void (*hp_site_fn)(const struct hp_site_ctr *c, void *arg);
void hp_threads_drain(hp_site_fn fn, void *arg, struct hp_sum *sum);

/* The counter c went to, or NULL if the table could not grow (nothing added). */
struct hp_site_ctr *hp_site_tab_add(struct hp_site_tab *t, const struct hp_site_ctr *c);
/* The counter of key, or NULL. */
const struct hp_site_ctr *hp_site_tab_find(const struct hp_site_tab *t, uint64_t key);
void hp_site_tab_clear(struct hp_site_tab *t);
void hp_site_tab_free(struct hp_site_tab *t);

#endif
