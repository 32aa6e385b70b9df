/* threadtest.c - the Hoard threadtest pattern: P threads that each allocate a batch of small
 * objects and free them all, over and over (the thesis ran 1000 steps).
 *
 * A step allocates --objects/P objects of 8 bytes (default 30000/P), writes each, then frees
 * them all in allocation order. An op is one allocation with its free.
 */
#include "common.h"

#include <stdlib.h>

struct object {
	int x;
	int y;
};

struct tt_state {
	struct object **objs;
	long n;
};

static long total_objects = 30000;

static const struct bench_param params[] = {
    {"objects", &total_objects, 1, 100000000, "objects per step over all threads"},
    {0},
};

static void *tt_init(int tid, const struct bench_opts *opts)
{
	struct tt_state *s = malloc(sizeof(*s));

	(void)tid;
	if (!s)
		bench_oom("thread state");
	s->n = total_objects / opts->threads;
	if (s->n < 1)
		s->n = 1;
	s->objs = malloc((size_t)s->n * sizeof(*s->objs));
	if (!s->objs)
		bench_oom("object array");
	return s;
}

static uint64_t tt_step(void *arg)
{
	struct tt_state *s = arg;

	for (long i = 0; i < s->n; i++) {
		struct object *o = malloc(sizeof(*o));

		if (!o)
			bench_oom("object");
		o->x = (int)i;
		o->y = (int)i + 1;
		s->objs[i] = o;
	}
	for (long i = 0; i < s->n; i++) {
		if (s->objs[i]->y != s->objs[i]->x + 1)
			bench_fail("object %ld overwritten", i);
		free(s->objs[i]);
	}
	return (uint64_t)s->n;
}

static void tt_fini(void *arg)
{
	struct tt_state *s = arg;

	free(s->objs);
	free(s);
}

int main(int argc, char **argv)
{
	static const struct bench_def def = {
	    .name = "threadtest",
	    .summary = "A step allocates --objects/P 8-byte objects, then frees them; "
		       "an op is one malloc+free.",
	    .params = params,
	    .thread_init = tt_init,
	    .step = tt_step,
	    .thread_fini = tt_fini,
	};

	return bench_main(argc, argv, &def);
}
