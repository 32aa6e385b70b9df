/* dl-target.c - loads and unloads a library that allocates, while it is being profiled.
 *
 * Contract: `dl-target LIBRARY K` prints "ready", then reads commands, one per line, from
 * stdin and answers on stdout (flushed):
 *   go N MS  N times: dlopen LIBRARY (RTLD_NOW and RTLD_LAZY alternately), call its
 *            dltest_run(K) (tests/targets/dltest.c), wait MS milliseconds, dlclose it and
 *            check it is gone; then free the blocks the previous call handed over
 *            (checking their fill) and keep this call's. Answers "done", or "failed" with
 *            the reason on stderr.
 *   shift    from now on, after each dlclose, maps a page where the library was and keeps
 *            it, so the next dlopen puts the library and what it loads at other addresses,
 *            into the range of what was unloaded; answers "shifted".
 *   ping     answers "pong" without allocating.
 *   exit     (or end of input) frees what is kept; the process exits 0 (1 if a block was
 *            found corrupted).
 * The main program itself never calls malloc or free on the library's blocks except to
 * free the handed-over ones, so every allocation at the library's sites is its own.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static const char *library;
static unsigned nallocs;
static unsigned char **kept, **fresh;
static int corrupted;
static int shifting;

/* The library's fill, repeated here: the library is unloaded when its blocks are checked. */
static unsigned char fill_of(unsigned k)
{
	return (unsigned char)(k * 29 + 3);
}

static void free_kept(void)
{
	for (unsigned k = 0; k < nallocs; k++) {
		unsigned char *p = kept[k];

		if (!p)
			continue;
		for (unsigned i = 0; i < 56 + k % 8; i++) {
			if (p[i] != fill_of(k)) {
				fprintf(stderr, "dl-target: corrupt block %u at byte %u\n", k, i);
				corrupted = 1;
				break;
			}
		}
		free(p);
		kept[k] = NULL;
	}
}

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, ms % 1000 * 1000000};

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static int cycle(unsigned i, long ms)
{
	void *h = dlopen(library, i % 2 ? RTLD_LAZY : RTLD_NOW);

	if (!h) {
		fprintf(stderr, "dl-target: dlopen: %s\n", dlerror());
		return -1;
	}

	int (*run)(unsigned, unsigned char **) =
	    (int (*)(unsigned, unsigned char **))dlsym(h, "dltest_run");
	Dl_info where = {0};

	if (run)
		dladdr((void *)run, &where);

	if (!run || run(nallocs, fresh) < 0) {
		fprintf(stderr, "dl-target: dltest_run failed\n");
		dlclose(h);
		return -1;
	}
	sleep_ms(ms);
	if (dlclose(h) != 0) {
		fprintf(stderr, "dl-target: dlclose: %s\n", dlerror());
		return -1;
	}
	/* A library the profiler still held would stay mapped. */
	h = dlopen(library, RTLD_NOW | RTLD_NOLOAD);
	if (h) {
		fprintf(stderr, "dl-target: %s is still loaded after dlclose\n", library);
		dlclose(h);
		return -1;
	}
	if (shifting && where.dli_fbase &&
	    mmap(where.dli_fbase, 4096, PROT_NONE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0) == MAP_FAILED) {
		perror("dl-target: mmap");
		return -1;
	}
	free_kept();

	unsigned char **t = kept;

	kept = fresh;
	fresh = t;
	return 0;
}

static void say(const char *line)
{
	puts(line);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	char line[64];
	char *end;

	if (argc != 3 || (nallocs = (unsigned)strtoul(argv[2], &end, 10)) == 0 || *end ||
	    nallocs > 100000) {
		fputs("usage: dl-target LIBRARY ALLOCS (1 to 100000)\n", stderr);
		return 2;
	}
	library = argv[1];
	kept = calloc(nallocs, sizeof(*kept));
	fresh = calloc(nallocs, sizeof(*fresh));
	if (!kept || !fresh) {
		fputs("dl-target: out of memory\n", stderr);
		return 1;
	}
	say("ready");
	while (fgets(line, sizeof(line), stdin)) {
		unsigned n;
		long ms;

		line[strcspn(line, "\n")] = '\0';
		if (sscanf(line, "go %u %ld", &n, &ms) == 2) {
			unsigned i = 0;

			while (i < n && cycle(i, ms) == 0)
				i++;
			say(i == n ? "done" : "failed");
		} else if (!strcmp(line, "shift")) {
			shifting = 1;
			say("shifted");
		} else if (!strcmp(line, "ping")) {
			say("pong");
		} else if (!strcmp(line, "exit")) {
			break;
		} else {
			fprintf(stderr, "dl-target: unknown command '%s'\n", line);
		}
	}
	free_kept();
	free(kept);
	free(fresh);
	return corrupted;
}
