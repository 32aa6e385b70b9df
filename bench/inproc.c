/* inproc.c - the payload's cost per allocation, without a target process: the payload is
 * dlopen'd into this program and started in full mode as tests/unit/test-payload starts
 * it, a thread drains its pipe, and one allocation shape runs a fixed number of times.
 * Under valgrind's callgrind the count of instructions is exact, where the attached
 * benchmarks' ratios move by 10 to 20% on a busy host (`make bench-inproc`,
 * bench/inproc.sh; docs/performance.md, "Instructions, counted"); the CPU time it prints
 * compares two builds run in turn.
 *
 * Usage: inproc PAYLOAD|none SHAPE COUNT
 *   loop     8-byte blocks, 15000 allocated and then freed, COUNT times (microbench's shape)
 *   request  a server's request: five allocation paths through one wrapper, two of them
 *            at one depth (request-paths' shape), COUNT batches of sixteen
 *   tree     a binary tree of depth 15 built and freed, COUNT times (binary-trees' shape)
 * Prints "shape=S allocations=N cpu_s=T", T the process's user and system time.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "hpabi.h"
#include "hpformat.h"

#define NOINLINE __attribute__((noinline))
/* Keeps a call from being folded away or turned into a tail call. */
#define KEEP(p) __asm__ volatile("" ::"r"(p) : "memory")

static uint64_t allocations;

static void *reader(void *arg)
{
	static char buf[1 << 16];
	int fd = (int)(intptr_t)arg;
	while (read(fd, buf, sizeof buf) > 0)
		;
	return NULL;
}

static void *must(void *p)
{
	if (!p) {
		fprintf(stderr, "inproc: out of memory\n");
		exit(1);
	}
	allocations++;
	return p;
}

/* loop */
#define LOOP_BLOCKS 15000
static void *loop_blocks[LOOP_BLOCKS];

NOINLINE static void loop_step(void)
{
	for (int i = 0; i < LOOP_BLOCKS; i++) {
		loop_blocks[i] = must(malloc(8));
		KEEP(loop_blocks[i]);
	}
	for (int i = 0; i < LOOP_BLOCKS; i++)
		free(loop_blocks[i]);
}

/* request: the wrapper, a stored object of two blocks, a reply three calls deep, and the
 * request's own arguments; the stored entries are replaced in a ring of 64. */
static void *entries[64];
static unsigned next_entry;

NOINLINE static void *wrapped(size_t n)
{
	void *p = must(malloc(n));
	KEEP(p);
	return p;
}

NOINLINE static void unwrapped(void *p)
{
	free(p);
	__asm__ volatile("" ::: "memory");
}

NOINLINE static void *new_string(size_t n)
{
	void *p = wrapped(n + 9);
	KEEP(p);
	return p;
}

NOINLINE static void *new_object(size_t n)
{
	void **o = wrapped(16);
	o[0] = new_string(n);
	KEEP(o);
	return o;
}

NOINLINE static void drop_object(void **o)
{
	unwrapped(o[0]);
	unwrapped(o);
}

NOINLINE static void set_command(unsigned i)
{
	void **e = wrapped(24);
	e[0] = new_object(10 + (i & 7));
	unsigned k = next_entry++ & 63;
	if (entries[k]) {
		drop_object(((void ***)entries[k])[0]);
		unwrapped(entries[k]);
	}
	entries[k] = e;
}

NOINLINE static void *reply_block(unsigned i)
{
	void *r = wrapped(32 + (i & 3));
	KEEP(r);
	return r;
}

NOINLINE static void *reply_inner(unsigned i)
{
	void *r = reply_block(i);
	KEEP(r);
	return r;
}

NOINLINE static void *reply(unsigned i)
{
	void *r = reply_inner(i);
	KEEP(r);
	return r;
}

NOINLINE static void get_command(unsigned i)
{
	unwrapped(reply(i));
}

NOINLINE static void command(unsigned i)
{
	void *argv = wrapped(48);
	if (i & 1)
		set_command(i);
	else
		get_command(i);
	unwrapped(argv);
}

NOINLINE static void request_batch(unsigned b)
{
	void *query = wrapped(1024);
	for (unsigned j = 0; j < 16; j++)
		command(b * 16 + j);
	unwrapped(query);
}

/* tree */
struct node {
	struct node *left, *right;
};

NOINLINE static struct node *tree_build(int d)
{
	struct node *n = must(malloc(sizeof *n));
	n->left = d > 0 ? tree_build(d - 1) : NULL;
	n->right = d > 0 ? tree_build(d - 1) : NULL;
	return n;
}

NOINLINE static void tree_free(struct node *n)
{
	if (n->left) {
		tree_free(n->left);
		tree_free(n->right);
	}
	free(n);
}

static int usage(FILE *f)
{
	fprintf(f, "usage: inproc PAYLOAD|none loop|request|tree COUNT\n");
	return f == stdout ? 0 : 2;
}

static void *payload;

/* No round ends while the shape runs: the collector's work would be counted by how long
 * the run took (under valgrind, many times the real length), not by what it did. The
 * stop's last round is the same for a run and one twice as long, and falls out. */
#define INTERVAL_MS (3600 * 1000)

static int start(const char *path)
{
	payload = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	hp_start_fn fn = payload ? (hp_start_fn)dlsym(payload, HP_START_SYMBOL) : NULL;
	if (!fn) {
		fprintf(stderr, "inproc: %s: %s\n", path, dlerror());
		return -1;
	}
	struct hp_start_args a = {.abi_version = HP_ABI_VERSION,
				  .mode = HP_MODE_FULL,
				  .interval_ms = INTERVAL_MS,
				  .max_depth = 64};
	int fd = fn(&a);
	pthread_t t;
	if (fd < 0 || pthread_create(&t, NULL, reader, (void *)(intptr_t)fd) != 0) {
		fprintf(stderr, "inproc: the payload did not start (%d)\n", fd);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "--help"))
		return usage(stdout);
	if (argc != 4)
		return usage(stderr);
	long count = strtol(argv[3], NULL, 10);
	if (count <= 0)
		return usage(stderr);
	const char *shape = argv[2];
	if (strcmp(shape, "loop") && strcmp(shape, "request") && strcmp(shape, "tree"))
		return usage(stderr);
	if (strcmp(argv[1], "none") && start(argv[1]) < 0)
		return 1;
	for (long i = 0; i < count; i++) {
		if (!strcmp(shape, "loop"))
			loop_step();
		else if (!strcmp(shape, "request"))
			request_batch((unsigned)i);
		else
			tree_free(tree_build(15));
	}
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	if (payload)
		((hp_stop_fn)dlsym(payload, HP_STOP_SYMBOL))();
	printf("shape=%s allocations=%llu cpu_s=%.3f\n", shape, (unsigned long long)allocations,
	       (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
		   ru.ru_stime.tv_usec / 1e6);
	return 0;
}
