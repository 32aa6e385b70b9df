/* test-unwind.c - payload/unwind.c against libgcc's _Unwind_Backtrace, frame for frame, on
 * stacks of known shapes: recursion of varying depth and variable-size (alloca) frames in
 * a library built with frame pointers and in one built without, calls through PLT stubs,
 * a qsort callback inside libc, a second thread. On those the fast path must be taken.
 * Then random register states and stack contents must stop the walk without a fault. */
#include <dlfcn.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "payload/payload.h"
#include "payload/unwind.h"

/* start.c's: mem.c's helpers read the session's bounds from it. */
struct hp_payload hp;

#define MAX 64

typedef void (*shape_cb)(void *arg);
typedef int (*recurse_fn)(int depth, shape_cb cb, void *arg);
typedef int (*alloca_fn)(int depth, int size, shape_cb cb, void *arg);
typedef int (*sorted_fn)(shape_cb cb, void *arg);
typedef int (*two_sites_fn)(int which, shape_cb cb, void *arg);
typedef int (*scratch_rbp_fn)(long v, shape_cb cb, void *arg);

struct lib {
	void *h;
	recurse_fn recurse;
	alloca_fn alloca_chain;
	sorted_fn sorted;
	two_sites_fn two_sites;
	scratch_rbp_fn scratch_rbp;
};

static struct lib libs[2]; /* with frame pointers, without */

struct cap {
	uint64_t fast[MAX], slow[MAX], regs[MAX];
	unsigned nfast, nslow;
	int nregs;
};

typedef unsigned (*unwind_fn)(uint64_t *f, unsigned max, uintptr_t lo, uintptr_t hi);

/* Both unwinders are called from the one call site, so their first frames are equal. */
__attribute__((noinline)) static unsigned call_unwinder(unwind_fn fn, uint64_t *f, unsigned max)
{
	unsigned n = fn(f, max, 0, 0);
	__asm__ volatile("" ::: "memory");
	return n;
}

static void capture(void *arg)
{
	struct cap *c = arg;
	uintptr_t pc, sp, bp;
	/* One call site for both: a loop the compiler cannot unroll. */
	for (volatile int i = 0; i < 2; i++) {
		unsigned n =
		    call_unwinder(i ? hp_unwind : hp_unwind_slow, i ? c->fast : c->slow, MAX);
		*(i ? &c->nfast : &c->nslow) = n;
	}
	__asm__ volatile("lea 0(%%rip), %0\n\t"
			 "mov %%rsp, %1\n\t"
			 "mov %%rbp, %2"
			 : "=r"(pc), "=r"(sp), "=r"(bp));
	c->nregs = hp_unwind_regs(c->regs, MAX, 0, 0, pc, sp, bp);
}

/* The fast path, when taken, starts at capture's caller: two frames after the slow one. */
static void check(const struct cap *c, int fast_path)
{
	assert_true(c->nslow > 3);
	assert_int_equal(c->nfast, c->nslow);
	assert_memory_equal(c->fast, c->slow, c->nslow * sizeof c->slow[0]);
	if (!fast_path)
		return;
	assert_int_equal(c->nregs, c->nslow == MAX ? MAX : (int)c->nslow - 2);
	assert_memory_equal(c->regs, c->slow + 2, (c->nslow - 2) * sizeof c->slow[0]);
}

static void test_recursion(void **state)
{
	(void)state;
	static const int depths[] = {0, 1, 2, 5, 13, 40, 70};
	for (int l = 0; l < 2; l++) {
		for (size_t i = 0; i < sizeof depths / sizeof depths[0]; i++) {
			struct cap c;
			memset(&c, 0, sizeof c);
			libs[l].recurse(depths[i], capture, &c);
			check(&c, 1);
			/* call_unwinder, capture, depth + 1 recursions, this test: at least */
			assert_true(c.nslow >=
				    (unsigned)(depths[i] + 4 < MAX ? depths[i] + 4 : MAX));
		}
	}
}

static void test_alloca(void **state)
{
	(void)state;
	for (int l = 0; l < 2; l++) {
		for (int d = 0; d < 6; d++) {
			struct cap c;
			memset(&c, 0, sizeof c);
			libs[l].alloca_chain(d, 24, capture, &c);
			check(&c, 1);
		}
	}
}

struct hop {
	int lib, depth;
	struct cap *c;
};

static void second_lib(void *arg)
{
	struct hop *h = arg;
	libs[h->lib].recurse(h->depth, capture, h->c);
}

/* Frames of both builds on one stack. */
static void test_mixed(void **state)
{
	(void)state;
	for (int l = 0; l < 2; l++) {
		struct cap c;
		struct hop h = {.lib = 1 - l, .depth = 3, .c = &c};
		memset(&c, 0, sizeof c);
		libs[l].recurse(4, second_lib, &h);
		check(&c, 1);
	}
}

static void test_qsort_callback(void **state)
{
	(void)state;
	for (int l = 0; l < 2; l++) {
		struct cap c;
		memset(&c, 0, sizeof c);
		libs[l].sorted(capture, &c);
		check(&c, 0);
	}
}

static void *thread_main(void *arg)
{
	struct cap *c = arg;
	libs[1].recurse(6, capture, c);
	return NULL;
}

static void test_thread(void **state)
{
	(void)state;
	struct cap c;
	pthread_t t;
	memset(&c, 0, sizeof c);
	assert_int_equal(pthread_create(&t, NULL, thread_main, &c), 0);
	pthread_join(t, NULL);
	check(&c, 1);
}

/* Without the rule table every frame is derived afresh: same result. */
static void test_no_table(void **state)
{
	(void)state;
	struct cap c;
	hp_unwind_fini();
	memset(&c, 0, sizeof c);
	libs[0].recurse(3, capture, &c);
	assert_int_equal(hp_unwind_init(), 0);
	check(&c, 1);
}

static uint64_t rng = 88172645463325252ull;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* A value a corrupt stack might hold: a real return address, a stack address, noise, 0. */
static uint64_t garbage(const struct cap *c, const uint64_t *buf, size_t n)
{
	switch (next() % 5) {
	case 0:
	case 1:
		return c->slow[next() % c->nslow];
	case 2:
		return (uintptr_t)&buf[next() % n] + next() % 8;
	case 3:
		return next() % 8 ? next() : 0;
	default:
		return next() % 256;
	}
}

__attribute__((noinline)) static void fuzz(const struct cap *c)
{
	uint64_t buf[512], frames[MAX];
	size_t n = sizeof buf / sizeof buf[0];
	for (int iter = 0; iter < 20000; iter++) {
		for (size_t i = 0; i < n; i++)
			buf[i] = garbage(c, buf, n);
		uintptr_t pc = c->slow[next() % c->nslow] - 1;
		uintptr_t sp = (uintptr_t)&buf[next() % n] + (next() % 4 == 0 ? next() % 8 : 0);
		int r = hp_unwind_regs(frames, MAX, 0, 0, pc, sp, garbage(c, buf, n));
		assert_true(r >= -1 && r <= MAX);
	}
}

static void test_garbage(void **state)
{
	(void)state;
	struct cap c;
	uint64_t frames[MAX];
	memset(&c, 0, sizeof c);
	libs[0].recurse(3, capture, &c);
	check(&c, 1);
	fuzz(&c);
	/* A stack pointer in no thread's stack: nothing is read. */
	void *heap = malloc(64);
	assert_int_equal(hp_unwind_regs(frames, MAX, 0, 0, c.slow[0] - 1, 16, 0), -1);
	assert_int_equal(hp_unwind_regs(frames, MAX, 0, 0, c.slow[0] - 1, (uintptr_t)heap, 0), -1);
	assert_int_equal(hp_unwind_regs(frames, MAX, 0, 0, c.slow[0] - 1, UINTPTR_MAX - 7, 0), -1);
	free(heap);
}

/* The memo's walks against libgcc's, one after the other, on shapes that share frames with
 * the walk before in every way: deeper, shallower, the same, the same frames below a
 * different caller, variable-size frames of another size at the same depth, both builds,
 * another thread's stack, and walks cut at max. */
static struct hp_unwind_memo *memo, *memo_from;
static int memo_same;

/* test_rel_checks: memo_unwind tests rel_in (made for rel_frames, rel_depth of them) from
 * its frame before it walks, and makes rel_out from its walk after. */
#define REL_CAP (HP_UNWIND_REL_HEAD + 3 * MAX)
static const uint16_t *rel_in;
static const uint64_t *rel_frames;
static unsigned rel_depth, rel_len;
static uint16_t *rel_out;
static int rel_holds;

/* Called like the others from call_unwinder, and walks from its own frame as a hook does,
 * so its first frame is the return into call_unwinder, as the slow walk's is. With two
 * memos, frames the splice left unwritten are poisoned first, so that any that
 * hp_unwind_memo_tail does not write compare unequal. */
__attribute__((noinline)) static unsigned memo_unwind(uint64_t *f, unsigned max, uintptr_t lo,
						      uintptr_t hi)
{
	uintptr_t frame = (uintptr_t)__builtin_frame_address(0);
	unsigned n;
	if (rel_in)
		rel_holds = hp_unwind_rel_holds(rel_in, rel_frames, rel_depth, frame);
	if (memo_from) {
		memset(f, 0xa5, max * sizeof *f);
		n = hp_unwind_memo_from(f, max, lo, hi, frame, memo, memo_from, 1, &memo_same);
		hp_unwind_memo_tail(memo, f, n);
	} else {
		n = hp_unwind_memo(f, max, lo, hi, frame, memo, &memo_same);
	}
	if (rel_out)
		rel_len = hp_unwind_rel_make(memo, frame, rel_out, REL_CAP);
	__asm__ volatile("" ::: "memory");
	return n;
}

struct memo_cap {
	uint64_t memo[MAX], slow[MAX];
	unsigned nmemo, nslow, max;
	int same;
};

static void capture_memo(void *arg)
{
	struct memo_cap *c = arg;
	for (volatile int i = 0; i < 2; i++) {
		unsigned n =
		    call_unwinder(i ? memo_unwind : hp_unwind_slow, i ? c->memo : c->slow, c->max);
		*(i ? &c->nmemo : &c->nslow) = n;
	}
	c->same = memo_same;
}

enum { S_RECURSE, S_ALLOCA, S_TWO_SITES, S_MIXED };

struct memo_shape {
	int kind, lib, a, b;
	unsigned max;
	int same; /* the frames must equal the walk before's */
};

static void *memo_thread(void *arg)
{
	libs[0].recurse(4, capture_memo, arg);
	return NULL;
}

static void mixed_memo(void *arg)
{
	libs[1].recurse(2, capture_memo, arg);
}

static void run_memo_shape(const struct memo_shape *s, struct memo_cap *c)
{
	memset(c, 0, sizeof *c);
	c->max = s->max;
	switch (s->kind) {
	case S_RECURSE:
		libs[s->lib].recurse(s->a, capture_memo, c);
		break;
	case S_ALLOCA:
		libs[s->lib].alloca_chain(s->a, s->b, capture_memo, c);
		break;
	case S_TWO_SITES:
		libs[s->lib].two_sites(s->a, capture_memo, c);
		break;
	default:
		libs[0].recurse(s->a, mixed_memo, c);
		break;
	}
}

static const struct memo_shape shapes[] = {
    {S_RECURSE, 0, 5, 0, MAX, 0},   {S_RECURSE, 0, 5, 0, MAX, 1},   {S_RECURSE, 0, 3, 0, MAX, 0},
    {S_RECURSE, 0, 9, 0, MAX, 0},   {S_RECURSE, 1, 9, 0, MAX, 0},   {S_RECURSE, 1, 9, 0, MAX, 1},
    {S_TWO_SITES, 0, 1, 0, MAX, 0}, {S_TWO_SITES, 0, 0, 0, MAX, 0}, {S_TWO_SITES, 0, 0, 0, MAX, 1},
    {S_TWO_SITES, 1, 1, 0, MAX, 0}, {S_ALLOCA, 0, 3, 24, MAX, 0},   {S_ALLOCA, 0, 3, 40, MAX, 0},
    {S_ALLOCA, 0, 3, 40, MAX, 1},   {S_ALLOCA, 1, 4, 8, MAX, 0},    {S_MIXED, 0, 3, 0, MAX, 0},
    {S_MIXED, 0, 3, 0, MAX, 1},	    {S_RECURSE, 0, 70, 0, 20, 0},   {S_RECURSE, 0, 60, 0, 20, 0},
    {S_RECURSE, 0, 60, 0, MAX, 0},  {S_RECURSE, 0, 6, 0, 8, 0},	    {S_RECURSE, 0, 2, 0, 8, 0},
    {S_RECURSE, 0, 2, 0, MAX, 0},
};

static void check_memo_shape(size_t i, const struct memo_cap *c)
{
	assert_true(c->nslow > 3);
	assert_int_equal(c->nmemo, c->nslow);
	assert_memory_equal(c->memo, c->slow, c->nslow * sizeof c->slow[0]);
	if (shapes[i].same && memo)
		assert_true(c->same);
	if (i && !shapes[i].same && shapes[i].kind == shapes[i - 1].kind &&
	    shapes[i].a != shapes[i - 1].a)
		assert_false(c->same);
}

static void test_memo(void **state)
{
	(void)state;
	struct hp_unwind_memo *m = hp_unwind_memo_new(MAX);
	assert_non_null(m);
	/* The last round walks without a memo (a thread that could not have one). */
	for (int round = 0; round < 4; round++) {
		memo = round < 3 ? m : NULL;
		for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
			struct memo_cap c;
			run_memo_shape(&shapes[i], &c);
			check_memo_shape(i, &c);
		}
		struct memo_cap c = {.max = MAX};
		pthread_t t;
		assert_int_equal(pthread_create(&t, NULL, memo_thread, &c), 0);
		pthread_join(t, NULL);
		assert_int_equal(c.nmemo, c.nslow);
		assert_memory_equal(c.memo, c.slow, c.nslow * sizeof c.slow[0]);
		assert_false(c.same);
	}
	hp_unwind_memo_free(m);
	memo = NULL;
}

/* The same shapes with three memos, as the payload keeps several: each walk is written into
 * one memo (in turn) and spliced against the one holding the walk before, so every splice
 * copies its tail from another memo. */
static void test_memo_from(void **state)
{
	(void)state;
	struct hp_unwind_memo *m = hp_unwind_memos_reserve(MAX, 3), *ms[3];
	assert_non_null(m);
	hp_unwind_memos_ready(m, 1);
	hp_unwind_memos_ready(m, 2);
	for (int k = 0; k < 3; k++)
		ms[k] = (struct hp_unwind_memo *)((char *)m + hp_unwind_memo_size(MAX) * k);
	unsigned last = 0;
	for (int round = 0; round < 3; round++)
		for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
			unsigned k = (unsigned)(i + round) % 3;
			struct memo_cap c;
			memo = ms[k];
			memo_from = ms[last];
			run_memo_shape(&shapes[i], &c);
			check_memo_shape(i, &c);
			last = k;
		}
	/* Two paths in turn, each kept in a memo of its own: from the third walk on, each is
	 * its memo's last walk again, though the walk before was the other path. */
	for (int j = 0; j < 6; j++) {
		struct memo_cap c;
		memo = ms[j % 2];
		memo_from = ms[last];
		run_memo_shape(&shapes[j % 2 ? 2 : 0], &c);
		assert_int_equal(c.nmemo, c.nslow);
		assert_memory_equal(c.memo, c.slow, c.nslow * sizeof c.slow[0]);
		if (j >= 2)
			assert_int_equal(c.same, 1);
		last = (unsigned)j % 2;
	}
	hp_unwind_memos_free(m, 3);
	memo = memo_from = NULL;
}

/* A thread's memos (the payload's hooks: 28) cost only the head and the first until a path
 * takes another: each other is counted once, when made ready, and the free gives back
 * exactly what was counted. */
static void test_memos_reserved(void **state)
{
	(void)state;
	const unsigned n = 28;
	uint64_t before = atomic_load(&hp_mapped_bytes), memo_sz = hp_unwind_memo_size(MAX);
	struct hp_unwind_memo *m = hp_unwind_memos_reserve(MAX, n);
	assert_non_null(m);
	assert_int_equal(atomic_load(&hp_mapped_bytes) - before, HP_UNWIND_MEMOS_HEAD + memo_sz);
	assert_int_equal(hp_unwind_memos_ready(m, 0), 0);
	assert_int_equal(hp_unwind_memos_ready(m, 9), 1);
	assert_int_equal(hp_unwind_memos_ready(m, 9), 0);
	assert_int_equal(hp_unwind_memos_ready(m, n - 1), 1);
	assert_int_equal(atomic_load(&hp_mapped_bytes) - before,
			 HP_UNWIND_MEMOS_HEAD + 3 * memo_sz);
	/* A memo made ready after others walks like the first. */
	struct memo_cap c;
	memo = (struct hp_unwind_memo *)((char *)m + memo_sz * 9);
	memo_from = m;
	run_memo_shape(&shapes[0], &c);
	check_memo_shape(0, &c);
	hp_unwind_memos_free(m, n);
	assert_int_equal(atomic_load(&hp_mapped_bytes), before);
	memo = memo_from = NULL;
}

/* A caller without frame pointers that holds another value in rbp at each call: the walk
 * from below it meets the last walk's frames at its first step and splices there, though
 * the rbp saved in the callback's frame differs, since no later step reads it. */
static void test_memo_scratch_rbp(void **state)
{
	(void)state;
	struct hp_unwind_memo *m = hp_unwind_memo_new(MAX);
	assert_non_null(m);
	memo = m;
	for (long v = 0; v < 4; v++) {
		struct memo_cap c = {.max = MAX};
		libs[1].scratch_rbp(v * 0x1111, capture_memo, &c);
		assert_true(c.nslow > 3);
		assert_int_equal(c.nmemo, c.nslow);
		assert_memory_equal(c.memo, c.slow, c.nslow * sizeof c.slow[0]);
		if (v) {
			assert_true(c.same);
			assert_int_equal(m->walked, 1);
		}
	}
	hp_unwind_memo_free(m);
	memo = NULL;
}

/* The unwinder called from one of two call sites of one function: a walk from memo_unwind's
 * frame then begins at the same address with another return address, and every frame above
 * it is the same. The distinct asm after each call keeps the compiler from merging them. */
__attribute__((noinline)) static unsigned call_unwinder_at(int site, unwind_fn fn, uint64_t *f)
{
	unsigned n;
	if (site) {
		n = fn(f, MAX, 0, 0);
		__asm__ volatile("# after site 1" ::: "memory");
	} else {
		n = fn(f, MAX, 0, 0);
		__asm__ volatile("# after site 0" ::: "memory");
	}
	return n;
}

/* The inline check compares two (address, value) pairs a turn, an odd count made even with
 * a pair that always holds: a walk that repeats is found to, whatever the parity of its
 * pairs. parity_cb walks from its own frame into memo and then asks as a hook does: the
 * first ask makes the checks, the second runs them inline. */
struct parity {
	unsigned seen[2], held[2];
};

__attribute__((noinline)) static void parity_cb(void *arg)
{
	struct parity *p = arg;
	uintptr_t frame = (uintptr_t)__builtin_frame_address(0);
	uint64_t f[MAX];
	int same;
	hp_unwind_memo(f, MAX, 0, 0, frame, memo, &same);
	if (hp_unwind_memo_repeats(memo, frame, MAX) && memo->nchk != HP_MEMO_CHECKS_LONG) {
		unsigned odd = (memo->nchk - 1) % 2;
		p->seen[odd]++;
		p->held[odd] += (unsigned)hp_unwind_memo_holds(memo, frame);
	}
	__asm__ volatile("" ::: "memory");
}

static void test_memo_checks_paired(void **state)
{
	(void)state;
	memo = hp_unwind_memo_new(MAX);
	assert_non_null(memo);
	struct parity p = {{0}, {0}};
	for (int lib = 0; lib < 2; lib++)
		for (int d = 0; d < 8; d++)
			libs[lib].recurse(d, parity_cb, &p);
	print_message("pairs even %u times, odd %u\n", p.seen[0], p.seen[1]);
	assert_true(p.seen[0] > 0 && p.seen[1] > 0);
	assert_int_equal(p.held[0], p.seen[0]);
	assert_int_equal(p.held[1], p.seen[1]);
	hp_unwind_memo_free(memo);
	memo = NULL;
}

/* A repeat of the memo's walk is told apart by its first return address alone. */
static void test_memo_first_return(void **state)
{
	(void)state;
	struct hp_unwind_memo *m = hp_unwind_memo_new(MAX);
	assert_non_null(m);
	memo = m;
	static const int sites[] = {0, 0, 0, 1, 1, 0};
	for (size_t i = 0; i < sizeof sites / sizeof sites[0]; i++) {
		struct memo_cap c = {.max = MAX};
		/* One call site for both, as in capture_memo. */
		for (volatile int j = 0; j < 2; j++) {
			unsigned n = call_unwinder_at(sites[i], j ? memo_unwind : hp_unwind_slow,
						      j ? c.memo : c.slow);
			*(j ? &c.nmemo : &c.nslow) = n;
		}
		assert_true(c.nslow > 3);
		assert_int_equal(c.nmemo, c.nslow);
		assert_memory_equal(c.memo, c.slow, c.nslow * sizeof c.slow[0]);
		assert_int_equal(memo_same, i > 0 && sites[i] == sites[i - 1]);
	}
	hp_unwind_memo_free(m);
	memo = NULL;
}

/* Two paths in turn through one memo, which differ a few frames up: each check of the memo
 * fails, so after a few it is no longer made, but made again every so many walks. Then one
 * path stays: a check left out is a walk spliced against the memo, never wrong, and a later
 * check finds the walk whole (same 1) from then on. Every walk is the slow walk's. */
#define TURNS 13u
static void test_memo_skips_failing(void **state)
{
	(void)state;
	struct hp_unwind_memo *m = hp_unwind_memo_new(MAX);
	assert_non_null(m);
	memo = m;
	unsigned whole = 0;
	for (unsigned i = 0; i < 64; i++) {
		struct memo_shape s = {S_TWO_SITES, 0, i < TURNS ? (int)(i & 1) : 1, 0, MAX, 0};
		struct memo_cap c;
		run_memo_shape(&s, &c);
		assert_true(c.nslow > 3);
		assert_int_equal(c.nmemo, c.nslow);
		assert_memory_equal(c.memo, c.slow, c.nslow * sizeof c.slow[0]);
		if (i <= TURNS)
			assert_int_not_equal(c.same, 1);
		else if (whole)
			assert_int_equal(c.same, 1);
		else if (c.same == 1)
			whole = i;
	}
	/* Walk TURNS + 1 is walk TURNS's path again: checked, it would be found whole. */
	assert_true(whole > TURNS + 1 && whole <= TURNS + 1 + 16);
	assert_int_equal(m->misses, 0);
	hp_unwind_memo_free(m);
	memo = NULL;
}

/* A walk's checks, made from one shape, tested from every shape of the same max: they
 * hold for the shape they were made from, and only where the walk there has exactly their
 * frames. Many shapes share their inner frames and differ further up (a recursion one
 * deeper, the same callback below other callers), or have the same return addresses with
 * frames of another size (alloca), or rbp values that frames with frame pointers read. */
static void rel_shape(const struct memo_shape *s, struct memo_cap *c, uint16_t *out,
		      const uint16_t *in, const struct memo_cap *from)
{
	rel_out = out;
	rel_in = in;
	rel_frames = from ? from->memo : NULL;
	rel_depth = from ? from->nmemo : 0;
	rel_holds = -1;
	run_memo_shape(s, c);
	rel_out = NULL;
	rel_in = NULL;
	assert_int_equal(c->nmemo, c->nslow);
	assert_memory_equal(c->memo, c->slow, c->nslow * sizeof c->slow[0]);
}

static int same_shape(const struct memo_shape *a, const struct memo_shape *b)
{
	return a->kind == b->kind && a->lib == b->lib && a->a == b->a && a->b == b->b;
}

struct rel_thread {
	uint16_t *out;
	const uint16_t *in;
	const struct memo_cap *from;
	struct memo_cap c;
	int holds;
};

static void *rel_thread_main(void *arg)
{
	struct rel_thread *r = arg;
	struct memo_shape s = {S_RECURSE, 0, 4, 0, MAX, 0};
	rel_shape(&s, &r->c, r->out, r->in, r->from);
	r->holds = rel_holds;
	return NULL;
}

static void test_rel_checks(void **state)
{
	(void)state;
	struct hp_unwind_memo *m = hp_unwind_memo_new(MAX);
	assert_non_null(m);
	memo = m;
	const size_t n = sizeof shapes / sizeof shapes[0];
	unsigned held = 0, refused = 0;
	for (size_t i = 0; i < n; i++) {
		for (size_t j = 0; j < n; j++) {
			if (shapes[j].max != shapes[i].max)
				continue;
			uint16_t chk[REL_CAP];
			struct memo_cap a, b;
			/* One call site for both, so that the frames above it are the same. */
			for (volatile int k = 0; k < 2; k++)
				rel_shape(k ? &shapes[j] : &shapes[i], k ? &b : &a, k ? NULL : chk,
					  k ? chk : NULL, k ? &a : NULL);
			assert_true(rel_len > HP_UNWIND_REL_HEAD);
			int same = b.nmemo == a.nmemo &&
				   !memcmp(b.memo, a.memo, a.nmemo * sizeof a.memo[0]);
			if (same_shape(&shapes[i], &shapes[j]))
				assert_int_equal(rel_holds, 1);
			else if (rel_holds)
				assert_true(same);
			held += rel_holds == 1;
			refused += rel_holds == 0;
		}
	}
	assert_true(held > 0 && refused > held);
	/* Made on one thread's stack, they hold on another's at other addresses, and on the
	 * main thread's, whose outer frames differ, they do not. */
	uint16_t chk[REL_CAP];
	struct rel_thread t1 = {.out = chk}, t2 = {.in = chk, .from = &t1.c};
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, rel_thread_main, &t1), 0);
	pthread_join(t, NULL);
	assert_true(rel_len > HP_UNWIND_REL_HEAD);
	assert_int_equal(pthread_create(&t, NULL, rel_thread_main, &t2), 0);
	pthread_join(t, NULL);
	assert_int_equal(t2.holds, 1);
	struct rel_thread t3 = {.in = chk, .from = &t1.c};
	rel_thread_main(&t3);
	assert_int_equal(t3.holds, 0);
	hp_unwind_memo_free(m);
	memo = NULL;
}

/* The checks word by word, made by hand over words of this thread's stack: each return
 * address and each rbp value must be where they say, the modules' count the same, and the
 * frame aligned and on the calling thread's stack. */
static void test_rel_words(void **state)
{
	(void)state;
	uintptr_t w[8] = {0};
	uintptr_t frame = (uintptr_t)w;
	const uint64_t f[2] = {0x401234, 0x405678};
	uint32_t gen = (uint32_t)atomic_load(&hp_unwind_gen);
	/* Return addresses at w[1] and w[5], and w[4] holding the address of w[6]. */
	const uint16_t chk[] = {(uint16_t)gen, (uint16_t)(gen >> 16), 5, 1, 0, 1, 5, 4, 6};
	w[1] = f[0];
	w[5] = f[1];
	w[4] = (uintptr_t)&w[6];
	assert_int_equal(hp_unwind_rel_holds(chk, f, 2, frame), 1);
	w[5]++;
	assert_int_equal(hp_unwind_rel_holds(chk, f, 2, frame), 0);
	w[5]--;
	w[4] += 8;
	assert_int_equal(hp_unwind_rel_holds(chk, f, 2, frame), 0);
	w[4] -= 8;
	atomic_fetch_add(&hp_unwind_gen, 1);
	assert_int_equal(hp_unwind_rel_holds(chk, f, 2, frame), 0);
	atomic_fetch_sub(&hp_unwind_gen, 1);
	assert_int_equal(hp_unwind_rel_holds(chk, f, 2, frame + 4), 0);
	uintptr_t *heap = calloc(8, sizeof *heap);
	assert_non_null(heap);
	memcpy(heap, w, sizeof w);
	heap[4] = (uintptr_t)&heap[6];
	assert_int_equal(hp_unwind_rel_holds(chk, f, 2, (uintptr_t)heap), 0);
	free(heap);
	assert_int_equal(hp_unwind_rel_holds(chk, f, 2, frame), 1);
}

/* A delta's words by hand (stacks.c): two added below the join and the kept ones from the
 * join up, on this thread's stack. Each word is compared wherever it falls among the kept
 * ones' groups of four, and the join must be where it says: a frame that is not the one the
 * words were tied to, by a word or by less, is refused. */
static void test_words_hold(void **state)
{
	(void)state;
	enum { KEPT = 9, WORDS = 2 * KEPT + 8 };
	uintptr_t s[WORDS] = {0};
	uintptr_t frame = (uintptr_t)s;
	static struct hp_unwind_words w;
	/* Kept words outermost first, from s[2 * KEPT + 4] down to the join at s[6]. */
	for (unsigned i = 0; i < KEPT; i++) {
		unsigned at = 2 * (KEPT - 1 - i) + 6;
		hp_unwind_words_put(
		    &w, i, (struct hp_unwind_word){(uintptr_t)&s[at], 0x401000 + 0x10 * i});
		s[at] = w.ra[i];
	}
	const uint16_t off[HP_UNWIND_ADDED] = {4, 1};
	const uint64_t ra[HP_UNWIND_ADDED] = {0x402000, 0x402010};
	s[4] = ra[0];
	s[1] = ra[1];
	for (unsigned keep = 1; keep <= KEPT; keep++) {
		unsigned join = 2 * (KEPT - keep) + 6;
		/* The words past keep are not the stack's: none may be read. */
		for (unsigned i = keep; i < KEPT; i++)
			w.ra[i] ^= 0x40;
		assert_int_equal(hp_unwind_words_hold(&w, keep, join, off, ra, frame), 1);
		assert_int_equal(hp_unwind_words_hold(&w, keep, join + 2, off, ra, frame), 0);
		assert_int_equal(hp_unwind_words_hold(&w, keep, join, off, ra, frame + 4), 0);
		for (unsigned i = 0; i < keep; i++) {
			*(uintptr_t *)w.at[i] ^= 0x40;
			assert_int_equal(hp_unwind_words_hold(&w, keep, join, off, ra, frame), 0);
			*(uintptr_t *)w.at[i] ^= 0x40;
		}
		for (unsigned i = 0; i < HP_UNWIND_ADDED; i++) {
			s[off[i]] ^= 0x40;
			assert_int_equal(hp_unwind_words_hold(&w, keep, join, off, ra, frame), 0);
			s[off[i]] ^= 0x40;
		}
		for (unsigned i = keep; i < KEPT; i++)
			w.ra[i] ^= 0x40;
	}
	/* A word outside the kept ones changes nothing. */
	s[5] = 0xdead;
	assert_int_equal(hp_unwind_words_hold(&w, KEPT, 6, off, ra, frame), 1);
	assert_int_equal(hp_unwind_words_hold(&w, KEPT, 6, off, ra, frame + 8), 0);
}

/* Return addresses only, at every depth the checks' loop treats apart (under four, a
 * multiple of four, and each remainder past one): each word is compared, whatever its
 * place among the ones the loop reads in a group. */
static void test_rel_depths(void **state)
{
	(void)state;
	enum { MAXD = 13 };
	uintptr_t w[MAXD + 2] = {0};
	uint64_t f[MAXD];
	uint16_t chk[HP_UNWIND_REL_HEAD + MAXD];
	uint32_t gen = (uint32_t)atomic_load(&hp_unwind_gen);
	for (unsigned d = 1; d <= MAXD; d++) {
		chk[0] = (uint16_t)gen;
		chk[1] = (uint16_t)(gen >> 16);
		chk[2] = (uint16_t)d;
		chk[3] = 0;
		chk[4] = 0;
		for (unsigned i = 0; i < d; i++) {
			chk[HP_UNWIND_REL_HEAD + i] = (uint16_t)(i + 1);
			f[i] = 0x401000 + 0x10 * i + d;
			w[i + 1] = f[i];
		}
		assert_int_equal(hp_unwind_rel_holds(chk, f, d, (uintptr_t)w), 1);
		for (unsigned i = 0; i < d; i++) {
			w[i + 1] ^= 0x40;
			assert_int_equal(hp_unwind_rel_holds(chk, f, d, (uintptr_t)w), 0);
			w[i + 1] ^= 0x40;
		}
		assert_int_equal(hp_unwind_rel_holds(chk, f, d, (uintptr_t)w), 1);
	}
}

static int load(struct lib *l, const char *path, const char *pfx)
{
	char name[64];
	l->h = dlopen(path, RTLD_NOW);
	if (!l->h)
		return -1;
	snprintf(name, sizeof name, "%srecurse", pfx);
	l->recurse = (recurse_fn)dlsym(l->h, name);
	snprintf(name, sizeof name, "%salloca_chain", pfx);
	l->alloca_chain = (alloca_fn)dlsym(l->h, name);
	snprintf(name, sizeof name, "%ssorted", pfx);
	l->sorted = (sorted_fn)dlsym(l->h, name);
	snprintf(name, sizeof name, "%stwo_sites", pfx);
	l->two_sites = (two_sites_fn)dlsym(l->h, name);
	snprintf(name, sizeof name, "%sscratch_rbp", pfx);
	l->scratch_rbp = (scratch_rbp_fn)dlsym(l->h, name);
	return l->recurse && l->alloca_chain && l->sorted && l->two_sites && l->scratch_rbp ? 0
											    : -1;
}

static int setup(void **state)
{
	(void)state;
	if (load(&libs[0], UNWIND_FP_PATH, "fp_") < 0 ||
	    load(&libs[1], UNWIND_NOFP_PATH, "nofp_") < 0)
		return -1;
	return hp_unwind_init();
}

static int teardown(void **state)
{
	(void)state;
	hp_unwind_fini();
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_recursion),
	    cmocka_unit_test(test_alloca),
	    cmocka_unit_test(test_mixed),
	    cmocka_unit_test(test_qsort_callback),
	    cmocka_unit_test(test_thread),
	    cmocka_unit_test(test_no_table),
	    cmocka_unit_test(test_garbage),
	    cmocka_unit_test(test_memo),
	    cmocka_unit_test(test_memo_from),
	    cmocka_unit_test(test_memos_reserved),
	    cmocka_unit_test(test_memo_scratch_rbp),
	    cmocka_unit_test(test_memo_first_return),
	    cmocka_unit_test(test_memo_checks_paired),
	    cmocka_unit_test(test_memo_skips_failing),
	    cmocka_unit_test(test_rel_checks),
	    cmocka_unit_test(test_rel_words),
	    cmocka_unit_test(test_rel_depths),
	    cmocka_unit_test(test_words_hold),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
