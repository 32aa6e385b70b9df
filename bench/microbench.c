/* microbench.c - the free+malloc microbenchmark of the research brief: one thread (or P,
 * each on its own) replacing blocks through two small functions that are never inlined, so
 * every call has its own caller frame as in real code, and nothing can be optimized away.
 *
 * A step makes 1000 pairs over a ring of 16 blocks of --size bytes (default 64): free the
 * oldest block, allocate its replacement. An op is one free+malloc pair.
 */
#include "common.h"

#include <stdlib.h>

#define PAIRS_PER_STEP 1000
#define RING 16

struct mb_state {
	char *ring[RING];
	unsigned next;
};

static long block_size = 64;

static const struct bench_param params[] = {
    {"size", &block_size, 1, 1048576, "bytes per block"},
    {0},
};

__attribute__((noipa)) static char *mb_alloc(size_t size)
{
	char *p = malloc(size);

	if (!p)
		bench_oom("block");
	p[0] = 1;
	return p;
}

__attribute__((noipa)) static void mb_free(char *p)
{
	free(p);
}

static void *mb_init(int tid, const struct bench_opts *opts)
{
	struct mb_state *s = malloc(sizeof(*s));

	(void)tid;
	(void)opts;
	if (!s)
		bench_oom("thread state");
	for (int i = 0; i < RING; i++)
		s->ring[i] = mb_alloc((size_t)block_size);
	s->next = 0;
	return s;
}

static uint64_t mb_step(void *arg)
{
	struct mb_state *s = arg;

	for (int i = 0; i < PAIRS_PER_STEP; i++) {
		unsigned k = s->next++ % RING;

		mb_free(s->ring[k]);
		s->ring[k] = mb_alloc((size_t)block_size);
	}
	return PAIRS_PER_STEP;
}

static void mb_fini(void *arg)
{
	struct mb_state *s = arg;

	for (int i = 0; i < RING; i++)
		mb_free(s->ring[i]);
	free(s);
}

int main(int argc, char **argv)
{
	static const struct bench_def def = {
	    .name = "microbench",
	    .summary = "A step makes 1000 free+malloc pairs of --size bytes through two "
		       "non-inlined functions; an op is one pair.",
	    .params = params,
	    .thread_init = mb_init,
	    .step = mb_step,
	    .thread_fini = mb_fini,
	};

	return bench_main(argc, argv, &def);
}
