/* fork-target.c - a process that forks, and execs, while it is being profiled.
 *
 * Contract: `fork-target K` prints "ready", then reads commands, one per line, from stdin
 * and answers on stdout (flushed):
 *   go    the main thread forks 2 children, then calls parent_alloc() K times (block
 *         size 40, the line marked HP_SITE_PARENT) and frees every odd-indexed block, while
 *         a helper thread forks 6 more, 5 ms apart. Each child allocates at parent_alloc and at
 *         child_alloc (HP_SITE_CHILD) and frees every block the parent kept from the
 *         previous "go" (its own copies); half the children then exec /bin/true, the others
 *         keep allocating for about 200 ms and exit. Once every child has been reaped and
 *         exited 0, the blocks kept from the previous "go" are freed and the answer is
 *         "done"; a child that failed makes it "failed".
 *   hold  a helper thread forks a child that waits for SIGUSR1, allocates and exits 0; the
 *         thread waits for it. Answers "held".
 *   hold-raw  the same, but the child is made with a raw clone syscall (as daemon()'s
 *         fork inside libc is: no hook sees it) and calls child_alloc once before it waits.
 *         Answers "held-raw PID".
 *   release  sends the held child SIGUSR1 and joins the thread: "released" if the child
 *         exited 0.
 *   storm    a helper thread forks children back to back, each of which allocates, frees
 *         and exits 0; the thread reaps each and counts those still alive after 5 s
 *         (killed then) or ended otherwise. Answers "storming".
 *   calm  stops the storm: "calm N" after N children all exited 0, else "failed".
 *   ping  answers "pong" without allocating.
 *   exit  (or end of input) frees what is kept; the process exits 0.
 * Only parent_alloc allocates in the parent outside setup, so a profile of the parent has
 * exactly the parent's calls at HP_SITE_PARENT and nothing at child_alloc. Blocks carry a
 * fill pattern checked before every free (by the children too); a mismatch makes the
 * exit status 1.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { BLOCK = 40, CHILD_ALLOCS = 300, MAIN_FORKS = 2, HELPER_FORKS = 6 };

static unsigned nallocs;
static unsigned char **cur, **prev;
static int corrupted;
static _Atomic pid_t held;

unsigned char *parent_alloc(unsigned char fill);
unsigned char *child_alloc(unsigned char fill);

static unsigned char *filled(unsigned char *p, unsigned char fill)
{
	if (!p) {
		fputs("fork-target: out of memory\n", stderr);
		_exit(1);
	}
	memset(p, fill, BLOCK);
	return p;
}

/* Out of line and not tail calls, so each site is its own function and line. */
__attribute__((noinline, noclone)) unsigned char *parent_alloc(unsigned char fill)
{
	return filled(malloc(BLOCK), fill); /* HP_SITE_PARENT */
}

__attribute__((noinline, noclone)) unsigned char *child_alloc(unsigned char fill)
{
	return filled(malloc(BLOCK), fill); /* HP_SITE_CHILD */
}

static void check_and_free(unsigned char *p, unsigned char fill)
{
	for (size_t i = 0; i < BLOCK; i++) {
		if (p[i] != fill) {
			fprintf(stderr, "fork-target %d: corrupt block at byte %zu\n",
				(int)getpid(), i);
			corrupted = 1;
			break;
		}
	}
	free(p);
}

static unsigned char fill_of(unsigned k)
{
	return (unsigned char)(k * 13 + 5);
}

static void free_kept(unsigned char **blocks)
{
	for (unsigned k = 0; k < nallocs; k++) {
		if (blocks[k])
			check_and_free(blocks[k], fill_of(k));
		blocks[k] = NULL;
	}
}

/* Both sites, interleaved, so a child's calls would land on the parent's site if they
 * were counted. */
static void child_burst(void)
{
	unsigned char *a[CHILD_ALLOCS], *b[CHILD_ALLOCS];

	for (unsigned k = 0; k < CHILD_ALLOCS; k++) {
		a[k] = parent_alloc(fill_of(k));
		b[k] = child_alloc(fill_of(k + 1));
	}
	for (unsigned k = 0; k < CHILD_ALLOCS; k++) {
		check_and_free(a[k], fill_of(k));
		check_and_free(b[k], fill_of(k + 1));
	}
}

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, ms % 1000 * 1000000};

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* prev is not written while children are being forked, so the child's copy is whole. */
static void child_main(pid_t parent, int execs)
{
	/* A child must not outlive a failed test that killed its parent. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
		_exit(4);
	child_burst();
	free_kept(prev);
	if (execs) {
		char *argv[] = {"/bin/true", NULL};

		execv(argv[0], argv);
		_exit(3);
	}
	/* Across a few of the profiler's rounds: a child still writing the parent's pipe
	 * would be seen there. */
	for (int i = 0; i < 4; i++) {
		sleep_ms(50);
		child_burst();
	}
	exit(corrupted);
}

static int reap(pid_t pid)
{
	int status;

	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return 0;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 1;
	fprintf(stderr, "fork-target: child %d ended with status 0x%x\n", (int)pid, status);
	return 0;
}

/* The thread that forks also reaps: a child's parent-death signal fires when the thread
 * that forked it exits. */
struct forks {
	pid_t pid[HELPER_FORKS];
	unsigned want, n;
	int ok;
};

static void fork_some(struct forks *f)
{
	pid_t self = getpid();

	for (unsigned i = 0; i < f->want; i++) {
		pid_t pid = fork();

		if (pid == 0)
			child_main(self, i % 2);
		if (pid < 0) {
			perror("fork-target: fork");
			continue;
		}
		f->pid[f->n++] = pid;
		sleep_ms(5);
	}
}

static void reap_some(struct forks *f)
{
	f->ok = f->n == f->want;
	for (unsigned i = 0; i < f->n; i++)
		f->ok &= reap(f->pid[i]);
}

static void *forker_main(void *arg)
{
	fork_some(arg);
	reap_some(arg);
	return NULL;
}

static void say(const char *line)
{
	puts(line);
	fflush(stdout);
}

static void go(void)
{
	struct forks mine = {.want = MAIN_FORKS}, helper = {.want = HELPER_FORKS};
	pthread_t forker;

	if (pthread_create(&forker, NULL, forker_main, &helper)) {
		say("failed");
		return;
	}
	fork_some(&mine);
	for (unsigned k = 0; k < nallocs; k++)
		cur[k] = parent_alloc(fill_of(k));
	for (unsigned k = 1; k < nallocs; k += 2) {
		check_and_free(cur[k], fill_of(k));
		cur[k] = NULL;
	}
	reap_some(&mine);
	pthread_join(forker, NULL);
	free_kept(prev);

	unsigned char **t = prev;

	prev = cur;
	cur = t;
	say(mine.ok && helper.ok ? "done" : "failed");
}

static pthread_t holder;
static int holding;

static sigset_t usr1;
static int hold_raw;

/* Forks the held child, then waits for it. */
static void *holder_main(void *arg)
{
	(void)arg;
	pid_t self = getpid();

	pid_t pid = hold_raw ? (pid_t)syscall(SYS_clone, SIGCHLD, NULL, NULL, NULL, NULL) : fork();

	if (pid == 0) {
		int sig;

		if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != self)
			_exit(4);
		if (hold_raw)
			check_and_free(child_alloc(fill_of(1)), fill_of(1));
		sigwait(&usr1, &sig);
		child_burst();
		exit(corrupted);
	}
	held = pid;
	return (void *)(intptr_t)(pid > 0 && reap(pid));
}

static void hold(int raw)
{
	sigset_t old;

	if (holding) {
		say("failed");
		return;
	}
	hold_raw = raw;
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	/* The child inherits the mask, so SIGUSR1 waits for its sigwait. */
	pthread_sigmask(SIG_BLOCK, &usr1, &old);
	holding = pthread_create(&holder, NULL, holder_main, NULL) == 0;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	while (holding && held == 0)
		sleep_ms(1);
	if (!holding || held <= 0) {
		say("failed");
	} else if (raw) {
		printf("held-raw %d\n", (int)held);
		fflush(stdout);
	} else {
		say("held");
	}
}

static void release(void)
{
	void *reaped = NULL;

	if (holding && held > 0)
		kill(held, SIGUSR1);
	if (holding)
		pthread_join(holder, &reaped);
	holding = 0;
	held = 0;
	say(reaped ? "released" : "failed");
}

static pthread_t stormer;
static atomic_int storming;
static unsigned storm_forks, storm_bad;

static int reap_within(pid_t pid, long ms)
{
	int status;

	for (long waited = 0; waited < ms; waited++) {
		pid_t r = waitpid(pid, &status, WNOHANG);

		if (r == pid)
			return WIFEXITED(status) && WEXITSTATUS(status) == 0;
		if (r < 0 && errno != EINTR)
			return 0;
		sleep_ms(1);
	}
	fprintf(stderr, "fork-target: storm child %d still running after %ld ms\n", (int)pid, ms);
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	return 0;
}

static void *stormer_main(void *arg)
{
	pid_t self = getpid();

	(void)arg;
	while (atomic_load(&storming)) {
		pid_t pid = fork();

		if (pid == 0) {
			if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != self)
				_exit(4);
			check_and_free(child_alloc(fill_of(1)), fill_of(1));
			exit(corrupted);
		}
		if (pid < 0 || !reap_within(pid, 5000))
			storm_bad++;
		storm_forks++;
	}
	return NULL;
}

static void storm(void)
{
	if (atomic_load(&storming)) {
		say("failed");
		return;
	}
	storm_forks = storm_bad = 0;
	atomic_store(&storming, 1);
	if (pthread_create(&stormer, NULL, stormer_main, NULL)) {
		atomic_store(&storming, 0);
		say("failed");
		return;
	}
	say("storming");
}

static void calm(void)
{
	char answer[32];

	if (!atomic_exchange(&storming, 0)) {
		say("failed");
		return;
	}
	pthread_join(stormer, NULL);
	snprintf(answer, sizeof(answer), "calm %u", storm_forks);
	say(storm_bad ? "failed" : answer);
}

int main(int argc, char **argv)
{
	char line[64];
	char *end;

	if (argc != 2 || (nallocs = (unsigned)strtoul(argv[1], &end, 10)) == 0 || *end ||
	    nallocs > 100000) {
		fputs("usage: fork-target ALLOCS (1 to 100000)\n", stderr);
		return 2;
	}
	cur = calloc(nallocs, sizeof(*cur));
	prev = calloc(nallocs, sizeof(*prev));
	if (!cur || !prev) {
		fputs("fork-target: out of memory\n", stderr);
		return 1;
	}
	say("ready");
	while (fgets(line, sizeof(line), stdin)) {
		line[strcspn(line, "\n")] = '\0';
		if (!strcmp(line, "go"))
			go();
		else if (!strcmp(line, "hold"))
			hold(0);
		else if (!strcmp(line, "hold-raw"))
			hold(1);
		else if (!strcmp(line, "release"))
			release();
		else if (!strcmp(line, "storm"))
			storm();
		else if (!strcmp(line, "calm"))
			calm();
		else if (!strcmp(line, "ping"))
			say("pong");
		else if (!strcmp(line, "exit"))
			break;
		else
			fprintf(stderr, "fork-target: unknown command '%s'\n", line);
	}
	free_kept(prev);
	free_kept(cur);
	free(prev);
	free(cur);
	return corrupted;
}
