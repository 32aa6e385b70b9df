/* order-target.c - a server's requests: allocations through one wrapper from several
 * callers, in an order that repeats, one caller met twice a request with a different one
 * after it each time, and a loop of a few allocations from one more.
 *
 * Contract: `order-target N` prints "ready", then reads commands, one per line, from stdin
 * and answers on stdout (flushed):
 *   go    the main thread serves N requests (N from 1 to 1000000), then answers "done".
 *         A request allocates through wrap() (the line marked HP_SITE) from req_a, req_b,
 *         req_a, req_c, then req_loop three times, and frees its blocks at its end.
 *   flip  later requests take req_a, req_c, req_a, req_b, then req_loop twice; flip again
 *         for the first order; answers "flipped".
 *   ping  answers "pong" without allocating.
 *   exit  (or end of input) the process exits 0.
 * A bad N exits 2.
 */
#include "serve.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_BLOCKS 8

static unsigned flipped;
static unsigned long requests;
static void *blocks[MAX_BLOCKS];
static unsigned nblocks;

/* noipa throughout, and nothing after each call: each caller keeps its own frame and call
 * to wrap (no tail call), so each is a stack of its own that differs from the others only
 * above wrap. */
__attribute__((noipa)) static void wrap(size_t n)
{
	unsigned char *p = malloc(n); /* HP_SITE */

	if (!p) {
		fputs("order-target: out of memory\n", stderr);
		exit(1);
	}
	memset(p, (int)n, n);
	blocks[nblocks++] = p;
}

__attribute__((noipa)) static void req_a(void)
{
	wrap(24);
	__asm__ volatile("" ::: "memory");
}

__attribute__((noipa)) static void req_b(void)
{
	wrap(40);
	__asm__ volatile("" ::: "memory");
}

__attribute__((noipa)) static void req_c(void)
{
	wrap(56);
	__asm__ volatile("" ::: "memory");
}

__attribute__((noipa)) static void req_loop(void)
{
	for (unsigned i = 0; i < (flipped ? 2u : 3u); i++)
		wrap(72);
	__asm__ volatile("" ::: "memory");
}

/* One call site for every step, so the steps' stacks differ at their callers only. */
static void (*const order[2][5])(void) = {
    {req_a, req_b, req_a, req_c, req_loop},
    {req_a, req_c, req_a, req_b, req_loop},
};

static void request(void)
{
	for (unsigned i = 0; i < 5; i++)
		order[flipped][i]();
	while (nblocks)
		free(blocks[--nblocks]);
}

static void serve_requests(void)
{
	for (unsigned long i = 0; i < requests; i++)
		request();
}

int main(int argc, char **argv)
{
	requests = target_arg(argc, argv, "order-target", "REQUESTS", 1, 1000000);
	target_serve("order-target", serve_requests, &flipped);
	return 0;
}
