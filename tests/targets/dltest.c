/* dltest.c - the library dl-target dlopens and dlcloses (libdltest.so).
 *
 * Contract: dltest_run(K, out) calls dltest_alloc() K times (block size 56 + k % 8, filled
 * with dltest_fill(k); the line marked HP_SITE_DLTEST), frees every odd-indexed block
 * itself and stores the even-indexed ones in out[k] (NULL for the odd ones), for the
 * caller to free after the library is gone. Its first call in a load also allocates one
 * 200-byte block (HP_SITE_DLCACHE) that the library's destructor frees, in dlclose. Every
 * allocation is made from this library's code, through its own PLT.
 */
#include <stdlib.h>
#include <string.h>

unsigned char *dltest_alloc(unsigned k);
unsigned char *dltest_cache_alloc(void);
unsigned char dltest_fill(unsigned k);
int dltest_run(unsigned nallocs, unsigned char **out);

static unsigned char *cache;

unsigned char dltest_fill(unsigned k)
{
	return (unsigned char)(k * 29 + 3);
}

__attribute__((noinline, noclone)) unsigned char *dltest_alloc(unsigned k)
{
	unsigned char *p = malloc(56 + k % 8); /* HP_SITE_DLTEST */

	if (p)
		memset(p, dltest_fill(k), 56 + k % 8);
	return p;
}

__attribute__((noinline, noclone)) unsigned char *dltest_cache_alloc(void)
{
	unsigned char *p = malloc(200); /* HP_SITE_DLCACHE */

	if (p)
		memset(p, 0xc5, 200);
	return p;
}

int dltest_run(unsigned nallocs, unsigned char **out)
{
	if (!cache && !(cache = dltest_cache_alloc()))
		return -1;
	for (unsigned k = 0; k < nallocs; k++)
		if (!(out[k] = dltest_alloc(k)))
			return -1;
	for (unsigned k = 1; k < nallocs; k += 2) {
		free(out[k]);
		out[k] = NULL;
	}
	return 0;
}

/* Runs inside dlclose, through the library's (possibly still patched) free slot. */
__attribute__((destructor)) static void dltest_fini(void)
{
	free(cache);
}
