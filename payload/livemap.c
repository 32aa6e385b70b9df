#include "livemap.h"

#include "payload.h"

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

_Atomic uint8_t *hp_live_filter;

int hp_live_init(int filtered)
{
	shards = hp_map(SHARDS * sizeof *shards);
	if (filtered)
		hp_live_filter = hp_map(HP_LIVE_FILTER_SLOTS);
	return shards && (hp_live_filter || !filtered) ? 0 : -1;
}

void hp_live_fini(void)
{
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

int hp_live_insert(uintptr_t addr, struct hp_live_val v, struct hp_live_val *old)
{
	uint64_t h = addr_hash(addr);
	struct shard *s = shard_of(addr);
	int rc = 0;
	if (hp_live_filter)
		filter_step(addr, 1);
	hp_spin_lock(&s->lock);
	if ((!s->e || (s->count + 1) * 4 > ((uint64_t)s->mask + 1) * 3) && grow(s) < 0) {
		hp_spin_unlock(&s->lock);
		if (hp_live_filter)
			filter_step(addr, 0);
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
	if (rc == 1 && hp_live_filter)
		filter_step(addr, 0);
	return rc;
}

int hp_live_remove(uintptr_t addr, struct hp_live_val *v)
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

uint64_t hp_live_count(void)
{
	uint64_t n = 0;
	for (unsigned i = 0; i < SHARDS; i++)
		n += __atomic_load_n(&shards[i].count, __ATOMIC_RELAXED);
	return n;
}

void hp_live_each(hp_live_fn fn, void *arg)
{
	for (unsigned i = 0; i < SHARDS; i++) {
		struct shard *s = &shards[i];
		hp_spin_lock(&s->lock);
		for (uint32_t j = 0; s->e && j <= s->mask; j++)
			if (s->e[j].addr)
				fn(&s->e[j].v, arg);
		hp_spin_unlock(&s->lock);
	}
}
