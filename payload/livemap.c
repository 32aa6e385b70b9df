#include "livemap.h"

#include "payload.h"
#include "stacks.h"

#define SHARDS 256u
#define SHARD_MIN 256u

struct entry {
	uint64_t addr; /* 0 = empty */
	struct hp_live_val v;
};

_Static_assert(sizeof(struct entry) == HP_LIVE_ENTRY_BYTES, "payload.h states it");

/* A line each: threads freeing into different shards never share one. */
struct shard {
	hp_spin lock;
	uint32_t mask;
	uint64_t count;
	struct entry *e;
} __attribute__((aligned(64)));
_Static_assert(sizeof(struct shard) == 64, "a shard is one line");

static struct shard *shards;
_Atomic int hp_live_spilled;

_Atomic(struct dm_chunk *) *hp_dm_dir;
/* hp_dm_near while off: address 0, the only one that hp_dm_near_outside lets through then,
 * reads its one entry. */
static _Atomic(struct dm_chunk *) dm_none[1];
_Atomic(struct dm_chunk *) *hp_dm_near = dm_none;
uint64_t hp_dm_near_outside = ~0ull;
static _Atomic uint64_t dm_bytes; /* what the chunks count in hp_mapped_bytes */

__attribute__((noinline)) static struct dm_chunk *dm_make(uintptr_t c)
{
	if (!hp_mem_admit_live(DM_CHUNK_FIXED))
		return NULL;
	struct dm_chunk *p = hp_reserve(DM_CHUNK_BYTES), *none = NULL;
	if (!p)
		return NULL;
	if (!atomic_compare_exchange_strong(&hp_dm_dir[c], &none, p)) {
		hp_unreserve(p, DM_CHUNK_BYTES);
		return none;
	}
	atomic_fetch_add(&dm_bytes, DM_CHUNK_FIXED);
	atomic_fetch_add(&hp_mapped_bytes, DM_CHUNK_FIXED);
	return p;
}

/* The chunk of a covered addr, made if missing (NULL when that fails: the insert is
 * dropped). */
static inline struct dm_chunk *dm_chunk_made(uintptr_t addr)
{
	struct dm_chunk *p = dm_chunk_at(addr);
	return p ? p : dm_make(addr >> DM_CHUNK_SHIFT);
}

__attribute__((noinline)) static int dm_admit_page(_Atomic uint64_t *b, uint64_t bit)
{
	if (!hp_mem_admit_live(4096))
		return 0;
	if (!(atomic_fetch_or(b, bit) & bit)) {
		atomic_fetch_add(&dm_bytes, 4096);
		atomic_fetch_add(&hp_mapped_bytes, 4096);
	}
	return 1;
}

/* Admits the page of word w before its first write. */
static inline int dm_page(struct dm_chunk *c, const _Atomic uint64_t *w)
{
	uint64_t bit;
	_Atomic uint64_t *b = dm_bits(c, dm_page_of(c, w), &bit);
	return (atomic_load_explicit(b, memory_order_relaxed) & bit) || dm_admit_page(b, bit);
}

static inline int dm_insert(struct dm_chunk *c, _Atomic uint64_t *w, struct hp_live_val v,
			    struct hp_live_val *old)
{
	uint64_t n = v.size & ~HP_LIVE_SAMPLED;
	if (!dm_page(c, w) || (n > DM_SIZE_INLINE && !dm_page(c, w + 1)))
		return -1;
	uint64_t e = atomic_load_explicit(w, memory_order_relaxed);
	int rc = 0;
	if (dm_is_block(e)) {
		*old = dm_unpack(e, w);
		rc = 1;
	}
	dm_store(w, v);
	return rc;
}

static void dm_each(hp_live_fn fn, void *arg)
{
	for (unsigned i = 0; i < DM_CHUNKS; i++) {
		struct dm_chunk *c = atomic_load_explicit(&hp_dm_dir[i], memory_order_acquire);
		for (uint64_t pg = 0; c && pg < DM_PAGES; pg++) {
			if (!dm_page_written(c, pg))
				continue;
			uint64_t end = (pg + 1) * DM_WORDS_PER_PAGE;
			for (uint64_t j = pg * DM_WORDS_PER_PAGE; j < end && j < DM_WORDS; j++) {
				uint64_t e = atomic_load_explicit(&c->w[j], memory_order_acquire);
				if (dm_is_block(e)) {
					struct hp_live_val v = dm_unpack(e, &c->w[j]);
					fn(&v, arg);
				}
			}
		}
	}
}

void hp_dm_near_off(void)
{
	hp_dm_near = dm_none;
	hp_dm_near_outside = ~0ull;
}

void hp_dm_near_on(void)
{
	hp_dm_near = hp_dm_dir;
	hp_dm_near_outside = DM_OUTSIDE;
}

static void dm_fini(void)
{
	hp_dm_near_off();
	for (unsigned i = 0; hp_dm_dir && i < DM_CHUNKS; i++) {
		struct dm_chunk *c = atomic_load(&hp_dm_dir[i]);
		if (c)
			hp_unreserve(c, DM_CHUNK_BYTES);
	}
	if (hp_dm_dir)
		hp_unreserve(hp_dm_dir, DM_CHUNKS * sizeof *hp_dm_dir);
	hp_dm_dir = NULL;
	atomic_fetch_sub(&hp_mapped_bytes, atomic_exchange(&dm_bytes, 0));
}

_Atomic uint8_t *hp_live_filter, *hp_live_spill_filter;

int hp_live_init(int filtered, int reserve_free)
{
	shards = hp_map(SHARDS * sizeof *shards);
	atomic_store(&hp_live_spilled, 0);
	/* Sampled blocks are sparse: a page of words for each would cost more than the table. */
	if (!hp_dm_dir && !filtered && reserve_free)
		hp_dm_dir = hp_reserve(DM_CHUNKS * sizeof *hp_dm_dir);
	if (filtered)
		hp_live_filter = hp_map(HP_LIVE_FILTER_SLOTS);
	/* Before any insert, so that the table has no entry it does not count. */
	if (hp_dm_dir)
		hp_live_spill_filter = hp_map(HP_LIVE_SPILL_SLOTS);
	return shards && (hp_live_filter || !filtered) && (hp_live_spill_filter || !hp_dm_dir) ? 0
											       : -1;
}

void hp_live_fini(void)
{
	dm_fini();
	if (hp_live_filter)
		hp_unmap((void *)hp_live_filter, HP_LIVE_FILTER_SLOTS);
	hp_live_filter = NULL;
	if (hp_live_spill_filter)
		hp_unmap((void *)hp_live_spill_filter, HP_LIVE_SPILL_SLOTS);
	hp_live_spill_filter = NULL;
	if (!shards)
		return;
	for (unsigned i = 0; i < SHARDS; i++)
		if (shards[i].e)
			hp_unmap(shards[i].e, ((size_t)shards[i].mask + 1) * sizeof(struct entry));
	hp_unmap(shards, SHARDS * sizeof *shards);
	shards = NULL;
}

/* Blocks allocated one after another mostly lie one after another: the sixteen 16-byte
 * granules of each 256 bytes of addresses share a run (payload.h, hp_run_slot), so that such
 * blocks share table lines. 32 gained on parse-json (millions of blocks) and lost on
 * threadtest (docs/performance.md); 64 slots per KB, unrotated, lost 15% there. */
#define LIVE_RUN_BITS 4

static inline uint64_t addr_hash(uintptr_t a)
{
	return hp_run_slot(a >> (4 + LIVE_RUN_BITS), a >> 4, LIVE_RUN_BITS);
}

/* The shard is chosen by the address's 2 MB region, not by the whole address. An allocator
 * hands each thread blocks from regions of its own most of the time (glibc's per-thread
 * arenas, jemalloc's per-CPU arenas), so the blocks a thread allocates, and mostly frees,
 * stay in shards that only its CPU touches. Sharded by whole address, every operation took
 * a lock and a table line last written by another CPU: in full mode two threads ran no
 * faster than one (threadtest 19x at P=2, 6.8x now). Whole 64 MB regions (glibc's heap
 * size) did as well on glibc, but up to 11x against 7x on jemalloc, whose threads share
 * regions more and then queue on one lock. */
#define REGION_SHIFT 21

/* One multiply (Fibonacci hashing) on the hot path: the entry's own hash already costs a
 * full mix, and region numbers only need spreading over the shards. */
static inline struct shard *shard_of(uintptr_t addr)
{
	return &shards[((addr >> REGION_SHIFT) * 0x9e3779b97f4a7c15ull) >> 56];
}

/* One of the saturating counters of hp_live_filter or hp_live_spill_filter, up or down. */
static void counter_step(_Atomic uint8_t *f, int up)
{
	uint8_t c = atomic_load_explicit(f, memory_order_relaxed);
	while (c != 255 && (up || c) &&
	       !atomic_compare_exchange_weak_explicit(f, &c, (uint8_t)(up ? c + 1 : c - 1),
						      memory_order_relaxed, memory_order_relaxed))
		;
}

static void filter_step(uintptr_t addr, int up)
{
	counter_step(hp_live_filter_slot(addr), up);
}

static void spill_step(uintptr_t addr, int up)
{
	if (hp_live_spill_filter)
		counter_step(hp_live_counter(hp_live_spill_filter, HP_LIVE_SPILL_BITS, addr), up);
}

static void put(struct entry *e, uint32_t mask, const struct entry *x)
{
	uint32_t i = (uint32_t)addr_hash(x->addr) & mask;
	while (e[i].addr)
		i = (i + 1) & mask;
	e[i] = *x;
}

static int grow(struct shard *s)
{
	uint32_t cap = s->e ? (s->mask + 1) * 2 : SHARD_MIN;
	size_t len = (size_t)cap * sizeof(struct entry);
	if (!(atomic_load(&hp.went_sampled) ? hp_mem_admit(len) : hp_mem_admit_live(len)))
		return -1;
	struct entry *e = hp_map(len);
	if (!e)
		return -1;
	for (uint32_t i = 0; s->e && i <= s->mask; i++)
		if (s->e[i].addr)
			put(e, cap - 1, &s->e[i]);
	if (s->e)
		hp_unmap(s->e, ((size_t)s->mask + 1) * sizeof *e);
	s->e = e;
	s->mask = cap - 1;
	return 0;
}

__attribute__((noinline)) static int table_insert(uintptr_t addr, struct hp_live_val v,
						  struct hp_live_val *old)
{
	uint64_t h = addr_hash(addr);
	struct shard *s = shard_of(addr);
	int rc = 0;
	/* Counted before the entry is there, and taken back below if it is not new. */
	spill_step(addr, 1);
	hp_spin_lock(&s->lock);
	if ((!s->e || (s->count + 1) * 4 > ((uint64_t)s->mask + 1) * 3) && grow(s) < 0) {
		hp_spin_unlock(&s->lock);
		spill_step(addr, 0);
		return -1;
	}
	uint32_t i = (uint32_t)h & s->mask;
	while (s->e[i].addr && s->e[i].addr != addr)
		i = (i + 1) & s->mask;
	if (s->e[i].addr) {
		*old = s->e[i].v;
		rc = 1;
	} else {
		s->count++;
	}
	s->e[i] = (struct entry){.addr = addr, .v = v};
	hp_spin_unlock(&s->lock);
	if (rc)
		spill_step(addr, 0);
	return rc;
}

int hp_live_insert_slow(uintptr_t addr, struct hp_live_val v, struct hp_live_val *old)
{
	int rc;
	if (hp_live_filter)
		filter_step(addr, 1);
	if (dm_covers(addr)) {
		struct dm_chunk *c = dm_chunk_made(addr);
		rc = c ? dm_insert(c, dm_word(c, addr), v, old) : -1;
		if (rc < 0 && atomic_load(&hp.went_sampled)) {
			atomic_store(&hp_live_spilled, 1);
			rc = table_insert(addr, v, old);
		} else if (rc == 0 &&
			   atomic_load_explicit(&hp_live_spilled, memory_order_relaxed) &&
			   hp_live_table_remove(addr, old)) {
			/* A block at this address went to the table when its page was refused, and
			 * was freed unseen: it is the one replaced, as in the direct map. */
			rc = 1;
		}
	} else {
		rc = table_insert(addr, v, old);
	}
	/* Replaced, the address still counts once; dropped, not at all. */
	if (rc != 0 && hp_live_filter)
		filter_step(addr, 0);
	return rc;
}

int hp_live_table_remove(uintptr_t addr, struct hp_live_val *v)
{
	uint64_t h = addr_hash(addr);
	struct shard *s = shard_of(addr);
	/* The table's filter (hp_live_unspilled) says so without the lock: after a switch to
	 * sampling whose pages were refused, every free the direct map misses asked here and
	 * took its region's lock (binary-trees' frees spent a tenth of its time on it). */
	if (hp_live_unspilled(addr))
		return 0;
	hp_spin_lock(&s->lock);
	if (!s->e) {
		hp_spin_unlock(&s->lock);
		return 0;
	}
	uint32_t m = s->mask, i = (uint32_t)h & m;
	while (s->e[i].addr && s->e[i].addr != addr)
		i = (i + 1) & m;
	if (!s->e[i].addr) {
		hp_spin_unlock(&s->lock);
		return 0;
	}
	*v = s->e[i].v;
	/* Backward-shift deletion keeps every probe chain unbroken without tombstones. */
	uint32_t j = i;
	for (;;) {
		j = (j + 1) & m;
		if (!s->e[j].addr)
			break;
		uint32_t home = (uint32_t)addr_hash(s->e[j].addr) & m;
		if (((j - home) & m) >= ((j - i) & m)) {
			s->e[i] = s->e[j];
			i = j;
		}
	}
	s->e[i] = (struct entry){0};
	s->count--;
	hp_spin_unlock(&s->lock);
	spill_step(addr, 0);
	if (hp_live_filter)
		filter_step(addr, 0);
	return 1;
}

void hp_live_each(hp_live_fn fn, void *arg)
{
	if (hp_dm_dir)
		dm_each(fn, arg);
	for (unsigned i = 0; i < SHARDS; i++) {
		struct shard *s = &shards[i];
		hp_spin_lock(&s->lock);
		for (uint32_t j = 0; s->e && j <= s->mask; j++)
			if (s->e[j].addr)
				fn(&s->e[j].v, arg);
		hp_spin_unlock(&s->lock);
	}
}
