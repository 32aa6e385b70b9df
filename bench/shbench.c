/* shbench.c - the MicroQuill SmartHeap benchmark pattern: random allocations and frees of
 * random sizes (1-1000 B) over a per-thread pool of slots, so blocks of mixed sizes and
 * lifetimes interleave.
 *
 * A step makes 1000 slot operations: pick a random slot of the thread's pool (--slots,
 * default 1000), free the block there if any, and in three cases out of four allocate a
 * new block of 1..1000 bytes into it. An op is one allocation (every block is freed, at the
 * latest when the thread ends).
 */
#include "common.h"

#include <stdlib.h>
#include <string.h>

#define OPS_PER_STEP 1000
#define MAX_SIZE 1000

struct sh_slot {
	unsigned char *p;
	size_t size;
};

struct sh_state {
	struct sh_slot *slots;
	uint64_t rng;
};

static long nslots = 1000;

static const struct bench_param params[] = {
    {"slots", &nslots, 1, 10000000, "blocks each thread may hold at once"},
    {0},
};

static void *sh_init(int tid, const struct bench_opts *opts)
{
	struct sh_state *s = malloc(sizeof(*s));

	if (!s)
		bench_oom("thread state");
	s->slots = calloc((size_t)nslots, sizeof(*s->slots));
	if (!s->slots)
		bench_oom("slot array");
	s->rng = bench_rand_seed(opts, tid);
	return s;
}

static uint64_t sh_step(void *arg)
{
	struct sh_state *s = arg;
	uint64_t allocs = 0;

	for (int i = 0; i < OPS_PER_STEP; i++) {
		uint64_t r = bench_rand(&s->rng);
		struct sh_slot *slot = &s->slots[r % (uint64_t)nslots];

		if (slot->p) {
			if (slot->p[slot->size - 1] != (unsigned char)slot->size)
				bench_fail("block of %zu bytes overwritten", slot->size);
			free(slot->p);
			slot->p = NULL;
		}
		if ((r >> 32) % 4 != 0) {
			size_t size = 1 + (size_t)((r >> 40) % MAX_SIZE);

			slot->p = malloc(size);
			if (!slot->p)
				bench_oom("block");
			slot->p[0] = (unsigned char)size;
			slot->p[size - 1] = (unsigned char)size;
			slot->size = size;
			allocs++;
		}
	}
	return allocs;
}

static void sh_fini(void *arg)
{
	struct sh_state *s = arg;

	for (long i = 0; i < nslots; i++)
		free(s->slots[i].p);
	free(s->slots);
	free(s);
}

int main(int argc, char **argv)
{
	static const struct bench_def def = {
	    .name = "shbench",
	    .summary = "A step makes 1000 random free/allocate operations on a pool of --slots "
		       "blocks of 1-1000 bytes; an op is one malloc.",
	    .params = params,
	    .thread_init = sh_init,
	    .step = sh_step,
	    .thread_fini = sh_fini,
	};

	return bench_main(argc, argv, &def);
}
