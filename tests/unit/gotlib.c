/* gotlib.c - a library that allocates through its GOT, built three ways by payload/local.mk
 * (lazy PLT, -fno-plt, full RELRO) for test-got.c. */
#include <stdlib.h>

void *gotlib_malloc(size_t n);
void gotlib_free(void *p);
void *gotlib_calloc(size_t a, size_t b);

void *gotlib_malloc(size_t n)
{
	return malloc(n);
}

void gotlib_free(void *p)
{
	free(p);
}

void *gotlib_calloc(size_t a, size_t b)
{
	return calloc(a, b);
}
