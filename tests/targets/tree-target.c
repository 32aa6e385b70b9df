/* tree-target.c - allocations from more call paths than a bounded stack table holds.
 *
 * Contract: `tree-target D` prints "ready", then reads commands, one per line, from stdin
 * and answers on stdout (flushed):
 *   go    the main thread walks a binary recursion of depth D (D from 1 to 24), each of
 *         its 2^(D+1) - 1 calls allocating one block of 32 bytes (the line marked HP_SITE),
 *         writing it and freeing it before it recurses: every call is a call path of its
 *         own, as in binary-trees; then "done".
 *   ping  answers "pong" without allocating.
 *   exit  (or end of input) the process exits 0.
 * A bad D exits 2.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BLOCK 32

void node(unsigned d);

/* Two call sites of itself, so a call's path is the left and right turns above it. */
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
	if (d > 0) {
		node(d - 1);
		node(d - 1);
	}
	__asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv)
{
	char line[64], *end = NULL;
	unsigned long depth = argc == 2 ? strtoul(argv[1], &end, 10) : 0;

	if (argc != 2 || *argv[1] == '\0' || *end != '\0' || depth < 1 || depth > 24) {
		fputs("usage: tree-target DEPTH (1 to 24)\n", stderr);
		return 2;
	}
	puts("ready");
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		line[strcspn(line, "\n")] = '\0';
		if (!strcmp(line, "go")) {
			node((unsigned)depth);
			puts("done");
		} else if (!strcmp(line, "ping")) {
			puts("pong");
		} else if (!strcmp(line, "exit")) {
			break;
		} else {
			fprintf(stderr, "tree-target: unknown command '%s'\n", line);
		}
		fflush(stdout);
	}
	return 0;
}
