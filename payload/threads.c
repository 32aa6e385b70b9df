#include "threads.h"

#include <linux/membarrier.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "stacks.h"
#include "unwind.h"

#define THREADS_CAP (1u << HP_THREADS_BITS) /* records; reserved, pages touched on use */
#define SITE_TAB_MIN 64u

/* A record no thread claims (key 0): hp_threads before the first session, and every
 * thread's hp_thread_mine until the thread finds its own. */
static struct hp_thread threads_none;
struct hp_thread *hp_threads = &threads_none;
#if HP_THREAD_TLS
__thread struct hp_thread *hp_thread_mine = &threads_none;
#endif
_Static_assert(sizeof(struct hp_thread) == 3 * 64, "THREADS_CAP records are reserved at start");
int hp_threads_fenced;

/* A bit for each record a thread claimed, set after its key and before the thread records
 * anything, and never cleared in a session (nor is the key). A round visits these records
 * alone: reading every record's key touched THREADS_CAP lines spread over 3 MB a round,
 * which was most of an idle round (threadtest at P=2: 421 us of the collector a round, 160
 * us with the bits). */
static _Atomic uint64_t claimed[THREADS_CAP / 64];

/* The first claimed record at or after i, THREADS_CAP if none. */
static unsigned claimed_next(unsigned i)
{
	for (unsigned w = i / 64; w < THREADS_CAP / 64; w++) {
		uint64_t m = atomic_load_explicit(&claimed[w], memory_order_acquire);
		if (w == i / 64)
			m &= ~0ull << (i % 64);
		if (m)
			return w * 64 + (unsigned)__builtin_ctzll(m);
	}
	return THREADS_CAP;
}

#define EACH_CLAIMED(i) for (unsigned i = claimed_next(0); i < THREADS_CAP; i = claimed_next(i + 1))

/* Dense counters (threads.h): a page of bookkeeping, then the two tables, a page of
 * DENSE_PER_PAGE counters at a time. The first DENSE_FREE_PAGES pages are admitted
 * whatever their fill; past them a page is admitted only while the thread's counters fill
 * its pages to 1 / DENSE_MIN_FILL. */
#define DENSE_PER_PAGE (4096u / sizeof(struct hp_site_ctr))
#define DENSE_PAGES (HP_DENSE_SLOTS / DENSE_PER_PAGE)
#define DENSE_BYTES (4096u + 2ull * HP_DENSE_SLOTS * sizeof(struct hp_site_ctr))
#define DENSE_FREE_PAGES 2u
#define DENSE_MIN_FILL 8u
_Static_assert(HP_DENSE_SLOTS % DENSE_PER_PAGE == 0, "dense tables are whole pages");

struct dense_head {
	uint64_t admitted[2][(DENSE_PAGES + 63) / 64]; /* pages of each table */
	uint32_t pages;				       /* admitted, both tables */
	uint32_t claimed;			       /* counters with a key, both tables */
};
_Static_assert(sizeof(struct dense_head) <= 4096, "the bookkeeping fits its page");

/* Full mode, with membarrier, where reserving address space costs the target nothing
 * (hp_reserve_is_free): set once at init. */
static int dense_allowed;

/* Table a's dense counters: the thread must have them. */
static struct hp_site_ctr *dense_tab(const struct hp_thread *t, unsigned a)
{
	return atomic_load_explicit(&t->dense, memory_order_relaxed) + a * HP_DENSE_SLOTS;
}

static struct dense_head *dense_head(const struct hp_thread *t)
{
	return (struct dense_head *)((char *)dense_tab(t, 0) - 4096);
}

/* The thread's dense counters, once it has HP_DENSE_AFTER sites; dense_none if they cannot
 * be had. Only the bookkeeping page is written, and counted, here. */
static void dense_make(struct hp_thread *t)
{
	char *p = NULL;
	if (dense_allowed && hp_mem_spare(4096))
		p = hp_reserve(DENSE_BYTES);
	if (!p) {
		t->dense_none = 1;
		return;
	}
	atomic_fetch_add(&hp_mapped_bytes, 4096);
	atomic_store_explicit(&t->dense, (struct hp_site_ctr *)(p + 4096), memory_order_relaxed);
}

static void dense_free(struct hp_thread *t)
{
	struct dense_head *h = dense_head(t);
	atomic_fetch_sub(&hp_mapped_bytes, 4096ull * (1 + h->pages));
	hp_unreserve(h, DENSE_BYTES);
	atomic_store_explicit(&t->dense, NULL, memory_order_relaxed);
}

/* 1 if the owner may write the dense counter e of table a: its page is admitted, or is
 * now. The page's first write maps it (reads before that map the zero page only). */
static int dense_admit(struct hp_thread *t, unsigned a, const struct hp_site_ctr *e)
{
	struct dense_head *h = dense_head(t);
	uint32_t pg = (uint32_t)(e - dense_tab(t, a)) / DENSE_PER_PAGE;
	uint64_t bit = 1ull << (pg % 64), *w = &h->admitted[a][pg / 64];
	if (*w & bit)
		return 1;
	if (h->pages >= DENSE_FREE_PAGES &&
	    (uint64_t)h->claimed * DENSE_MIN_FILL < (uint64_t)h->pages * DENSE_PER_PAGE)
		return 0;
	if (!hp_mem_spare(4096))
		return 0;
	*w |= bit;
	h->pages++;
	atomic_fetch_add(&hp_mapped_bytes, 4096);
	return 1;
}

/* 1 if e, a free dense counter of table a, is now key's. */
static int dense_claim(struct hp_thread *t, unsigned a, struct hp_site_ctr *e, uint64_t key)
{
	if (!dense_admit(t, a, e))
		return 0;
	e->key = key;
	dense_head(t)->claimed++;
	return 1;
}

/* Hands the dense counters of table a that counted anything to fn and zeroes them; each
 * keeps its key, so the site that claimed it keeps it. */
static void dense_drain(struct hp_thread *t, unsigned a, hp_site_fn fn, void *arg)
{
	const struct dense_head *h = dense_head(t);
	for (uint32_t i = 0; i < sizeof h->admitted[a] / sizeof h->admitted[a][0]; i++) {
		for (uint64_t m = h->admitted[a][i]; m; m &= m - 1) {
			uint32_t pg = i * 64 + (uint32_t)__builtin_ctzll(m);
			struct hp_site_ctr *e = dense_tab(t, a) + pg * DENSE_PER_PAGE;
			for (uint32_t j = 0; j < DENSE_PER_PAGE; j++, e++) {
				if (!e->key || !(e->allocs | e->frees | e->temp_frees))
					continue;
				fn(e, arg);
				*e = (struct hp_site_ctr){.key = e->key};
			}
		}
	}
}

static int membarrier_global(void)
{
	return (int)syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0);
}

/* Whether MEMBARRIER_CMD_GLOBAL works here. The kernel refuses it only where the query
 * leaves it out (a kernel without it, nohz_full CPUs); a seccomp filter, though, may refuse
 * it by its argument, and only a call tells. The call is not made without a filter: it
 * waits for an RCU grace period, 19 ms of the 22 that heapprof_start took, in the thread
 * the injector holds. */
static int membarrier_works(void)
{
	long q = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
	if (q <= 0 || !(q & MEMBARRIER_CMD_GLOBAL))
		return 0;
	return prctl(PR_GET_SECCOMP) == 0 || membarrier_global() == 0;
}

#define THREADS_BYTES (THREADS_CAP * sizeof(struct hp_thread))
/* Between a session's hp_threads_init and its hp_threads_fini, which the unload repeats. */
static int threads_counted;

/* The records are reserved once and kept until unload (hp_threads_unload), since a thread
 * keeps its record's address (hp_thread_mine) across sessions; a session counts them as
 * mapped and leaves them zeroed. A forked child sees them zeroed (MADV_WIPEONFORK), so
 * that its hooks, whose page of hp_parent_only is zeroed too, find no record of theirs
 * (payload.h). */
int hp_threads_init(int reserve_free)
{
	if (hp_threads == &threads_none) {
		struct hp_thread *t = hp_reserve(THREADS_BYTES);
		if (!t)
			return -1;
		if (madvise(t, THREADS_BYTES, MADV_WIPEONFORK) < 0) {
			hp_unreserve(t, THREADS_BYTES);
			return -1;
		}
		hp_threads = t;
	}
	threads_counted = 1;
	atomic_fetch_add(&hp_mapped_bytes, THREADS_BYTES);
	for (unsigned w = 0; w < THREADS_CAP / 64; w++)
		atomic_store_explicit(&claimed[w], 0, memory_order_relaxed);
	hp_threads_fenced = membarrier_works();
	dense_allowed = hp_threads_fenced && hp.args.mode == HP_MODE_FULL && reserve_free;
	return 0;
}

void hp_threads_fini(void)
{
	if (!threads_counted)
		return;
	threads_counted = 0;
	EACH_CLAIMED (i) {
		hp_site_tab_free(&hp_threads[i].tab[0]);
		hp_site_tab_free(&hp_threads[i].tab[1]);
		if (hp_threads[i].memo)
			hp_unwind_memos_free(hp_threads[i].memo, HP_WALK_MEMOS);
		if (hp_threads[i].scache)
			hp_stack_cache_free(hp_threads[i].scache);
		if (atomic_load_explicit(&hp_threads[i].dense, memory_order_relaxed))
			dense_free(&hp_threads[i]);
	}
	/* Zero pages again: no key, so no hook matches its thread's record until the
	 * thread claims it anew. */
	madvise(hp_threads, THREADS_BYTES, MADV_DONTNEED);
	atomic_fetch_sub(&hp_mapped_bytes, THREADS_BYTES);
}

void hp_threads_unload(void)
{
	if (hp_threads == &threads_none)
		return;
	hp_unreserve(hp_threads, THREADS_BYTES);
	hp_threads = &threads_none;
}

struct hp_thread *hp_thread_self_slow(uintptr_t self)
{
	unsigned i = hp_thread_home(self);
	for (unsigned n = 0; n < THREADS_CAP; n++, i = (i + 1) & (THREADS_CAP - 1)) {
		struct hp_thread *t = &hp_threads[i];
		uintptr_t k = atomic_load_explicit(&t->key, memory_order_acquire);
		if ((k & ~(uintptr_t)HP_THREAD_GUARDED) == self)
			return HP_THREAD_FOUND(t);
		if (k == 0) {
			uintptr_t expect = 0;
			if (atomic_compare_exchange_strong(&t->key, &expect, self)) {
				atomic_fetch_or(&claimed[i / 64], 1ull << (i % 64));
				return HP_THREAD_FOUND(t);
			}
			if ((expect & ~(uintptr_t)HP_THREAD_GUARDED) == self)
				return HP_THREAD_FOUND(t);
		}
	}
	return NULL;
}

static int tab_resize(struct hp_site_tab *t, uint32_t cap)
{
	if (!hp_mem_admit((size_t)cap * sizeof(struct hp_site_ctr)))
		return -1;
	struct hp_site_ctr *e = hp_map((size_t)cap * sizeof *e);
	if (!e)
		return -1;
	struct hp_site_tab n = {.e = e, .mask = cap - 1, .count = 0};
	for (uint32_t i = 0; t->e && i <= t->mask; i++)
		if (t->e[i].key)
			hp_site_tab_add(&n, &t->e[i]);
	hp_site_tab_free(t);
	*t = n;
	return 0;
}

/* The counter of key in a table that has one (t->e), or the empty one its probe ends at:
 * a table is never more than 3/4 full. */
__attribute__((always_inline)) static inline struct hp_site_ctr *
site_slot(const struct hp_site_tab *t, uint64_t key)
{
	uint32_t i = hp_site_home(key, t->mask);
	while (t->e[i].key && t->e[i].key != key)
		i = (i + 1) & t->mask;
	return &t->e[i];
}

/* A table of fewer than SITE_TAB_SPARSE slots grows at half full, a larger one at three
 * quarters. An event whose counter is not near its key's home slot is added out of line,
 * after a probe (hp_thread_add_other): at three quarters full, redis-server's site table
 * sent 0.61 adds a request there, at half full 0.08, about 75 instructions a request
 * fewer. The room costs a small table at most 64 KiB more; a large one is a program of
 * many sites, whose events miss the cache more than they probe. */
#define SITE_TAB_SPARSE 4096u

/* Inline into the owner's add, which would otherwise make two calls per event. */
__attribute__((always_inline)) static inline struct hp_site_ctr *
site_tab_add(struct hp_site_tab *t, const struct hp_site_ctr *c)
{
	if (!t->e && tab_resize(t, SITE_TAB_MIN) < 0)
		return NULL;
	uint32_t cap = t->mask + 1;
	if ((t->count + 1) * 4 > cap * (cap < SITE_TAB_SPARSE ? 2 : 3) &&
	    tab_resize(t, cap * 2) < 0)
		return NULL;
	struct hp_site_ctr *e = site_slot(t, c->key);
	if (e->key) {
		hp_site_ctr_add(e, c);
	} else {
		*e = *c;
		t->count++;
	}
	return e;
}

struct hp_site_ctr *hp_site_tab_add(struct hp_site_tab *t, const struct hp_site_ctr *c)
{
	return site_tab_add(t, c);
}

void hp_site_tab_clear(struct hp_site_tab *t)
{
	if (t->e && t->count)
		memset(t->e, 0, (t->mask + 1) * sizeof *t->e);
	t->count = 0;
}

void hp_site_tab_free(struct hp_site_tab *t)
{
	if (t->e)
		hp_unmap(t->e, (t->mask + 1) * sizeof *t->e);
	*t = (struct hp_site_tab){0};
}

/* 1 if counters by stack id would take their share of the events of a table that has just
 * reached HP_DENSE_AFTER sites: a stack's first size key gets its counter, and there are at
 * least a third as many stack ids as keys that could take one. A thread whose sites are
 * many sizes of a few stacks (shbench: a thousand sizes of one) would find each stack's
 * one counter taken by another size nearly every time, a check for nothing before the
 * hash table's probe (shbench full 2.29x to 2.45x by CPU time with it). The distinct ids
 * are counted in a bitmap of DENSE_PAYS_BITS, whose collisions undercount them by a few
 * percent at most. */
#define DENSE_PAYS_BITS 4096u
static int dense_pays(const struct hp_site_tab *tab)
{
	uint64_t seen[DENSE_PAYS_BITS / 64] = {0};
	uint32_t exact = 0, ids = 0;
	for (uint32_t i = 0; i <= tab->mask; i++) {
		uint64_t key = tab->e[i].key;
		if (!(key & HP_SITE_INLINE))
			continue;
		exact++;
		uint32_t b = (uint32_t)hp_hash64(hp_site_key_stack(key)) % DENSE_PAYS_BITS;
		ids += !(seen[b / 64] >> (b % 64) & 1);
		seen[b / 64] |= 1ull << (b % 64);
	}
	return ids * 3 >= exact;
}

/* A table reaches HP_DENSE_AFTER sites once a round (the drain empties it). The add that
 * takes it there may be a companion's (hp_thread_add_bytes), which is always inserted
 * right after its site: then this one is the next, at HP_DENSE_AFTER + 1. */
static void add_probe(struct hp_thread *t, unsigned a, const struct hp_site_ctr *c)
{
	struct hp_site_ctr *e = site_tab_add(&t->tab[a], c);
	t->last = e ? hp_site_last_of(a, e) : 0;
	if (!e)
		hp_own_add(&t->tot.lost, 1);
	else if (t->tab[a].count - HP_DENSE_AFTER < 2u && !t->dense_none &&
		 !atomic_load_explicit(&t->dense, memory_order_relaxed) && dense_pays(&t->tab[a]))
		dense_make(t);
}

void hp_thread_add_other(struct hp_thread *t, unsigned a, uint64_t key, int free, uint64_t n,
			 uint64_t temp)
{
	struct hp_site_ctr *e = hp_thread_dense(t, a, key);
	if (e && !e->key && dense_claim(t, a, e, key)) {
		hp_site_event_add(e, free, n, temp);
		return;
	}
	struct hp_site_ctr c = hp_site_event(key, free, n, temp);
	add_probe(t, a, &c);
}

/* A lost companion loses the site's bytes, not its count: counted lost all the same. */
void hp_thread_add_bytes(struct hp_thread *t, unsigned a, uint64_t key, int free, uint64_t n,
			 uint64_t size)
{
	struct hp_site_ctr c = hp_site_event(key | HP_SITE_BYTES, free, hp_event_bytes(n, size), 0);
	const struct hp_site_ctr *before = t->tab[a].e;
	if (!site_tab_add(&t->tab[a], &c))
		hp_own_add(&t->tot.lost, 1);
	/* Grown: the last counter was in the table unmapped. */
	if (t->tab[a].e != before)
		t->last = 0;
}

void hp_thread_add_locked(struct hp_thread *t, uint64_t key, int free, uint64_t n, uint64_t size,
			  uint64_t temp)
{
	struct hp_site_ctr c = hp_site_event(key, free, n, temp),
			   b = hp_site_event(key | HP_SITE_BYTES, free, hp_event_bytes(n, size), 0);
	hp_spin_lock(&t->lock);
	struct hp_site_tab *tab = &t->tab[atomic_load_explicit(&t->active, memory_order_relaxed)];
	int ok = hp_site_tab_add(tab, &c) && (!hp_site_has_bytes(key) || hp_site_tab_add(tab, &b));
	hp_spin_unlock(&t->lock);
	if (!ok)
		hp_own_add(&t->tot.lost, 1);
}

const struct hp_site_ctr *hp_site_tab_find(const struct hp_site_tab *t, uint64_t key)
{
	if (!t->e)
		return NULL;
	const struct hp_site_ctr *e = site_slot(t, key);
	return e->key ? e : NULL;
}

/* After the flips and a membarrier, an owner still on its old table has an odd sequence
 * number, visible now; any later add of its sees the flip. */
static void wait_add_done(struct hp_thread *t)
{
	uint32_t s = atomic_load_explicit(&t->seq, memory_order_acquire);
	unsigned n = 0;
	while ((s & 1) && atomic_load_explicit(&t->seq, memory_order_acquire) == s) {
		if (++n > 64)
			sched_yield();
		else
			__builtin_ia32_pause();
	}
}

static void flip(struct hp_thread *t)
{
	unsigned old = atomic_load_explicit(&t->active, memory_order_relaxed);
	atomic_store_explicit(&t->active, old ^ 1, memory_order_relaxed);
	t->retired = (uint8_t)(old + 1);
}

#define LOAD(x) atomic_load_explicit(&(x), memory_order_relaxed)

void hp_threads_drain(hp_site_fn fn, void *arg, struct hp_sum *sum)
{
	*sum = (struct hp_sum){0};
	int use_fence = hp_threads_fenced;
	EACH_CLAIMED (i) {
		struct hp_thread *t = &hp_threads[i];
		if (use_fence) {
			flip(t);
			continue;
		}
		hp_spin_lock(&t->lock);
		flip(t);
		hp_spin_unlock(&t->lock);
	}
	/* Cannot fail once membarrier_works said it works: what the kernel refuses is fixed
	 * at boot, and a filter that refuses it was there at init. */
	if (use_fence)
		membarrier_global();
	EACH_CLAIMED (i) {
		struct hp_thread *t = &hp_threads[i];
		if (t->retired) {
			if (use_fence)
				wait_add_done(t);
			/* The owner now writes only the other table: this one is ours until the
			 * next flip, which only we make. */
			unsigned r = t->retired - 1u;
			struct hp_site_tab *tab = &t->tab[r];
			t->retired = 0;
			for (uint32_t j = 0; tab->e && tab->count && j <= tab->mask; j++)
				if (tab->e[j].key)
					fn(&tab->e[j], arg);
			hp_site_tab_clear(tab);
			if (atomic_load_explicit(&t->dense, memory_order_relaxed))
				dense_drain(t, r, fn, arg);
		}
		sum->allocs += LOAD(t->tot.allocs);
		sum->alloc_bytes += LOAD(t->tot.alloc_bytes);
		sum->frees += LOAD(t->tot.frees);
		sum->freed_bytes += LOAD(t->tot.freed_bytes);
		sum->alloc_usable += LOAD(t->tot.alloc_usable);
		sum->untracked += LOAD(t->tot.untracked);
		sum->missed += LOAD(t->tot.missed);
		sum->lost += LOAD(t->tot.lost);
	}
}

/* Sampling math without libm (loading it could outlive the payload): natural log and
 * exp(-x) to ~1e-7, plenty for weights and intervals. */
static double ln_pos(double u)
{
	uint64_t b;
	memcpy(&b, &u, sizeof b);
	int e = (int)((b >> 52) & 0x7ff) - 1023;
	b = (b & 0x000fffffffffffffull) | 0x3ff0000000000000ull;
	double m;
	memcpy(&m, &b, sizeof m);
	if (m > 1.41421356237) {
		m /= 2;
		e++;
	}
	double z = (m - 1) / (m + 1), z2 = z * z;
	double s = z * (2 + z2 * (2.0 / 3 + z2 * (2.0 / 5 + z2 * (2.0 / 7 + z2 * (2.0 / 9)))));
	return e * 0.69314718055994531 + s;
}

/* 1 - exp(-x), the probability that an allocation of x mean intervals is sampled. */
static double sample_prob(double x)
{
	if (x < 1e-3)
		return x * (1 - x / 2 * (1 - x / 3 * (1 - x / 4)));
	if (x > 40)
		return 1;
	int k = (int)(x / 0.69314718055994531);
	double r = x - k * 0.69314718055994531, t = 1, e = 1;
	for (int i = 1; i <= 10; i++) {
		t *= -r / i;
		e += t;
	}
	while (k-- > 0)
		e *= 0.5;
	return 1 - e;
}

/* The weight of a sampled block of n bytes in HP_FX fixed point: how many allocations of
 * its kind it stands for. */
uint64_t hp_weight_fx(uint64_t n, uint64_t rate)
{
	double w = 1 / sample_prob((double)(n ? n : 1) / (double)rate);
	return (uint64_t)(w * HP_FX_ONE + 0.5);
}

/* Bytes to the next sampled allocation: exponential with mean rate (a Poisson process over
 * the allocated bytes, as tcmalloc and jemalloc sample). */
static int64_t next_interval(struct hp_thread *t, uint64_t rate)
{
	uint64_t x = t->rng;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	t->rng = x;
	double u = (double)(((x * 0x2545f4914f6cdd1dull) >> 11) + 1) * 0x1p-53;
	double d = -ln_pos(u) * (double)rate;
	return d < 1 ? 1 : d > 0x1p62 ? (int64_t)1 << 62 : (int64_t)d;
}

int hp_sample_hit_slow(struct hp_thread *t, uint64_t n, uint64_t rate)
{
	if (!t->rng) {
		t->rng = hp_hash64((uintptr_t)t ^ ((uint64_t)hp_now_ms() << 32)) | 1;
		t->countdown = next_interval(t, rate) - (int64_t)(n ? n : 1);
		if (t->countdown > 0)
			return 0;
	}
	t->countdown = next_interval(t, rate);
	return 1;
}
