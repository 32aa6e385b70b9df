/* gotaddr.c - a library that takes free's address (a destructor handed to someone, as
 * pthread_key_create(&key, free) does), built by payload/local.mk as gotaddr-take.so (it
 * only takes it) and as gotaddr-noplt.so (-fno-plt, and it also calls free) for
 * test-got.c's test_called_through. */
#include <stdlib.h>

void (*gotaddr_free_fn(void))(void *);

void (*gotaddr_free_fn(void))(void *)
{
	return free;
}

#ifdef GOTADDR_CALL
void gotaddr_free(void *p);

void gotaddr_free(void *p)
{
	free(p);
}
#endif
