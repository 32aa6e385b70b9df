/* stop-probe.c - measures how long a profiler stops the threads of the process it attaches to.
 *
 * Contract: `stop-probe [--threads T]` prints "ready pid=<pid>" and runs T threads (the main
 * thread is one of them, default 2) that each read CLOCK_MONOTONIC in a tight loop and keep
 * the largest gap between two successive readings, per phase. No thread ever blocks, so the
 * profiler has to stop a running thread, whose stop the probe then sees. Phases are named on
 * stdin, one command a line:
 *   phase NAME   ends the current phase and begins NAME; answered "phase=NAME begun"
 *   quit         (or end of input) ends the run
 * The first phase, before any command, is "start". At the end the probe prints, for every
 * phase in order, "phase=NAME max_gap_ms=<float> max_stop_ms=<float>", then "done", and exits
 * 0. Usage errors exit 2. max_gap_ms is the largest gap of any thread; max_stop_ms is the
 * largest gap less the time its thread spent waiting for a CPU (the run_delay of
 * /proc/self/task/TID/schedstat): the time the thread was stopped or ran someone else's code,
 * without the scheduler noise of a busy machine (equal to the gap where schedstat is missing).
 * A gap that spans a phase change counts in both phases. The probe allocates nothing after
 * start-up: what it measures is the stop, not the profiler's cost per allocation.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_PHASES 64
#define MAX_THREADS 64
#define NAME_LEN 32
/* How often the main thread looks at stdin: often enough that a phase change is seen at once,
 * rarely enough that the read(2) is not what the probe measures. */
#define POLL_NS 1000000
/* A gap this long is checked against the thread's run delay; shorter ones are the loop's own
 * pace or a timer tick. */
#define STOP_MIN_NS 200000
/* The run delay is also read this often, so the delay subtracted from a gap is the gap's and
 * not that of the many short waits before it. */
#define SAMPLE_NS 1000000

/* Written only by the spinner's own thread until it is joined. */
struct spinner {
	pthread_t thread;
	int schedstat_fd;    /* -1: no schedstat, a stop is the whole gap */
	uint64_t sampled_at; /* ns, CLOCK_MONOTONIC */
	uint64_t run_delay;  /* ns waited for a CPU, as of sampled_at */
	uint64_t max_gap[MAX_PHASES];
	uint64_t max_stop[MAX_PHASES];
};

static struct spinner spinners[MAX_THREADS];
static char phase_names[MAX_PHASES][NAME_LEN] = {"start"};
static atomic_int current_phase;
static atomic_bool stopping;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The thread's total time waited on a run queue (ns), or 0 without schedstat. */
static uint64_t read_run_delay(const struct spinner *s)
{
	char buf[96];
	ssize_t n;
	unsigned long long on_cpu, delay;

	if (s->schedstat_fd < 0)
		return 0;
	n = pread(s->schedstat_fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	if (sscanf(buf, "%llu %llu", &on_cpu, &delay) != 2)
		return 0;
	return delay;
}

/* Opens this thread's schedstat and takes the run delay's starting point. */
static void spinner_init(struct spinner *s)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/self/task/%d/schedstat", (int)gettid());
	s->schedstat_fd = open(path, O_RDONLY | O_CLOEXEC);
	s->run_delay = read_run_delay(s);
	s->sampled_at = now_ns();
}

static void record(uint64_t *max, int phase, int prev_phase, uint64_t value)
{
	if (value > max[prev_phase])
		max[prev_phase] = value;
	if (phase != prev_phase && value > max[phase])
		max[phase] = value;
}

/* One reading of the clock: the gap since *prev counts in the phase it began in and in the
 * phase it ended in. Returns the new reading. */
static uint64_t spin_once(struct spinner *s, uint64_t prev, int *prev_phase)
{
	uint64_t t = now_ns();
	int ph = atomic_load_explicit(&current_phase, memory_order_relaxed);
	uint64_t gap = t - prev;

	record(s->max_gap, ph, *prev_phase, gap);
	if (gap >= STOP_MIN_NS || t - s->sampled_at >= SAMPLE_NS) {
		uint64_t delay = read_run_delay(s);
		/* A failed read (0) makes the whole gap a stop: the report errs long. */
		uint64_t waited = delay >= s->run_delay ? delay - s->run_delay : 0;

		if (gap >= STOP_MIN_NS)
			record(s->max_stop, ph, *prev_phase, waited < gap ? gap - waited : 0);
		s->run_delay = delay;
		s->sampled_at = t;
	}
	*prev_phase = ph;
	return t;
}

static void *spin_thread(void *arg)
{
	struct spinner *s = arg;
	int ph = atomic_load(&current_phase);
	uint64_t t;

	spinner_init(s);
	t = now_ns();
	while (!atomic_load_explicit(&stopping, memory_order_relaxed))
		t = spin_once(s, t, &ph);
	return NULL;
}

/* Handles one command line; returns false when the run should end. */
static bool command(char *line)
{
	int next;

	if (strcmp(line, "quit") == 0)
		return false;
	if (strncmp(line, "phase ", 6) != 0 || line[6] == '\0') {
		fprintf(stderr, "stop-probe: unknown command '%s' (phase NAME, quit)\n", line);
		return true;
	}
	next = atomic_load(&current_phase) + 1;
	if (next >= MAX_PHASES) {
		fprintf(stderr, "stop-probe: more than %d phases; '%s' ignored\n", MAX_PHASES,
			line + 6);
		return true;
	}
	/* Longer names are cut to fit. */
	snprintf(phase_names[next], NAME_LEN, "%.*s", NAME_LEN - 1, line + 6);
	atomic_store(&current_phase, next);
	printf("phase=%s begun\n", phase_names[next]);
	return true;
}

/* Reads what stdin has without blocking and runs the complete lines; false at quit or EOF. */
static bool poll_commands(char *buf, size_t *len, size_t cap)
{
	ssize_t n = read(STDIN_FILENO, buf + *len, cap - 1 - *len);
	char *nl;

	if (n == 0)
		return false;
	if (n < 0)
		return errno == EAGAIN || errno == EINTR;
	*len += (size_t)n;
	buf[*len] = '\0';
	while ((nl = strchr(buf, '\n'))) {
		*nl = '\0';
		if (!command(buf))
			return false;
		*len -= (size_t)(nl + 1 - buf);
		memmove(buf, nl + 1, *len + 1);
	}
	if (*len == cap - 1) /* a line longer than any command: drop it */
		*len = 0;
	return true;
}

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: stop-probe [--threads T]\n"
		"Spins T threads (1..%d, default 2; the main thread is one) on CLOCK_MONOTONIC\n"
		"and reports per phase the longest gap between two readings and the longest\n"
		"stop (the gap less the time the thread waited for a CPU).\n"
		"Commands on stdin: 'phase NAME', 'quit'.\n",
		MAX_THREADS);
}

int main(int argc, char **argv)
{
	char buf[256];
	size_t len = 0;
	long threads = 2;
	uint64_t t, last_poll;
	int ph = 0, i, p, nphases;
	char *end;

	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--help") == 0) {
			usage(stdout);
			return 0;
		}
		if (strcmp(argv[i], "--threads") != 0 || i + 1 == argc) {
			usage(stderr);
			return 2;
		}
		errno = 0;
		threads = strtol(argv[++i], &end, 10);
		if (errno || *end || end == argv[i] || threads < 1 || threads > MAX_THREADS) {
			usage(stderr);
			return 2;
		}
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (fcntl(STDIN_FILENO, F_SETFL, fcntl(STDIN_FILENO, F_GETFL) | O_NONBLOCK) < 0) {
		perror("stop-probe: stdin");
		return 1;
	}
	printf("ready pid=%d\n", (int)getpid());
	for (i = 1; i < threads; i++) {
		int err = pthread_create(&spinners[i].thread, NULL, spin_thread, &spinners[i]);

		if (err) {
			fprintf(stderr, "stop-probe: pthread_create: %s\n", strerror(err));
			return 1;
		}
	}
	spinner_init(&spinners[0]);
	t = last_poll = now_ns();
	for (;;) {
		t = spin_once(&spinners[0], t, &ph);
		if (t - last_poll < POLL_NS)
			continue;
		/* The read's microseconds count in the gap: resetting the clock after it would
		 * hide a stop that began while this thread was in the system call. */
		last_poll = t;
		if (!poll_commands(buf, &len, sizeof(buf)))
			break;
	}
	atomic_store(&stopping, true);
	for (i = 1; i < threads; i++)
		pthread_join(spinners[i].thread, NULL);
	nphases = atomic_load(&current_phase) + 1;
	for (p = 0; p < nphases; p++) {
		uint64_t gap = 0, stop = 0;

		for (i = 0; i < threads; i++) {
			if (spinners[i].max_gap[p] > gap)
				gap = spinners[i].max_gap[p];
			if (spinners[i].max_stop[p] > stop)
				stop = spinners[i].max_stop[p];
		}
		printf("phase=%s max_gap_ms=%.3f max_stop_ms=%.3f\n", phase_names[p],
		       (double)gap / 1e6, (double)stop / 1e6);
	}
	printf("done\n");
	return 0;
}
