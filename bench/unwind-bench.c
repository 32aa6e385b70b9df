/* unwind-bench.c - in-process cost of one stack capture: payload/unwind.c's cached rules
 * against libgcc's _Unwind_Backtrace, on a stack of --depth frames (default 6, counted as
 * the payload counts them: from the caller of the capturing function to _start).
 * Prints "fast_ns=<n> slow_ns=<n> frames=<n>", the best of five runs of --iterations. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "payload/payload.h"
#include "payload/unwind.h"

void *hp_map(size_t len)
{
	void *p = mmap(NULL, hp_page_round(len), PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

void hp_unmap(void *p, size_t len)
{
	munmap(p, hp_page_round(len));
}

size_t hp_page_round(size_t len)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	return (len + pg - 1) & ~(pg - 1);
}

typedef unsigned (*unwind_fn)(uint64_t *f, unsigned max, uintptr_t lo, uintptr_t hi);

static long iterations = 2000000;
static unsigned frames_seen;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

__attribute__((noipa)) static double timed(unwind_fn fn)
{
	uint64_t f[128];
	double best = 1e30;
	for (int run = 0; run < 5; run++) {
		double t0 = now();
		for (long i = 0; i < iterations; i++)
			frames_seen = fn(f, 128, 0, 0);
		double ns = (now() - t0) / (double)iterations;
		if (ns < best)
			best = ns;
	}
	return best;
}

/* Each level is one frame between main and the capture. */
__attribute__((noipa)) static int descend(int levels, double *fast, double *slow)
{
	if (levels > 0)
		return descend(levels - 1, fast, slow) + 1;
	*fast = timed(hp_unwind);
	*slow = timed(hp_unwind_slow);
	return 0;
}

int main(int argc, char **argv)
{
	long depth = 6;
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--depth"))
			depth = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "--iterations"))
			iterations = atol(argv[i + 1]);
	}
	/* main, __libc_start_call_main, __libc_start_main, _start, and timed's frame */
	if (depth < 5 || iterations < 1 || hp_unwind_init() < 0) {
		fprintf(stderr, "usage: unwind-bench [--depth N>=5] [--iterations N]\n");
		return 2;
	}
	double fast, slow;
	descend((int)depth - 5, &fast, &slow);
	printf("fast_ns=%.1f slow_ns=%.1f frames=%u\n", fast, slow, frames_seen);
	hp_unwind_fini();
	return 0;
}
