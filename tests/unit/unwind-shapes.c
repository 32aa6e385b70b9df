/* unwind-shapes.c - call stacks of known shapes for test-unwind. Built twice, with and
 * without frame pointers; SHAPE() gives each build's exports their own names. Calls between
 * the exports go through the PLT, and the qsort callback runs inside libc's frames. */
#include <alloca.h>
#include <stdlib.h>
#include <string.h>

#define CAT(a, b) a##b
#define NAME(p, n) CAT(p, n)
#define SHAPE(n) NAME(SHAPE_PREFIX, n)

typedef void (*shape_cb)(void *arg);

int SHAPE(recurse)(int depth, shape_cb cb, void *arg);
int SHAPE(alloca_chain)(int depth, int size, shape_cb cb, void *arg);
int SHAPE(sorted)(shape_cb cb, void *arg);
int SHAPE(two_sites)(int which, shape_cb cb, void *arg);
int SHAPE(scratch_rbp)(long v, shape_cb cb, void *arg);

/* Keeps every call a real call: the result is used after it returns. */
static volatile int sink;

/* noipa: one frame per level, not a partly inlined recursion. */
__attribute__((noipa)) int SHAPE(recurse)(int depth, shape_cb cb, void *arg)
{
	if (depth <= 0)
		cb(arg);
	else
		SHAPE(recurse)(depth - 1, cb, arg);
	return sink++;
}

__attribute__((noipa)) int SHAPE(alloca_chain)(int depth, int size, shape_cb cb, void *arg)
{
	char *buf = alloca((size_t)size);
	memset(buf, depth, (size_t)size);
	if (depth <= 0)
		cb(arg);
	else
		SHAPE(alloca_chain)(depth - 1, size * 3 + 8, cb, arg);
	sink += buf[size - 1];
	return sink;
}

static shape_cb sort_cb;
static void *sort_arg;

static int cmp(const void *a, const void *b)
{
	if (sort_cb) {
		sort_cb(sort_arg);
		sort_cb = NULL;
	}
	return *(const int *)a - *(const int *)b;
}

int SHAPE(sorted)(shape_cb cb, void *arg)
{
	int v[8] = {5, 3, 7, 1, 8, 2, 6, 4};
	sort_cb = cb;
	sort_arg = arg;
	qsort(v, 8, sizeof v[0], cmp);
	return sink + v[0];
}

/* The same recursion from two call sites at the same stack depth: inside it, every frame
 * but this one's return address is the same. */
__attribute__((noipa)) int SHAPE(two_sites)(int which, shape_cb cb, void *arg)
{
	if (which)
		sink += SHAPE(recurse)(2, cb, arg);
	else
		sink -= SHAPE(recurse)(2, cb, arg);
	return sink;
}

/* Calls cb with rbp holding v, as code built without frame pointers may leave any value in
 * it: no frame's CFA depends on it, so the walks from cb must not either. With frame
 * pointers rbp is not free, and cb is just called. */
__attribute__((noipa)) int SHAPE(scratch_rbp)(long v, shape_cb cb, void *arg)
{
#if SHAPE_RBP_FREE
	register long r __asm__("rbp") = v;
	__asm__ volatile("" : "+r"(r));
	cb(arg);
	__asm__ volatile("" : "+r"(r));
	return (int)r + sink;
#else
	cb(arg);
	return (int)v + sink;
#endif
}
