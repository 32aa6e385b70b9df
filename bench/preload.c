/* preload.c - heapprof-preload.so: preloaded (LD_PRELOAD) into a program that is not one of
 * bench/'s, such as redis-server, it starts the payload inside that program, as the
 * programs' --payload does, so that callgrind counts the payload's instructions there
 * (bench/redis-inproc.sh).
 *
 * Contract: with HEAPPROF_PRELOAD_PAYLOAD set to a payload's path, a thread made at load
 * sleeps HEAPPROF_PRELOAD_DELAY seconds (default 2, past the program's own start) and then
 * starts that payload (bench_payload_start), in full mode, or sampled every
 * HEAPPROF_PRELOAD_RATE bytes when that is set. Without HEAPPROF_PRELOAD_PAYLOAD it does
 * nothing.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hpformat.h"
#include "inproc-payload.h"

static long env_long(const char *name, long def)
{
	const char *s = getenv(name);
	return s && *s ? strtol(s, NULL, 10) : def;
}

static void *starter(void *arg)
{
	sleep((unsigned)env_long("HEAPPROF_PRELOAD_DELAY", 2));
	bench_payload_start(arg, HP_MODE_FULL, env_long("HEAPPROF_PRELOAD_RATE", 0),
			    "heapprof-preload");
	return NULL;
}

/* The path is copied now: redis-server writes its process title over the environment's
 * strings meanwhile. */
__attribute__((constructor)) static void preload_init(void)
{
	const char *env = getenv("HEAPPROF_PRELOAD_PAYLOAD");
	char *path = env && *env ? strdup(env) : NULL;
	pthread_t t;

	if (path && pthread_create(&t, NULL, starter, path) == 0)
		pthread_detach(t);
}
