/* test-stacks.c - payload/stacks.c's interning: equal stacks get one id, and
 * hp_stack_intern_after gives every capture the id hp_stack_intern gives its frames,
 * whichever way it finds it (its thread's cache, the stack that followed last the time
 * before, or the table). Stacks here are made up: frames are numbers, not addresses, as
 * the table never reads what they point to. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "payload/payload.h"
#include "hpformat.h"
#include "payload/stacks.h"
#include "payload/unwind.h"

/* start.c's: mem.c's helpers read the session's bounds from it. */
struct hp_payload hp;

#define LEVELS 8 /* a tree of 255 nodes: more paths than a thread's cache holds */
#define BASE 3	 /* frames below the tree's root (main and the like) */
#define SITE 0x1000
#define LEFT 0x2000
#define RIGHT 0x3000

static int setup(void **state)
{
	(void)state;
	return hp_stacks_init(0);
}

static int teardown(void **state)
{
	(void)state;
	hp_stacks_fini();
	return 0;
}

/* One capture after another, as a thread makes them: k is how many frames come before the
 * last `depth - k` frames of the stack before, which the unwinder tells the caller. */
struct thread_caps {
	struct hp_stack_cache *c;
	uint32_t last;
	uint64_t prev[64];
	unsigned nprev;
};

/* The frames the two stacks share at their ends. */
static unsigned shared_tail(const uint64_t *a, unsigned na, const uint64_t *b, unsigned nb)
{
	unsigned n = 0;
	while (n < na && n < nb && a[na - 1 - n] == b[nb - 1 - n])
		n++;
	return n;
}

static void capture(struct thread_caps *t, const uint64_t *f, unsigned depth)
{
	uint64_t frames[64];
	memcpy(frames, f, depth * sizeof *f);
	unsigned k = depth - shared_tail(f, depth, t->prev, t->nprev);
	uint32_t id = hp_stack_intern_after(t->c, t->last, frames, depth, k, NULL);
	assert_int_not_equal(id, 0);
	assert_int_equal(id, hp_stack_intern(f, depth));
	t->last = id;
	memcpy(t->prev, f, depth * sizeof *f);
	t->nprev = depth;
}

/* binary-trees' allocations: a node at level d allocates from a stack of the site, then
 * the call sites (left or right) of the d calls above it, then the base. */
static void tree(struct thread_caps *t, unsigned level, uint64_t *path)
{
	uint64_t f[64];
	unsigned n = 0;
	f[n++] = SITE;
	for (unsigned i = level; i-- > 0;)
		f[n++] = path[i];
	for (unsigned i = 0; i < BASE; i++)
		f[n++] = 0x100 + i;
	capture(t, f, n);
	if (level + 1 == LEVELS)
		return;
	path[level] = LEFT;
	tree(t, level + 1, path);
	path[level] = RIGHT;
	tree(t, level + 1, path);
}

static void test_intern(void **state)
{
	(void)state;
	uint64_t a[] = {1, 2, 3}, b[] = {1, 2, 4};
	uint32_t ia = hp_stack_intern(a, 3);
	assert_int_not_equal(ia, 0);
	assert_int_equal(hp_stack_intern(a, 3), ia);
	assert_int_not_equal(hp_stack_intern(b, 3), ia);
	assert_int_not_equal(hp_stack_intern(a, 2), ia);
}

/* The same walk order again and again: from the second tree on, most ids come from the
 * guess, as the cache holds 32 of the tree's 255 paths. */
static void test_after_trees(void **state)
{
	(void)state;
	struct thread_caps t = {.c = hp_stack_cache_new()};
	assert_non_null(t.c);
	uint64_t path[LEVELS] = {0};
	for (int i = 0; i < 3; i++)
		tree(&t, 0, path);
	hp_stack_cache_free(t.c);
}

/* Stack a, then b, then a again and then c, where c has one new frame before a's last
 * frames, as b has: the guess a keeps (b, the stack that came after it the time before)
 * must be told from c by that frame, or by how many of a's frames follow it. */
static void then_other(const uint64_t *a, const uint64_t *b, const uint64_t *c, unsigned nc)
{
	struct thread_caps t = {.c = hp_stack_cache_new()};
	assert_non_null(t.c);
	capture(&t, a, 4);
	capture(&t, b, 4);
	capture(&t, a, 4);
	capture(&t, c, nc);
	hp_stack_cache_free(t.c);
}

static void test_after_wrong_guess(void **state)
{
	(void)state;
	uint64_t a[] = {10, 11, 12, 13}, b[] = {20, 11, 12, 13};
	uint64_t other_frame[] = {30, 11, 12, 13}, shorter_tail[] = {20, 12, 13};
	then_other(a, b, other_frame, 4);
	then_other(a, b, shorter_tail, 3);
}

static int setup_small(void **state)
{
	(void)state;
	return hp_stacks_init(8u << 20);
}

#define DEEP 40
#define VARIANTS 4

/* Stack i of the fill: one of `variants` beginnings of eight frames, then frames of its
 * own. */
static void deep_stack_of(uint64_t *f, unsigned i, unsigned variants)
{
	for (unsigned j = 0; j < 8; j++)
		f[j] = 0x10000 * (i % variants + 1) + j;
	for (unsigned j = 8; j < DEEP; j++)
		f[j] = (uint64_t)i << 20 | j;
}

static void deep_stack(uint64_t *f, unsigned i)
{
	deep_stack_of(f, i, VARIANTS);
}

struct seen {
	unsigned stacks, cut;
	uint32_t cut_ids[VARIANTS + 1];
};

static void on_stack(uint32_t id, const uint64_t *frames, uint32_t depth, void *arg)
{
	struct seen *s = arg;
	s->stacks++;
	if (frames[depth - 1] != HP_FRAME_CUT)
		return;
	assert_int_equal(depth, 9);
	assert_true(s->cut < VARIANTS + 1);
	s->cut_ids[s->cut++] = id;
}

/* A full table cuts stacks short instead of losing them: every stack still gets an id, a
 * stack past the table's end gets its beginning's, made once and ending in HP_FRAME_CUT,
 * and the same stack always gets the same id. */
static void test_cut_when_full(void **state)
{
	(void)state;
	enum { N = 10000 }; /* 8 MiB: 245760 frames before the reserve, 6144 of these stacks */
	static uint32_t ids[N];
	uint64_t f[DEEP];
	for (unsigned i = 0; i < N; i++) {
		deep_stack(f, i);
		ids[i] = hp_stack_intern(f, DEEP);
		assert_int_not_equal(ids[i], 0);
	}
	for (unsigned i = 0; i < N; i += 97) {
		deep_stack(f, i);
		assert_int_equal(hp_stack_intern(f, DEEP), ids[i]);
	}
	assert_int_equal(ids[N - 1], ids[N - 1 - VARIANTS]);
	assert_int_not_equal(ids[N - 1], ids[N - 2]);

	struct seen s = {0};
	hp_stacks_each_new(on_stack, &s);
	assert_int_equal(s.cut, VARIANTS);
	assert_int_equal(s.stacks, hp_stacks_end() - 1);
	assert_true(s.stacks < N - 1000);
	int found = 0;
	for (unsigned v = 0; v < VARIANTS; v++)
		found += s.cut_ids[v] == ids[N - 1];
	assert_int_equal(found, 1);
}

/* Two stacks cut to one id, each followed by a short stack sharing its own last frames:
 * the second short stack must not get the first's id through the cache or the guess kept
 * for what follows the cut id. */
static void test_after_cut(void **state)
{
	(void)state;
	uint64_t f[DEEP];
	for (unsigned i = 0; i < 8000; i++) {
		deep_stack(f, i);
		hp_stack_intern(f, DEEP);
	}
	uint64_t x[] = {1, 2, 3, 4, 5, 6, 7, 8, 100, 200, 300};
	uint64_t x2[] = {1, 2, 3, 4, 5, 6, 7, 8, 101, 201, 301};
	uint64_t y[] = {50, 200, 300}, y2[] = {50, 201, 301};
	assert_int_equal(hp_stack_intern(x, 11), hp_stack_intern(x2, 11));
	struct thread_caps t = {.c = hp_stack_cache_new()};
	assert_non_null(t.c);
	capture(&t, x, 11);
	capture(&t, y, 3);
	capture(&t, x2, 11);
	capture(&t, y2, 3);
	hp_stack_cache_free(t.c);
}

#define CUT_THREADS 4
#define PER_THREAD 4000
/* Many beginnings, so that the reserve takes new stacks all the while the table refuses
 * others: the interleaving where a refused take undone after a later one hands out the
 * same frames twice. */
#define CUT_VARIANTS 1024

static uint32_t thread_ids[CUT_THREADS][PER_THREAD];

static void *intern_many(void *arg)
{
	unsigned t = (unsigned)(uintptr_t)arg;
	uint64_t f[DEEP];
	for (unsigned i = 0; i < PER_THREAD; i++) {
		deep_stack_of(f, t * PER_THREAD + i, CUT_VARIANTS);
		thread_ids[t][i] = hp_stack_intern(f, DEEP);
	}
	return NULL;
}

static struct {
	uint32_t depth;
	uint64_t f[DEEP];
} table_copy[1u << 15];

static void copy_stack(uint32_t id, const uint64_t *frames, uint32_t depth, void *arg)
{
	(void)arg;
	assert_true(id < 1u << 15 && depth <= DEEP);
	table_copy[id].depth = depth;
	memcpy(table_copy[id].f, frames, depth * sizeof *frames);
}

/* Threads filling the table at once, past its end: each stack's id holds its frames, or
 * its cut form, so no frames and no id were handed out twice (the bounds are taken with a
 * CAS, stacks.c's take()). */
static void test_cut_threads(void **state)
{
	(void)state;
	pthread_t th[CUT_THREADS];
	for (unsigned t = 0; t < CUT_THREADS; t++)
		assert_int_equal(pthread_create(&th[t], NULL, intern_many, (void *)(uintptr_t)t),
				 0);
	for (unsigned t = 0; t < CUT_THREADS; t++)
		pthread_join(th[t], NULL);
	hp_stacks_each_new(copy_stack, NULL);
	unsigned cut = 0;
	for (unsigned t = 0; t < CUT_THREADS; t++)
		for (unsigned i = 0; i < PER_THREAD; i++) {
			uint64_t f[DEEP];
			deep_stack_of(f, t * PER_THREAD + i, CUT_VARIANTS);
			uint32_t id = thread_ids[t][i];
			assert_int_not_equal(id, 0);
			if (table_copy[id].depth == 9 && table_copy[id].f[8] == HP_FRAME_CUT) {
				assert_memory_equal(table_copy[id].f, f, 8 * sizeof *f);
				cut++;
			} else {
				assert_int_equal(table_copy[id].depth, DEEP);
				assert_memory_equal(table_copy[id].f, f, sizeof f);
			}
		}
	assert_true(cut > 0);
}

/* A recursion's guesses on a stack made by hand (this thread's own, as the guess requires):
 * node a, then its child b, which adds two words below a's and keeps the three above. The
 * walks are given as memos stopped at their max, which need no unwinding rules. */
enum { R_SITE = 0x401010, R_CALL = 0x401020, R_OUT1 = 0x402010, R_OUT2 = 0x403010 };
/* Where each walk's return addresses are, in words from the stack's start, and what. */
static const unsigned at_a[] = {4, 8, 12, 16}, at_b[] = {1, 4, 8, 12, 16};
static const uint64_t ra_a[] = {R_SITE, R_CALL, R_OUT1, R_OUT2},
		      ra_b[] = {R_SITE, R_CALL, R_CALL, R_OUT1, R_OUT2};

static struct hp_unwind_memo *walk_of(uintptr_t *s, const unsigned *at, const uint64_t *ra,
				      unsigned n)
{
	struct hp_unwind_memo *m = hp_unwind_memo_new(16);
	assert_non_null(m);
	m->gen = atomic_load(&hp_unwind_gen);
	m->n = n;
	m->max = n;
	m->cut = 1;
	for (unsigned i = 0; i < n; i++)
		m->st[i] = (struct hp_unwind_step){.cfa = (uintptr_t)&s[at[i]] + 8, .ra = ra[i]};
	return m;
}

/* Each word of a walk written where the walk read it. */
static void write_walk(uintptr_t *s, const unsigned *at, const uint64_t *ra, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		s[at[i]] = ra[i];
}

/* What a thread does after the walks learnt a -> b: a guessed after x, then b after a. */
static void guess_a_then_b(struct hp_stack_cache *c, uintptr_t *s, uint32_t x, uint32_t a,
			   uint32_t b, uint64_t *delta_bytes)
{
	write_walk(s, at_a, ra_a, 4);
	assert_int_equal(hp_stack_guess(c, x, (uintptr_t)&s[3]), a);
	write_walk(s, at_b, ra_b, 5);
	uint64_t before = hp_stacks_bytes();
	assert_int_equal(hp_stack_guess(c, a, (uintptr_t)&s[0]), b);
	*delta_bytes = hp_stacks_bytes() - before;
}

/* After a dlclose (the modules' count moves on) every delta is stale: the first guess of b
 * after a by its checks, learnt again, makes b's delta anew, as it did the first time, so
 * the recursion is checked by its added words again. */
static void test_delta_after_dlclose(void **state)
{
	(void)state;
	hp.max_memory = 1ull << 30;
	assert_int_equal(hp_unwind_init(), 0);
	uintptr_t s[20] = {0};
	const uint64_t fx[] = {0x404010, R_OUT2};
	uint32_t x = hp_stack_intern(fx, 2), a = hp_stack_intern(ra_a, 4),
		 b = hp_stack_intern(ra_b, 5);
	struct hp_stack_cache *c = hp_stack_cache_new();
	assert_non_null(c);
	uint64_t made[2];
	for (int round = 0; round < 2; round++) {
		struct hp_unwind_memo *ma = walk_of(s, at_a, ra_a, 4),
				      *mb = walk_of(s, at_b, ra_b, 5);
		write_walk(s, at_a, ra_a, 4);
		hp_stack_learn(x, a, ma, (uintptr_t)&s[3]);
		write_walk(s, at_b, ra_b, 5);
		hp_stack_learn(a, b, mb, (uintptr_t)&s[0]);
		guess_a_then_b(c, s, x, a, b, &made[round]);
		uint64_t again;
		guess_a_then_b(c, s, x, a, b, &again);
		assert_int_equal(again, 0);
		/* A word of b's that the delta compares, changed, is seen. */
		s[1] = R_SITE + 1;
		assert_int_equal(hp_stack_guess(c, a, (uintptr_t)&s[0]), 0);
		hp_unwind_memo_free(ma);
		hp_unwind_memo_free(mb);
		atomic_fetch_add(&hp_unwind_gen, 1);
	}
	assert_true(made[0] > 0);
	assert_int_equal(made[1], made[0]);
	hp_stack_cache_free(c);
	hp_unwind_fini();
	hp.max_memory = 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_intern, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_after_trees, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_after_wrong_guess, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_delta_after_dlclose, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_cut_when_full, setup_small, teardown),
	    cmocka_unit_test_setup_teardown(test_after_cut, setup_small, teardown),
	    cmocka_unit_test_setup_teardown(test_cut_threads, setup_small, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
