/* linux-scalability.c - Chuck Lever's linux-scalability pattern: every thread allocates
 * many blocks of one small size, then frees them (the thesis: 10^7 blocks of 32 B per
 * thread at once; here in batches so memory stays small, 100 steps make 10^7).
 *
 * A step allocates --batch blocks of --size bytes (default 100000 of 32 B), touches each,
 * then frees them all. An op is one allocation with its free.
 */
#include "common.h"

#include <stdlib.h>
#include <string.h>

struct ls_state {
	char **blocks;
	unsigned char tag;
};

static long batch = 100000;
static long block_size = 32;

static const struct bench_param params[] = {
    {"batch", &batch, 1, 10000000, "blocks allocated per step and thread"},
    {"size", &block_size, 1, 1048576, "bytes per block"},
    {0},
};

static void *ls_init(int tid, const struct bench_opts *opts)
{
	struct ls_state *s = malloc(sizeof(*s));

	(void)opts;
	if (!s)
		bench_oom("thread state");
	s->blocks = malloc((size_t)batch * sizeof(*s->blocks));
	if (!s->blocks)
		bench_oom("block array");
	s->tag = (unsigned char)tid;
	return s;
}

static uint64_t ls_step(void *arg)
{
	struct ls_state *s = arg;

	for (long i = 0; i < batch; i++) {
		char *b = malloc((size_t)block_size);

		if (!b)
			bench_oom("block");
		b[0] = (char)s->tag;
		b[block_size - 1] = (char)s->tag;
		s->blocks[i] = b;
	}
	for (long i = 0; i < batch; i++) {
		if (s->blocks[i][block_size - 1] != (char)s->tag)
			bench_fail("block %ld overwritten", i);
		free(s->blocks[i]);
	}
	s->tag++;
	return (uint64_t)batch;
}

static void ls_fini(void *arg)
{
	struct ls_state *s = arg;

	free(s->blocks);
	free(s);
}

int main(int argc, char **argv)
{
	static const struct bench_def def = {
	    .name = "linux-scalability",
	    .summary = "A step allocates --batch blocks of --size bytes, then frees them; "
		       "an op is one malloc+free.",
	    .params = params,
	    .thread_init = ls_init,
	    .step = ls_step,
	    .thread_fini = ls_fini,
	};

	return bench_main(argc, argv, &def);
}
