#include "stacks.h"

#include <string.h>

#include "hpformat.h"
#include "payload.h"
#include "unwind.h"

#define CLAIMING UINT32_MAX

enum { ENT_PENDING = 0, ENT_READY = 1 };

struct ent {
	uint64_t hash;
	uint32_t off; /* into the frame arena (its cap is below 2^32 frames) */
	uint32_t depth;
	atomic_uint state;
	uint32_t sent;
	/* The stack some thread interned right after this one, through hp_stack_intern_after,
	 * with how it was told from it (next_guess): a guess, checked before it is used, and
	 * rewritten by whoever finds it wrong. */
	_Atomic uint64_t next;
};
_Static_assert(sizeof(struct ent) == 32, "hp_stacks_init's bound counts 32 bytes an id");

/* By id, for hp_stack_guess: the stack some thread took right after this one, where this
 * one's checks (unwind.h, hp_unwind_rel_make) begin in the check arena, and which of the
 * delta arena's entries is the delta of a stack taken right after it (below). Both of the
 * latter CHK_NONE before any thread made them, CHK_CLAIMED while one makes them and for
 * good when they cannot be made, else at least CHK_FIRST. The delta hangs off the stack
 * before it, not its own: a guess then finds it in the entry it read the successor from,
 * where the successor's own entry was a line more to wait for on every node of a
 * recursion. */
struct guess {
	_Atomic uint32_t succ;
	_Atomic uint32_t chk;
	_Atomic uint32_t delta;
};
#define CHK_NONE 0u
#define CHK_CLAIMED 1u
#define CHK_FIRST 2u

/* The checks of stack id as the words it adds to those of pred, the stack checked before
 * it (unwind.h, hp_unwind_words_hold), for a thread that holds pred's words; pred's guess
 * entry says where it is. A recursion's next node shares all but a word or two of the
 * last one's: checked so, the node's guess reads this (half a line) where its checks and
 * frames took four lines, and a tree of binary-trees' 65535 paths swept 16 MB of them
 * through the caches. Made once a pred, by the first thread to check a stack right after
 * it, while a quarter of max_memory is free and the arena has room. */
struct delta {
	uint32_t id;
	uint32_t gen;	     /* the modules' count they were made under */
	uint8_t keep, depth; /* pred's outermost words kept; the stack's words in all */
	uint16_t join;	     /* where the kept words begin: frame + 8 * join */
	/* The added words, outermost first, the last one repeated past depth - keep (the join's
	 * when none is added). */
	uint16_t off[HP_UNWIND_ADDED];
	uint64_t ra[HP_UNWIND_ADDED];
};
_Static_assert(sizeof(struct delta) == 32, "a delta in half a line");
_Static_assert(HP_MAX_DEPTH <= UINT8_MAX, "a delta's counts fit a byte");

static struct {
	_Atomic uint32_t *slots; /* hash index -> id; 0 empty, CLAIMING while written */
	struct ent *ents;	 /* by id */
	uint64_t *arena;
	uint32_t nslots, max_ids;
	uint64_t arena_cap;	  /* frames */
	_Atomic uint64_t next_id; /* 64 bits: take() serves it and the arena */
	_Atomic uint64_t arena_used;
	uint32_t sent_upto;  /* collector: every id below it was sent or is dead */
	struct guess *guess; /* by id */
	struct delta *delta; /* the delta arena */
	uint64_t delta_cap;
	_Atomic uint64_t delta_used;
	uint16_t *chk;	  /* the check arena */
	uint64_t chk_cap; /* words */
	_Atomic uint64_t chk_used;
} st;

int hp_stacks_init(uint64_t max_memory)
{
	st.max_ids = HP_STACKS_MAX_IDS;
	st.arena_cap = 8u << 20;
	if (max_memory && max_memory / 4 / sizeof(uint64_t) < st.arena_cap) {
		st.arena_cap = max_memory / 4 / sizeof(uint64_t);
		while (st.max_ids > 1024 &&
		       (uint64_t)st.max_ids * sizeof(struct ent) * 8 > max_memory)
			st.max_ids /= 2;
	}
	st.nslots = st.max_ids * 2;
	st.slots = hp_reserve(st.nslots * sizeof *st.slots);
	st.ents = hp_reserve(((size_t)st.max_ids + 1) * sizeof *st.ents);
	st.arena = hp_reserve(st.arena_cap * sizeof *st.arena);
	/* A check word a frame and the head: a fourth of the frames' room. The words below
	 * CHK_FIRST are never handed out. */
	st.chk_cap = st.arena_cap + (uint64_t)st.max_ids * HP_UNWIND_REL_HEAD;
	st.guess = hp_reserve(((size_t)st.max_ids + 1) * sizeof *st.guess);
	/* A sixty-fourth of max_memory at most, so that deltas never take the room the site
	 * tables and the live map would have had (binary-trees' 65535 deltas: 2 MB of 256). */
	st.delta_cap = (uint64_t)st.max_ids + CHK_FIRST;
	if (max_memory && max_memory / 64 / sizeof(struct delta) < st.delta_cap)
		st.delta_cap = max_memory / 64 / sizeof(struct delta);
	st.delta = hp_reserve(st.delta_cap * sizeof *st.delta);
	st.chk = hp_reserve(st.chk_cap * sizeof *st.chk);
	atomic_store(&st.next_id, 1);
	atomic_store(&st.arena_used, 0);
	atomic_store(&st.chk_used, CHK_FIRST);
	atomic_store(&st.delta_used, CHK_FIRST);
	st.sent_upto = 1;
	if (!st.slots || !st.ents || !st.arena || !st.guess || !st.delta || !st.chk ||
	    hp_unwind_init() < 0)
		return -1;
	return 0;
}

void hp_stacks_fini(void)
{
	hp_unwind_fini();
	if (st.slots)
		hp_unreserve((void *)st.slots, st.nslots * sizeof *st.slots);
	if (st.ents)
		hp_unreserve(st.ents, ((size_t)st.max_ids + 1) * sizeof *st.ents);
	if (st.arena)
		hp_unreserve(st.arena, st.arena_cap * sizeof *st.arena);
	if (st.guess)
		hp_unreserve(st.guess, ((size_t)st.max_ids + 1) * sizeof *st.guess);
	if (st.delta)
		hp_unreserve(st.delta, st.delta_cap * sizeof *st.delta);
	if (st.chk)
		hp_unreserve(st.chk, st.chk_cap * sizeof *st.chk);
	memset(&st, 0, sizeof st);
}

uint64_t hp_stacks_bytes(void)
{
	uint64_t ids = atomic_load_explicit(&st.next_id, memory_order_relaxed);
	uint64_t used = atomic_load_explicit(&st.arena_used, memory_order_relaxed);
	uint64_t chk = atomic_load_explicit(&st.chk_used, memory_order_relaxed);
	uint64_t deltas = atomic_load_explicit(&st.delta_used, memory_order_relaxed);
	return ids * (sizeof(struct ent) + sizeof(struct guess)) + ids * 2 * sizeof(uint32_t) +
	       deltas * sizeof(struct delta) + used * sizeof(uint64_t) + chk * sizeof(uint16_t);
}

uint32_t hp_stacks_end(void)
{
	return (uint32_t)atomic_load_explicit(&st.next_id, memory_order_acquire);
}

/* Runs on every allocation: two independent multiply lanes, so consecutive frames do
 * not wait on each other's multiply, and one full mix at the end. */
static uint64_t frames_hash(const uint64_t *f, unsigned depth)
{
	uint64_t a = depth, b = 0x2545f4914f6cdd1dull;
	unsigned i = 0;
	for (; i + 1 < depth; i += 2) {
		a = (a ^ f[i]) * 0x9e3779b97f4a7c15ull;
		b = (b ^ f[i + 1]) * 0xc2b2ae3d27d4eb4full;
		a ^= a >> 29;
		b ^= b >> 31;
	}
	if (i < depth)
		a = (a ^ f[i]) * 0x9e3779b97f4a7c15ull;
	return hp_hash64(a ^ b) | 1;
}

/* 1 if e's first k frames are f's. Stacks are a few frames: an inline loop beats a call to
 * memcmp. */
static int same_start(const struct ent *e, const uint64_t *f, unsigned k)
{
	const uint64_t *g = st.arena + e->off;
	for (unsigned i = 0; i < k; i++)
		if (g[i] != f[i])
			return 0;
	return 1;
}

static int same_frames(const struct ent *e, const uint64_t *f, unsigned depth)
{
	return e->depth == depth && same_start(e, f, depth);
}

static int same(const struct ent *e, uint64_t h, const uint64_t *f, unsigned depth)
{
	return e->hash == h && same_frames(e, f, depth);
}

/* The table keeps a sixteenth of its ids and frames for stacks cut short: once a stack no
 * longer fits, its allocations are counted at its innermost CUT_FRAMES frames and an
 * HP_FRAME_CUT (hpformat.h) rather than lost. A program's distinct beginnings are few
 * (binary-trees' 65535 stacks begin in 256 ways), so the reserve outlasts the table. */
#define CUT_FRAMES 8

struct bound {
	uint32_t ids;
	uint64_t frames;
};

/* Takes n from *used unless that passes lim; *at is where the n begin. A CAS, not an add
 * and an undo: an undone add lets a later taker reuse frames or an id already handed out
 * past the undone one. Taken only for a new stack. */
static int take(_Atomic uint64_t *used, uint64_t n, uint64_t lim, uint64_t *at)
{
	uint64_t u = atomic_load_explicit(used, memory_order_relaxed);
	do {
		if (u + n > lim)
			return 0;
	} while (!atomic_compare_exchange_weak_explicit(used, &u, u + n, memory_order_relaxed,
							memory_order_relaxed));
	*at = u;
	return 1;
}

/* Fills a freshly claimed slot; returns the id or 0 if b was reached. Frames taken for an
 * id then refused stay unused: a race at the very end of the table. */
static uint32_t publish(_Atomic uint32_t *slot, uint64_t h, const uint64_t *f, unsigned depth,
			struct bound b)
{
	uint64_t off, id;
	if (!take(&st.arena_used, depth, b.frames, &off) ||
	    !take(&st.next_id, 1, (uint64_t)b.ids + 1, &id)) {
		atomic_store_explicit(slot, 0, memory_order_release);
		return 0;
	}
	struct ent *e = &st.ents[id];
	memcpy(&st.arena[off], f, depth * sizeof *f);
	e->hash = h;
	e->off = (uint32_t)off;
	e->depth = depth;
	atomic_store_explicit(&e->state, ENT_READY, memory_order_release);
	atomic_store_explicit(slot, (uint32_t)id, memory_order_release);
	return (uint32_t)id;
}

static uint32_t intern_in(const uint64_t *f, unsigned depth, struct bound b)
{
	uint64_t h = frames_hash(f, depth);
	uint32_t mask = st.nslots - 1;
	uint32_t i = (uint32_t)h & mask;
	for (uint32_t probes = 0; probes < st.nslots;) {
		_Atomic uint32_t *slot = &st.slots[i];
		uint32_t id;
		unsigned spins = 0;
		/* A slot being claimed may turn out to hold this very stack: wait for it. */
		while ((id = atomic_load_explicit(slot, memory_order_acquire)) == CLAIMING)
			if (++spins > 64)
				sched_yield();
		if (id == 0) {
			if (atomic_load_explicit(&st.next_id, memory_order_relaxed) > b.ids)
				return 0;
			uint32_t expect = 0;
			if (atomic_compare_exchange_strong(slot, &expect, CLAIMING))
				return publish(slot, h, f, depth, b);
			continue; /* someone else claimed it: look again */
		}
		if (same(&st.ents[id], h, f, depth))
			return id;
		probes++;
		i = (i + 1) & mask;
	}
	return 0;
}

uint32_t hp_stack_intern(const uint64_t *f, unsigned depth)
{
	struct bound all = {st.max_ids, st.arena_cap};
	uint32_t id = intern_in(
	    f, depth, (struct bound){all.ids - all.ids / 16, all.frames - all.frames / 16});
	if (id)
		return id;
	if (depth <= CUT_FRAMES)
		return intern_in(f, depth, all);
	uint64_t cut[CUT_FRAMES + 1];
	memcpy(cut, f, CUT_FRAMES * sizeof *f);
	cut[CUT_FRAMES] = HP_FRAME_CUT;
	return intern_in(cut, CUT_FRAMES + 1, all);
}

/* A splice seldom brings more new frames than this; one that does is interned whole. */
#define SC_FRAMES 6
#define SC_BITS 5

struct sc_ent {
	uint32_t last, id; /* id 0: empty */
	uint16_t tail, k;
	uint64_t f[SC_FRAMES];
};

struct hp_stack_cache {
	struct sc_ent e[1u << SC_BITS];
	uint32_t guessed; /* the id hp_stack_guess last found */
	/* The words of the stack a guess last found, outermost first, when its checks read
	 * no rbp (unwind.h, hp_unwind_rel_plain): buf_id 0 when none, buf_gen the modules'
	 * count they were taken under. */
	uint32_t buf_id, buf_gen;
	unsigned buf_n;
	/* Room for a delta's every added word past the stack's deepest. */
	struct hp_unwind_words buf;
};

size_t hp_stack_cache_size(void)
{
	return hp_page_round(sizeof(struct hp_stack_cache));
}

struct hp_stack_cache *hp_stack_cache_new(void)
{
	return hp_map(sizeof(struct hp_stack_cache));
}

void hp_stack_cache_free(struct hp_stack_cache *c)
{
	hp_unmap(c, sizeof *c);
}

static int is_cut(const struct ent *e)
{
	return e->depth == CUT_FRAMES + 1 && st.arena[e->off + CUT_FRAMES] == HP_FRAME_CUT;
}

/* An ent's next: the id, with the tail and the count of new frames of the splice it was
 * interned from (both below 2^16: HP_MAX_DEPTH). A stack made after the same last with the
 * same tail and k is k frames and then that same part of last's, so only the k compare. */
static uint64_t next_guess(uint32_t id, unsigned tail, unsigned k)
{
	return id | (uint64_t)tail << 32 | (uint64_t)k << 48;
}

void hp_stack_prefetch_after(uint32_t last)
{
	uint32_t id = (uint32_t)atomic_load_explicit(&st.ents[last].next, memory_order_acquire);
	if (id)
		__builtin_prefetch(st.arena + st.ents[id].off);
}

/* Ids are never reused, so (last, tail, new frames) always names the same frames: the
 * last `tail` frames of stack last, after the new ones. */
uint32_t hp_stack_intern_after(struct hp_stack_cache *c, uint32_t last, uint64_t *f, unsigned depth,
			       unsigned k, const struct hp_unwind_memo *m)
{
	if (!c || !last || k > SC_FRAMES || k > depth) {
		hp_unwind_memo_tail(m, f, depth);
		return hp_stack_intern(f, depth);
	}
	/* A program that walks many paths in the same order again (binary-trees' trees) has
	 * more of them than the cache holds: the stack that followed last the time before is
	 * checked first, which costs neither the hash nor the table's probes; and only its new
	 * frames are compared, as the cache's are, when it was made from last the same way.
	 * What the guess finds is not put in the cache: a path the guess keeps finding needs
	 * no entry, and the copy cost binary-trees' every node 30 instructions. */
	unsigned tail = depth - k;
	struct ent *prev = &st.ents[last];
	uint64_t g = atomic_load_explicit(&prev->next, memory_order_acquire);
	uint32_t id = (uint32_t)g;
	if (id && g == next_guess(id, tail, k) && same_start(&st.ents[id], f, k))
		return id;
	uint64_t h = (uint64_t)last << 32 ^ tail << 8 ^ k;
	for (unsigned i = 0; i < k; i++)
		h = (h ^ f[i]) * 0x9e3779b97f4a7c15ull;
	struct sc_ent *e = &c->e[hp_hash64(h) >> (64 - SC_BITS)];
	int hit = e->id && e->last == last && e->tail == tail && e->k == k;
	for (unsigned i = 0; hit && i < k; i++)
		hit = e->f[i] == f[i];
	if (hit)
		return e->id;
	hp_unwind_memo_tail(m, f, depth);
	id = hp_stack_intern(f, depth);
	/* A cut stack stands for many, so (last, tail, new frames) names no one stack when
	 * last is cut: nothing is learnt after one, and no lookup after one can hit. */
	if (id && !is_cut(prev)) {
		atomic_store_explicit(&prev->next, next_guess(id, tail, k), memory_order_release);
		e->last = last;
		e->id = id;
		e->tail = (uint16_t)tail;
		e->k = (uint16_t)k;
		memcpy(e->f, f, k * sizeof *f);
	}
	return id;
}

/* The stack of last's delta if it holds from frame, last's words being the cache's: the
 * cache then holds that stack's; else 0. The words of any capture of last are last's
 * return addresses, wherever the stack was, so the first keep of them are the stack's
 * outermost. The cache's words are the thread's own, found below its stack's top
 * (hp_unwind_words_hold's terms) by the check that took them: a cache belongs to one
 * thread record. */
__attribute__((always_inline)) static inline uint32_t guess_by_delta(struct hp_stack_cache *c,
								     uint32_t last, uintptr_t frame)
{
	uint32_t at = atomic_load_explicit(&st.guess[last].delta, memory_order_acquire);
	if (at < CHK_FIRST)
		return 0;
	const struct delta *d = &st.delta[at];
	if (d->gen != c->buf_gen || d->gen != hp_unwind_rel_gen_now() || d->keep > c->buf_n ||
	    !hp_unwind_words_hold(&c->buf, d->keep, d->join, d->off, d->ra, frame))
		return 0;
	/* Read d again rather than keep what the check read in registers across its loop,
	 * which would make this leaf save five. */
	__asm__("" ::: "memory");
	/* All of them, the repeated ones past buf_n: no loop. */
	_Static_assert(HP_UNWIND_ADDED == 2, "the added words, copied below");
	unsigned k = d->keep;
	c->buf.at[k] = frame + 8 * (uintptr_t)d->off[0];
	c->buf.ra[k] = d->ra[0];
	c->buf.at[k + 1] = frame + 8 * (uintptr_t)d->off[1];
	c->buf.ra[k + 1] = d->ra[1];
	c->buf_n = d->depth;
	return c->buf_id = d->id;
}

/* 1 if delta slot value v names no delta a guess can use now: none made yet, or one made
 * before a dlclose (guess_by_delta refuses it). Not CHK_CLAIMED, which is being made or
 * cannot be. */
static int delta_stale(uint32_t v)
{
	return v == CHK_NONE || (v >= CHK_FIRST && st.delta[v].gen != hp_unwind_rel_gen_now());
}

/* last's delta, to id, whose words the cache held before its first keep words were found
 * the same as id's and the others replaced by id's: made by the first thread to find id
 * so right after last, when id adds at most HP_UNWIND_ADDED words. One made before a
 * dlclose is replaced, in a new entry: a guess may be reading the old one, which is left
 * as it was. Without that, a program whose modules changed once (iconv unloading a gconv
 * module) checked every node of a recursion by its checks and frames from then on. */
static void make_delta(const struct hp_stack_cache *c, uint32_t last, uint32_t id, unsigned keep,
		       const uint16_t *chk, const uint64_t *f, unsigned depth, uintptr_t frame)
{
	unsigned nnew = depth - keep;
	_Atomic uint32_t *slot = &st.guess[last].delta;
	uint32_t was = atomic_load_explicit(slot, memory_order_acquire);
	uint64_t at;
	if (!keep || nnew > HP_UNWIND_ADDED || !delta_stale(was) ||
	    !hp_mem_spare(sizeof(struct delta)) ||
	    !atomic_compare_exchange_strong(slot, &was, CHK_CLAIMED) ||
	    !take(&st.delta_used, 1, st.delta_cap, &at))
		return;
	struct delta *d = &st.delta[at];
	d->id = id;
	d->gen = c->buf_gen;
	d->keep = (uint8_t)keep;
	d->depth = (uint8_t)depth;
	d->join = (uint16_t)((c->buf.at[keep - 1] - frame) / 8);
	for (unsigned i = 0; i < HP_UNWIND_ADDED; i++) {
		struct hp_unwind_word w = i < nnew ? hp_unwind_rel_word(chk, f, nnew - 1 - i, frame)
					  : nnew   ? hp_unwind_rel_word(chk, f, 0, frame)
						   : hp_unwind_words_get(&c->buf, keep - 1);
		d->off[i] = (uint16_t)((w.at - frame) / 8);
		d->ra[i] = w.ra;
	}
	atomic_store_explicit(slot, (uint32_t)at, memory_order_release);
}

/* After id's checks held from frame, the capture before having got last: the cache takes
 * id's words, and id's delta is made from last's if it has none. */
static void take_words(struct hp_stack_cache *c, uint32_t last, uint32_t id, const uint16_t *chk,
		       const uint64_t *f, unsigned depth, uintptr_t frame)
{
	uint32_t gen = hp_unwind_rel_gen(chk);
	if (!hp_unwind_rel_plain(chk) || depth > HP_MAX_DEPTH) {
		c->buf_id = 0;
		return;
	}
	int from_last = c->buf_id == last && c->buf_gen == gen;
	unsigned keep = 0;
	if (from_last)
		while (keep < depth && keep < c->buf_n) {
			struct hp_unwind_word w =
			    hp_unwind_rel_word(chk, f, depth - 1 - keep, frame);
			if (w.at != c->buf.at[keep] || w.ra != c->buf.ra[keep])
				break;
			keep++;
		}
	for (unsigned i = keep; i < depth; i++)
		hp_unwind_words_put(&c->buf, i, hp_unwind_rel_word(chk, f, depth - 1 - i, frame));
	c->buf_n = depth;
	c->buf_id = id;
	c->buf_gen = gen;
	if (from_last)
		make_delta(c, last, id, keep, chk, f, depth, frame);
}

/* hp_stack_guess of id, last's successor, by its checks: out of line, so that the guess
 * by a delta, a recursion's every node, is a leaf that saves only the registers its words'
 * loop needs. */
__attribute__((noinline)) static uint32_t guess_by_checks(struct hp_stack_cache *c, uint32_t last,
							  uint32_t id, uintptr_t frame)
{
	uint32_t o = atomic_load_explicit(&st.guess[id].chk, memory_order_acquire);
	if (o < CHK_FIRST)
		return 0;
	const struct ent *e = &st.ents[id];
	if (!hp_unwind_rel_holds(st.chk + o, st.arena + e->off, e->depth, frame))
		return 0;
	take_words(c, last, id, st.chk + o, st.arena + e->off, e->depth, frame);
	c->guessed = id;
	return id;
}

__attribute__((always_inline)) static inline uint32_t guess(struct hp_stack_cache *c, uint32_t last,
							    uintptr_t frame)
{
	if (c->buf_id == last) {
		uint32_t id = guess_by_delta(c, last, frame);
		if (id) {
			c->guessed = id;
			return id;
		}
		/* last is the cache's buf_id still: read again, not kept across the check's
		 * loop, where it would take the register of the leaf's last saved one. */
		__asm__("" ::: "memory");
		last = c->buf_id;
	}
	/* Relaxed: the guess reads what it needs of id through the index of its checks, loaded
	 * with acquire from the store that published it, after the stack entry it was made
	 * from; a delta's index is loaded so too. */
	uint32_t id = atomic_load_explicit(&st.guess[last].succ, memory_order_relaxed);
	if (!id)
		return 0;
	return guess_by_checks(c, last, id, frame);
}

uint32_t hp_stack_guess(struct hp_stack_cache *c, uint32_t last, uintptr_t frame)
{
	return guess(c, last, frame);
}

uint32_t hp_stack_guessed(const struct hp_stack_cache *c)
{
	return c->guessed;
}

uint32_t hp_stack_guess_again(struct hp_stack_cache *c, uintptr_t frame)
{
	return guess(c, c->guessed, frame);
}

/* The checks of id, made from m, into the check arena, by the first thread to find it
 * without; checks of another modules' count are made again, since ids outlive a dlclose. */
static void make_checks(uint32_t id, const struct hp_unwind_memo *m, uintptr_t frame)
{
	_Atomic uint32_t *at = &st.guess[id].chk;
	uint32_t o = atomic_load_explicit(at, memory_order_acquire);
	if (o == CHK_CLAIMED || (o != CHK_NONE && hp_unwind_rel_current(st.chk + o)))
		return;
	const struct ent *e = &st.ents[id];
	if (e->depth != m->n || !atomic_compare_exchange_strong(at, &o, CHK_CLAIMED))
		return;
	const uint64_t *f = st.arena + e->off;
	for (unsigned i = 0; i < m->n; i++)
		if (f[i] != m->st[i].ra)
			return;
	uint16_t w[HP_UNWIND_REL_HEAD + 3 * HP_MAX_DEPTH];
	unsigned n = hp_unwind_rel_make(m, frame, w, sizeof w / sizeof *w);
	uint64_t off;
	if (!n || !take(&st.chk_used, n, st.chk_cap, &off))
		return;
	memcpy(&st.chk[off], w, n * sizeof *w);
	atomic_store_explicit(at, (uint32_t)off, memory_order_release);
}

void hp_stack_learn(uint32_t last, uint32_t id, const struct hp_unwind_memo *m, uintptr_t frame)
{
	if (!id || is_cut(&st.ents[id]))
		return;
	if (last && atomic_load_explicit(&st.guess[last].succ, memory_order_relaxed) != id)
		atomic_store_explicit(&st.guess[last].succ, id, memory_order_release);
	make_checks(id, m, frame);
}

void hp_stacks_each_new(hp_stack_fn fn, void *arg)
{
	hp_unwind_check_modules();
	uint32_t end = hp_stacks_end();
	int contiguous = 1;
	for (uint32_t id = st.sent_upto; id < end; id++) {
		struct ent *e = &st.ents[id];
		if (e->sent) {
			if (contiguous)
				st.sent_upto = id + 1;
			continue;
		}
		if (atomic_load_explicit(&e->state, memory_order_acquire) != ENT_READY) {
			contiguous = 0;
			continue;
		}
		fn(id, &st.arena[e->off], e->depth, arg);
		e->sent = 1;
		if (contiguous)
			st.sent_upto = id + 1;
	}
}
