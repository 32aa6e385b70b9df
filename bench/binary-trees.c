/* binary-trees.c - the Benchmarks Game binary-trees: complete binary trees built
 * recursively with every node on the heap, walked, then freed. Each thread also keeps one
 * long-lived tree for the whole run. The recursion gives every tree level its own call
 * stack, which is what blew up the original design's backtrace cache.
 *
 * A step builds a tree of --depth levels below the root (default 15: 65535 nodes of 16
 * bytes), checks its node count and frees it. An op is one node (one malloc and its free).
 */
#include "common.h"

#include <stdlib.h>

struct node {
	struct node *left;
	struct node *right;
};

struct bt_state {
	struct node *long_lived;
};

static long depth = 15;

static const struct bench_param params[] = {
    {"depth", &depth, 0, 25, "levels below the root of each tree"},
    {0},
};

static struct node *bt_build(long d)
{
	struct node *n = malloc(sizeof(*n));

	if (!n)
		bench_oom("tree node");
	if (d > 0) {
		n->left = bt_build(d - 1);
		n->right = bt_build(d - 1);
	} else {
		n->left = NULL;
		n->right = NULL;
	}
	return n;
}

static uint64_t bt_check(const struct node *n)
{
	return n->left ? 1 + bt_check(n->left) + bt_check(n->right) : 1;
}

static void bt_free(struct node *n)
{
	if (n->left) {
		bt_free(n->left);
		bt_free(n->right);
	}
	free(n);
}

static uint64_t nodes_of(long d)
{
	return (UINT64_C(1) << (d + 1)) - 1;
}

static void *bt_init(int tid, const struct bench_opts *opts)
{
	struct bt_state *s = malloc(sizeof(*s));

	(void)tid;
	(void)opts;
	if (!s)
		bench_oom("thread state");
	s->long_lived = bt_build(depth);
	return s;
}

static uint64_t bt_step(void *arg)
{
	struct node *tree = bt_build(depth);
	uint64_t n = bt_check(tree);

	(void)arg;
	if (n != nodes_of(depth))
		bench_fail("tree of depth %ld has %llu nodes", depth, (unsigned long long)n);
	bt_free(tree);
	return n;
}

static void bt_fini(void *arg)
{
	struct bt_state *s = arg;

	if (bt_check(s->long_lived) != nodes_of(depth))
		bench_fail("long-lived tree damaged");
	bt_free(s->long_lived);
	free(s);
}

int main(int argc, char **argv)
{
	static const struct bench_def def = {
	    .name = "binary-trees",
	    .summary = "A step builds, checks and frees a heap binary tree of --depth levels; "
		       "an op is one node.",
	    .params = params,
	    .thread_init = bt_init,
	    .step = bt_step,
	    .thread_fini = bt_fini,
	};

	return bench_main(argc, argv, &def);
}
