/* inject-target.c - a victim for test-inject that notices if being borrowed changed
 * anything it can observe.
 *
 * Usage: inject-target CMDFD          sleeper, reader and spinner threads
 *        inject-target CMDFD spin     only the main thread, spinning in user code
 *        inject-target CMDFD spin-named  the same, the thread named as heapprof's collector
 * The sleeper checks that every nanosleep returns 0 and lasts its full length (an
 * interrupted syscall must restart); the reader checks that read() on CMDFD never fails
 * and returns the bytes 'a'..'z' in a cycle; '.' ends the process with status 0. The
 * spinner keeps patterns in xmm0-15 (and ymm0-15 with AVX2) across a busy loop and checks
 * them after; in spin mode SIGUSR1 ends the process with status 0 and SIGUSR2 runs an
 * empty handler (to be interrupted by signals while borrowed). Any anomaly exits at
 * once with a nonzero status and a line on stderr.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "hpabi.h"

#define SLEEP_NS 20000000L
#define SPIN_ITERS 2000000UL

static int cmd_fd;
static volatile sig_atomic_t quit;

static void fail(int code, const char *what)
{
	fprintf(stderr, "inject-target: %s (%s)\n", what, strerror(errno));
	_exit(code);
}

static int64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void *sleeper(void *arg)
{
	(void)arg;
	for (;;) {
		struct timespec d = {0, SLEEP_NS};
		int64_t t0 = now_ns();
		if (nanosleep(&d, NULL))
			fail(2, "nanosleep failed");
		if (now_ns() - t0 < SLEEP_NS)
			fail(3, "nanosleep returned early");
	}
	return NULL;
}

static void *reader(void *arg)
{
	(void)arg;
	char expect = 'a';
	for (;;) {
		char c;
		ssize_t n = read(cmd_fd, &c, 1);
		if (n < 0)
			fail(4, "read failed");
		if (n == 0)
			fail(5, "command pipe closed");
		if (c == '.')
			_exit(0);
		if (c != expect)
			fail(6, "read returned the wrong byte");
		expect = expect == 'z' ? 'a' : (char)(expect + 1);
	}
	return NULL;
}

#define CMP_XMM(i)                                                                                 \
	"pcmpeqb " #i "*16(%[p]), %%xmm" #i "\n\tpmovmskb %%xmm" #i ", %%eax\n\tand %%eax, "       \
	"%[acc]\n\t"
#define LD_XMM(i) "movdqa " #i "*16(%[p]), %%xmm" #i "\n\t"
#define CMP_YMM(i)                                                                                 \
	"vpcmpeqb " #i "*32(%[p]), %%ymm" #i ", %%ymm" #i "\n\tvpmovmskb %%ymm" #i                 \
	", %%eax\n\tand %%eax, %[acc]\n\t"
#define LD_YMM(i) "vmovdqa " #i "*32(%[p]), %%ymm" #i "\n\t"
#define ALL16(M)                                                                                   \
	M(0) M(1) M(2) M(3) M(4) M(5) M(6) M(7) M(8) M(9) M(10) M(11) M(12) M(13) M(14) M(15)
#define VEC_CLOBBERS                                                                               \
	"xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",   \
	    "xmm11", "xmm12", "xmm13", "xmm14", "xmm15"

static _Alignas(32) uint8_t pattern[16 * 32];

static int spin_xmm(void)
{
	unsigned long n = SPIN_ITERS;
	uint32_t acc = 0xffff;
	__asm__ volatile(ALL16(LD_XMM) "1: dec %[n]\n\tjnz 1b\n\t" ALL16(CMP_XMM)
			 : [n] "+r"(n), [acc] "+r"(acc)
			 : [p] "r"(pattern)
			 : "eax", "cc", "memory", VEC_CLOBBERS);
	return acc == 0xffff;
}

static int spin_ymm(void)
{
	unsigned long n = SPIN_ITERS;
	uint32_t acc = 0xffffffff;
	__asm__ volatile(ALL16(LD_YMM) "1: dec %[n]\n\tjnz 1b\n\t" ALL16(CMP_YMM) "vzeroupper\n\t"
			 : [n] "+r"(n), [acc] "+r"(acc)
			 : [p] "r"(pattern)
			 : "eax", "cc", "memory", VEC_CLOBBERS);
	return acc == 0xffffffff;
}

static void *spinner(void *arg)
{
	(void)arg;
	int avx2 = __builtin_cpu_supports("avx2");
	while (!quit) {
		if (!spin_xmm())
			fail(7, "xmm registers changed");
		if (avx2 && !spin_ymm())
			fail(8, "ymm registers changed");
	}
	_exit(0);
	return NULL;
}

static void on_usr1(int sig)
{
	(void)sig;
	quit = 1;
}

static void on_usr2(int sig)
{
	(void)sig;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: inject-target CMDFD [spin|spin-named]\n");
		return 1;
	}
	cmd_fd = atoi(argv[1]);
	for (size_t i = 0; i < sizeof pattern; i++)
		pattern[i] = (uint8_t)(i * 37 + 11);
	/* spin-named: the spinning thread bears the collector's name (safepoint.c tries
	 * such a thread last, never skips it). */
	if (argc > 2 && !strcmp(argv[2], "spin-named"))
		prctl(PR_SET_NAME, HP_COLLECTOR_NAME, 0, 0, 0);
	if (argc > 2 && !strncmp(argv[2], "spin", 4)) {
		signal(SIGUSR1, on_usr1);
		signal(SIGUSR2, on_usr2);
		spinner(NULL);
	}
	pthread_t t[3];
	if (pthread_create(&t[0], NULL, sleeper, NULL) ||
	    pthread_create(&t[1], NULL, reader, NULL) || pthread_create(&t[2], NULL, spinner, NULL))
		fail(9, "pthread_create failed");
	pthread_join(t[1], NULL);
	return 1;
}
