/* test-inject.c - the injector against real processes (inject-target, inject-testlib.so).
 *
 * Contract: every test starts its own target as a child, drives it only through
 * hp_inject_load/hp_inject_unload and its command pipe, and checks what the target and
 * /proc show: the payload mapped and its pipe delivering the header while loaded, maps
 * and fd count back to the original after unload, and the target's own exit status
 * (nonzero means it saw an interrupted syscall, a wrong byte or changed vector
 * registers). Failures to attach must name the cause and leave the process running.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hpformat.h"
#include "inject/inject.h"
#include "inject/libcfn.h"
#include "inject/maps.h"
#include "inject/safepoint.h"
#include "inject/unwind.h"

#define TARGET HP_BUILDDIR "/tests/unit/inject-target"
#define TESTLIB HP_BUILDDIR "/tests/unit/inject-testlib.so"
#define CYCLES 20

static const struct hp_start_args start_args = {
    .abi_version = HP_ABI_VERSION,
    .mode = HP_MODE_FULL,
    .interval_ms = 250,
    .max_depth = 32,
    .sample_rate = 4096,
};

static double now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void sleep_ms(long ms)
{
	struct timespec d = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&d, NULL);
}

static int count_dir(const char *what, pid_t pid)
{
	char name[64];
	snprintf(name, sizeof name, "/proc/%d/%s", (int)pid, what);
	DIR *d = opendir(name);
	if (!d)
		return -1;
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	return n;
}

/* In a child just forked: it dies with the test, which a failed assertion ends while the
 * child still runs (a spinning target, the signal flood, a traced sleep). */
static void die_with_parent(pid_t parent)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(127);
}

/* 1 once pid runs exe (its exec done) and its dynamic loader has mapped libc, found as the
 * injector finds it (hp_maps_find): before that the injector refuses the process (no
 * shared glibc). A process just forked (libc mapped, but the parent's image) or exec'd
 * takes longer than a fixed wait on a slow host. */
static int libc_mapped(pid_t pid, const char *exe)
{
	char path[64], line[512];
	ssize_t n;
	struct hp_module_range libc;
	snprintf(path, sizeof path, "/proc/%d/exe", (int)pid);
	if ((n = readlink(path, line, sizeof line - 1)) < 0)
		return 0;
	line[n] = '\0';
	return strstr(line, exe) && hp_maps_find(pid, hp_maps_is_libc, &libc) == 1;
}

static void wait_libc(pid_t pid, const char *exe)
{
	for (int i = 0; i < 400 && !libc_mapped(pid, exe); i++)
		sleep_ms(5);
	assert_true(libc_mapped(pid, exe));
}

/* Starts inject-target with its command pipe on fd 3 and waits until its threads run. */
static pid_t start_target(const char *mode, int *cmd)
{
	int p[2];
	assert_int_equal(pipe(p), 0);
	pid_t parent = getpid(), pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		die_with_parent(parent);
		dup2(p[0], 3);
		if (p[0] != 3)
			close(p[0]);
		close(p[1]);
		execl(TARGET, "inject-target", "3", mode, (char *)NULL);
		_exit(127);
	}
	close(p[0]);
	*cmd = p[1];
	int want = mode ? 1 : 4;
	wait_libc(pid, "inject-target");
	for (int i = 0; i < 200 && count_dir("task", pid) < want; i++)
		sleep_ms(5);
	assert_int_equal(count_dir("task", pid), want);
	sleep_ms(30);
	return pid;
}

static void expect_exit_zero(pid_t pid)
{
	int st;
	pid_t r;
	for (int i = 0; i < 300 && !(r = waitpid(pid, &st, WNOHANG)); i++)
		sleep_ms(10);
	if (r == 0) {
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
		fail_msg("target did not exit");
	}
	assert_int_equal(r, pid);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		fail_msg("target ended with status %#x: it saw an anomaly", st);
}

static void read_stream_start(int fd, pid_t pid)
{
	struct {
		struct hp_file_header fh;
		struct hp_rec_hdr rh;
		struct hp_hello hello;
	} in;
	size_t got = 0;
	while (got < sizeof in) {
		ssize_t n = read(fd, (char *)&in + got, sizeof in - got);
		assert_true(n > 0);
		got += (size_t)n;
	}
	assert_memory_equal(in.fh.magic, HP_MAGIC, 8);
	assert_int_equal(in.fh.version, HP_FORMAT_VERSION);
	assert_int_equal(in.rh.type, HP_REC_HELLO);
	assert_int_equal(in.hello.pid, pid);
	assert_int_equal(in.hello.mode, start_args.mode);
	assert_int_equal(in.hello.interval_ms, start_args.interval_ms);
	assert_int_equal(in.hello.sample_rate, start_args.sample_rate);
}

/* One load/unload; returns the wall time of load and unload in *ms. by_other: the unload
 * is told nothing of the load, as heapprof-detach's after a heapprof-attach that died. */
static void cycle(pid_t pid, int base_fds, double ms[2], int by_other)
{
	struct hp_error err = {0};
	struct hp_payload_fns fns;
	int fd = -1;
	double t0 = now_ms();
	if (hp_inject_load(pid, TESTLIB, NULL, &start_args, &fd, &fns, &err))
		fail_msg("load: %s", err.msg);
	ms[0] = now_ms() - t0;
	assert_true(fd >= 0);
	read_stream_start(fd, pid);
	assert_int_equal(hp_payload_mapped(pid), 1);
	assert_int_equal(count_dir("fd", pid), base_fds + 1);

	t0 = now_ms();
	if (hp_inject_unload(pid, by_other ? NULL : &fns, &err))
		fail_msg("unload: %s", err.msg);
	ms[1] = now_ms() - t0;
	char c;
	assert_int_equal(read(fd, &c, 1), 0); /* the payload closed its end */
	close(fd);
	assert_int_equal(hp_payload_mapped(pid), 0);
	assert_int_equal(count_dir("fd", pid), base_fds);
}

static void test_load_unload_cycles(void **state)
{
	(void)state;
	int cmd;
	pid_t pid = start_target(NULL, &cmd);
	int base_fds = count_dir("fd", pid);
	assert_int_equal(hp_payload_mapped(pid), 0);
	double sum[2] = {0, 0}, max[2] = {0, 0};
	for (int i = 0; i < CYCLES; i++) {
		double ms[2];
		int st;
		if (waitpid(pid, &st, WNOHANG) == pid)
			fail_msg("target ended with status %#x before cycle %d", st, i);
		cycle(pid, base_fds, ms, i % 2);
		for (int k = 0; k < 2; k++) {
			sum[k] += ms[k];
			max[k] = ms[k] > max[k] ? ms[k] : max[k];
		}
		char c = (char)('a' + i % 26);
		assert_int_equal(write(cmd, &c, 1), 1);
	}
	printf("# %d cycles: load avg %.2f ms (max %.2f), unload avg %.2f ms (max %.2f)\n", CYCLES,
	       sum[0] / CYCLES, max[0], sum[1] / CYCLES, max[1]);
	sleep_ms(50); /* a few more sleeps and reads that must still be right */
	assert_int_equal(write(cmd, ".", 1), 1);
	close(cmd);
	expect_exit_zero(pid);
}

/* Only a thread running user code (vector registers live) can be borrowed here. */
static void test_spinning_thread(void **state)
{
	(void)state;
	int cmd;
	pid_t pid = start_target("spin", &cmd);
	int base_fds = count_dir("fd", pid);
	for (int i = 0; i < 3; i++) {
		double ms[2];
		cycle(pid, base_fds, ms, 0);
	}
	kill(pid, SIGUSR1);
	close(cmd);
	expect_exit_zero(pid);
}

/* A thread of the application named as heapprof's collector is tried last, not skipped:
 * here it is the only thread. */
static void test_named_like_collector(void **state)
{
	(void)state;
	int cmd;
	pid_t pid = start_target("spin-named", &cmd);
	char path[64], comm[32] = "";
	snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	assert_non_null(fgets(comm, sizeof comm, f));
	fclose(f);
	assert_string_equal(comm, HP_COLLECTOR_NAME "\n");
	double ms[2];
	cycle(pid, count_dir("fd", pid), ms, 0);
	kill(pid, SIGUSR1);
	close(cmd);
	expect_exit_zero(pid);
}

/* Signals keep arriving while the thread is borrowed: one reported instead of the
 * interrupt stop must be handed back, none may disturb the call or the target. */
static void test_signals_meanwhile(void **state)
{
	(void)state;
	int cmd;
	pid_t pid = start_target("spin", &cmd);
	int base_fds = count_dir("fd", pid);
	pid_t parent = getpid(), flood = fork();
	if (flood == 0) {
		die_with_parent(parent);
		for (;;) {
			kill(pid, SIGUSR2);
			usleep(20);
		}
	}
	for (int i = 0; i < 10; i++) {
		double ms[2];
		cycle(pid, base_fds, ms, i % 2);
	}
	kill(flood, SIGKILL);
	waitpid(flood, NULL, 0);
	kill(pid, SIGUSR1);
	close(cmd);
	expect_exit_zero(pid);
}

/* The load finds the payload's entry points in its file, at the bias the loader reports:
 * they must be what the target's own dlsym answers. An unload given a handle that is not
 * the payload's asks dlsym itself. */
static void test_entry_points(void **state)
{
	(void)state;
	int cmd;
	pid_t pid = start_target("spin", &cmd);
	struct hp_error err = {0};
	struct hp_payload_fns fns;
	int fd = -1;
	if (hp_inject_load(pid, TESTLIB, NULL, &start_args, &fd, &fns, &err))
		fail_msg("load: %s", err.msg);
	read_stream_start(fd, pid);
	struct hp_libc_fns f;
	struct hp_thread t;
	assert_int_equal(hp_libc_resolve(pid, &f, &err), 0);
	assert_int_equal(hp_borrow_thread(pid, &t, &err), 0);
	const char *names[] = {HP_START_SYMBOL, HP_RELEASE_SYMBOL, HP_STOP_SYMBOL, HP_FREE_SYMBOL,
			       HP_COLLECTOR_SYMBOL};
	uint64_t found[] = {fns.start, fns.release, fns.stop, fns.free, fns.collector};
	for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
		uint64_t addr = 0;
		assert_int_equal(hp_call_dlsym(&t, &f, fns.handle, names[i], &addr, &err), 0);
		if (addr != found[i])
			fail_msg("%s: dlsym %#llx, the load %#llx", names[i],
				 (unsigned long long)addr, (unsigned long long)found[i]);
	}
	assert_int_equal(hp_thread_release(&t, &err), 0);
	struct hp_payload_fns other = fns;
	other.handle ^= 0x40;
	other.stop = other.release = other.free = other.collector = 1;
	if (hp_inject_unload(pid, &other, &err))
		fail_msg("unload: %s", err.msg);
	char c;
	assert_int_equal(read(fd, &c, 1), 0);
	close(fd);
	assert_int_equal(hp_payload_mapped(pid), 0);
	kill(pid, SIGUSR1);
	close(cmd);
	expect_exit_zero(pid);
}

/* An injector that is not scheduled for the trampoline's whole wait finds the thread back at
 * its work, restored by the trampoline: the load fails and says so, touches the thread no
 * more, and what it left (a started payload, the trampoline) is unloaded afterwards. */
static void test_tracer_stalled(void **state)
{
	(void)state;
	int cmd;
	pid_t pid = start_target(NULL, &cmd);
	int base_fds = count_dir("fd", pid);
	struct hp_error err = {0};
	struct hp_payload_fns fns;
	int fd = -1;
	setenv("HEAPPROF_TEST_STALL_IN", HP_RELEASE_SYMBOL, 1);
	int r = hp_inject_load(pid, TESTLIB, NULL, &start_args, &fd, &fns, &err);
	unsetenv("HEAPPROF_TEST_STALL_IN");
	assert_int_equal(r, -1);
	printf("# stalled: %s\n", err.msg);
	assert_non_null(strstr(err.msg, "was not scheduled"));
	assert_int_equal(hp_payload_mapped(pid), 1);
	assert_int_equal(write(cmd, "a", 1), 1);
	if (hp_inject_unload(pid, NULL, &err))
		fail_msg("unload: %s", err.msg);
	assert_int_equal(hp_payload_mapped(pid), 0);
	assert_int_equal(hp_inject_leftovers(pid), 0);
	assert_int_equal(count_dir("fd", pid), base_fds);
	assert_int_equal(write(cmd, ".", 1), 1);
	close(cmd);
	expect_exit_zero(pid);
}

struct names {
	char seen[16][64];
	int n;
};

static int note_name(void *ctx, uint64_t ip, const char *name)
{
	(void)ip;
	struct names *w = ctx;
	snprintf(w->seen[w->n++], sizeof w->seen[0], "%s", name ? name : "?");
	return w->n == 16;
}

/* The injector's walk reads the held thread's memory a page at a time and keeps the names
 * it found (inject/unwind.c): the sleeper, held in its nanosleep, must show its own frames
 * by name, the same in a second walk. */
static void test_walk_names(void **state)
{
	(void)state;
	int cmd;
	pid_t pid = start_target(NULL, &cmd);
	pid_t *tids;
	int n = hp_list_threads(pid, &tids), found = 0;
	assert_true(n > 1);
	struct hp_unwinder *u = hp_unwinder_new();
	assert_non_null(u);
	for (int tries = 0; tries < 50 && !found; tries++)
		for (int i = 0; i < n && !found; i++) {
			struct hp_thread t;
			if (hp_thread_seize(pid, tids[i], &t))
				continue;
			struct names w = {.n = 0}, again = {.n = 0};
			if (t.regs.orig_rax == SYS_clock_nanosleep ||
			    t.regs.orig_rax == SYS_nanosleep) {
				assert_true(hp_unwind(u, t.tid, t.mem_fd, 1, note_name, &w) > 2);
				/* The names now come from the injector's cache of them. */
				assert_int_equal(
				    hp_unwind(u, t.tid, t.mem_fd, 1, note_name, &again), w.n);
				for (int k = 0; k < w.n; k++)
					assert_string_equal(again.seen[k], w.seen[k]);
			}
			assert_int_equal(hp_thread_release(&t, NULL), 0);
			for (int k = 1; k < w.n; k++)
				if (!strcmp(w.seen[k], "sleeper")) {
					if (!strstr(w.seen[k - 1], "nanosleep"))
						fail_msg("%s before sleeper", w.seen[k - 1]);
					found = 1;
				}
		}
	hp_unwinder_free(u);
	free(tids);
	assert_true(found);
	assert_int_equal(write(cmd, ".", 1), 1);
	close(cmd);
	expect_exit_zero(pid);
}

static void test_no_such_process(void **state)
{
	(void)state;
	pid_t pid = fork();
	if (pid == 0)
		_exit(0);
	waitpid(pid, NULL, 0);
	struct hp_error err = {0};
	struct hp_payload_fns fns;
	int fd = 7;
	assert_int_equal(hp_inject_load(pid, TESTLIB, NULL, &start_args, &fd, &fns, &err), -1);
	assert_int_equal(fd, -1);
	assert_true(err.set);
	assert_non_null(strstr(err.msg, "does not exist"));
	struct hp_error err2 = {0};
	assert_int_equal(hp_inject_unload(pid, NULL, &err2), -1);
	assert_non_null(strstr(err2.msg, "does not exist"));
	assert_int_equal(hp_payload_mapped(pid), -1);
}

static void test_already_traced(void **state)
{
	(void)state;
	pid_t parent = getpid(), pid = fork();
	if (pid == 0) {
		die_with_parent(parent);
		ptrace(PTRACE_TRACEME, 0, NULL, NULL);
		execl("/bin/sleep", "sleep", "30", (char *)NULL);
		_exit(127);
	}
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFSTOPPED(st)); /* the exec stop */
	assert_int_equal(ptrace(PTRACE_CONT, pid, NULL, NULL), 0);
	wait_libc(pid, "sleep");

	struct hp_error err = {0};
	struct hp_payload_fns fns;
	int fd = 7;
	assert_int_equal(hp_inject_load(pid, TESTLIB, NULL, &start_args, &fd, &fns, &err), -1);
	assert_int_equal(fd, -1);
	printf("# already traced: %s\n", err.msg);
	assert_non_null(strstr(err.msg, "already traced"));
	assert_int_equal(waitpid(pid, &st, WNOHANG), 0);
	assert_int_equal(kill(pid, 0), 0);
	assert_int_equal(hp_payload_mapped(pid), 0);

	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_load_unload_cycles),	 cmocka_unit_test(test_spinning_thread),
	    cmocka_unit_test(test_named_like_collector), cmocka_unit_test(test_signals_meanwhile),
	    cmocka_unit_test(test_entry_points),	 cmocka_unit_test(test_tracer_stalled),
	    cmocka_unit_test(test_walk_names),		 cmocka_unit_test(test_no_such_process),
	    cmocka_unit_test(test_already_traced),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
