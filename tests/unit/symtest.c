/* symtest.c - calls at marked lines, built -g -O2 into libsymtest.so for test-symbolize.
 * Each symtest_* function returns the return address of its marked call. The markers
 * are searched for in this file by the test; do not put them anywhere else. */
#include "symtest.h"

__attribute__((noinline, noipa)) void *symtest_ret(void)
{
	return __builtin_return_address(0);
}

/* The volatile result keeps each call from becoming a tail call (the frame must stay). */
__attribute__((noinline, noipa)) void *symtest_plain(void)
{
	void *volatile r = symtest_ret(); /* SYMTEST_CALL */
	return r;
}

static inline __attribute__((always_inline)) void *symtest_inner(void)
{
	void *volatile r = symtest_ret(); /* SYMTEST_INLINE_CALL */
	return r;
}

__attribute__((noinline, noipa)) void *symtest_outer(void)
{
	void *volatile r = symtest_inner(); /* SYMTEST_OUTER_CALL */
	return r;
}
