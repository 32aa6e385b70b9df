/* tree-target.c - allocations from more call paths than a bounded stack table holds.
 *
 * Contract: `tree-target D` prints "ready", then reads commands, one per line, from stdin
 * and answers on stdout (flushed):
 *   go    the main thread walks a binary recursion of depth D (D from 1 to 24), each of
 *         its 2^(D+1) - 1 calls allocating one block of 32 bytes (the line marked HP_SITE),
 *         writing it and freeing it before it recurses: every call is a call path of its
 *         own, as in binary-trees; then "done".
 *   flip  later walks call the two call sites in the other order: the same paths, met in
 *         another order; answers "flipped".
 *   ping  answers "pong" without allocating.
 *   exit  (or end of input) the process exits 0.
 * A bad D exits 2.
 */
#include "serve.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BLOCK 32

void node(unsigned d);

static unsigned flipped;
static unsigned long depth;

/* Two call sites of itself, so a call's path is the left and right turns above it. The
 * distinct asm after each keeps the compiler from merging them into one. */
__attribute__((noinline, noclone)) void node(unsigned d)
{
	unsigned char *p = malloc(BLOCK); /* HP_SITE */

	if (!p) {
		fputs("tree-target: out of memory\n", stderr);
		exit(1);
	}
	memset(p, (int)d, BLOCK);
	__asm__ volatile("" ::"r"(p) : "memory");
	free(p);
	for (unsigned k = 0; d > 0 && k < 2; k++) {
		if (k == flipped) {
			node(d - 1);
			__asm__ volatile("# left turn" ::: "memory");
		} else {
			node(d - 1);
			__asm__ volatile("# right turn" ::: "memory");
		}
	}
	__asm__ volatile("" ::: "memory");
}

static void walk_tree(void)
{
	node((unsigned)depth);
}

int main(int argc, char **argv)
{
	depth = target_arg(argc, argv, "tree-target", "DEPTH", 1, 24);
	target_serve("tree-target", walk_tree, &flipped);
	return 0;
}
