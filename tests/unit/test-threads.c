/* test-threads.c - payload/threads.c's site counters, in one process: which counters a
 * thread's sites go to, and that every event is counted once wherever it went.
 *
 * A thread's sites go to its hash table until it holds HP_DENSE_AFTER of them; then, if
 * they are of many stacks, the thread gets counters by stack id, whose pages are admitted
 * only while the thread's claimed counters fill them to an eighth (past the first two).
 * Each test runs its events in a thread of its own on a fresh table of records, then
 * drains the counters as the collector does and checks every site's counts. */
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/membarrier.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "payload/livemap.h"
#include "payload/payload.h"
#include "payload/threads.h"

struct hp_payload hp;

/* start.c's clock: only a sampling decision's seed reads it, and nothing here samples. */
uint32_t hp_now_ms(void)
{
	return 0;
}

/* What a worker thread adds: sites of nstacks stack ids, spacing apart from first, each
 * of nsizes exact sizes, every site allocated and freed reps times. */
struct plan {
	uint32_t first, spacing, nstacks, nsizes, reps;
	/* Seen by the worker after its adds. */
	int dense;
	uint32_t hashed; /* sites in its active hash table */
	uint64_t mapped; /* hp_mapped_bytes after its adds */
};

static uint64_t key_of(const struct plan *p, uint32_t s, uint32_t z)
{
	return hp_site_key(p->first + s * p->spacing, hp_size_code(16 + z));
}

static void *worker(void *arg)
{
	struct plan *p = arg;
	struct hp_thread *t = hp_thread_self();
	assert_non_null(t);
	for (uint32_t r = 0; r < p->reps; r++)
		for (uint32_t s = 0; s < p->nstacks; s++)
			for (uint32_t z = 0; z < p->nsizes; z++) {
				uint64_t n = 16 + z;
				hp_thread_add_alloc(t, key_of(p, s, z), HP_FX_ONE, n);
				hp_thread_add_free(t, key_of(p, s, z), HP_FX_ONE, n, 0);
			}
	p->dense = atomic_load(&t->dense) != NULL;
	p->hashed = t->tab[atomic_load(&t->active)].count;
	p->mapped = atomic_load(&hp_mapped_bytes);
	return NULL;
}

/* The drain's counters summed by site: a site met in the hash table first and claimed by
 * a counter by stack id later has one of each, which the collector adds up the same way. */
struct drained {
	const struct plan *p;
	uint64_t *allocs, *frees;
	uint32_t counters, foreign;
};

static void drained_site(const struct hp_site_ctr *c, void *arg)
{
	struct drained *d = arg;
	const struct plan *p = d->p;
	uint32_t id = hp_site_key_stack(c->key), size = hp_site_key_code(c->key) & 0xffffff;
	uint32_t s = (id - p->first) / p->spacing, z = size - 16;
	d->counters++;
	if (id < p->first || (id - p->first) % p->spacing || s >= p->nstacks || size < 16 ||
	    z >= p->nsizes || c->key != key_of(p, s, z) || c->temp_frees) {
		d->foreign++;
		return;
	}
	d->allocs[s * p->nsizes + z] += c->allocs;
	d->frees[s * p->nsizes + z] += c->frees;
}

/* Runs p in a thread of its own and checks every site's counts after a drain. */
static void run_plan(struct plan *p)
{
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, worker, p), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	uint32_t n = p->nstacks * p->nsizes;
	struct drained d = {.p = p, .allocs = calloc(n, 8), .frees = calloc(n, 8)};
	assert_true(d.allocs && d.frees);
	struct hp_sum sum;
	memset(&sum, 0, sizeof sum);
	hp_threads_drain(drained_site, &d, &sum);
	assert_int_equal(d.foreign, 0);
	assert_int_equal(sum.lost, 0);
	for (uint32_t i = 0; i < n; i++) {
		assert_int_equal(d.allocs[i], (uint64_t)p->reps * HP_FX_ONE);
		assert_int_equal(d.frees[i], (uint64_t)p->reps * HP_FX_ONE);
	}
	print_message("%u stacks %u apart, %u sizes: dense %d, %u sites hashed, %u counters\n",
		      p->nstacks, p->spacing, p->nsizes, p->dense, p->hashed, d.counters);
	free(d.allocs);
	free(d.frees);
}

static int setup(void **state)
{
	(void)state;
	memset(&hp, 0, sizeof hp);
	hp.args.mode = HP_MODE_FULL;
	hp.max_memory = 1ull << 30;
	return hp_threads_init(hp_reserve_is_free());
}

static int teardown(void **state)
{
	(void)state;
	hp_threads_fini();
	assert_int_equal(atomic_load(&hp_mapped_bytes), 0);
	return 0;
}

/* Without membarrier the records take a lock and no thread gets dense counters. */
static void need_dense(void)
{
	if (!hp_threads_fenced || !hp_reserve_is_free())
		skip();
}

/* A few sites: the hash table, and the thread's last counter for each repeat. */
static void test_few_sites(void **state)
{
	(void)state;
	struct plan p = {.first = 1, .spacing = 1, .nstacks = 20, .nsizes = 3, .reps = 5};
	run_plan(&p);
	assert_false(p.dense);
	assert_int_equal(p.hashed, 60);
}

/* Many stacks, ids in a row (binary-trees): past HP_DENSE_AFTER sites every new one is
 * counted by stack id. */
static void test_dense_in_a_row(void **state)
{
	(void)state;
	need_dense();
	struct plan p = {.first = 1, .spacing = 1, .nstacks = 3000, .nsizes = 1, .reps = 3};
	run_plan(&p);
	assert_true(p.dense);
	assert_in_range(p.hashed, HP_DENSE_AFTER, HP_DENSE_AFTER + 1);
}

/* Many sizes of a few stacks (shbench): each stack's one counter by id would be taken by
 * one size and checked for nothing by all the others, so the thread gets none. */
static void test_dense_does_not_pay(void **state)
{
	(void)state;
	need_dense();
	struct plan p = {.first = 1, .spacing = 1, .nstacks = 2, .nsizes = 1000, .reps = 2};
	run_plan(&p);
	assert_false(p.dense);
	assert_int_equal(p.hashed, 2000);
}

/* Stack ids eight apart fill each page of counters (128 of them) to exactly the fill rule's
 * eighth, so every page is admitted; sixteen apart, only the first two are, and the rest of
 * the sites stay in the hash table, where a page each would cost 4 KB a site. */
static void test_fill_rule(void **state)
{
	(void)state;
	need_dense();
	const uint32_t n = 3000;
	struct plan eighth = {.first = 1, .spacing = 8, .nstacks = n, .nsizes = 1, .reps = 2};
	run_plan(&eighth);
	assert_true(eighth.dense);
	assert_in_range(eighth.hashed, HP_DENSE_AFTER, HP_DENSE_AFTER + 1);
	teardown(state);
	setup(state);
	struct plan sparse = {.first = 1, .spacing = 16, .nstacks = n, .nsizes = 1, .reps = 2};
	run_plan(&sparse);
	assert_true(sparse.dense);
	/* Two pages of eight ids each were admitted, whichever the first ones were. */
	assert_in_range(sparse.hashed, n - 16 - 1, n - 16 + 1);
	/* A page a site would have taken the sparse thread to 10 MB of counters; it holds less
	 * than the thread at an eighth, whose pages are each an eighth full. */
	print_message("mapped: %" PRIu64 " KB at an eighth, %" PRIu64 " KB at a sixteenth\n",
		      eighth.mapped >> 10, sparse.mapped >> 10);
	assert_true(sparse.mapped < eighth.mapped);
}

/* A site of an inexact size adds its bytes to a companion counter right after its own
 * add. One exact site first makes the 16th such site's companion the insert that grows the
 * table (past half of 64 slots), right after the site's own counter became the thread's
 * last: the free that follows must not go through the last counter into the table that
 * was unmapped (threads.h, struct hp_thread's last). */
#define GROW_SITES 40u
static void *grow_worker(void *arg)
{
	(void)arg;
	struct hp_thread *t = hp_thread_self();
	assert_non_null(t);
	hp_thread_add_alloc(t, hp_site_key(1, hp_size_code(16)), HP_FX_ONE, 16);
	for (uint32_t s = 0; s < GROW_SITES; s++) {
		uint64_t n = HP_EXACT_SIZE_MAX + 1, key = hp_site_key(2 + s, hp_size_code(n));
		hp_thread_add_alloc(t, key, HP_FX_ONE, n);
		hp_thread_add_free(t, key, HP_FX_ONE, n, 0);
	}
	return NULL;
}

struct grown {
	uint32_t sites, bytes, wrong;
};

static void grown_site(const struct hp_site_ctr *c, void *arg)
{
	struct grown *g = arg;
	uint64_t want = (c->key & HP_SITE_BYTES) ? (HP_EXACT_SIZE_MAX + 1ull) << HP_FX : HP_FX_ONE;
	uint64_t frees = hp_site_key_stack(c->key) == 1 ? 0 : want;
	if (c->key & HP_SITE_BYTES)
		g->bytes++;
	else
		g->sites++;
	g->wrong += c->allocs != want || c->frees != frees;
}

static void test_last_after_growth(void **state)
{
	(void)state;
	if (!hp_threads_fenced)
		skip();
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, grow_worker, NULL), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	struct grown g = {0};
	struct hp_sum sum;
	hp_threads_drain(grown_site, &g, &sum);
	assert_int_equal(g.sites, GROW_SITES + 1);
	assert_int_equal(g.bytes, GROW_SITES);
	assert_int_equal(g.wrong, 0);
	assert_int_equal(sum.lost, 0);
}

/* A thread keeps its record's address (what the hooks read in place of a search); the
 * record stays readable with its key zeroed after the session, and a forked child sees it
 * zeroed, so that neither a late hook nor a child's matches it (payload.h, self_flip). The
 * session's end gives the records' memory back once, however often it is asked to. */
static void test_record_kept_and_forgotten(void **state)
{
	(void)state;
	struct hp_thread *t = hp_thread_self();
	assert_non_null(t);
	assert_ptr_equal(hp_thread_mine, t);
	assert_int_equal(atomic_load(&t->key), hp_self());
	assert_ptr_equal(hp_thread_self(), t);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(atomic_load(&hp_thread_mine->key) == 0 ? 0 : 1);
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_int_equal(atomic_load(&t->key), hp_self());
	uint64_t mapped = atomic_load(&hp_mapped_bytes);
	hp_threads_fini();
	/* Again, as the unload does after the collector's own: nothing more is given back. */
	uint64_t after = atomic_load(&hp_mapped_bytes);
	hp_threads_fini();
	assert_int_equal(atomic_load(&hp_mapped_bytes), after);
	assert_true(after < mapped);
	assert_ptr_equal(hp_thread_mine, t);
	assert_int_equal(atomic_load(&t->key), 0);
	assert_int_equal(hp_threads_init(hp_reserve_is_free()), 0);
	t = hp_thread_self();
	assert_non_null(t);
	assert_ptr_equal(hp_thread_mine, t);
	assert_int_equal(atomic_load(&t->key), hp_self());
}

/* A key round-trips its stack id and size code, no key is 0, and for every size a block's
 * word holds, the word masked is the key of its site: what the free hook counts a block
 * at is what its allocation counted it at (hooks.c, record_free_exact). */
static void test_site_key_of_word(void **state)
{
	(void)state;
	const uint32_t stacks[] = {0, 1, 7, 8, 4095, HP_STACKS_MAX_IDS - 1};
	const uint64_t big[] = {HP_EXACT_SIZE_MAX + 1, 1ull << 20, 3ull << 40};
	for (unsigned i = 0; i < sizeof stacks / sizeof *stacks; i++) {
		for (uint64_t n = 0; n <= HP_EXACT_SIZE_MAX; n++) {
			uint64_t key = hp_site_key(stacks[i], hp_size_code(n));
			assert_int_equal(hp_site_key_stack(key), stacks[i]);
			assert_int_equal(hp_site_key_code(key), hp_size_code(n));
			assert_true(key != 0 && !(key & HP_SITE_BYTES));
			assert_false(hp_site_has_bytes(key));
			if (n > DM_SIZE_INLINE)
				continue;
			assert_int_equal(key, hp_site_key_inline(stacks[i], n));
			struct hp_live_val v = {
			    .stack = stacks[i], .size = n, .birth_ms = UINT32_MAX};
			assert_int_equal(dm_pack(v) & HP_SITE_WORD_MASK, key);
		}
		for (unsigned j = 0; j < sizeof big / sizeof *big; j++) {
			uint64_t key = hp_site_key(stacks[i], hp_size_code(big[j]));
			assert_int_equal(hp_site_key_stack(key), stacks[i]);
			assert_int_equal(hp_site_key_code(key), hp_size_code(big[j]));
			assert_true(hp_site_has_bytes(key) && !(key & HP_SITE_BYTES));
			assert_int_not_equal(key | HP_SITE_BYTES, key);
		}
	}
	uint64_t none = hp_site_key(0, (uint32_t)HP_SIZE_NONE << 24);
	assert_true(none != 0 && hp_site_has_bytes(none));
	assert_int_equal(hp_site_key_code(none), (uint32_t)HP_SIZE_NONE << 24);
}

/* With no seccomp filter the kernel's answer to the query decides, with no barrier made to
 * find out (threads.c, membarrier_works): the lock-free adds wherever it offers the
 * command. */
static void test_fence_from_query(void **state)
{
	(void)state;
	if (prctl(PR_GET_SECCOMP) != 0)
		skip();
	long q = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
	assert_int_equal(hp_threads_fenced, q > 0 && (q & MEMBARRIER_CMD_GLOBAL));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_fence_from_query, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_record_kept_and_forgotten, setup, teardown),
	    cmocka_unit_test(test_site_key_of_word),
	    cmocka_unit_test_setup_teardown(test_few_sites, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_dense_in_a_row, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_dense_does_not_pay, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_fill_rule, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_last_after_growth, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
