/* common.c - argument parsing, worker threads and throughput reporting for bench/. */
#include "common.h"

#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "hpabi.h"
#include "hpformat.h"
#include "inproc-payload.h"

#define MAX_THREADS 256
#define MAX_PARAMS 8
/* How long the main thread sleeps at most between looks at the workers. */
#define POLL_NS 50000000L

/* One cache line per worker: the counters are written on every step and must not share. */
struct worker {
	_Alignas(64) _Atomic uint64_t ops;
	struct timespec end;
	pthread_t thread;
	int tid;
	const struct bench_def *def;
	const struct bench_opts *opts;
};

static struct worker workers[MAX_THREADS];
static atomic_bool stop_flag;
static atomic_int finished;

void bench_oom(const char *what)
{
	fprintf(stderr, "out of memory: %s\n", what);
	exit(1);
}

void bench_fail(const char *fmt, ...)
{
	va_list ap;

	fputs("self-check failed: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

uint64_t bench_rand_seed(const struct bench_opts *opts, int tid)
{
	/* splitmix64 spreads neighbouring seeds and thread ids over the whole state. */
	uint64_t z = opts->seed * 0x9e3779b97f4a7c15ULL + (uint64_t)tid + 1;

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	z ^= z >> 31;
	return z ? z : 1;
}

static double ts_diff(const struct timespec *a, const struct timespec *b)
{
	return (double)(a->tv_sec - b->tv_sec) + (double)(a->tv_nsec - b->tv_nsec) / 1e9;
}

static void ts_add_ns(struct timespec *t, long ns)
{
	t->tv_nsec += ns;
	while (t->tv_nsec >= 1000000000L) {
		t->tv_nsec -= 1000000000L;
		t->tv_sec++;
	}
}

static bool ts_before(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

static void on_signal(int sig)
{
	(void)sig;
	atomic_store(&stop_flag, true);
}

static void usage(FILE *f, const struct bench_def *def)
{
	fprintf(f,
		"usage: %s [--seconds S | --iterations N] [--threads P] [--seed N] [--progress] "
		"[--payload PATH [--payload-rate B | --payload-mode M]]",
		def->name);
	for (const struct bench_param *p = def->params; p && p->name; p++)
		fprintf(f, " [--%s N]", p->name);
	fprintf(f, "\n%s\n", def->summary);
	fputs("  --seconds S     run for S seconds (default 10)\n"
	      "  --iterations N  instead, every thread performs N steps\n"
	      "  --threads P     worker threads (default 1)\n"
	      "  --seed N        random seed (default 1)\n"
	      "  --progress      print a throughput line every second\n"
	      "  --payload PATH  load heapprof's payload into this process and record in full\n"
	      "                  mode while the workers run (bench/inproc.sh)\n"
	      "  --payload-rate B\n"
	      "                  with --payload, record in sampled mode instead: one sample\n"
	      "                  per B bytes on average\n"
	      "  --payload-mode M\n"
	      "                  with --payload, record in mode M: basic, extended or full\n",
	      f);
	for (const struct bench_param *p = def->params; p && p->name; p++) {
		char flag[64];

		snprintf(flag, sizeof(flag), "--%s N", p->name);
		fprintf(f, "  %-15s %s (%ld..%ld, default %ld)\n", flag, p->help, p->min, p->max,
			*p->value);
	}
	fputs("Prints \"ready pid=<pid>\" at once and ends with "
	      "\"ops_per_s=<float> threads=<P> seconds=<elapsed> cpu_s=<CPU time> ops=<N>\"\n"
	      "(the whole process's user + system time while the workers ran; N exact).\n",
	      f);
}

static bool parse_long(const char *s, long min, long max, long *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max)
		return false;
	*out = v;
	return true;
}

enum {
	OPT_SECONDS = 1000,
	OPT_ITERATIONS,
	OPT_THREADS,
	OPT_SEED,
	OPT_PROGRESS,
	OPT_PAYLOAD,
	OPT_PAYLOAD_RATE,
	OPT_PAYLOAD_MODE,
	OPT_HELP
};

/* Returns 0, or the exit status for a usage error (2) or --help (-1). */
static int parse_args(int argc, char **argv, const struct bench_def *def, struct bench_opts *o)
{
	struct option longopts[9 + MAX_PARAMS + 1] = {
	    {"seconds", required_argument, NULL, OPT_SECONDS},
	    {"iterations", required_argument, NULL, OPT_ITERATIONS},
	    {"threads", required_argument, NULL, OPT_THREADS},
	    {"seed", required_argument, NULL, OPT_SEED},
	    {"progress", no_argument, NULL, OPT_PROGRESS},
	    {"payload", required_argument, NULL, OPT_PAYLOAD},
	    {"payload-rate", required_argument, NULL, OPT_PAYLOAD_RATE},
	    {"payload-mode", required_argument, NULL, OPT_PAYLOAD_MODE},
	    {"help", no_argument, NULL, OPT_HELP},
	};
	bool have_seconds = false;
	int nparams = 0;
	int idx = 0;
	int c;

	for (const struct bench_param *p = def->params; p && p->name; p++) {
		if (nparams == MAX_PARAMS)
			abort();
		longopts[9 + nparams] = (struct option){p->name, required_argument, NULL, nparams};
		nparams++;
	}
	*o = (struct bench_opts){
	    .seconds = 10, .threads = 1, .seed = 1, .payload_mode = HP_MODE_FULL};

	while ((c = getopt_long(argc, argv, "", longopts, &idx)) != -1) {
		long v;
		char *end;

		switch (c) {
		case OPT_SECONDS:
			errno = 0;
			o->seconds = strtod(optarg, &end);
			if (errno || end == optarg || *end || !isfinite(o->seconds) ||
			    o->seconds <= 0 || o->seconds > 1e6)
				goto bad_value;
			have_seconds = true;
			break;
		case OPT_ITERATIONS:
			if (!parse_long(optarg, 1, LONG_MAX, &o->iterations))
				goto bad_value;
			break;
		case OPT_THREADS:
			if (!parse_long(optarg, 1, MAX_THREADS, &v))
				goto bad_value;
			o->threads = (int)v;
			break;
		case OPT_SEED:
			if (!parse_long(optarg, 0, LONG_MAX, &v))
				goto bad_value;
			o->seed = (uint64_t)v;
			break;
		case OPT_PROGRESS:
			o->progress = true;
			break;
		case OPT_PAYLOAD:
			o->payload = optarg;
			break;
		case OPT_PAYLOAD_RATE:
			if (!parse_long(optarg, 1, LONG_MAX, &o->payload_rate))
				goto bad_value;
			break;
		case OPT_PAYLOAD_MODE:
			if (!(o->payload_mode = (int)hp_mode_from_name(optarg)))
				goto bad_value;
			break;
		case OPT_HELP:
			usage(stdout, def);
			return -1;
		default:
			if (c >= 0 && c < nparams) {
				const struct bench_param *p = &def->params[c];

				if (!parse_long(optarg, p->min, p->max, p->value))
					goto bad_value;
				break;
			}
			usage(stderr, def);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "%s: unexpected argument '%s'\n", def->name, argv[optind]);
		return 2;
	}
	if (have_seconds && o->iterations) {
		fprintf(stderr, "%s: --seconds and --iterations exclude each other\n", def->name);
		return 2;
	}
	if ((o->payload_rate || o->payload_mode != HP_MODE_FULL) && !o->payload) {
		fprintf(stderr, "%s: --payload-rate and --payload-mode need --payload\n",
			def->name);
		return 2;
	}
	if (o->payload_rate && o->payload_mode != HP_MODE_FULL) {
		fprintf(stderr, "%s: --payload-rate samples full mode only\n", def->name);
		return 2;
	}
	return 0;
bad_value:
	fprintf(stderr, "%s: bad value '%s' for --%s\n", def->name, optarg, longopts[idx].name);
	return 2;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	const struct bench_def *def = w->def;
	long iterations = w->opts->iterations;
	void *state = def->thread_init(w->tid, w->opts);
	uint64_t ops = 0;

	for (long n = 0; !iterations || n < iterations; n++) {
		if (atomic_load_explicit(&stop_flag, memory_order_relaxed))
			break;
		ops += def->step(state);
		/* Only this thread writes the counter; the main thread reads it for --progress. */
		atomic_store_explicit(&w->ops, ops, memory_order_relaxed);
	}
	clock_gettime(CLOCK_MONOTONIC, &w->end);
	def->thread_fini(state);
	atomic_fetch_add(&finished, 1);
	return NULL;
}

static uint64_t total_ops(int threads)
{
	uint64_t sum = 0;

	for (int i = 0; i < threads; i++)
		sum += atomic_load_explicit(&workers[i].ops, memory_order_relaxed);
	return sum;
}

static void print_rate(double ops, int threads, double seconds)
{
	printf("ops_per_s=%.1f threads=%d seconds=%.3f", seconds > 0 ? ops / seconds : 0.0, threads,
	       seconds);
}

/* User + system time of every thread of the process, a profiler's included. */
static double cpu_seconds(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* Sleeps until the run is over, printing progress lines on the way. */
static void supervise(const struct bench_opts *o, const struct timespec *start)
{
	struct timespec deadline = *start, tick = *start, now;
	uint64_t last_ops = 0;
	struct timespec last = *start;

	deadline.tv_sec += (time_t)o->seconds;
	ts_add_ns(&deadline, (long)((o->seconds - floor(o->seconds)) * 1e9));
	tick.tv_sec++;

	while (!atomic_load(&stop_flag) && atomic_load(&finished) < o->threads) {
		struct timespec wake;

		clock_gettime(CLOCK_MONOTONIC, &now);
		if (!o->iterations && !ts_before(&now, &deadline)) {
			atomic_store(&stop_flag, true);
			break;
		}
		if (o->progress && !ts_before(&now, &tick)) {
			uint64_t ops = total_ops(o->threads);

			print_rate((double)(ops - last_ops), o->threads, ts_diff(&now, &last));
			putchar('\n');
			last_ops = ops;
			last = now;
			tick.tv_sec++;
		}
		wake = now;
		ts_add_ns(&wake, POLL_NS);
		if (o->progress && ts_before(&tick, &wake))
			wake = tick;
		if (!o->iterations && ts_before(&deadline, &wake))
			wake = deadline;
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &wake, NULL);
	}
}

int bench_main(int argc, char **argv, const struct bench_def *def)
{
	struct bench_opts o;
	struct sigaction sa = {.sa_handler = on_signal};
	struct timespec start;
	double elapsed = 0;
	void *payload = NULL;
	int rc, started;

	rc = parse_args(argc, argv, def, &o);
	if (rc)
		return rc < 0 ? 0 : rc;
	setvbuf(stdout, NULL, _IOLBF, 0);
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	printf("ready pid=%d\n", (int)getpid());

	if (def->setup && def->setup(&o))
		return 1;
	if (o.payload &&
	    !(payload = bench_payload_start(o.payload, o.payload_mode, o.payload_rate, def->name)))
		return 1;

	double cpu0 = cpu_seconds();
	clock_gettime(CLOCK_MONOTONIC, &start);
	for (started = 0; started < o.threads; started++) {
		struct worker *w = &workers[started];

		w->tid = started;
		w->def = def;
		w->opts = &o;
		rc = pthread_create(&w->thread, NULL, worker_main, w);
		if (rc) {
			fprintf(stderr, "%s: pthread_create: %s\n", def->name, strerror(rc));
			atomic_store(&stop_flag, true);
			break;
		}
	}
	if (started == o.threads)
		supervise(&o, &start);
	for (int i = 0; i < started; i++) {
		pthread_join(workers[i].thread, NULL);
		if (ts_diff(&workers[i].end, &start) > elapsed)
			elapsed = ts_diff(&workers[i].end, &start);
	}
	double cpu = cpu_seconds() - cpu0;
	if (payload)
		((hp_stop_fn)dlsym(payload, HP_STOP_SYMBOL))();
	if (def->teardown)
		def->teardown();
	if (started < o.threads)
		return 1;
	uint64_t ops = total_ops(o.threads);
	print_rate((double)ops, o.threads, elapsed);
	printf(" cpu_s=%.3f ops=%llu\n", cpu, (unsigned long long)ops);
	return 0;
}
