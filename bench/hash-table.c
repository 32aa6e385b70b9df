/* hash-table.c - every thread owns a table of slots and inserts randomly sized arrays at
 * random slots, freeing the array each insertion replaces (the thesis: 7*10^6 insertions
 * per thread).
 *
 * A step makes 1000 insertions of an array of 1..128 longs, filled, into a random slot of a
 * table of --slots entries (default 10000). An op is one insertion (one malloc; the array
 * replaced is freed, and the rest when the thread ends).
 */
#include "common.h"

#include <stdlib.h>

#define INSERTS_PER_STEP 1000
#define MAX_LEN 128

struct entry {
	long *values;
	long len;
};

struct ht_state {
	struct entry *table;
	uint64_t rng;
	long sum;
};

static long nslots = 10000;

static const struct bench_param params[] = {
    {"slots", &nslots, 1, 100000000, "slots of each thread's table"},
    {0},
};

static void *ht_init(int tid, const struct bench_opts *opts)
{
	struct ht_state *s = calloc(1, sizeof(*s));

	if (!s)
		bench_oom("thread state");
	s->table = calloc((size_t)nslots, sizeof(*s->table));
	if (!s->table)
		bench_oom("table");
	s->rng = bench_rand_seed(opts, tid);
	return s;
}

static uint64_t ht_step(void *arg)
{
	struct ht_state *s = arg;

	for (int i = 0; i < INSERTS_PER_STEP; i++) {
		uint64_t r = bench_rand(&s->rng);
		struct entry *e = &s->table[r % (uint64_t)nslots];
		long len = 1 + (long)((r >> 40) % MAX_LEN);
		long *values = malloc((size_t)len * sizeof(*values));

		if (!values)
			bench_oom("array");
		for (long k = 0; k < len; k++)
			values[k] = len + k;
		if (e->values) {
			/* Reading the old array back keeps the fill loop from being dead code. */
			s->sum += e->values[e->len - 1] - e->values[0];
			free(e->values);
		}
		e->values = values;
		e->len = len;
	}
	return INSERTS_PER_STEP;
}

static void ht_fini(void *arg)
{
	struct ht_state *s = arg;

	for (long i = 0; i < nslots; i++) {
		struct entry *e = &s->table[i];

		if (e->values && e->values[e->len - 1] != 2 * e->len - 1)
			bench_fail("array of %ld values overwritten", e->len);
		free(e->values);
	}
	free(s->table);
	free(s);
}

int main(int argc, char **argv)
{
	static const struct bench_def def = {
	    .name = "hash-table",
	    .summary = "A step inserts 1000 arrays of 1-128 longs at random slots of a "
		       "per-thread table, freeing the ones replaced; an op is one insertion.",
	    .params = params,
	    .thread_init = ht_init,
	    .step = ht_step,
	    .thread_fini = ht_fini,
	};

	return bench_main(argc, argv, &def);
}
