/* stress-target - a process that checks its own memory, syscall results and signals while
 * heapprof attaches to it and detaches from it again and again.
 *
 * Contract: prints "ready" once every thread runs, then answers one command per stdin line:
 * "ping" -> "pong"; "check" -> "ok ..." or "FAIL ..." with every counter; "exit" -> stops
 * everything, checks one last time and exits 0 if nothing ever went wrong, else 1.
 * Checked continuously, each failure counted (and the first few printed on stderr):
 * - allocator threads fill every block with a pattern derived from its address and size
 *   and verify it before freeing it (a corrupted block);
 * - a churn thread creates and joins short-lived threads without pause;
 * - a reader blocked in read() on a pipe (a writer feeds it every 20 ms), a waiter in
 *   epoll_wait() on another, a futex sleeper (pthread_cond_timedwait) and a nanosleep()
 *   sleeper: no call may fail with EINTR (no handler runs in those threads: signals go to
 *   the signal thread only), and a sleep must never be shorter than asked;
 * - a sender queues SIGRTMIN to the process at a high rate; the signal thread's handler
 *   counts them, and at "check" every signal sent must have been received (real-time
 *   signals queue: none may be lost).
 * With --trees, a tree thread also builds binary trees recursively, each node a block from a
 * call path of its own (a left and a right call site: 2047 stacks a tree, so that an
 * attached payload counts them by stack id), checks every node and frees them.
 * At "check" the code it maps must also be byte for byte what its files hold (heapprof's
 * trampoline, written into the zero tail of a code segment, must be gone; only a used
 * GLOB_DAT stub area, hpabi.h, may stay). "take" keeps the addresses of malloc and free as
 * the code sees them (read from the GOT, so heapprof's stubs while attached); every later
 * "check" allocates and frees through them, after a detach too.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "hpabi.h"

#define ALLOC_THREADS 2
#define SLOTS 256
#define SLEEP_NS 30000000L

static atomic_int stop;
static atomic_ulong failures, allocs, churned, reads, epolls, futexes, sleeps;
static atomic_ulong sig_sent, sig_received;
static int feed_pipe[2], epoll_pipe[2];

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...)
{
	if (atomic_fetch_add(&failures, 1) < 20) {
		va_list ap;
		va_start(ap, fmt);
		fprintf(stderr, "stress-target: FAIL: ");
		vfprintf(stderr, fmt, ap);
		fputc('\n', stderr);
		va_end(ap);
	}
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static unsigned char pattern(const void *p, size_t size, size_t i)
{
	uintptr_t a = (uintptr_t)p;
	return (unsigned char)((a >> 4) ^ (a >> 12) ^ size ^ (i * 131));
}

static void *alloc_thread(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;
	struct {
		unsigned char *p;
		size_t n;
	} slot[SLOTS] = {{0}};
	while (!atomic_load(&stop)) {
		int k = rand_r(&seed) % SLOTS;
		if (slot[k].p) {
			for (size_t i = 0; i < slot[k].n; i++)
				if (slot[k].p[i] != pattern(slot[k].p, slot[k].n, i)) {
					fail("block %p of %zu bytes corrupted at %zu", slot[k].p,
					     slot[k].n, i);
					break;
				}
			free(slot[k].p);
		}
		slot[k].n = 1 + (size_t)(rand_r(&seed) % 4096);
		slot[k].p = malloc(slot[k].n);
		if (!slot[k].p) {
			fail("malloc(%zu) failed", slot[k].n);
			continue;
		}
		for (size_t i = 0; i < slot[k].n; i++)
			slot[k].p[i] = pattern(slot[k].p, slot[k].n, i);
		atomic_fetch_add(&allocs, 1);
	}
	for (int k = 0; k < SLOTS; k++)
		free(slot[k].p);
	return NULL;
}

#define TREE_DEPTH 10

struct node {
	struct node *kid[2];
	unsigned char fill[16];
};

__attribute__((noinline)) static struct node *tree_build(int d)
{
	struct node *n = malloc(sizeof *n);
	if (!n) {
		fail("malloc(%zu) failed", sizeof *n);
		return NULL;
	}
	for (size_t i = 0; i < sizeof n->fill; i++)
		n->fill[i] = pattern(n, sizeof *n, i);
	n->kid[0] = n->kid[1] = NULL;
	atomic_fetch_add(&allocs, 1);
	if (d > 0) {
		n->kid[0] = tree_build(d - 1);
		n->kid[1] = tree_build(d - 1);
	}
	return n;
}

static void tree_free(struct node *n)
{
	if (!n)
		return;
	for (size_t i = 0; i < sizeof n->fill; i++)
		if (n->fill[i] != pattern(n, sizeof *n, i)) {
			fail("tree node %p corrupted at %zu", (void *)n, i);
			break;
		}
	tree_free(n->kid[0]);
	tree_free(n->kid[1]);
	free(n);
}

static void *tree_thread(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop))
		tree_free(tree_build(TREE_DEPTH));
	return NULL;
}

static void *short_lived(void *arg)
{
	free(malloc(64 + (size_t)(uintptr_t)arg % 512));
	return NULL;
}

static void *churn_thread(void *arg)
{
	(void)arg;
	for (uintptr_t i = 0; !atomic_load(&stop); i++) {
		pthread_t t;
		if (pthread_create(&t, NULL, short_lived, (void *)i) != 0) {
			fail("pthread_create: %s", strerror(errno));
			continue;
		}
		pthread_join(t, NULL);
		atomic_fetch_add(&churned, 1);
	}
	return NULL;
}

static void *writer_thread(void *arg)
{
	(void)arg;
	struct timespec d = {0, 20000000L};
	for (uint32_t seq = 0; !atomic_load(&stop); seq++) {
		if (write(feed_pipe[1], &seq, sizeof seq) != sizeof seq ||
		    write(epoll_pipe[1], &seq, sizeof seq) != sizeof seq)
			fail("write to a pipe: %s", strerror(errno));
		while (nanosleep(&d, &d) < 0 && errno == EINTR)
			;
		d = (struct timespec){0, 20000000L};
	}
	/* The write ends are this thread's: closed by main, one could go between the test of
	 * stop and a write, which then failed with EBADF. The last value wakes the epoll
	 * thread; the close ends the reader's stream. */
	uint32_t v = 0;
	if (write(epoll_pipe[1], &v, sizeof v) < 0)
		fail("write: %s", strerror(errno));
	close(epoll_pipe[1]);
	close(feed_pipe[1]);
	return NULL;
}

static void *reader_thread(void *arg)
{
	(void)arg;
	for (uint32_t want = 0;; want++) {
		uint32_t got;
		ssize_t n = read(feed_pipe[0], &got, sizeof got);
		if (n < 0) {
			fail("read: %s", strerror(errno));
			continue;
		}
		if (n == 0)
			return NULL;
		if (n != sizeof got || got != want)
			fail("read %zd bytes, value %u, expected %u", n, got, want);
		want = got;
		atomic_fetch_add(&reads, 1);
	}
}

static void *epoll_thread(void *arg)
{
	(void)arg;
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = {.events = EPOLLIN};
	epoll_ctl(ep, EPOLL_CTL_ADD, epoll_pipe[0], &ev);
	while (!atomic_load(&stop)) {
		int n = epoll_wait(ep, &ev, 1, -1);
		if (n < 0) {
			fail("epoll_wait: %s", strerror(errno));
			continue;
		}
		uint32_t v;
		if (read(epoll_pipe[0], &v, sizeof v) != sizeof v)
			break;
		atomic_fetch_add(&epolls, 1);
	}
	close(ep);
	return NULL;
}

static void *futex_thread(void *arg)
{
	(void)arg;
	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
	pthread_condattr_t ca;
	pthread_cond_t c;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c, &ca);
	pthread_mutex_lock(&m);
	while (!atomic_load(&stop)) {
		uint64_t t0 = now_ns();
		struct timespec dl;
		clock_gettime(CLOCK_MONOTONIC, &dl);
		dl.tv_nsec += SLEEP_NS;
		if (dl.tv_nsec >= 1000000000L) {
			dl.tv_sec++;
			dl.tv_nsec -= 1000000000L;
		}
		int r;
		do
			r = pthread_cond_timedwait(&c, &m, &dl);
		while (r == 0);
		if (r != ETIMEDOUT)
			fail("pthread_cond_timedwait: %s", strerror(r));
		else if (now_ns() - t0 < (uint64_t)SLEEP_NS)
			fail("futex wait returned after %llu ns, asked %ld",
			     (unsigned long long)(now_ns() - t0), SLEEP_NS);
		atomic_fetch_add(&futexes, 1);
	}
	pthread_mutex_unlock(&m);
	return NULL;
}

static void *sleep_thread(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop)) {
		uint64_t t0 = now_ns();
		struct timespec d = {0, SLEEP_NS};
		if (nanosleep(&d, NULL) < 0)
			fail("nanosleep: %s", strerror(errno));
		else if (now_ns() - t0 < (uint64_t)SLEEP_NS)
			fail("nanosleep returned after %llu ns, asked %ld",
			     (unsigned long long)(now_ns() - t0), SLEEP_NS);
		atomic_fetch_add(&sleeps, 1);
	}
	return NULL;
}

static void on_rt(int sig)
{
	(void)sig;
	atomic_fetch_add(&sig_received, 1);
}

/* The one thread that takes SIGRTMIN: the handler never interrupts the checked calls. */
static void *signal_thread(void *arg)
{
	(void)arg;
	sigset_t s;
	sigemptyset(&s);
	sigaddset(&s, SIGRTMIN);
	pthread_sigmask(SIG_UNBLOCK, &s, NULL);
	while (!atomic_load(&stop))
		pause();
	return NULL;
}

static void *sender_thread(void *arg)
{
	(void)arg;
	struct timespec d = {0, 200000L};
	while (!atomic_load(&stop)) {
		/* Stay well below RLIMIT_SIGPENDING while the receiver is stopped. */
		if (atomic_load(&sig_sent) - atomic_load(&sig_received) < 200) {
			if (sigqueue(getpid(), SIGRTMIN, (union sigval){0}) == 0)
				atomic_fetch_add(&sig_sent, 1);
			else if (errno != EAGAIN)
				fail("sigqueue: %s", strerror(errno));
		}
		nanosleep(&d, NULL);
	}
	return NULL;
}

static void *(*volatile kept_malloc)(size_t);
static void (*volatile kept_free)(void *);

/* memcmp of a page of code against the file's bytes, except a stub area in it. */
static int page_differs(const unsigned char *mem, const unsigned char *file, size_t len)
{
	if (!memcmp(mem, file, len))
		return 0;
	for (size_t o = 0; o + HP_STUBS_CODE_LEN <= len; o += 64)
		if (!memcmp(mem + o, HP_STUBS_MAGIC, HP_STUBS_MAGIC_LEN))
			return memcmp(mem, file, o) ||
			       memcmp(mem + o + HP_STUBS_CODE_LEN, file + o + HP_STUBS_CODE_LEN,
				      len - o - HP_STUBS_CODE_LEN);
	return 1;
}

/* Every executable mapping of a file, compared with the file (zeros past its end). */
static void check_code(void)
{
	FILE *maps = fopen("/proc/self/maps", "re");
	char line[PATH_MAX + 128];
	static unsigned char buf[65536];
	while (maps && fgets(line, sizeof line, maps)) {
		unsigned long lo, hi, off;
		char perms[8];
		int pathpos = 0;
		if (sscanf(line, "%lx-%lx %7s %lx %*s %*u %n", &lo, &hi, perms, &off, &pathpos) <
			4 ||
		    strcmp(perms, "r-xp") || line[pathpos] != '/' || strstr(line, " (deleted)"))
			continue;
		line[strcspn(line, "\n")] = '\0';
		int fd = open(line + pathpos, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		for (unsigned long at = lo; at < hi; at += sizeof buf) {
			size_t len = hi - at < sizeof buf ? hi - at : sizeof buf;
			ssize_t n = pread(fd, buf, len, (off_t)(off + (at - lo)));
			if (n < 0)
				n = 0;
			memset(buf + n, 0, len - (size_t)n);
			int differs = 0;
			for (size_t p = 0; p < len && !differs; p += 4096)
				differs = page_differs((const unsigned char *)at + p, buf + p,
						       len - p < 4096 ? len - p : 4096);
			if (differs) {
				fail("the code of %s at %#lx differs from the file", line + pathpos,
				     at);
				break;
			}
		}
		close(fd);
	}
	if (maps)
		fclose(maps);
}

static void report(const char *word)
{
	printf("%s failures=%lu allocs=%lu churned=%lu reads=%lu epolls=%lu futex=%lu "
	       "sleeps=%lu signals=%lu/%lu\n",
	       word, atomic_load(&failures), atomic_load(&allocs), atomic_load(&churned),
	       atomic_load(&reads), atomic_load(&epolls), atomic_load(&futexes),
	       atomic_load(&sleeps), atomic_load(&sig_received), atomic_load(&sig_sent));
	fflush(stdout);
}

/* Every signal sent has arrived (those in flight get a moment; the handler may also count
 * one before its sender has). */
static void check_signals(void)
{
	for (int i = 0; i < 200 && atomic_load(&sig_received) != atomic_load(&sig_sent); i++)
		usleep(10000);
	if (atomic_load(&sig_received) != atomic_load(&sig_sent))
		fail("%lu signals sent, %lu received", atomic_load(&sig_sent),
		     atomic_load(&sig_received));
}

int main(int argc, char **argv)
{
	int trees = argc > 1 && !strcmp(argv[1], "--trees");
	sigset_t s;
	sigemptyset(&s);
	sigaddset(&s, SIGRTMIN);
	pthread_sigmask(SIG_BLOCK, &s, NULL);
	struct sigaction sa = {.sa_handler = on_rt, .sa_flags = SA_RESTART};
	sigaction(SIGRTMIN, &sa, NULL);
	if (pipe(feed_pipe) < 0 || pipe(epoll_pipe) < 0)
		return 2;

	void *(*fns[])(void *) = {churn_thread, writer_thread, reader_thread, epoll_thread,
				  futex_thread, sleep_thread,  signal_thread, sender_thread};
	enum { NFIXED = sizeof fns / sizeof fns[0] };
	pthread_t th[NFIXED + ALLOC_THREADS + 1];
	int n = 0;
	for (int i = 0; i < ALLOC_THREADS; i++)
		pthread_create(&th[n++], NULL, alloc_thread, (void *)(uintptr_t)(i + 1));
	for (int i = 0; i < (int)NFIXED; i++)
		pthread_create(&th[n++], NULL, fns[i], NULL);
	if (trees)
		pthread_create(&th[n++], NULL, tree_thread, NULL);
	printf("ready\n");
	fflush(stdout);

	char line[64];
	while (fgets(line, sizeof line, stdin)) {
		if (!strncmp(line, "ping", 4)) {
			printf("pong\n");
			fflush(stdout);
		} else if (!strncmp(line, "take", 4)) {
			kept_malloc = malloc;
			kept_free = free;
			printf("taken\n");
			fflush(stdout);
		} else if (!strncmp(line, "check", 5)) {
			if (kept_free)
				kept_free(kept_malloc(24));
			check_signals();
			check_code();
			report(atomic_load(&failures) ? "FAIL" : "ok");
		} else if (!strncmp(line, "exit", 4)) {
			break;
		}
	}
	check_signals();
	atomic_store(&stop, 1);
	/* The signal thread waits in pause(): wake it once the sender has stopped. */
	for (int i = 0; i < n; i++) {
		if (i == ALLOC_THREADS + 6)
			pthread_kill(th[i], SIGRTMIN);
		pthread_join(th[i], NULL);
	}
	report(atomic_load(&failures) ? "FAIL" : "ok");
	return atomic_load(&failures) ? 1 : 0;
}
