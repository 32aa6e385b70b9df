/* unwind-bench.c - in-process cost of one stack capture, by every way of taking one that
 * issue 3 asks to compare, on a stack of --depth frames (default 6, counted as the payload
 * counts them: from the caller of the capturing function to _start):
 *   cached   payload/unwind.c's CFA rules from .eh_frame, cached per address (hp_unwind)
 *   memo     the same from a hook-like frame with the thread's memo of its last walk, as the
 *            payload walks (hp_unwind_memo; the stack is the same every time, its best case)
 *   libgcc   _Unwind_Backtrace (what the cached rules must equal; the payload's slow path)
 *   libunwind unw_backtrace with its caches (cannot be unloaded from a target: design.md)
 *   fp       following saved rbp, correct only where every frame keeps a frame pointer
 * Prints one line per way, "<way>_ns=<n> <way>_frames=<n> <way>_equal=<0|1>", the best of
 * five runs of --iterations; equal says whether the frames are libgcc's. Built with frame
 * pointers, so that fp walks this program's own frames. */
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "payload/payload.h"
#include "payload/unwind.h"

/* start.c's: mem.c's helpers read the session's bounds from it. */
struct hp_payload hp;

typedef unsigned (*unwind_fn)(uint64_t *f, unsigned max, uintptr_t lo, uintptr_t hi);

#define MAX_FRAMES 128
static long iterations = 2000000;
static struct hp_unwind_memo *memo;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Each way is called from timed()'s one call site, so each one's first frame is the
 * return into timed(), as for libgcc. */
__attribute__((noinline)) static unsigned by_memo(uint64_t *f, unsigned max, uintptr_t lo,
						  uintptr_t hi)
{
	int same;
	unsigned n =
	    hp_unwind_memo(f, max, lo, hi, (uintptr_t)__builtin_frame_address(0), memo, &same);
	__asm__ volatile("" ::: "memory");
	return n;
}

__attribute__((noinline)) static unsigned by_libunwind(uint64_t *f, unsigned max, uintptr_t lo,
						       uintptr_t hi)
{
	(void)lo;
	(void)hi;
	void *ip[MAX_FRAMES + 1];
	int n = unw_backtrace(ip, (int)max + 1);
	/* Its first frame is this function's own pc. */
	for (int i = 1; i < n; i++)
		f[i - 1] = (uint64_t)(uintptr_t)ip[i];
	__asm__ volatile("" ::: "memory");
	return n > 0 ? (unsigned)n - 1 : 0;
}

/* Saved rbp, then the return address above it, until the chain leaves the stack. */
__attribute__((noinline)) static unsigned by_fp(uint64_t *f, unsigned max, uintptr_t lo,
						uintptr_t hi)
{
	(void)lo;
	(void)hi;
	const uintptr_t *bp = __builtin_frame_address(0);
	uintptr_t top = (uintptr_t)bp + (64u << 20);
	unsigned n = 0;
	while (n < max && bp && ((uintptr_t)bp & 7) == 0 && (uintptr_t)bp < top && bp[1]) {
		f[n++] = bp[1];
		const uintptr_t *next = (const uintptr_t *)bp[0];
		if (next <= bp)
			break;
		bp = next;
	}
	__asm__ volatile("" ::: "memory");
	return n;
}

struct way {
	const char *name;
	unwind_fn fn;
	double ns;
	unsigned n;
	uint64_t f[MAX_FRAMES];
};

__attribute__((noipa)) static void timed(struct way *w)
{
	w->ns = 1e30;
	for (int run = 0; run < 5; run++) {
		double t0 = now();
		for (long i = 0; i < iterations; i++)
			w->n = w->fn(w->f, MAX_FRAMES, 0, 0);
		double ns = (now() - t0) / (double)iterations;
		if (ns < w->ns)
			w->ns = ns;
	}
}

static struct way ways[] = {
    {"cached", hp_unwind, 0, 0, {0}},
    {"memo", by_memo, 0, 0, {0}},
    {"libgcc", hp_unwind_slow, 0, 0, {0}},
    {"libunwind", by_libunwind, 0, 0, {0}},
    {"fp", by_fp, 0, 0, {0}},
};

/* Each level is one frame between main and the capture. */
__attribute__((noipa)) static int descend(int levels)
{
	if (levels > 0) {
		int r = descend(levels - 1);
		/* Not an accumulator GCC could turn the recursion into a loop with. */
		__asm__ volatile("" : "+r"(r));
		return r + 1;
	}
	for (size_t i = 0; i < sizeof ways / sizeof ways[0]; i++)
		timed(&ways[i]);
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
	/* main, __libc_start_call_main, __libc_start_main, _start, timed and descend(0) */
	if (depth < 6 || iterations < 1 || hp_unwind_init() < 0 ||
	    !(memo = hp_unwind_memo_new(MAX_FRAMES))) {
		fprintf(stderr, "usage: unwind-bench [--depth N>=6] [--iterations N]\n");
		return 2;
	}
	descend((int)depth - 6);
	const struct way *ref = &ways[2];
	for (size_t i = 0; i < sizeof ways / sizeof ways[0]; i++) {
		const struct way *w = &ways[i];
		int equal = w->n == ref->n && !memcmp(w->f, ref->f, w->n * sizeof w->f[0]);
		printf("%s_ns=%.1f %s_frames=%u %s_equal=%d\n", w->name, w->ns, w->name, w->n,
		       w->name, equal);
	}
	hp_unwind_memo_free(memo);
	hp_unwind_fini();
	return 0;
}
