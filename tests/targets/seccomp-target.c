/* seccomp-target.c - a process under a seccomp filter (or with a thread in strict mode).
 *
 * Contract: `seccomp-target MODE` first sets up MODE:
 *   deny-uname  a filter (on every thread, SECCOMP_FILTER_FLAG_TSYNC) that fails uname with
 *               EPERM and allows everything else: nothing heapprof needs is touched.
 *   kill-memfd  a filter that kills the process on memfd_create, which the injection makes.
 *   deny-membarrier  a filter (on every thread) that fails membarrier with EPERM: the
 *               payload then adds to its counters under a lock, its hooks' inline paths off.
 *   strict      one extra thread enters strict mode and blocks in read() on a pipe nobody
 *               writes to; the other threads have no filter.
 * It checks the setup took (uname fails with EPERM under a filter), starts a churn thread
 * that allocates and frees without pause, prints "ready", then reads commands, one per line,
 * from stdin and answers on stdout (flushed):
 *   go    the main thread allocates 1000 blocks of 32 to 1031 bytes (go_block, at the line
 *         marked HP_SITE), frees them and answers "done N" (N: the churn thread's rounds so
 *         far, so a test can see it keeps running).
 *   ping  answers "pong" without allocating.
 *   exit  (or end of input) stops the churn thread; the process exits 0.
 * Every block carries a fill pattern checked before it is freed; a mismatch makes the exit
 * status 1. Setup errors exit 2.
 */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#define NBLOCKS 1000

static atomic_int quitting;
static atomic_int corrupted;
static atomic_ulong churn_rounds;

static void die(const char *what)
{
	fprintf(stderr, "seccomp-target: %s: %s\n", what, strerror(errno));
	exit(2);
}

/* nr gets action; every other syscall of x86_64 is allowed, any other arch killed. */
static void install_filter(long nr, unsigned action)
{
	struct sock_filter f[] = {
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)nr, 0, 1),
	    BPF_STMT(BPF_RET | BPF_K, action),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {sizeof f / sizeof *f, f};

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		die("PR_SET_NO_NEW_PRIVS");
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &prog) != 0)
		die("seccomp(SECCOMP_SET_MODE_FILTER)");
}

static int block_pipe[2], ack_pipe[2];

/* Strict mode allows read, write, exit and sigreturn: the thread says it is in strict mode
 * and blocks in read for good; it dies with the process. */
static void *strict_main(void *arg)
{
	char c = 's';

	(void)arg;
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT, 0, 0, 0) < 0)
		die("PR_SET_SECCOMP");
	syscall(SYS_write, ack_pipe[1], &c, 1);
	for (;;)
		syscall(SYS_read, block_pipe[0], &c, 1);
	return NULL;
}

static unsigned char *alloc_filled(size_t size, unsigned char fill)
{
	unsigned char *p = malloc(size);

	if (!p) {
		fputs("seccomp-target: out of memory\n", stderr);
		exit(1);
	}
	memset(p, fill, size);
	return p;
}

static void check_and_free(unsigned char *p, size_t size, unsigned char fill)
{
	for (size_t i = 0; i < size; i++) {
		if (p[i] != fill) {
			fprintf(stderr, "seccomp-target: corrupt block at byte %zu\n", i);
			atomic_store(&corrupted, 1);
			break;
		}
	}
	free(p);
}

static void *churn_main(void *arg)
{
	(void)arg;
	for (unsigned long r = 0; !atomic_load(&quitting); r++) {
		size_t size = 16 + r % 4000;
		unsigned char fill = (unsigned char)(r * 7 + 1);

		check_and_free(alloc_filled(size, fill), size, fill);
		atomic_store(&churn_rounds, r + 1);
	}
	return NULL;
}

static void say(const char *line)
{
	puts(line);
	fflush(stdout);
}

/* A site of its own, so that a test can count go's blocks apart from the churn's. */
static __attribute__((noinline)) unsigned char *go_block(unsigned k)
{
	unsigned char *p = malloc(32 + k); /* HP_SITE */

	if (!p) {
		fputs("seccomp-target: out of memory\n", stderr);
		exit(1);
	}
	memset(p, (unsigned char)k, 32 + k);
	return p;
}

static void go(void)
{
	static unsigned char *blocks[NBLOCKS];

	for (unsigned k = 0; k < NBLOCKS; k++)
		blocks[k] = go_block(k);
	for (unsigned k = 0; k < NBLOCKS; k++)
		check_and_free(blocks[k], 32 + k, (unsigned char)k);
	printf("done %lu\n", atomic_load(&churn_rounds));
	fflush(stdout);
}

int main(int argc, char **argv)
{
	struct utsname u;
	pthread_t churn, strict;
	char line[64];

	if (argc != 2) {
		fputs("usage: seccomp-target deny-uname|kill-memfd|deny-membarrier|strict\n",
		      stderr);
		return 2;
	}
	if (!strcmp(argv[1], "deny-uname")) {
		install_filter(SYS_uname, SECCOMP_RET_ERRNO | EPERM);
	} else if (!strcmp(argv[1], "kill-memfd")) {
		install_filter(SYS_memfd_create, SECCOMP_RET_KILL_PROCESS);
		/* A second filter fails uname, so the check below sees the filters are in force
		 * (and heapprof has two to read). */
		install_filter(SYS_uname, SECCOMP_RET_ERRNO | EPERM);
	} else if (!strcmp(argv[1], "deny-membarrier")) {
		install_filter(SYS_membarrier, SECCOMP_RET_ERRNO | EPERM);
		install_filter(SYS_uname, SECCOMP_RET_ERRNO | EPERM);
	} else if (!strcmp(argv[1], "strict")) {
		char c;

		if (pipe(block_pipe) < 0 || pipe(ack_pipe) < 0 ||
		    pthread_create(&strict, NULL, strict_main, NULL) ||
		    read(ack_pipe[0], &c, 1) != 1)
			die("cannot start the strict thread");
	} else {
		fprintf(stderr, "seccomp-target: unknown mode '%s'\n", argv[1]);
		return 2;
	}
	if (strcmp(argv[1], "strict") && (uname(&u) == 0 || errno != EPERM)) {
		fputs("seccomp-target: the filter is not in force\n", stderr);
		return 2;
	}
	if (pthread_create(&churn, NULL, churn_main, NULL))
		die("cannot start the churn thread");
	say("ready");

	while (fgets(line, sizeof line, stdin)) {
		line[strcspn(line, "\n")] = '\0';
		if (!strcmp(line, "go"))
			go();
		else if (!strcmp(line, "ping"))
			say("pong");
		else if (!strcmp(line, "exit"))
			break;
		else
			fprintf(stderr, "seccomp-target: unknown command '%s'\n", line);
	}
	atomic_store(&quitting, 1);
	pthread_join(churn, NULL);
	if (atomic_load(&corrupted)) {
		fputs("seccomp-target: memory was corrupted\n", stderr);
		return 1;
	}
	return 0;
}
