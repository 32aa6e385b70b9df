#include "inproc-payload.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include "hpabi.h"
#include "hpformat.h"

/* No round ends while the program runs, since the collector's work would then be counted
 * by how long the run took under valgrind, not by what the program did. */
#define PAYLOAD_ROUND_MS (3600 * 1000)

static void *drain_pipe(void *arg)
{
	static char buf[1 << 16];
	int fd = (int)(intptr_t)arg;

	while (read(fd, buf, sizeof(buf)) > 0)
		;
	return NULL;
}

void *bench_payload_start(const char *path, int mode, long rate, const char *name)
{
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	hp_start_fn start = h ? (hp_start_fn)dlsym(h, HP_START_SYMBOL) : NULL;
	const struct hp_start_args a = {.abi_version = HP_ABI_VERSION,
					.mode = (uint32_t)mode,
					.interval_ms = PAYLOAD_ROUND_MS,
					.max_depth = 64,
					.sample_rate = (uint64_t)rate};
	pthread_t t;
	int fd;

	if (!start) {
		fprintf(stderr, "%s: cannot load the payload: %s\n", name, dlerror());
		return NULL;
	}
	fd = start(&a);
	if (fd < 0 || pthread_create(&t, NULL, drain_pipe, (void *)(intptr_t)fd)) {
		fprintf(stderr, "%s: the payload did not start (%d)\n", name, fd);
		return NULL;
	}
	return h;
}
