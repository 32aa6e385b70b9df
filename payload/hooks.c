#include "hooks.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>

#include "collector.h"
#include "dlcaller.h"
#include "got.h"
#include "hpformat.h"
#include "livemap.h"
#include "payload.h"
#include "stacks.h"
#include "threads.h"
#include "unwind.h"

enum {
	HK_MALLOC,
	HK_CALLOC,
	HK_REALLOC,
	HK_REALLOCARRAY,
	HK_FREE,
	HK_POSIX_MEMALIGN,
	HK_ALIGNED_ALLOC,
	HK_MEMALIGN,
	HK_VALLOC,
	HK_PVALLOC,
	HK_NEW,
	HK_NEW_ARR,
	HK_NEW_NT,
	HK_NEW_ARR_NT,
	HK_NEW_AL,
	HK_NEW_ARR_AL,
	HK_NEW_AL_NT,
	HK_NEW_ARR_AL_NT,
	HK_DEL,
	HK_DEL_ARR,
	HK_DEL_SZ,
	HK_DEL_ARR_SZ,
	HK_DEL_AL,
	HK_DEL_ARR_AL,
	HK_DEL_SZ_AL,
	HK_DEL_ARR_SZ_AL,
	HK_DEL_NT,
	HK_DEL_ARR_NT,
	HK_DEL_AL_NT,
	HK_DEL_ARR_AL_NT,
	HK_DLOPEN,
	HK_FORK,
	HK_COUNT
};

struct hook {
	const char *name;
	void *hook;
	void *_Atomic real;
};

static struct hook hooks[HK_COUNT];

/* Set when a lost event has no thread record to be counted in. */
_Atomic uint64_t hp_lost_unrecorded;

#define REAL(id, type) ((type)atomic_load_explicit(&hooks[id].real, memory_order_relaxed))

/* What a hook compares its record's key with: its thread pointer while recording, else
 * one no key matches (payload.h, self_flip and alloc_flip). */
__attribute__((always_inline)) static inline uintptr_t self_flipped(_Atomic uintptr_t *flip)
{
	return hp_self() ^ atomic_load_explicit(flip, memory_order_relaxed);
}

__attribute__((always_inline)) static inline uintptr_t hook_self(void)
{
	return self_flipped(&hp.self_flip);
}

/* The record the thread found last, or an empty one (threads.h, HP_THREAD_GUESS). Never
 * NULL: without saying so the callers' tests of the record were made twice. */
__attribute__((always_inline)) static inline struct hp_thread *guess_record(void)
{
	struct hp_thread *t = HP_THREAD_GUESS(hp_self());
	if (!t)
		__builtin_unreachable();
	return t;
}

/* The thread's record when it is recording, the record is known to the thread and its
 * guard is clear; else NULL, and enter() knows more. Calls nothing, so a hook whose every
 * call is a tail call saves no register for it. */
__attribute__((always_inline)) static inline struct hp_thread *record_if(_Atomic uintptr_t *flip)
{
	struct hp_thread *t = guess_record();
	return atomic_load_explicit(&t->key, memory_order_acquire) == self_flipped(flip) ? t : NULL;
}

__attribute__((always_inline)) static inline struct hp_thread *home_record(void)
{
	return record_if(&hp.self_flip);
}

/* record_if's record, its guard set. */
__attribute__((always_inline)) static inline struct hp_thread *enter_if(_Atomic uintptr_t *flip)
{
	struct hp_thread *t = record_if(flip);
	if (t)
		hp_thread_guard(t);
	return t;
}

__attribute__((always_inline)) static inline struct hp_thread *enter_home(void)
{
	return enter_if(&hp.self_flip);
}

/* enter() for every case enter_home leaves out. */
__attribute__((noinline)) static struct hp_thread *enter_other(void)
{
	if (!atomic_load_explicit(&hp.po->recording, memory_order_relaxed)) {
		if (__builtin_expect(!hp.po->parent, 0))
			hp_collector_forget_late();
		return NULL;
	}
	struct hp_thread *t = hp_thread_self();
	if (!t) {
		atomic_fetch_add_explicit(&hp_lost_unrecorded, 1, memory_order_relaxed);
		return NULL;
	}
	if (hp_thread_guarded(t))
		return NULL;
	hp_thread_guard(t);
	return t;
}

/* The thread's record with its guard set, or NULL when the hook is not to record. */
__attribute__((always_inline)) static inline struct hp_thread *enter(void)
{
	struct hp_thread *t = enter_home();
	return __builtin_expect(t != NULL, 1) ? t : enter_other();
}

static void leave(struct hp_thread **t)
{
	if (*t)
		hp_thread_unguard(*t);
}

/* The cleanup also runs when operator new throws, so the guard is never left set. It also
 * keeps every hook from tail-calling, so HOOK_FRAME stays valid until the hook returns. */
#define GUARDED struct hp_thread *t __attribute__((cleanup(leave))) = enter()

/* Where a stack capture starts: the hook's own frame (the payload is built with frame
 * pointers), so its return address is the first frame and nothing below it is walked. */
#define HOOK_FRAME ((uintptr_t)__builtin_frame_address(0))

static void lost(struct hp_thread *t)
{
	hp_own_add(&t->tot.lost, 1);
}

/* The allocator's own malloc_usable_size (whoever defines malloc defines it too); never
 * hooked, so no GOT slot is touched for it. */
static size_t (*_Atomic real_usable)(void *);

static uint64_t usable(void *p)
{
	size_t (*f)(void *) = atomic_load_explicit(&real_usable, memory_order_relaxed);
	return f ? f(p) : 0;
}

static uint64_t rate_now(void)
{
	return atomic_load_explicit(&hp.rate, memory_order_relaxed);
}

/* A tracked block is gone: its site gets the free, weighted as its allocation was (the
 * round's totals under sampling are made from the sites, collector.c). temp: it was the
 * thread's last allocation (hp_thread's last_alloc). */
__attribute__((always_inline)) static inline void
free_found_inline(struct hp_thread *t, const struct hp_live_val *v, int temp)
{
	uint64_t n = v->size & ~HP_LIVE_SAMPLED, w = HP_FX_ONE;
	if (v->size & HP_LIVE_SAMPLED)
		w = hp_weight_fx(n, rate_now());
	hp_own_add(&t->tot.frees, 1);
	hp_own_add(&t->tot.freed_bytes, n);
	hp_thread_add_free(t, hp_site_key(v->stack, hp_size_code(n)), w, n, temp ? w : 0);
}

/* The same out of line, for the paths where a block is found gone other than by free. */
static void free_found(struct hp_thread *t, const struct hp_live_val *v, int temp)
{
	free_found_inline(t, v, temp);
}

/* A block not in the live map: under sampling most likely one that was not sampled, whose
 * bytes the round estimates (asking the allocator would cost every free a call); else one
 * allocated before attach. With the filter (sampling from the start) such a free
 * is not counted at all, as in the free hooks' fast path (FREE_SKIPPED). */
__attribute__((always_inline)) static inline void free_missed(struct hp_thread *t)
{
	if (hp_live_filter)
		return;
	if (rate_now()) {
		hp_own_add(&t->tot.frees, 1);
		hp_own_add(&t->tot.missed, 1);
	} else {
		hp_own_add(&t->tot.untracked, 1);
	}
}

/* Without a live map (basic, extended) a free is counted by its usable size. */
__attribute__((always_inline)) static inline void free_unmapped(struct hp_thread *t,
								uint64_t usable_bytes)
{
	hp_own_add(&t->tot.frees, 1);
	hp_own_add(&t->tot.freed_bytes, usable_bytes);
}

/* hp_unwind_memo_size(max_depth), set by hp_hooks_arm before any hook records. */
static size_t memo_bytes;

/* The thread's walk memos and stack cache are made on its first capture: a few KB that the
 * payload could do without, so not when they would take it past max_memory. Only the
 * first memo is ready (the thread's last walk until it has one: memo_last 0); memo_pick
 * readies each other one as a path first takes it. At 87 KB a thread with all 28 ready,
 * mt-target's 1000 threads of one path each took 110 MiB, and 3000 reached the default
 * max_memory. */
static int thread_memos(struct hp_thread *t)
{
	if (!t->memo && !t->memo_none) {
		if (hp_mem_fits(HP_UNWIND_MEMOS_HEAD + memo_bytes + hp_stack_cache_size())) {
			t->memo = hp_unwind_memos_reserve(hp.args.max_depth, HP_WALK_MEMOS);
			if (t->memo)
				t->scache = hp_stack_cache_new();
		}
		t->memo_none = !t->memo;
	}
	return t->memo != NULL;
}

/* The i-th memo: they lie back to back. */
static struct hp_unwind_memo *memo_at(struct hp_thread *t, unsigned i)
{
	return (struct hp_unwind_memo *)((char *)t->memo + memo_bytes * i);
}

/* Which walk each memo began with, in the lines before the first memo
 * (hp_unwind_memos_head): a hook finds its memo there rather than in every memo's first
 * steps. A memo's begin word is the frame address of its walk (it fits in 47 bits) with
 * the low bits of the return address above it, 0 for none: equal words mean the same
 * frame, so its second word can be read at an offset from it, as the memo's walk read it
 * there. The second word is the return address one frame further up with its offset from
 * the frame in the top 16 bits, 0 when unknown: an allocation wrapper called from two
 * places at the same depth (one frame, one return address) then has a memo for each
 * caller. A memo found this way is still checked whole before its id is trusted
 * (hp_unwind_memo_repeats).
 * The memos are in sets of MEMO_WAYS, a begin word's set chosen by its hash, so a hook
 * looks at one line of begin words however many memos the thread has; the line also holds
 * the set's clock (memo_pick): used has a bit per way, hand the way it looks at next. A
 * set's second words are a line of their own, read only when a begin word matches. With
 * eight memos in one line, parse-json's eleven paths (its parser's allocations at each
 * depth of the document) took turns in them and 38% of its allocations walked. */
#define MEMO_WAYS 7u
#define MEMO_SET_BITS 2u
#define MEMO_SETS (1u << MEMO_SET_BITS)
struct memo_set {
	uint64_t begin[MEMO_WAYS];
	uint8_t used, hand;
} __attribute__((aligned(64)));
/* The order of a thread's memos where their own next (MEMO_SURE, below) cannot say it: a
 * memo met several times in a request with another follower each time (redis-server's: a
 * loop's three allocations, then another path's, "0 0 0 25"; request-paths' wrapper after
 * each of its callers). hist holds the memos that the last choices took, a byte each, the
 * newest lowest; next, by a hash of its last four, the memo that followed them the last
 * time, MEMO_SURE when the same one did the time before too. A memo a sure next led to is
 * left out of hist, which it adds nothing to, so a loop's and a sure order's allocations
 * pay no more than the test of MEMO_SURE. In a trace of redis-server (redis-benchmark -P
 * 16, 20000 requests a test), 43% of the allocations picked their memo without it, 7%
 * with it. */
#define ORDER_BITS 7u
struct memo_order {
	uint64_t hist;
	uint16_t next[1u << ORDER_BITS];
};
struct memo_keys {
	struct memo_set set[MEMO_SETS];
	struct {
		uint64_t w[MEMO_WAYS];
	} __attribute__((aligned(64))) second[MEMO_SETS];
	struct memo_order order __attribute__((aligned(64)));
};
_Static_assert(sizeof(struct memo_keys) <= HP_UNWIND_MEMOS_HEAD, "the memos' head holds it");
_Static_assert(MEMO_WAYS <= 8, "used has a bit per way");
_Static_assert(HP_WALK_MEMOS == MEMO_WAYS << MEMO_SET_BITS, "the memos are whole sets");

#define SECOND_RA_BITS 48

static uint64_t begin_key(uintptr_t frame)
{
	if (frame >> 47)
		return 0;
	return frame | (uint64_t) * (const uintptr_t *)(frame + 8) << 47;
}

/* The product's top bits, which every bit of k moves: a thread's frames differ in a few
 * low bits only. */
static unsigned memo_set(uint64_t k)
{
	return (unsigned)((k * 0x9e3779b97f4a7c15ull) >> (64 - MEMO_SET_BITS));
}

/* After a walk into memo i from frame: where its second return address is. A memo that
 * has one already was found by it (memo_pick zeroes a way it takes), so its walks began
 * that way: it stays. */
static void note_second(struct hp_thread *t, unsigned i, const struct hp_unwind_memo *m,
			uintptr_t frame)
{
	struct memo_keys *mk = hp_unwind_memos_head(t->memo);
	unsigned set = i / MEMO_WAYS, w = i % MEMO_WAYS;
	if (mk->second[set].w[w])
		return;
	uint64_t off = m->n > 1 ? m->st[1].cfa - 8 - frame : 0, ra = m->n > 1 ? m->st[1].ra : 0;
	int ok = mk->set[set].begin[w] && !m->cap_hit && hp_step_bp_at(&m->st[0]) == frame && off &&
		 off >> (64 - SECOND_RA_BITS) == 0 && ra >> SECOND_RA_BITS == 0;
	mk->second[set].w[w] = ok ? off << SECOND_RA_BITS | ra : 0;
}

/* Whether a walk from frame, whose begin word is k, began as the one a memo of begin
 * word *begin and second word *second did. */
static int memo_matches(const uint64_t *begin, const uint64_t *second, uint64_t k, uintptr_t frame)
{
	uint64_t s = *second;
	return *begin == k && (!s || *(const uintptr_t *)(frame + (s >> SECOND_RA_BITS)) ==
					 (s & ((1ull << SECOND_RA_BITS) - 1)));
}

/* Which memo a walk from the hook whose frame is frame goes into: the one of its set whose
 * last walk began the same way (above), else one of the set not picked for the longest,
 * roughly (a clock: the hand passes over memos picked since it last came by). A program
 * that takes turns between a few allocation paths (a server's request: its arguments, an
 * object, a reply, often through one allocation wrapper) then finds each path's last walk
 * whole, where a single memo would hold the other path's and each walk would go by the
 * rules up to where the two meet. Taking the memo after the last one picked instead, a
 * request of five paths, one of them between each two others, had every new path take the
 * same memo: 40% of its allocations walked. A new walk splices against the thread's last
 * walk, wherever that is kept (the best match for a recursion). */
static unsigned memo_pick(struct hp_thread *t, uintptr_t frame)
{
	struct memo_keys *mk = hp_unwind_memos_head(t->memo);
	uint64_t k = begin_key(frame);
	unsigned set = memo_set(k);
	struct memo_set *ms = &mk->set[set];
	const uint64_t *second = mk->second[set].w;
	for (unsigned w = 0; k && w < MEMO_WAYS; w++)
		if (memo_matches(&ms->begin[w], &second[w], k, frame)) {
			ms->used |= (uint8_t)(1u << w);
			return set * MEMO_WAYS + w;
		}
	unsigned h = ms->hand;
	while (ms->used & (1u << h)) {
		ms->used &= (uint8_t) ~(1u << h);
		h = h + 1 == MEMO_WAYS ? 0 : h + 1;
	}
	ms->hand = (uint8_t)(h + 1 == MEMO_WAYS ? 0 : h + 1);
	ms->used |= (uint8_t)(1u << h);
	ms->begin[h] = k;
	mk->second[set].w[h] = 0;
	/* A path new to the memo has its checks made (unwind.h, misses), and no memo that
	 * follows it yet. The memory it adds is not held against max_memory here (a memo at
	 * most, 28 a thread), but reaching it switches to sampling. */
	if (hp_unwind_memos_ready(t->memo, set * MEMO_WAYS + h))
		hp_mem_admit(0);
	struct hp_unwind_memo *m = memo_at(t, set * MEMO_WAYS + h);
	m->misses = 0;
	m->next = 0;
	return set * MEMO_WAYS + h;
}

/* The id of a capture: a memo's last one when the frames are that walk's, else through the
 * thread's cache when the unwinder says how they relate to the last walk. */
static uint32_t capture_id(struct hp_thread *t, const struct hp_unwind_memo *m,
			   const struct hp_unwind_memo *from, uint64_t *frames, unsigned d,
			   int same)
{
	if (!m)
		return hp_stack_intern(frames, d);
	if (same == 1 && m->id)
		return m->id;
	if (same == 2 && from->id)
		return from->id;
	if (m->tail_after != HP_UNWIND_NO_TAIL)
		return hp_stack_intern_after(t->scache, from->id, frames, d, m->tail_after, m);
	hp_unwind_memo_tail(m, frames, d);
	return hp_stack_intern(frames, d);
}

/* A memo's next (unwind.h, the caller's): in its low byte the memo of the allocation that
 * followed its own the last time, and MEMO_SURE when the same one followed the time before
 * too. Copied whole into the thread's memo_next, it is one load and one store. */
#define MEMO_SURE 0x100u
/* In the thread's memo_next only: the last allocation's stack was hp_stack_guess's, which
 * no memo holds; memo_last still names the thread's last walk. */
#define MEMO_GUESSED 0x200u

/* In the thread's memo_next only: the order was asked for memo_last's follower (ASKED),
 * and named it (PUSHED: hist holds it already, until it fails its check). */
#define MEMO_ASKED 0x400u
#define MEMO_PUSHED 0x800u

static struct memo_order *order_of(struct hp_thread *t)
{
	return &((struct memo_keys *)hp_unwind_memos_head(t->memo))->order;
}

static uint16_t *order_next(struct memo_order *o)
{
	return &o->next[((uint32_t)o->hist * 0x9e3779b1u) >> (32 - ORDER_BITS)];
}

/* memo_next after a memo whose own next, nx, is not sure. */
static uint16_t next_by_order(struct hp_thread *t, uint16_t nx)
{
	struct memo_order *o = order_of(t);
	uint16_t e = *order_next(o);
	if (!(e & MEMO_SURE))
		return (uint16_t)(nx | MEMO_ASKED);
	o->hist = o->hist << 8 | (uint8_t)e;
	return (uint16_t)(e | MEMO_ASKED | MEMO_PUSHED);
}

/* memo_next after a memo whose own next is nx. */
__attribute__((always_inline)) static inline uint16_t next_after(struct hp_thread *t, uint16_t nx)
{
	return __builtin_expect(nx & MEMO_SURE, 1) ? nx : next_by_order(t, nx);
}

/* The order learns that the thread's allocation went to memo slot, which memo_next did not
 * name (not a guess's: no memo holds those). */
static void order_learn(struct hp_thread *t, unsigned slot)
{
	struct memo_order *o = order_of(t);
	if (t->memo_next & MEMO_PUSHED)
		o->hist >>= 8;
	if (t->memo_next & MEMO_ASKED) {
		uint16_t *e = order_next(o);
		*e = (uint16_t)(slot | ((uint8_t)*e == slot ? MEMO_SURE : 0));
	}
	o->hist = o->hist << 8 | slot;
}

/* The stack id of the thread's last allocation. */
static uint32_t last_stack(struct hp_thread *t)
{
	if (t->memo_next & MEMO_GUESSED)
		return hp_stack_guessed(t->scache);
	return memo_at(t, t->memo_last)->id;
}

/* The stack id of an allocation from frame that memo_next names, once it holds, else 0.
 * With MEMO_SURE, the memo that followed the thread's last one, when its walk repeats: a
 * loop that allocates at one place (most of threadtest's, shbench's, queue's allocations)
 * finds its walk in the last memo itself, and a request that goes through a few paths in
 * the same order (a server's) the next path's walk in the memo of the next: checked at
 * once, with no begin word to make and no set to look through, 50 instructions of
 * microbench's pair. Only where the same memo followed twice in a row, since after a path
 * that other paths follow in turn the guess would be wrong every other time. The clock is
 * not told: the memo was picked when its path began, and a set's hand moves only when
 * another path of the set needs one. With MEMO_GUESSED, the guess after the last guess:
 * after a guess the next one most likely holds too (a recursion's nodes), and is tried
 * before a memo is picked, which would find none of them. */
__attribute__((always_inline)) static inline uint32_t named_stack(struct hp_thread *t,
								  uintptr_t frame)
{
	if (t->memo_next & MEMO_SURE) {
		unsigned s = (uint8_t)t->memo_next;
		struct hp_unwind_memo *m = memo_at(t, s);
		/* Read before the stores below, which might alias it as far as GCC knows: the
		 * caller's test of the id is then known to pass. */
		uint32_t id = m->id;
		if (!id || !hp_unwind_memo_holds(m, frame))
			return 0;
		t->memo_next = next_after(t, m->next);
		t->memo_last = (uint8_t)s;
		return id;
	}
	return (t->memo_next & MEMO_GUESSED) ? hp_stack_guess_again(t->scache, frame) : 0;
}

/* Extended mode's size histogram: a site without a stack per size. */
__attribute__((noinline)) static void count_size(struct hp_thread *t, size_t n)
{
	hp_thread_add_alloc(t, hp_site_key(0, hp_size_code(n)), HP_FX_ONE, n);
}

/* Basic and extended mode's allocation: inline in their own hooks (HOOK_COUNTED), out of
 * line in the general ones (record_alloc_counted). */
__attribute__((always_inline)) static inline void count_alloc(struct hp_thread *t, void *p,
							      size_t n)
{
	hp_own_add(&t->tot.allocs, 1);
	hp_own_add(&t->tot.alloc_bytes, n);
	hp_own_add(&t->tot.alloc_usable, usable(p));
	if (hp.args.mode == HP_MODE_EXTENDED)
		count_size(t, n);
}

__attribute__((noinline)) static void record_alloc_counted(struct hp_thread *t, void *p, size_t n)
{
	count_alloc(t, p, n);
}

/* The stack id of an allocation from frame whose memo m (slot; NULL without memos) does not
 * hold its walk, tried when m has one: a guess, else a walk into m. Guesses are tried and
 * learnt only where m's path keeps changing (each depth's of a recursion): a guess leaves m
 * as it was, and a memo that would hold its path from its next walk on (a server's request
 * paths taking turns in a set) must have that walk. Out of line, so that the allocations
 * that need neither (a loop's, a server's request) keep record_alloc_rest's registers. */
__attribute__((noinline)) static uint32_t guess_or_walk(struct hp_thread *t,
							struct hp_unwind_memo *m, unsigned slot,
							uintptr_t frame, int tried)
{
	int guessing = m && t->scache && hp_unwind_memo_failing(m);
	uint32_t last = guessing ? last_stack(t) : 0, id;
	if (guessing && !(t->memo_next & MEMO_GUESSED) &&
	    (id = hp_stack_guess(t->scache, last, frame))) {
		t->memo_next = MEMO_GUESSED;
		return id;
	}
	uint64_t frames[HP_MAX_DEPTH];
	int same;
	/* The thread's last walk, which this one splices against. */
	const struct hp_unwind_memo *from = m ? memo_at(t, t->memo_last) : NULL;
	if (from && from->id)
		hp_stack_prefetch_after(from->id);
	unsigned d = hp_unwind_memo_from(frames, hp.args.max_depth, hp.text_lo, hp.text_hi, frame,
					 m, from, !tried, &same);
	id = capture_id(t, m, from, frames, d, same);
	if (m) {
		note_second(t, slot, m, frame);
		if (guessing)
			hp_stack_learn(last, id, m, frame);
		m->id = id;
		if (!(t->memo_next & MEMO_GUESSED))
			order_learn(t, slot);
		/* A memo that walks (each depth's of a recursion) would be guessed only to fail
		 * its check: none follows it. */
		t->memo_last = (uint8_t)slot;
		t->memo_next = 0;
	}
	return id;
}

/* The live map's insert and the site's add of an allocation whose stack is known. */
__attribute__((always_inline)) static inline void
record_alloc_tail(struct hp_thread *t, void *p, size_t n, uint32_t stack, uint64_t rate)
{
	uint64_t w = HP_FX_ONE;
	struct hp_live_val old,
	    v = {.stack = stack,
		 .size = n,
		 .birth_ms = atomic_load_explicit(&hp_round_ms, memory_order_relaxed)};
	if (rate) {
		w = hp_weight_fx(n, rate);
		v.size |= HP_LIVE_SAMPLED;
	}
	if (!stack)
		lost(t);
	int rc = hp_live_insert((uintptr_t)p, v, &old);
	if (rc < 0) {
		lost(t);
		return;
	}
	/* The address was freed behind our back (a signal handler, an unpatched module):
	 * that block is gone, so its site gets the free. */
	if (rc == 1)
		free_found(t, &old, 0);
	hp_thread_add_alloc(t, hp_site_key(stack, hp_size_code(n)), w, n);
}

/* record_alloc_tail out of line, exact (no sampling), for the hooks' own stacks. */
__attribute__((noinline)) static void record_alloc_stack(struct hp_thread *t, void *p, size_t n,
							 uint32_t stack)
{
	record_alloc_tail(t, p, n, stack, 0);
}

/* The stack id of an allocation from frame whose memo_next names none that holds: the
 * memo its walk went into before, if that walk repeats, else a guess or a walk. */
static uint32_t pick_or_walk(struct hp_thread *t, uintptr_t frame)
{
	unsigned slot = memo_pick(t, frame);
	struct hp_unwind_memo *m = memo_at(t, slot);
	if (!m->id || !hp_unwind_memo_repeats(m, frame, hp.args.max_depth))
		/* The walk need not find again that it does not repeat m's. */
		return guess_or_walk(t, m, slot, frame, m->id != 0);
	/* Memos whose walks repeat learn which follows which, though not from a guess, which
	 * no memo holds. */
	unsigned next = 0;
	if (!(t->memo_next & MEMO_GUESSED)) {
		struct hp_unwind_memo *prev = memo_at(t, t->memo_last);
		prev->next = (uint16_t)(slot | ((uint8_t)prev->next == slot ? MEMO_SURE : 0));
		order_learn(t, slot);
		next = next_after(t, m->next);
	}
	t->memo_last = (uint8_t)slot;
	t->memo_next = (uint16_t)next;
	return m->id;
}

/* Full mode's allocation after the counts and the sampling test (record_alloc); tried: the
 * hook found already that memo_next names no stack that holds (named_stack). */
__attribute__((noinline)) static void record_alloc_rest(struct hp_thread *t, void *p, size_t n,
							uintptr_t frame, int tried)
{
	uint32_t again = tried ? 0 : named_stack(t, frame);
	if (!again)
		again =
		    thread_memos(t) ? pick_or_walk(t, frame) : guess_or_walk(t, NULL, 0, frame, 0);
	record_alloc_tail(t, p, n, again, rate_now());
}

/* The common exact allocation's insert and add, inline in the hooks: its block's word of
 * the direct map written before (dm_word_again), its size in the word, and its site's
 * counter found without a call. 0 when not so, with nothing written. */
__attribute__((always_inline)) static inline int record_alloc_near(struct hp_thread *t, void *p,
								   size_t n, uint32_t stack)
{
	_Atomic uint64_t *w;
	if (n > DM_SIZE_INLINE ||
	    !(w = dm_word_again(dm_chunk_near((uintptr_t)p), (uintptr_t)p, n)))
		return 0;
	uint64_t key = hp_site_key_inline(stack, n);
	hp_seq_step(t);
	struct hp_site_ctr *c =
	    hp_thread_ctr_near(t, atomic_load_explicit(&t->active, memory_order_relaxed), key);
	if (c) {
		/* The block's word is its site key with its birth (threads.h). */
		uint64_t birth = atomic_load_explicit(&hp_round_ms, memory_order_relaxed);
		atomic_store_explicit(w, key | birth << DM_BIRTH_SHIFT, memory_order_release);
		c->allocs += HP_FX_ONE;
	}
	hp_seq_step(t);
	return c != NULL;
}

/* An exact allocation whose stack memo_next names (named_stack). Inline in the hooks, with the
 * insert and the add of its common case (record_alloc_near), where record_alloc_rest's call saved
 * and restored six registers and passed four arguments for these paths too: threadtest's
 * pair 342 to 295 instructions, binary-trees' node 520 to 460. 0 when memo_next names no
 * stack that holds, with nothing written: record_alloc_rest does the rest. */
__attribute__((always_inline)) static inline int record_alloc_named(struct hp_thread *t, void *p,
								    size_t n, uintptr_t frame)
{
	uint32_t id = named_stack(t, frame);
	if (!id)
		return 0;
	if (!record_alloc_near(t, p, n, id))
		record_alloc_stack(t, p, n, id);
	return 1;
}

/* The counts every full-mode allocation makes, sampled or not. */
__attribute__((always_inline)) static inline void count_full(struct hp_thread *t, void *p, size_t n)
{
	hp_own_add(&t->tot.allocs, 1);
	hp_own_add(&t->tot.alloc_bytes, n);
	/* Only the live map's frees ask which block was last (take_last). */
	t->last_alloc = (uintptr_t)p;
}

/* Full mode's allocation where the hook knows that nothing is sampled (hp.alloc_flip): no
 * test of the rate. A switch to sampling after that test is seen by the next allocation. */
__attribute__((always_inline)) static inline void record_alloc_exact(struct hp_thread *t, void *p,
								     size_t n, uintptr_t frame)
{
	count_full(t, p, n);
	if (!record_alloc_named(t, p, n, frame))
		record_alloc_rest(t, p, n, frame, 1);
}

/* Full mode's allocation: the counts and, under sampling, the countdown are inline in
 * every hook, since most sampled allocations stop there. The hooks that basic and extended
 * mode replace (hp_hooks_arm) call it directly; the others through record_alloc, which
 * tests the mode. */
__attribute__((always_inline)) static inline void record_alloc_full(struct hp_thread *t, void *p,
								    size_t n, uintptr_t frame)
{
	uint64_t rate = rate_now();
	if (!rate) {
		record_alloc_exact(t, p, n, frame);
		return;
	}
	count_full(t, p, n);
	if (hp_sample_hit(t, n, rate))
		record_alloc_rest(t, p, n, frame, 0);
}

__attribute__((always_inline)) static inline void record_alloc(struct hp_thread *t, void *p,
							       size_t n, uintptr_t frame)
{
	if (hp.args.mode != HP_MODE_FULL)
		record_alloc_counted(t, p, n);
	else
		record_alloc_full(t, p, n, frame);
}

/* 1 if p was the thread's last allocation, which it then no longer is (a block freed by
 * the program and given back to it from elsewhere is not freed at once). */
static int take_last(struct hp_thread *t, void *p)
{
	if (t->last_alloc != (uintptr_t)p)
		return 0;
	t->last_alloc = 0;
	return 1;
}

/* Inline in the hooks of free and of the plain deletes, which take nearly every free of a
 * program (one call and one set of saved registers fewer a free) and are full mode's
 * only (hp_hooks_arm); record_free, out of line, in the rest. */
__attribute__((always_inline)) static inline void record_free_full(struct hp_thread *t, void *p)
{
	struct hp_live_val v;
	if (hp_live_remove((uintptr_t)p, &v))
		free_found_inline(t, &v, take_last(t, p));
	else
		free_missed(t);
}

/* A free's common case, exact: a block whose word of the direct map holds its size and
 * no sampling, and whose site's counter is found without a call. Inline in the hooks of
 * free and the plain deletes, which then call nothing else on this path and so save no
 * register (the general hook saved six and restored them after the real call):
 * threadtest's pair 295 to 271 instructions. Everything is looked at before anything is
 * written, so 0 leaves the free to the general hook whole. The site's key is the word
 * masked (threads.h), where making it from the word's stack id and size took 6
 * instructions and the hash of its home slot more. */
_Static_assert(DM_SIZE_INLINE <= HP_EXACT_SIZE_MAX, "a size the word holds is an exact key's");
__attribute__((always_inline)) static inline int record_free_exact(struct hp_thread *t, void *p)
{
	_Atomic uint64_t *w;
	if (!(w = dm_word_of(dm_chunk_near((uintptr_t)p), (uintptr_t)p)))
		return 0;
	uint64_t e = atomic_load_explicit(w, memory_order_relaxed);
	if ((e & (DM_BLOCK | DM_NEXT | DM_SAMPLED)) != DM_BLOCK) {
		/* No block in the direct map, and none in the table (none ever spilled there,
		 * or its filter says so): the free of a block allocated before attach or, once
		 * sampling, of one not sampled (most frees after a switch to sampling), which
		 * the general hook took with a frame, its guard and a second look at the word. */
		if (dm_is_block(e) || !p ||
		    (atomic_load_explicit(&hp_live_spilled, memory_order_relaxed) &&
		     !hp_live_unspilled((uintptr_t)p)))
			return 0;
		free_missed(t);
		return 1;
	}
	/* A block whose size is in the next word gives a key no counter has (no inline key's
	 * size is DM_SIZE_NEXT, and every other key has a bit the mask clears), so the lookup
	 * below finds none and the general hook takes the free: the common free is spared a
	 * test of its size. */
	_Static_assert(DM_SIZE_NEXT > HP_SITE_INLINE_MAX &&
			   !(HP_SITE_WORD_MASK & (HP_SITE_OTHER | HP_SITE_BYTES)),
		       "no site key is a DM_SIZE_NEXT word's");
	uint64_t key = e & HP_SITE_WORD_MASK;
	uint32_t n = (uint32_t)key >> DM_STACK_BITS;
	hp_seq_step(t);
	struct hp_site_ctr *c =
	    hp_thread_ctr_near(t, atomic_load_explicit(&t->active, memory_order_relaxed), key);
	if (c) {
		atomic_store_explicit(w, DM_GONE, memory_order_relaxed);
		hp_own_add(&t->tot.frees, 1);
		hp_own_add(&t->tot.freed_bytes, n);
		c->frees += HP_FX_ONE;
		if (take_last(t, p))
			c->temp_frees += HP_FX_ONE;
	}
	hp_seq_step(t);
	return c != NULL;
}

__attribute__((noinline)) static void record_free(struct hp_thread *t, void *p)
{
	if (hp.args.mode != HP_MODE_FULL)
		free_unmapped(t, usable(p));
	else
		record_free_full(t, p);
}

/* Under sampling from the start nearly every free is of a block never sampled: the
 * filter says so in one load, before the thread's record is even looked up, and such a
 * free is passed on uncounted (the sampled frees' weights stand for it in the round's
 * totals: collector.c). A free hook is this and a tail call of the rest, kept out of line
 * so that the skipped free's path saves no register. absent is hp_live_absent, or
 * hp_live_absent_on in a hook that hp_hooks_arm installs only with the filter on. */
#define FREE_SKIPPED_BY(absent, p, call)                                                           \
	do {                                                                                       \
		if (absent((uintptr_t)(p))) {                                                      \
			call;                                                                      \
			return;                                                                    \
		}                                                                                  \
	} while (0)
#define FREE_SKIPPED(p, call) FREE_SKIPPED_BY(hp_live_absent, p, call)

/* Not GUARDED: malloc and calloc throw nothing, so their guard needs no cleanup, and a
 * hook that is not to record passes the call on as a tail call, with no test of the
 * record after the real call (two instructions an allocation). The general path of full
 * mode's malloc and calloc hooks: sampling, a record not found yet, not recording. */
__attribute__((noinline)) static void *malloc_rated(size_t n)
{
	struct hp_thread *t = enter();
	if (!t)
		return REAL(HK_MALLOC, void *(*)(size_t))(n);
	void *p = REAL(HK_MALLOC, void *(*)(size_t))(n);
	if (p)
		record_alloc_full(t, p, n, HOOK_FRAME);
	hp_thread_unguard(t);
	return p;
}

__attribute__((noinline)) static void *calloc_rated(size_t a, size_t b)
{
	struct hp_thread *t = enter();
	if (!t)
		return REAL(HK_CALLOC, void *(*)(size_t, size_t))(a, b);
	void *p = REAL(HK_CALLOC, void *(*)(size_t, size_t))(a, b);
	if (p)
		record_alloc_full(t, p, a * b, HOOK_FRAME);
	hp_thread_unguard(t);
	return p;
}

/* Sampling from the start (the live map's filter on), nearly every allocation is one the
 * countdown passes over, and for those the hook needs only the thread's record, the
 * countdown and two counts: the general hook's other loads and its frame cost sampled mode
 * as much again. So malloc and calloc get hooks that try that first and jump to the
 * general hook for the rest (sampled, guarded, not recording, a record the thread has not
 * found yet). Not operator new: it can throw, and only the general hook's cleanup clears
 * the guard then.
 * A passed-over allocation is counted before the real call, which is then a tail call:
 * waiting for its result kept a frame and four registers around every call (threadtest
 * sampled 1.13x with them, 1.10x without). So a passed-over request the allocator refuses counts
 * as made: only one smaller than the countdown (on average the sample rate) can be, and
 * then only when memory is exhausted. Nothing runs after the real call, so no guard is
 * needed; and the block is not known here, so the thread's last allocation is cleared
 * rather than set (a sampled block freed after it is not temporary). The countdown is
 * never negative between two events of its thread, so it compares unsigned. */
__attribute__((always_inline)) static inline int pass_over(uint64_t n)
{
	struct hp_thread *t = home_record();
	uint64_t c = n ? n : 1;
	if (!t || (uint64_t)t->countdown <= c)
		return 0;
	t->countdown -= (int64_t)c;
	t->last_alloc = 0;
	hp_own_add(&t->tot.allocs, 1);
	hp_own_add(&t->tot.alloc_bytes, n);
	return 1;
}

static void *hk_malloc_sampled(size_t n)
{
	if (pass_over(n))
		return REAL(HK_MALLOC, void *(*)(size_t))(n);
	return malloc_rated(n);
}

static void *hk_calloc_sampled(size_t a, size_t b)
{
	size_t n;
	if (!__builtin_mul_overflow(a, b, &n) && pass_over(n))
		return REAL(HK_CALLOC, void *(*)(size_t, size_t))(a, b);
	return calloc_rated(a, b);
}

/* Full mode's malloc and calloc: a thread whose allocations are recorded exactly
 * (hp.alloc_flip) records here; any other goes the sampled hooks' way, which passes over
 * what the countdown passes over and tail-calls the *_rated hook for the rest. After a
 * switch to sampling (--max-memory) nearly every allocation is passed over, where the
 * *_rated hook's frame, guard and counts had cost binary-trees' node as much as an exact
 * one. A thread whose allocations are recorded exactly has no countdown running, so none
 * of its calls is passed over there. */
static void *hk_malloc(size_t n)
{
	struct hp_thread *t = enter_if(&hp.alloc_flip);
	if (!t)
		return hk_malloc_sampled(n);
	void *p = REAL(HK_MALLOC, void *(*)(size_t))(n);
	if (p)
		record_alloc_exact(t, p, n, HOOK_FRAME);
	hp_thread_unguard(t);
	return p;
}

static void *hk_calloc(size_t a, size_t b)
{
	struct hp_thread *t = enter_if(&hp.alloc_flip);
	if (!t)
		return hk_calloc_sampled(a, b);
	void *p = REAL(HK_CALLOC, void *(*)(size_t, size_t))(a, b);
	if (p)
		record_alloc_exact(t, p, a * b, HOOK_FRAME);
	hp_thread_unguard(t);
	return p;
}

/* Basic and extended mode keep no stacks and no live map, yet the general hooks paid for
 * full mode's paths: its tests, and the registers its inlined code keeps (five saved and
 * restored a call). Basic mode cost more than sampled full mode (171 payload instructions
 * a free+malloc pair against 44), so its most common calls get hooks of their own
 * (hp_hooks_arm; 119 now). free ends in a tail call, its guard cleared first: nothing runs
 * after the real call, and a real free calls no hooked function. */
#define HOOK_COUNTED(fn, id)                                                                       \
	static void *fn(size_t n)                                                                  \
	{                                                                                          \
		GUARDED;                                                                           \
		void *p = REAL(id, void *(*)(size_t))(n);                                          \
		if (t && p)                                                                        \
			count_alloc(t, p, n);                                                      \
		return p;                                                                          \
	}

HOOK_COUNTED(hk_malloc_counted, HK_MALLOC)
HOOK_COUNTED(hk_new_counted, HK_NEW)
HOOK_COUNTED(hk_new_arr_counted, HK_NEW_ARR)

static void *hk_calloc_counted(size_t a, size_t b)
{
	GUARDED;
	void *p = REAL(HK_CALLOC, void *(*)(size_t, size_t))(a, b);
	if (t && p)
		count_alloc(t, p, a * b);
	return p;
}

static void hk_free_counted(void *p)
{
	struct hp_thread *t = enter();
	if (t) {
		if (p)
			free_unmapped(t, usable(p));
		hp_thread_unguard(t);
	}
	REAL(HK_FREE, void (*)(void *))(p);
}

/* A real operator delete calls free, which must not count the block again: the guard
 * stays set across the call. */
#define HOOK_DEL_COUNTED(fn, id)                                                                   \
	static void fn(void *p)                                                                    \
	{                                                                                          \
		GUARDED;                                                                           \
		if (t && p)                                                                        \
			free_unmapped(t, usable(p));                                               \
		REAL(id, void (*)(void *))(p);                                                     \
	}

HOOK_DEL_COUNTED(hk_del_counted, HK_DEL)
HOOK_DEL_COUNTED(hk_del_arr_counted, HK_DEL_ARR)

/* realloc is one event: the old block's site gets the free, the new one's the alloc. The
 * old block is looked up (and its usable size taken) before the real call frees it. */
static void *do_realloc(struct hp_thread *t, void *p, size_t n, void *(*real)(void *, size_t),
			uintptr_t frame)
{
	if (!t)
		return real(p, n);
	if (!p) {
		void *q = real(NULL, n);
		if (q)
			record_alloc(t, q, n, frame);
		return q;
	}
	struct hp_live_val v, old;
	int had = 0;
	uint64_t u = 0;
	if (hp.args.mode == HP_MODE_FULL && !hp_live_absent((uintptr_t)p))
		had = hp_live_remove((uintptr_t)p, &v);
	if (hp.args.mode != HP_MODE_FULL)
		u = usable(p);
	void *q = real(p, n);
	if (!q && n) {
		if (had && hp_live_insert((uintptr_t)p, v, &old) < 0) {
			free_found(t, &v, 0);
			lost(t);
		}
		return NULL;
	}
	if (had)
		free_found(t, &v, take_last(t, p));
	else if (hp.args.mode == HP_MODE_FULL)
		free_missed(t);
	else
		free_unmapped(t, u);
	if (q)
		record_alloc(t, q, n, frame);
	return q;
}

static void *hk_realloc(void *p, size_t n)
{
	GUARDED;
	return do_realloc(t, p, n, REAL(HK_REALLOC, void *(*)(void *, size_t)), HOOK_FRAME);
}

static void *real_reallocarray_2(void *p, size_t n)
{
	return REAL(HK_REALLOC, void *(*)(void *, size_t))(p, n);
}

static void *hk_reallocarray(void *p, size_t a, size_t b)
{
	GUARDED;
	size_t n;
	if (!t || __builtin_mul_overflow(a, b, &n))
		return REAL(HK_REALLOCARRAY, void *(*)(void *, size_t, size_t))(p, a, b);
	return do_realloc(t, p, n, real_reallocarray_2, HOOK_FRAME);
}

static int hk_posix_memalign(void **pp, size_t al, size_t n)
{
	GUARDED;
	int rc = REAL(HK_POSIX_MEMALIGN, int (*)(void **, size_t, size_t))(pp, al, n);
	if (t && rc == 0 && *pp)
		record_alloc(t, *pp, n, HOOK_FRAME);
	return rc;
}

#define HOOK_AL(fn, id)                                                                            \
	static void *fn(size_t al, size_t n)                                                       \
	{                                                                                          \
		GUARDED;                                                                           \
		void *p = REAL(id, void *(*)(size_t, size_t))(al, n);                              \
		if (t && p)                                                                        \
			record_alloc(t, p, n, HOOK_FRAME);                                         \
		return p;                                                                          \
	}

HOOK_AL(hk_aligned_alloc, HK_ALIGNED_ALLOC)
HOOK_AL(hk_memalign, HK_MEMALIGN)

#define HOOK_1(fn, id, rec)                                                                        \
	static void *fn(size_t n)                                                                  \
	{                                                                                          \
		GUARDED;                                                                           \
		void *p = REAL(id, void *(*)(size_t))(n);                                          \
		if (t && p)                                                                        \
			rec(t, p, n, HOOK_FRAME);                                                  \
		return p;                                                                          \
	}

HOOK_1(hk_valloc, HK_VALLOC, record_alloc)
HOOK_1(hk_pvalloc, HK_PVALLOC, record_alloc)
HOOK_1(hk_new, HK_NEW, record_alloc_full)
HOOK_1(hk_new_arr, HK_NEW_ARR, record_alloc_full)

/* The C++ tag arguments (std::nothrow_t const&, std::align_val_t) are passed through as
 * what they are in the ABI: a pointer and a size_t. */
#define HOOK_NEW2(fn, id, T)                                                                       \
	static void *fn(size_t n, T x)                                                             \
	{                                                                                          \
		GUARDED;                                                                           \
		void *p = REAL(id, void *(*)(size_t, T))(n, x);                                    \
		if (t && p)                                                                        \
			record_alloc(t, p, n, HOOK_FRAME);                                         \
		return p;                                                                          \
	}

HOOK_NEW2(hk_new_nt, HK_NEW_NT, const void *)
HOOK_NEW2(hk_new_arr_nt, HK_NEW_ARR_NT, const void *)
HOOK_NEW2(hk_new_al, HK_NEW_AL, size_t)
HOOK_NEW2(hk_new_arr_al, HK_NEW_ARR_AL, size_t)

#define HOOK_NEW3(fn, id)                                                                          \
	static void *fn(size_t n, size_t al, const void *nt)                                       \
	{                                                                                          \
		GUARDED;                                                                           \
		void *p = REAL(id, void *(*)(size_t, size_t, const void *))(n, al, nt);            \
		if (t && p)                                                                        \
			record_alloc(t, p, n, HOOK_FRAME);                                         \
		return p;                                                                          \
	}

HOOK_NEW3(hk_new_al_nt, HK_NEW_AL_NT)
HOOK_NEW3(hk_new_arr_al_nt, HK_NEW_ARR_AL_NT)

#define HOOK_DEL1(fn, id)                                                                          \
	__attribute__((noinline)) static void fn##_general(void *p)                                \
	{                                                                                          \
		GUARDED;                                                                           \
		if (t && p)                                                                        \
			record_free_full(t, p);                                                    \
		REAL(id, void (*)(void *))(p);                                                     \
	}                                                                                          \
	static void fn(void *p)                                                                    \
	{                                                                                          \
		FREE_SKIPPED_BY(hp_live_absent_on, p, REAL(id, void (*)(void *))(p));              \
		fn##_general(p);                                                                   \
	}

/* Installed only with the filter on (hp_hooks_arm: the exact hooks without it, the
 * counted ones in basic and extended mode), so they do not test that it is. */
HOOK_DEL1(hk_free, HK_FREE)
HOOK_DEL1(hk_del, HK_DEL)
HOOK_DEL1(hk_del_arr, HK_DEL_ARR)

/* Full mode's free without the live map's filter (hp_hooks_arm): the common case inline
 * and, since a real free calls no hooked function, the real call a tail call with the
 * guard cleared first; anything else the general hook's, from the start. */
static void hk_free_exact(void *p)
{
	uintptr_t self = hook_self();
	struct hp_thread *t = guess_record();
	uintptr_t key = atomic_load_explicit(&t->key, memory_order_acquire);
	int done;
	if (key == self) {
		hp_thread_guard(t);
		/* free(NULL) finds no block (no block's word is at 0) before it is let
		 * through: a test fewer for every other free. */
		done = record_free_exact(t, p) || !p;
		hp_thread_unguard(t);
	} else {
		/* Guarded: a free inside a hooked call (a real operator delete's), counted
		 * there. */
		done = key == (self | HP_THREAD_GUARDED);
	}
	if (!done) {
		hk_free_general(p);
		return;
	}
	REAL(HK_FREE, void (*)(void *))(p);
}

/* The same for the plain deletes, whose real call keeps the guard: it frees through free,
 * which must not count the block again. */
#define HOOK_DEL_EXACT(fn, id)                                                                     \
	static void fn##_exact(void *p)                                                            \
	{                                                                                          \
		struct hp_thread *t = enter_home();                                                \
		if (t && (record_free_exact(t, p) || !p)) {                                        \
			REAL(id, void (*)(void *))(p);                                             \
			hp_thread_unguard(t);                                                      \
			return;                                                                    \
		}                                                                                  \
		if (t)                                                                             \
			hp_thread_unguard(t);                                                      \
		fn##_general(p);                                                                   \
	}

HOOK_DEL_EXACT(hk_del, HK_DEL)
HOOK_DEL_EXACT(hk_del_arr, HK_DEL_ARR)

#define HOOK_DEL2(fn, id, T)                                                                       \
	__attribute__((noinline)) static void fn##_general(void *p, T x)                           \
	{                                                                                          \
		GUARDED;                                                                           \
		if (t && p)                                                                        \
			record_free(t, p);                                                         \
		REAL(id, void (*)(void *, T))(p, x);                                               \
	}                                                                                          \
	static void fn(void *p, T x)                                                               \
	{                                                                                          \
		FREE_SKIPPED(p, REAL(id, void (*)(void *, T))(p, x));                              \
		fn##_general(p, x);                                                                \
	}

HOOK_DEL2(hk_del_sz, HK_DEL_SZ, size_t)
HOOK_DEL2(hk_del_arr_sz, HK_DEL_ARR_SZ, size_t)
HOOK_DEL2(hk_del_al, HK_DEL_AL, size_t)
HOOK_DEL2(hk_del_arr_al, HK_DEL_ARR_AL, size_t)
HOOK_DEL2(hk_del_nt, HK_DEL_NT, const void *)
HOOK_DEL2(hk_del_arr_nt, HK_DEL_ARR_NT, const void *)

#define HOOK_DEL3(fn, id, T2, T3)                                                                  \
	__attribute__((noinline)) static void fn##_general(void *p, T2 x, T3 y)                    \
	{                                                                                          \
		GUARDED;                                                                           \
		if (t && p)                                                                        \
			record_free(t, p);                                                         \
		REAL(id, void (*)(void *, T2, T3))(p, x, y);                                       \
	}                                                                                          \
	static void fn(void *p, T2 x, T3 y)                                                        \
	{                                                                                          \
		FREE_SKIPPED(p, REAL(id, void (*)(void *, T2, T3))(p, x, y));                      \
		fn##_general(p, x, y);                                                             \
	}

HOOK_DEL3(hk_del_sz_al, HK_DEL_SZ_AL, size_t, size_t)
HOOK_DEL3(hk_del_arr_sz_al, HK_DEL_ARR_SZ_AL, size_t, size_t)
HOOK_DEL3(hk_del_al_nt, HK_DEL_AL_NT, size_t, const void *)
HOOK_DEL3(hk_del_arr_al_nt, HK_DEL_ARR_AL_NT, size_t, const void *)

/* hp_dlopen_as's probe for an object already loaded: a miss makes libc allocate an error
 * message the application never asked for, so it is neither recorded nor left behind. */
static void *dlopen_probe(const char *file, int mode)
{
	GUARDED;
	(void)t;
	void *h = REAL(HK_DLOPEN, hp_dlopen_fn)(file, mode | RTLD_NOLOAD);
	if (!h)
		dlerror();
	return h;
}

/* Modules a dlopen brings in are patched right after it returns, outside any lock of ours:
 * the patching itself runs under dl_iterate_phdr's lock only, so a dlopen nested in a
 * constructor cannot invert a lock order. The file is found as the caller would have
 * found it (its DT_RUNPATH, $ORIGIN, namespace), not as the payload would. */
static void *hk_dlopen(const char *file, int mode)
{
	uint32_t first_stack = hp_stacks_end();
	void *h = hp_dlopen_as(__builtin_return_address(0), REAL(HK_DLOPEN, hp_dlopen_fn),
			       dlopen_probe, file, mode);
	if (!h)
		return h;
	GUARDED;
	if (t) {
		hp_hooks_resolve();
		hp_patch_all();
		hp_collector_note_modules(first_stack);
	}
	return h;
}

/* A child forked through a patched slot closes its copy of the pipe at once; one forked
 * another way (daemon(), a raw clone) at its first hooked call (enter). Either way its
 * hooks are quiet (hp.po). No pthread_atfork handler: the payload would then need
 * __cxa_finalize at dlclose, whose lock a concurrent fork can leave held in the child. */
static pid_t hk_fork(void)
{
	pid_t pid = REAL(HK_FORK, pid_t(*)(void))();
	if (pid == 0)
		hp_collector_forget();
	return pid;
}

static struct hook hooks[HK_COUNT] = {
    [HK_MALLOC] = {"malloc", (void *)hk_malloc, NULL},
    [HK_CALLOC] = {"calloc", (void *)hk_calloc, NULL},
    [HK_REALLOC] = {"realloc", (void *)hk_realloc, NULL},
    [HK_REALLOCARRAY] = {"reallocarray", (void *)hk_reallocarray, NULL},
    [HK_FREE] = {"free", (void *)hk_free, NULL},
    [HK_POSIX_MEMALIGN] = {"posix_memalign", (void *)hk_posix_memalign, NULL},
    [HK_ALIGNED_ALLOC] = {"aligned_alloc", (void *)hk_aligned_alloc, NULL},
    [HK_MEMALIGN] = {"memalign", (void *)hk_memalign, NULL},
    [HK_VALLOC] = {"valloc", (void *)hk_valloc, NULL},
    [HK_PVALLOC] = {"pvalloc", (void *)hk_pvalloc, NULL},
    [HK_NEW] = {"_Znwm", (void *)hk_new, NULL},
    [HK_NEW_ARR] = {"_Znam", (void *)hk_new_arr, NULL},
    [HK_NEW_NT] = {"_ZnwmRKSt9nothrow_t", (void *)hk_new_nt, NULL},
    [HK_NEW_ARR_NT] = {"_ZnamRKSt9nothrow_t", (void *)hk_new_arr_nt, NULL},
    [HK_NEW_AL] = {"_ZnwmSt11align_val_t", (void *)hk_new_al, NULL},
    [HK_NEW_ARR_AL] = {"_ZnamSt11align_val_t", (void *)hk_new_arr_al, NULL},
    [HK_NEW_AL_NT] = {"_ZnwmSt11align_val_tRKSt9nothrow_t", (void *)hk_new_al_nt, NULL},
    [HK_NEW_ARR_AL_NT] = {"_ZnamSt11align_val_tRKSt9nothrow_t", (void *)hk_new_arr_al_nt, NULL},
    [HK_DEL] = {"_ZdlPv", (void *)hk_del, NULL},
    [HK_DEL_ARR] = {"_ZdaPv", (void *)hk_del_arr, NULL},
    [HK_DEL_SZ] = {"_ZdlPvm", (void *)hk_del_sz, NULL},
    [HK_DEL_ARR_SZ] = {"_ZdaPvm", (void *)hk_del_arr_sz, NULL},
    [HK_DEL_AL] = {"_ZdlPvSt11align_val_t", (void *)hk_del_al, NULL},
    [HK_DEL_ARR_AL] = {"_ZdaPvSt11align_val_t", (void *)hk_del_arr_al, NULL},
    [HK_DEL_SZ_AL] = {"_ZdlPvmSt11align_val_t", (void *)hk_del_sz_al, NULL},
    [HK_DEL_ARR_SZ_AL] = {"_ZdaPvmSt11align_val_t", (void *)hk_del_arr_sz_al, NULL},
    [HK_DEL_NT] = {"_ZdlPvRKSt9nothrow_t", (void *)hk_del_nt, NULL},
    [HK_DEL_ARR_NT] = {"_ZdaPvRKSt9nothrow_t", (void *)hk_del_arr_nt, NULL},
    [HK_DEL_AL_NT] = {"_ZdlPvSt11align_val_tRKSt9nothrow_t", (void *)hk_del_al_nt, NULL},
    [HK_DEL_ARR_AL_NT] = {"_ZdaPvSt11align_val_tRKSt9nothrow_t", (void *)hk_del_arr_al_nt, NULL},
    [HK_DLOPEN] = {"dlopen", (void *)hk_dlopen, NULL},
    [HK_FORK] = {"fork", (void *)hk_fork, NULL},
};

void hp_hooks_resolve(void)
{
	int failed = 0;
	for (int i = 0; i < HK_COUNT; i++) {
		if (atomic_load(&hooks[i].real))
			continue;
		void *r = dlsym(RTLD_DEFAULT, hooks[i].name);
		if (r)
			atomic_store(&hooks[i].real, r);
		else
			failed = 1;
	}
	if (!atomic_load(&real_usable)) {
		void *u = dlsym(RTLD_DEFAULT, "malloc_usable_size");
		if (u)
			atomic_store(&real_usable, (size_t(*)(void *))u);
		else
			failed = 1;
	}
	/* Leave no error of ours for the target's next dlerror(). */
	if (failed)
		dlerror();
}

static atomic_int patching; /* cleared for good by hp_unpatch_all */

void hp_hooks_arm(void)
{
	memo_bytes = hp_unwind_memo_size(hp.args.max_depth);
	/* One session per load (start.c): the table starts with the general hooks. */
	if (hp.args.mode != HP_MODE_FULL) {
		hooks[HK_MALLOC].hook = (void *)hk_malloc_counted;
		hooks[HK_CALLOC].hook = (void *)hk_calloc_counted;
		hooks[HK_FREE].hook = (void *)hk_free_counted;
		hooks[HK_NEW].hook = (void *)hk_new_counted;
		hooks[HK_NEW_ARR].hook = (void *)hk_new_arr_counted;
		hooks[HK_DEL].hook = (void *)hk_del_counted;
		hooks[HK_DEL_ARR].hook = (void *)hk_del_arr_counted;
	} else if (hp_live_filter) {
		/* With HOOK_DEL1's free and plain deletes, which assume the filter. */
		hooks[HK_MALLOC].hook = (void *)hk_malloc_sampled;
		hooks[HK_CALLOC].hook = (void *)hk_calloc_sampled;
	} else {
		/* No filter: FREE_SKIPPED would only test that. */
		hooks[HK_FREE].hook = (void *)hk_free_exact;
		hooks[HK_DEL].hook = (void *)hk_del_exact;
		hooks[HK_DEL_ARR].hook = (void *)hk_del_arr_exact;
	}
	if (hp_threads_fenced && hp_dm_dir)
		hp_dm_near_on();
	else
		hp_dm_near_off();
	atomic_store(&patching, 1);
	atomic_store(&hp.self_flip, 0);
	atomic_store(&hp.alloc_flip, atomic_load(&hp.rate) ? HP_SELF_STOPPED : 0);
	atomic_store(&hp.po->recording, 1);
}

/* GLOB_DAT slots of one module looked at per patch pass; more are left unpatched. */
#define MAX_DATA_SLOTS 64

struct walk {
	int restore;
	int written;
	uintptr_t lo, hi;
	const struct dl_phdr_info *info;
	/* The module's GLOB_DAT slots of hooked functions, and whether code calls through
	 * each (got_called_through). */
	void **data_slots[MAX_DATA_SLOTS];
	unsigned char called[MAX_DATA_SLOTS];
	int ndata;
	/* The module's slots to write and what, written together (got_write_all). */
	void **slots[GOT_WRITE_MAX];
	void *values[GOT_WRITE_MAX];
	int npending;
};

static void flush_writes(struct walk *w)
{
	w->written += got_write_all(w->info, w->slots, w->values, w->npending);
	w->npending = 0;
}

static void write_slot(struct walk *w, void **slot, void *value)
{
	if (w->npending == GOT_WRITE_MAX)
		flush_writes(w);
	w->slots[w->npending] = slot;
	w->values[w->npending++] = value;
}

static struct hook *find_hook(const char *name)
{
	/* Every hooked name starts with one of these. */
	if (name[0] != 'm' && name[0] != 'c' && name[0] != 'r' && name[0] != 'f' &&
	    name[0] != 'p' && name[0] != 'a' && name[0] != 'v' && name[0] != '_' && name[0] != 'd')
		return NULL;
	for (int i = 0; i < HK_COUNT; i++)
		if (strcmp(name, hooks[i].name) == 0)
			return &hooks[i];
	return NULL;
}

/* A lazy JUMP_SLOT still points at its PLT entry: [endbr64] push $index. */
static int is_lazy_stub(const struct walk *w, uintptr_t v)
{
	if (v < w->lo || v >= w->hi)
		return 0;
	const uint8_t *c = (const uint8_t *)v;
	if (c[0] == 0x68)
		return 1;
	return c[0] == 0xf3 && c[1] == 0x0f && c[2] == 0x1e && c[3] == 0xfa && c[4] == 0x68;
}

static void data_slot_cb(const struct got_slot *s, void *arg)
{
	struct walk *w = arg;
	if (s->type == R_X86_64_GLOB_DAT && w->ndata < MAX_DATA_SLOTS && find_hook(s->name))
		w->data_slots[w->ndata++] = s->slot;
}

/* PIC code also reads a GLOB_DAT slot to take the function's address (&free as a
 * destructor, a stored allocator pointer), and may call that address long after the
 * payload is gone. So a GLOB_DAT slot gets the hook's stub (hpabi.h), which outlives the
 * payload and leads to the real function after it. Without stub areas only slots that
 * calls go through (-fno-plt code) are patched, with the hook itself. */
static void *stub_of(int i)
{
	if (!hp.args.stub_code)
		return NULL;
	return (void *)(uintptr_t)hp_stub_at(hp.args.stub_code, i);
}

static void *_Atomic *stub_slot(int i)
{
	return (void *_Atomic *)(uintptr_t)hp_stub_slot_at(hp.args.stub_data, i);
}

_Static_assert(HK_COUNT <= HP_STUB_COUNT, "a hook without a stub");

static int data_slot_called(const struct walk *w, void **slot)
{
	for (int i = 0; i < w->ndata; i++)
		if (w->data_slots[i] == slot)
			return w->called[i];
	return 0;
}

static void slot_cb(const struct got_slot *s, void *arg)
{
	struct walk *w = arg;
	struct hook *h = find_hook(s->name);
	if (!h)
		return;
	void *real = atomic_load(&h->real);
	void *cur = __atomic_load_n(s->slot, __ATOMIC_ACQUIRE);
	if (!real)
		return;
	int i = (int)(h - hooks);
	void *stub = stub_of(i);
	if (w->restore) {
		if (cur == h->hook || (stub && cur == stub))
			write_slot(w, s->slot, real);
		return;
	}
	void *to = h->hook;
	if (s->type == R_X86_64_GLOB_DAT) {
		if (cur != real)
			return;
		if (stub) {
			/* Both before any code can reach the stub through the slot. */
			atomic_store(stub_slot(i), h->hook);
			atomic_store((_Atomic uint64_t *)(uintptr_t)hp.args.stub_data, 1);
			to = stub;
		} else if (!data_slot_called(w, s->slot)) {
			return;
		}
	} else if (cur != real && !is_lazy_stub(w, (uintptr_t)cur)) {
		return;
	}
	write_slot(w, s->slot, to);
}

static int skip_module(const struct dl_phdr_info *info)
{
	if (info->dlpi_addr == hp.base)
		return 1;
	uintptr_t ph = (uintptr_t)info->dlpi_phdr;
	uintptr_t vdso = getauxval(AT_SYSINFO_EHDR);
	if (vdso && ph >= vdso && ph < vdso + 65536)
		return 1;
	uintptr_t ldso = getauxval(AT_BASE);
	if (ldso && info->dlpi_addr == ldso)
		return 1;
	const char *n = info->dlpi_name ? info->dlpi_name : "";
	return strstr(n, "/ld-linux") || strncmp(n, "ld-linux", 8) == 0;
}

static int phdr_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	struct walk *w = arg;
	if (skip_module(info))
		return 0;
	if (!w->restore && !atomic_load(&patching))
		return 1;
	w->info = info;
	got_module_range(info, &w->lo, &w->hi);
	w->ndata = 0;
	if (!w->restore && !hp.args.stub_code) {
		got_walk(info, data_slot_cb, w);
		memset(w->called, 0, sizeof w->called);
		if (w->ndata)
			got_called_through(info, w->data_slots, w->ndata, w->called);
	}
	got_walk(info, slot_cb, w);
	flush_writes(w);
	return 0;
}

int hp_patch_all(void)
{
	struct walk w = {.restore = 0};
	dl_iterate_phdr(phdr_cb, &w);
	return w.written;
}

int hp_unpatch_all(void)
{
	struct walk w = {.restore = 1};
	atomic_store(&patching, 0);
	atomic_store(&hp.self_flip, HP_SELF_STOPPED);
	atomic_store(&hp.alloc_flip, HP_SELF_STOPPED);
	atomic_store(&hp.po->recording, 0);
	dl_iterate_phdr(phdr_cb, &w);
	/* Addresses of stubs that code kept now lead to the real functions. */
	for (int i = 0; hp.args.stub_data && i < HK_COUNT; i++) {
		void *real = atomic_load(&hooks[i].real);
		if (real && atomic_load(stub_slot(i)))
			atomic_store(stub_slot(i), real);
	}
	return w.written;
}
