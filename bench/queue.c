/* queue.c - every thread keeps a FIFO queue of heap blocks, randomly pushing a new block at
 * the tail or freeing the oldest at the head, so blocks live for widely varying times (the
 * thesis: up to 3*10^7 objects in all).
 *
 * A step makes 1000 queue operations; each pushes a new block of 16..256 bytes with
 * probability 1/2 (always when the queue is empty, never when it holds --max-length
 * blocks, default 100000), else frees the oldest block. An op is one push (one malloc;
 * every block is freed, at the latest when the thread ends).
 */
#include "common.h"

#include <stdlib.h>

#define OPS_PER_STEP 1000
#define MIN_BLOCK 16
#define MAX_BLOCK 256

struct block {
	struct block *next;
	uint32_t size;
	uint32_t check;
	unsigned char data[];
};

struct q_state {
	struct block *head;
	struct block *tail;
	long length;
	uint64_t rng;
};

static long max_length = 100000;

static const struct bench_param params[] = {
    {"max-length", &max_length, 1, 100000000, "most blocks a thread's queue holds"},
    {0},
};

static void *q_init(int tid, const struct bench_opts *opts)
{
	struct q_state *s = calloc(1, sizeof(*s));

	if (!s)
		bench_oom("thread state");
	s->rng = bench_rand_seed(opts, tid);
	return s;
}

static void q_pop(struct q_state *s)
{
	struct block *b = s->head;

	if (b->check != (b->size ^ 0x5a5a5a5au) || b->data[b->size - 1] != (unsigned char)b->size)
		bench_fail("queued block of %u bytes overwritten", b->size);
	s->head = b->next;
	if (!s->head)
		s->tail = NULL;
	s->length--;
	free(b);
}

static uint64_t q_step(void *arg)
{
	struct q_state *s = arg;
	uint64_t pushes = 0;

	for (int i = 0; i < OPS_PER_STEP; i++) {
		uint64_t r = bench_rand(&s->rng);
		bool push = s->length == 0 || (s->length < max_length && (r & 1));

		if (push) {
			uint32_t size =
			    (uint32_t)(MIN_BLOCK + (r >> 8) % (MAX_BLOCK - MIN_BLOCK + 1));
			struct block *b = malloc(sizeof(*b) + size);

			if (!b)
				bench_oom("queued block");
			b->next = NULL;
			b->size = size;
			b->check = size ^ 0x5a5a5a5au;
			b->data[0] = (unsigned char)size;
			b->data[size - 1] = (unsigned char)size;
			if (s->tail)
				s->tail->next = b;
			else
				s->head = b;
			s->tail = b;
			s->length++;
			pushes++;
		} else {
			q_pop(s);
		}
	}
	return pushes;
}

static void q_fini(void *arg)
{
	struct q_state *s = arg;

	while (s->head)
		q_pop(s);
	free(s);
}

int main(int argc, char **argv)
{
	static const struct bench_def def = {
	    .name = "queue",
	    .summary = "A step makes 1000 random pushes of 16-256 byte blocks or frees of the "
		       "oldest one on a per-thread queue; an op is one push.",
	    .params = params,
	    .thread_init = q_init,
	    .step = q_step,
	    .thread_fini = q_fini,
	};

	return bench_main(argc, argv, &def);
}
