/* mt-target.c - a multi-threaded allocation workload whose counts are known exactly.
 *
 * Contract: `mt-target T K [B]` starts T worker threads and prints "ready". It then reads
 * commands, one per line, from stdin and answers on stdout (flushed):
 *   go    every worker calls worker_alloc() exactly K times with block size B + its index
 *         (B defaults to 48; a B of 1 makes blocks that an allocator with an 8-byte size
 *         class places at addresses that are not 16-byte aligned)
 *         (one call site, the line marked HP_SITE); when all have, worker (i + 1) % T frees
 *         every odd-indexed block of worker i (a cross-thread free when T > 1); then "done".
 *         A later "go" first frees the blocks kept from the previous one.
 *   ping  answers "pong" without allocating.
 *   exit  (or end of input) every worker frees what it kept; the process exits 0.
 * With MT_TARGET_TLS_PAD naming a library whose only content is a small initial-exec TLS
 * variable (tls-pad.c), it first loads copies of that library until glibc's static TLS has
 * no room for another: a process into which a module with initial-exec TLS cannot be
 * dlopened, as one whose own plugins took the room would be.
 * Every block carries a fill pattern that is checked before it is freed; any mismatch is
 * reported on stderr and makes the exit status 1. The program calls neither malloc nor free
 * before the first "go" (its arrays come from calloc), so in a lazily bound build their PLT
 * slots are still unresolved when a profiler attaches.
 */
#define _GNU_SOURCE /* memfd_create */
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct worker {
	pthread_t thread;
	unsigned index;
	unsigned char **blocks;
};

static unsigned nthreads;
static unsigned nallocs;
static unsigned base_size = 48;
static struct worker *workers;
static pthread_barrier_t allocated;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static pthread_cond_t progress = PTHREAD_COND_INITIALIZER;
static unsigned generation;
static unsigned finished;
static int quitting;
static atomic_int corrupted;

unsigned char *worker_alloc(size_t size, unsigned char fill);

/* Out of line and not a tail call (the block is used after malloc returns), so the call
 * site is this function and this line in every build variant. */
__attribute__((noinline, noclone)) unsigned char *worker_alloc(size_t size, unsigned char fill)
{
	unsigned char *p = malloc(size); /* HP_SITE */

	if (!p) {
		fputs("mt-target: out of memory\n", stderr);
		exit(1);
	}
	memset(p, fill, size);
	return p;
}

static size_t block_size(const struct worker *w)
{
	return base_size + w->index;
}

static unsigned char block_fill(const struct worker *w, unsigned k)
{
	return (unsigned char)(w->index * 131 + k * 7 + 1);
}

static void check_and_free(const struct worker *w, unsigned k)
{
	unsigned char *p = w->blocks[k];
	size_t size = block_size(w);
	unsigned char fill = block_fill(w, k);

	for (size_t i = 0; i < size; i++) {
		if (p[i] != fill) {
			fprintf(stderr, "mt-target: corrupt block %u of worker %u at byte %zu\n", k,
				w->index, i);
			atomic_store(&corrupted, 1);
			break;
		}
	}
	free(p);
	w->blocks[k] = NULL;
}

static void free_kept(const struct worker *w)
{
	for (unsigned k = 0; k < nallocs; k++)
		if (w->blocks[k])
			check_and_free(w, k);
}

static void run_round(struct worker *w)
{
	free_kept(w);
	for (unsigned k = 0; k < nallocs; k++)
		w->blocks[k] = worker_alloc(block_size(w), block_fill(w, k));
	pthread_barrier_wait(&allocated);

	/* The victim's blocks were all written before the barrier, and it touches none of
	 * them again until the next round, which needs every worker finished first. */
	const struct worker *victim = &workers[(w->index + nthreads - 1) % nthreads];

	for (unsigned k = 1; k < nallocs; k += 2)
		check_and_free(victim, k);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	unsigned seen = 0;

	for (;;) {
		pthread_mutex_lock(&lock);
		while (generation == seen && !quitting)
			pthread_cond_wait(&wake, &lock);
		seen = generation;
		int quit = quitting;
		pthread_mutex_unlock(&lock);
		if (quit)
			break;
		run_round(w);
		pthread_mutex_lock(&lock);
		finished++;
		pthread_cond_signal(&progress);
		pthread_mutex_unlock(&lock);
	}
	free_kept(w);
	return NULL;
}

static void say(const char *line)
{
	puts(line);
	fflush(stdout);
}

static void go(void)
{
	pthread_mutex_lock(&lock);
	finished = 0;
	generation++;
	pthread_cond_broadcast(&wake);
	while (finished < nthreads)
		pthread_cond_wait(&progress, &lock);
	pthread_mutex_unlock(&lock);
	say("done");
}

/* Each copy from a memfd of its own, so that the loader takes it for another module; each
 * memfd stays open, since a path the loader has seen (/proc/self/fd/N) names the module it
 * loaded from there. */
static void fill_static_tls(const char *pad)
{
	int fd = open(pad, O_RDONLY | O_CLOEXEC);
	struct stat st;
	void *image = MAP_FAILED;

	if (fd >= 0 && fstat(fd, &st) == 0)
		image = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (image == MAP_FAILED) {
		fprintf(stderr, "mt-target: cannot read %s\n", pad);
		exit(1);
	}
	close(fd);
	for (unsigned n = 0;; n++) {
		char path[64];
		int m = memfd_create("tls-pad", MFD_CLOEXEC);

		if (m < 0 || write(m, image, (size_t)st.st_size) != st.st_size || n > 100000) {
			fputs("mt-target: cannot copy the TLS pad\n", stderr);
			exit(1);
		}
		snprintf(path, sizeof path, "/proc/self/fd/%d", m);
		if (!dlopen(path, RTLD_NOW | RTLD_LOCAL)) {
			const char *why = dlerror();

			if (!why || !strstr(why, "static TLS")) {
				fprintf(stderr, "mt-target: dlopen of the TLS pad: %s\n",
					why ? why : "?");
				exit(1);
			}
			fprintf(stderr, "mt-target: static TLS full after %u pads\n", n);
			break;
		}
	}
	munmap(image, (size_t)st.st_size);
}

static unsigned parse_count(const char *s, const char *what)
{
	char *end;
	unsigned long v = strtoul(s, &end, 10);

	if (*s == '\0' || *end != '\0' || v == 0 || v > 1000000) {
		fprintf(stderr, "mt-target: bad %s '%s': try a number from 1 to 1000000\n", what,
			s);
		exit(2);
	}
	return (unsigned)v;
}

int main(int argc, char **argv)
{
	char line[64];

	if (argc != 3 && argc != 4) {
		fputs("usage: mt-target THREADS ALLOCS-PER-THREAD [BASE-SIZE]\n", stderr);
		return 2;
	}
	nthreads = parse_count(argv[1], "thread count");
	nallocs = parse_count(argv[2], "allocation count");
	if (argc == 4)
		base_size = parse_count(argv[3], "base size");
	workers = calloc(nthreads, sizeof(*workers));
	if (!workers || pthread_barrier_init(&allocated, NULL, nthreads)) {
		fputs("mt-target: cannot set up the workers\n", stderr);
		return 1;
	}
	for (unsigned i = 0; i < nthreads; i++) {
		workers[i].index = i;
		workers[i].blocks = calloc(nallocs, sizeof(*workers[i].blocks));
		if (!workers[i].blocks ||
		    pthread_create(&workers[i].thread, NULL, worker_main, &workers[i])) {
			fputs("mt-target: cannot start the workers\n", stderr);
			return 1;
		}
	}
	if (getenv("MT_TARGET_TLS_PAD"))
		fill_static_tls(getenv("MT_TARGET_TLS_PAD"));
	say("ready");

	while (fgets(line, sizeof(line), stdin)) {
		line[strcspn(line, "\n")] = '\0';
		if (!strcmp(line, "go"))
			go();
		else if (!strcmp(line, "ping"))
			say("pong");
		else if (!strcmp(line, "exit"))
			break;
		else
			fprintf(stderr, "mt-target: unknown command '%s'\n", line);
	}

	pthread_mutex_lock(&lock);
	quitting = 1;
	pthread_cond_broadcast(&wake);
	pthread_mutex_unlock(&lock);
	for (unsigned i = 0; i < nthreads; i++) {
		pthread_join(workers[i].thread, NULL);
		free(workers[i].blocks);
	}
	pthread_barrier_destroy(&allocated);
	free(workers);
	if (atomic_load(&corrupted)) {
		fputs("mt-target: memory was corrupted\n", stderr);
		return 1;
	}
	return 0;
}
