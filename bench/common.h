/* common.h - the shared driver of the benchmark programs in bench/.
 *
 * Contract: a program describes its work as a struct bench_def and returns
 * bench_main(argc, argv, &def) from main(). bench_main parses
 *   --seconds S      run for S seconds (default 10)
 *   --iterations N   instead, every thread performs exactly N steps
 *   --threads P      worker threads (default 1)
 *   --seed N         seed of the per-thread random generators (default 1)
 *   --progress       also print one throughput line per second
 *   --payload PATH   load heapprof's payload into the process and record in full mode
 *                    while the workers run (to count its instructions: bench/inproc.sh)
 *   --payload-rate B with --payload: record in sampled mode, one sample per B bytes
 * plus the program's own integer parameters, prints "ready pid=<pid>" at once (before any
 * setup, so a profiler can attach while the program runs), runs def->setup, then P threads
 * that each call thread_init, step until told to stop, thread_fini. It ends by printing
 *   ops_per_s=<float> threads=<P> seconds=<elapsed> cpu_s=<CPU time> ops=<N>
 * (progress lines give its first three fields; the last line is the total) and returns 0. Usage
 * errors exit 2, allocation or self-check failures exit 1. SIGINT and SIGTERM end the run
 * early with the final line printed. stdout is line-buffered so a pipe sees every line.
 */
#ifndef HEAPPROF_BENCH_COMMON_H
#define HEAPPROF_BENCH_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct bench_opts {
	double seconds;
	long iterations; /* 0: run for `seconds` */
	int threads;
	uint64_t seed;
	bool progress;
	const char *payload; /* --payload, or NULL */
	long payload_rate;   /* --payload-rate: bytes between samples, 0 = full mode */
	int payload_mode;    /* --payload-mode: an enum hp_mode, full by default */
};

/* A program-specific integer option, --name N, written to *value when given. */
struct bench_param {
	const char *name;
	long *value;
	long min;
	long max;
	const char *help;
};

struct bench_def {
	const char *name;
	const char *summary;		  /* one line for --help: what a step is, what an op is */
	const struct bench_param *params; /* terminated by a zeroed entry; may be NULL */
	/* Optional; runs once after "ready" and before the workers. Nonzero fails the run. */
	int (*setup)(const struct bench_opts *opts);
	/* Optional; runs once after every worker has finished. */
	void (*teardown)(void);
	/* Runs in the worker thread; returns its private state. */
	void *(*thread_init)(int tid, const struct bench_opts *opts);
	/* One short unit of work (well under a millisecond to a few ms): returns ops done. */
	uint64_t (*step)(void *state);
	/* Frees everything the thread still holds. */
	void (*thread_fini)(void *state);
};

int bench_main(int argc, char **argv, const struct bench_def *def);

/* Reports that the allocator returned NULL and exits 1. */
__attribute__((noreturn)) void bench_oom(const char *what);

/* Reports a failed self-check and exits 1. */
__attribute__((noreturn, format(printf, 1, 2))) void bench_fail(const char *fmt, ...);

/* xorshift64*: small, fast and good enough to pick sizes and slots. */
static inline uint64_t bench_rand(uint64_t *state)
{
	uint64_t x = *state;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*state = x;
	return x * 0x2545f4914f6cdd1dULL;
}

/* A uniform value in [lo, hi]. */
static inline uint64_t bench_rand_range(uint64_t *state, uint64_t lo, uint64_t hi)
{
	return lo + bench_rand(state) % (hi - lo + 1);
}

/* A nonzero generator state distinct for every thread of one seed. */
uint64_t bench_rand_seed(const struct bench_opts *opts, int tid);

#endif
