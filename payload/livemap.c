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

struct shard {
	hp_spin lock;
	uint32_t mask;
	uint64_t count;
	struct entry *e;
	char pad[64 - 24];
};

static struct shard *shards;

/* The direct map. A chunk serves 1 GiB of addresses: a bitmap of the pages of its words
 * written so far (what it costs), then one word per 16 bytes, and one spare word so that
 * the last granule's block has a word after it too. */
#define DM_CHUNK_SHIFT 30
#define DM_CHUNKS (1u << (47 - DM_CHUNK_SHIFT))
#define DM_WORDS (1ull << (DM_CHUNK_SHIFT - 4))
#define DM_WORDS_PER_PAGE 512u
#define DM_PAGES ((DM_WORDS + 1 + DM_WORDS_PER_PAGE - 1) / DM_WORDS_PER_PAGE)
_Static_assert(4096 / HP_LIVE_DIRECT_BYTES == DM_WORDS_PER_PAGE, "a 4 KiB page of words");

struct dm_chunk {
	_Atomic uint64_t written[(DM_PAGES + 63) / 64];
	_Atomic uint64_t w[DM_WORDS + 1];
};

#define DM_CHUNK_BYTES (sizeof(struct dm_chunk))
/* Besides its pages: the bitmap and the directory page its pointer is in, counted when
 * the chunk is made (a conservative count of what they touch). */
#define DM_CHUNK_FIXED (sizeof(((struct dm_chunk *)0)->written) + 4096)

/* A block's word: bit 62 set and 63 clear; the stack id in bits 0-23, the size in 24-28
 * (0 to 16, or DM_SIZE_NEXT: the next word holds it, with bit 63 set), sampled in bit 29,
 * the birth in 30-61. The word after a block of more than 16 bytes lies inside the block,
 * so no other live block has its own word there. */
#define DM_BLOCK (1ull << 62)
#define DM_NEXT (1ull << 63)
/* What a removed block leaves in its word: a word once written never reads 0 again, so a
 * nonzero one proves its page admitted and the common insert skips the bitmap (a chain of
 * three dependent loads, directory, bitmap, word, cut to two). */
#define DM_GONE 1ull
#define DM_SIZE_NEXT 31u
_Static_assert(HP_STACKS_MAX_IDS < (1u << 24), "stack ids fit in 24 bits");

static _Atomic(struct dm_chunk *) *dm_dir; /* DM_CHUNKS pointers; NULL: the map is off */
static _Atomic uint64_t dm_bytes;	   /* what the chunks count in hp_mapped_bytes */

static int is_block(uint64_t e)
{
	return (e & (DM_BLOCK | DM_NEXT)) == DM_BLOCK;
}

__attribute__((noinline)) static struct dm_chunk *dm_make(uintptr_t c)
{
	if (!hp_mem_admit(DM_CHUNK_FIXED))
		return NULL;
	struct dm_chunk *p = hp_reserve(DM_CHUNK_BYTES), *none = NULL;
	if (!p)
		return NULL;
	if (!atomic_compare_exchange_strong(&dm_dir[c], &none, p)) {
		hp_unreserve(p, DM_CHUNK_BYTES);
		return none;
	}
	atomic_fetch_add(&dm_bytes, DM_CHUNK_FIXED);
	atomic_fetch_add(&hp_mapped_bytes, DM_CHUNK_FIXED);
	return p;
}

/* 1 if the block at addr has its word in the direct map, never an entry in the table (nor
 * a count in the filter: the direct map is off when it is on). */
static inline int dm_covers(uintptr_t addr)
{
	return dm_dir && !(addr & 15) && !(addr >> 47);
}

/* The chunk of a covered addr; make: made if missing (NULL when that fails: the insert is
 * dropped). */
static inline struct dm_chunk *dm_chunk_of(uintptr_t addr, int make)
{
	uintptr_t c = addr >> DM_CHUNK_SHIFT;
	struct dm_chunk *p = atomic_load_explicit(&dm_dir[c], memory_order_acquire);
	return p || !make ? p : dm_make(c);
}

static inline _Atomic uint64_t *dm_word(struct dm_chunk *c, uintptr_t addr)
{
	return &c->w[(addr >> 4) & (DM_WORDS - 1)];
}

__attribute__((noinline)) static int dm_admit_page(_Atomic uint64_t *b, uint64_t bit)
{
	if (!hp_mem_admit(4096))
		return 0;
	if (!(atomic_fetch_or(b, bit) & bit)) {
		atomic_fetch_add(&dm_bytes, 4096);
		atomic_fetch_add(&hp_mapped_bytes, 4096);
	}
	return 1;
}

static inline _Atomic uint64_t *dm_bits(struct dm_chunk *c, uint64_t pg, uint64_t *bit)
{
	*bit = 1ull << (pg & 63);
	return &c->written[pg / 64];
}

/* 1 if page pg of the chunk's words was admitted and written already. */
static inline int dm_page_written(struct dm_chunk *c, uint64_t pg)
{
	uint64_t bit;
	return (atomic_load_explicit(dm_bits(c, pg, &bit), memory_order_relaxed) & bit) != 0;
}

static inline uint64_t dm_page_of(struct dm_chunk *c, const _Atomic uint64_t *w)
{
	return (uint64_t)(w - c->w) / DM_WORDS_PER_PAGE;
}

static inline int dm_written(struct dm_chunk *c, const _Atomic uint64_t *w)
{
	return dm_page_written(c, dm_page_of(c, w));
}

/* Admits the page of word w before its first write. */
static inline int dm_page(struct dm_chunk *c, const _Atomic uint64_t *w)
{
	uint64_t bit;
	_Atomic uint64_t *b = dm_bits(c, dm_page_of(c, w), &bit);
	return (atomic_load_explicit(b, memory_order_relaxed) & bit) || dm_admit_page(b, bit);
}

static uint64_t dm_pack(struct hp_live_val v)
{
	uint64_t n = v.size & ~HP_LIVE_SAMPLED;
	return DM_BLOCK | v.stack | (n <= 16 ? n : DM_SIZE_NEXT) << 24 |
	       ((v.size & HP_LIVE_SAMPLED) ? 1ull << 29 : 0) | (uint64_t)v.birth_ms << 30;
}

/* A size word overwritten by another block's (a block freed behind the payload's back,
 * whose memory went to another) leaves the size unknown: 0. */
__attribute__((always_inline)) static inline struct hp_live_val dm_unpack(uint64_t e,
									  const _Atomic uint64_t *w)
{
	struct hp_live_val v = {.stack = e & 0xffffff, .birth_ms = (uint32_t)(e >> 30)};
	uint64_t n = e >> 24 & 31;
	if (n == DM_SIZE_NEXT) {
		uint64_t x = atomic_load_explicit(w + 1, memory_order_relaxed);
		n = (x & DM_NEXT) ? x & ~DM_NEXT : 0;
	}
	v.size = n | ((e & (1ull << 29)) ? HP_LIVE_SAMPLED : 0);
	return v;
}

/* Writes v as the block of word w, whose pages are written. Release: hp_live_each, reading
 * the block's word, reads its size word after it. */
static inline void dm_store(_Atomic uint64_t *w, struct hp_live_val v)
{
	uint64_t n = v.size & ~HP_LIVE_SAMPLED;
	if (n > 16)
		atomic_store_explicit(w + 1, n | DM_NEXT, memory_order_relaxed);
	atomic_store_explicit(w, dm_pack(v), memory_order_release);
}

static inline int dm_insert(struct dm_chunk *c, _Atomic uint64_t *w, struct hp_live_val v,
			    struct hp_live_val *old)
{
	uint64_t n = v.size & ~HP_LIVE_SAMPLED;
	if (!dm_page(c, w) || (n > 16 && !dm_page(c, w + 1)))
		return -1;
	uint64_t e = atomic_load_explicit(w, memory_order_relaxed);
	int rc = 0;
	if (is_block(e)) {
		*old = dm_unpack(e, w);
		rc = 1;
	}
	dm_store(w, v);
	return rc;
}

static inline int dm_remove(_Atomic uint64_t *w, struct hp_live_val *v)
{
	uint64_t e = atomic_load_explicit(w, memory_order_relaxed);
	if (!is_block(e))
		return 0;
	*v = dm_unpack(e, w);
	atomic_store_explicit(w, DM_GONE, memory_order_relaxed);
	return 1;
}

static void dm_each(hp_live_fn fn, void *arg)
{
	for (unsigned i = 0; i < DM_CHUNKS; i++) {
		struct dm_chunk *c = atomic_load_explicit(&dm_dir[i], memory_order_acquire);
		for (uint64_t pg = 0; c && pg < DM_PAGES; pg++) {
			if (!dm_page_written(c, pg))
				continue;
			uint64_t end = (pg + 1) * DM_WORDS_PER_PAGE;
			for (uint64_t j = pg * DM_WORDS_PER_PAGE; j < end && j < DM_WORDS; j++) {
				uint64_t e = atomic_load_explicit(&c->w[j], memory_order_acquire);
				if (is_block(e)) {
					struct hp_live_val v = dm_unpack(e, &c->w[j]);
					fn(&v, arg);
				}
			}
		}
	}
}

static void dm_fini(void)
{
	for (unsigned i = 0; dm_dir && i < DM_CHUNKS; i++) {
		struct dm_chunk *c = atomic_load(&dm_dir[i]);
		if (c)
			hp_unreserve(c, DM_CHUNK_BYTES);
	}
	if (dm_dir)
		hp_unreserve(dm_dir, DM_CHUNKS * sizeof *dm_dir);
	dm_dir = NULL;
	atomic_fetch_sub(&hp_mapped_bytes, atomic_exchange(&dm_bytes, 0));
}

_Atomic uint8_t *hp_live_filter;

int hp_live_init(int filtered)
{
	shards = hp_map(SHARDS * sizeof *shards);
	/* Sampled blocks are sparse: a page of words for each would cost more than the table. */
	if (!dm_dir && !filtered && hp_reserve_is_free())
		dm_dir = hp_reserve(DM_CHUNKS * sizeof *dm_dir);
	if (filtered)
		hp_live_filter = hp_map(HP_LIVE_FILTER_SLOTS);
	return shards && (hp_live_filter || !filtered) ? 0 : -1;
}

void hp_live_fini(void)
{
	dm_fini();
	if (hp_live_filter)
		hp_unmap((void *)hp_live_filter, HP_LIVE_FILTER_SLOTS);
	hp_live_filter = NULL;
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

static void filter_step(uintptr_t addr, int up)
{
	_Atomic uint8_t *f = hp_live_filter_slot(addr);
	uint8_t c = atomic_load_explicit(f, memory_order_relaxed);
	while (c != 255 && (up || c) &&
	       !atomic_compare_exchange_weak_explicit(f, &c, (uint8_t)(up ? c + 1 : c - 1),
						      memory_order_relaxed, memory_order_relaxed))
		;
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
	if (!hp_mem_admit((size_t)cap * sizeof(struct entry)))
		return -1;
	struct entry *e = hp_map((size_t)cap * sizeof *e);
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
	hp_spin_lock(&s->lock);
	if ((!s->e || (s->count + 1) * 4 > ((uint64_t)s->mask + 1) * 3) && grow(s) < 0) {
		hp_spin_unlock(&s->lock);
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
	return rc;
}

__attribute__((noinline)) static int insert_slow(uintptr_t addr, struct hp_live_val v,
						 struct hp_live_val *old)
{
	int rc;
	if (hp_live_filter)
		filter_step(addr, 1);
	if (dm_covers(addr)) {
		struct dm_chunk *c = dm_chunk_of(addr, 1);
		rc = c ? dm_insert(c, dm_word(c, addr), v, old) : -1;
	} else {
		rc = table_insert(addr, v, old);
	}
	/* Replaced, the address still counts once; dropped, not at all. */
	if (rc != 0 && hp_live_filter)
		filter_step(addr, 0);
	return rc;
}

/* The common insert has no call but a tail call, so it saves no register: a block of the
 * direct map (never with the filter, which only sampling from the start uses) whose word
 * was written before (DM_GONE), and so was its page, and whose size word, if it needs one,
 * lies in the same page or one written already. */
int hp_live_insert(uintptr_t addr, struct hp_live_val v, struct hp_live_val *old)
{
	if (dm_covers(addr)) {
		struct dm_chunk *c = dm_chunk_of(addr, 0);
		if (c) {
			_Atomic uint64_t *w = dm_word(c, addr);
			uint64_t e = atomic_load_explicit(w, memory_order_relaxed);
			uint64_t n = v.size & ~HP_LIVE_SAMPLED;
			if (e && !is_block(e) &&
			    (n <= 16 || (addr >> 4) % DM_WORDS_PER_PAGE != DM_WORDS_PER_PAGE - 1 ||
			     dm_written(c, w + 1))) {
				dm_store(w, v);
				return 0;
			}
		}
	}
	return insert_slow(addr, v, old);
}

__attribute__((noinline)) static int table_remove(uintptr_t addr, struct hp_live_val *v)
{
	uint64_t h = addr_hash(addr);
	struct shard *s = shard_of(addr);
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
	if (hp_live_filter)
		filter_step(addr, 0);
	return 1;
}

int hp_live_remove(uintptr_t addr, struct hp_live_val *v)
{
	if (dm_covers(addr)) {
		struct dm_chunk *c = dm_chunk_of(addr, 0);
		return c && dm_remove(dm_word(c, addr), v);
	}
	return table_remove(addr, v);
}

void hp_live_each(hp_live_fn fn, void *arg)
{
	if (dm_dir)
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
