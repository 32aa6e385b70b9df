/* test-seccomp: the classic-BPF evaluator of inject/seccomp.h against real filters, written
 * as the struct sock_filter arrays a program installs, and checked against the kernel's own
 * verdict for one of them; and the read of a thread's Seccomp fields it relies on. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <linux/audit.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "inject/seccomp.h"
#include "target.h"

#define PROG(a) ((struct hp_bpf_prog){(a), sizeof(a) / sizeof *(a)})
#define LD_NR BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr))
#define LD_ARCH BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch))
#define LD_ARG_LO(i) BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[i]))
#define RET(v) BPF_STMT(BPF_RET | BPF_K, (v))
/* nr gets action, every other syscall is allowed. */
#define ONE(nr, action)                                                                            \
	{                                                                                          \
		LD_NR, BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1), RET(action),               \
		    RET(SECCOMP_RET_ALLOW)                                                         \
	}

static uint32_t eval1(struct hp_bpf_prog p, long nr)
{
	struct seccomp_data d = {.nr = (int)nr, .arch = AUDIT_ARCH_X86_64};
	return hp_seccomp_eval(&p, 1, &d);
}

static void test_allow_all(void **state)
{
	(void)state;
	struct sock_filter f[] = {RET(SECCOMP_RET_ALLOW)};
	struct hp_bpf_prog p = PROG(f);
	const char *name = NULL;
	uint32_t ret = 0;
	assert_int_equal(eval1(p, SYS_memfd_create), SECCOMP_RET_ALLOW);
	assert_int_equal(hp_seccomp_denied(&p, 1, &name, &ret), 0);
	assert_int_equal(hp_seccomp_denied(NULL, 0, &name, &ret), 0);
}

static void test_errno_on_unrelated(void **state)
{
	(void)state;
	struct sock_filter f[] = ONE(SYS_uname, SECCOMP_RET_ERRNO | EPERM);
	struct hp_bpf_prog p = PROG(f);
	const char *name = NULL;
	uint32_t ret = 0;
	assert_int_equal(eval1(p, SYS_uname), SECCOMP_RET_ERRNO | EPERM);
	assert_int_equal(eval1(p, SYS_getpid), SECCOMP_RET_ALLOW);
	assert_int_equal(hp_seccomp_denied(&p, 1, &name, &ret), 0);
}

static void test_kill_on_needed(void **state)
{
	(void)state;
	struct sock_filter f[] = ONE(SYS_memfd_create, SECCOMP_RET_KILL_PROCESS);
	struct hp_bpf_prog p = PROG(f);
	const char *name = NULL;
	uint32_t ret = 0;
	char action[64];
	assert_int_equal(hp_seccomp_denied(&p, 1, &name, &ret), 1);
	assert_string_equal(name, "memfd_create");
	assert_int_equal(ret, SECCOMP_RET_KILL_PROCESS);
	hp_seccomp_action_name(ret, action, sizeof action);
	assert_string_equal(action, "kill-process");
}

/* An ERRNO is only accepted where the caller copes with it. */
static void test_errno_on_needed(void **state)
{
	(void)state;
	struct sock_filter memfd[] = ONE(SYS_memfd_create, SECCOMP_RET_ERRNO | EPERM);
	struct sock_filter barrier[] = ONE(SYS_membarrier, SECCOMP_RET_ERRNO | EPERM);
	struct hp_bpf_prog p = PROG(memfd), q = PROG(barrier);
	const char *name = NULL;
	uint32_t ret = 0;
	char action[64];
	assert_int_equal(hp_seccomp_denied(&p, 1, &name, &ret), 1);
	assert_string_equal(name, "memfd_create");
	hp_seccomp_action_name(ret, action, sizeof action);
	assert_string_equal(action, "errno EPERM");
	assert_int_equal(hp_seccomp_denied(&q, 1, &name, &ret), 0);
}

/* glibc's pthread_create falls back from clone3 to clone on ENOSYS only. */
static void test_clone3_fallback(void **state)
{
	(void)state;
	struct sock_filter enosys[] = ONE(SYS_clone3, SECCOMP_RET_ERRNO | ENOSYS);
	struct sock_filter eperm[] = ONE(SYS_clone3, SECCOMP_RET_ERRNO | EPERM);
	struct sock_filter noclone[] = ONE(SYS_clone, SECCOMP_RET_KILL_THREAD);
	struct hp_bpf_prog ok = PROG(enosys), bad = PROG(eperm);
	struct hp_bpf_prog both[] = {PROG(enosys), PROG(noclone)};
	const char *name = NULL;
	uint32_t ret = 0;
	assert_int_equal(hp_seccomp_denied(&ok, 1, &name, &ret), 0);
	assert_int_equal(hp_seccomp_denied(&bad, 1, &name, &ret), 1);
	assert_string_equal(name, "clone3");
	/* clone3 allowed: clone is never made, so killing it does not matter. */
	assert_int_equal(hp_seccomp_denied(&both[1], 1, &name, &ret), 0);
	assert_int_equal(hp_seccomp_denied(both, 2, &name, &ret), 1);
	assert_string_equal(name, "clone");
	assert_int_equal(ret, SECCOMP_RET_KILL_THREAD);
}

/* The usual first test of a filter: anything but x86_64 is killed. */
static void test_arch_check(void **state)
{
	(void)state;
	struct sock_filter f[] = {
	    LD_ARCH,
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
	    RET(SECCOMP_RET_KILL_PROCESS),
	    RET(SECCOMP_RET_ALLOW),
	};
	struct hp_bpf_prog p = PROG(f);
	struct seccomp_data d = {.nr = SYS_getpid, .arch = AUDIT_ARCH_I386};
	const char *name = NULL;
	uint32_t ret = 0;
	assert_int_equal(hp_seccomp_eval(&p, 1, &d), SECCOMP_RET_KILL_PROCESS);
	d.arch = AUDIT_ARCH_X86_64;
	assert_int_equal(hp_seccomp_eval(&p, 1, &d), SECCOMP_RET_ALLOW);
	assert_int_equal(hp_seccomp_denied(&p, 1, &name, &ret), 0);
}

/* The kernel's precedence: the lowest action of all filters wins, whatever their order;
 * among equal actions the newest filter (the last) gives the data. */
static void test_precedence(void **state)
{
	(void)state;
	struct sock_filter eperm[] = ONE(SYS_getpid, SECCOMP_RET_ERRNO | EPERM);
	struct sock_filter eacces[] = ONE(SYS_getpid, SECCOMP_RET_ERRNO | EACCES);
	struct sock_filter trap[] = ONE(SYS_getpid, SECCOMP_RET_TRAP);
	struct sock_filter log[] = ONE(SYS_getpid, SECCOMP_RET_LOG);
	struct sock_filter kthread[] = ONE(SYS_getpid, SECCOMP_RET_KILL_THREAD);
	struct sock_filter kproc[] = ONE(SYS_getpid, SECCOMP_RET_KILL_PROCESS);
	struct sock_filter notif[] = ONE(SYS_getpid, SECCOMP_RET_USER_NOTIF);
	struct sock_filter trace[] = ONE(SYS_getpid, SECCOMP_RET_TRACE);
	struct hp_bpf_prog a[] = {PROG(eperm), PROG(trap)}, b[] = {PROG(trap), PROG(eperm)};
	struct hp_bpf_prog c[] = {PROG(eperm), PROG(eacces)}, d[] = {PROG(log), PROG(eperm)};
	struct hp_bpf_prog e[] = {PROG(kthread), PROG(kproc)}, f[] = {PROG(trace), PROG(notif)};
	struct hp_bpf_prog g[] = {PROG(log), PROG(trace)};
	struct seccomp_data sd = {.nr = SYS_getpid, .arch = AUDIT_ARCH_X86_64};
	assert_int_equal(hp_seccomp_eval(a, 2, &sd), SECCOMP_RET_TRAP);
	assert_int_equal(hp_seccomp_eval(b, 2, &sd), SECCOMP_RET_TRAP);
	assert_int_equal(hp_seccomp_eval(c, 2, &sd), SECCOMP_RET_ERRNO | EACCES);
	assert_int_equal(hp_seccomp_eval(d, 2, &sd), SECCOMP_RET_ERRNO | EPERM);
	assert_int_equal(hp_seccomp_eval(e, 2, &sd), SECCOMP_RET_KILL_PROCESS);
	assert_int_equal(hp_seccomp_eval(f, 2, &sd), SECCOMP_RET_USER_NOTIF);
	assert_int_equal(hp_seccomp_eval(g, 2, &sd), SECCOMP_RET_TRACE);
	sd.nr = SYS_getppid;
	assert_int_equal(hp_seccomp_eval(a, 2, &sd), SECCOMP_RET_ALLOW);
	const char *name = NULL;
	uint32_t ret = 0;
	struct sock_filter kill_getpid[] = ONE(SYS_getpid, SECCOMP_RET_KILL_PROCESS);
	struct hp_bpf_prog h[] = {PROG(log), PROG(kill_getpid)};
	assert_int_equal(hp_seccomp_denied(h, 2, &name, &ret), 1);
	assert_string_equal(name, "getpid");
}

/* W^X policies (systemd's MemoryDenyWriteExecute) test mmap's and mprotect's protection
 * argument: heapprof maps r-x or rw-, never both, so they let it in; a filter refusing any
 * anonymous executable mapping does not. */
static void test_args(void **state)
{
	(void)state;
	struct sock_filter wx[] = {
	    LD_NR,
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_mmap, 0, 3),
	    LD_ARG_LO(2),
	    BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, PROT_WRITE, 0, 1),
	    BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, PROT_EXEC, 4, 0),
	    LD_NR,
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_mprotect, 0, 3),
	    LD_ARG_LO(2),
	    BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, PROT_EXEC, 0, 1),
	    RET(SECCOMP_RET_KILL_PROCESS),
	    RET(SECCOMP_RET_ALLOW),
	};
	struct sock_filter anon_exec[] = {
	    LD_NR,
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_mmap, 0, 5),
	    LD_ARG_LO(2),
	    BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, PROT_EXEC, 0, 3),
	    LD_ARG_LO(3),
	    BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, MAP_ANONYMOUS, 0, 1),
	    RET(SECCOMP_RET_ERRNO | EPERM),
	    RET(SECCOMP_RET_ALLOW),
	};
	struct sock_filter file_exec[] = {
	    LD_NR,
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_mmap, 0, 5),
	    LD_ARG_LO(2),
	    BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, PROT_EXEC, 0, 3),
	    LD_ARG_LO(3),
	    BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, MAP_ANONYMOUS, 1, 0),
	    RET(SECCOMP_RET_ERRNO | EPERM),
	    RET(SECCOMP_RET_ALLOW),
	};
	struct hp_bpf_prog p = PROG(wx), q = PROG(anon_exec), f = PROG(file_exec);
	struct seccomp_data d = {.nr = SYS_mmap, .arch = AUDIT_ARCH_X86_64};
	const char *name = NULL;
	uint32_t ret = 0;
	d.args[2] = PROT_READ | PROT_WRITE | PROT_EXEC;
	assert_int_equal(hp_seccomp_eval(&p, 1, &d), SECCOMP_RET_KILL_PROCESS);
	d.args[2] = PROT_READ | PROT_EXEC;
	assert_int_equal(hp_seccomp_eval(&p, 1, &d), SECCOMP_RET_ALLOW);
	d.nr = SYS_mprotect;
	assert_int_equal(hp_seccomp_eval(&p, 1, &d), SECCOMP_RET_KILL_PROCESS);
	d.args[2] = PROT_READ;
	assert_int_equal(hp_seccomp_eval(&p, 1, &d), SECCOMP_RET_ALLOW);
	assert_int_equal(hp_seccomp_denied(&p, 1, &name, &ret), 0);
	/* No anonymous code: the trampoline is written into existing code pages. */
	assert_int_equal(hp_seccomp_denied(&q, 1, &name, &ret), 0);
	assert_int_equal(hp_seccomp_denied(&f, 1, &name, &ret), 1);
	assert_string_equal(name, "mmap (r-x file)");
}

/* Every instruction class seccomp accepts: scratch memory, both registers, ALU with a
 * constant and with X, jumps, RET A. For getpid the program returns
 * ERRNO | ((nr * 2 + 3 - 1) & 0xfff), for anything else kill-thread. */
static void test_instructions(void **state)
{
	(void)state;
	struct sock_filter f[] = {
	    LD_NR,
	    BPF_STMT(BPF_ST, 5),
	    BPF_STMT(BPF_LDX | BPF_IMM, 2),
	    BPF_STMT(BPF_ALU | BPF_MUL | BPF_X, 0),
	    BPF_STMT(BPF_ALU | BPF_ADD | BPF_K, 3),
	    BPF_STMT(BPF_MISC | BPF_TAX, 0),
	    BPF_STMT(BPF_LD | BPF_IMM, 1),
	    BPF_STMT(BPF_ALU | BPF_NEG, 0),
	    BPF_STMT(BPF_ALU | BPF_ADD | BPF_X, 0),
	    BPF_STMT(BPF_ALU | BPF_AND | BPF_K, 0xfff),
	    BPF_STMT(BPF_ALU | BPF_OR | BPF_K, SECCOMP_RET_ERRNO),
	    BPF_STMT(BPF_MISC | BPF_TAX, 0),
	    BPF_STMT(BPF_STX, 6),
	    BPF_STMT(BPF_LDX | BPF_MEM, 5),
	    BPF_STMT(BPF_MISC | BPF_TXA, 0),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_getpid, 1, 0),
	    RET(SECCOMP_RET_KILL_THREAD),
	    BPF_STMT(BPF_LD | BPF_MEM, 6),
	    BPF_STMT(BPF_ALU | BPF_SUB | BPF_K, 0),
	    BPF_STMT(BPF_ALU | BPF_LSH | BPF_K, 0),
	    BPF_STMT(BPF_JMP | BPF_JA, 0),
	    BPF_STMT(BPF_RET | BPF_A, 0),
	};
	struct hp_bpf_prog p = PROG(f);
	assert_int_equal(eval1(p, SYS_getpid), SECCOMP_RET_ERRNO | ((SYS_getpid * 2 + 2) & 0xfff));
	assert_int_equal(eval1(p, SYS_getppid), SECCOMP_RET_KILL_THREAD);
}

/* Nothing the kernel would have installed, and each one ends as kill-process, so heapprof
 * refuses rather than guesses: a jump that would wrap around to itself in 32 bits, no RET,
 * loads outside struct seccomp_data or unaligned, an opcode seccomp refuses, an empty
 * program. A division by X == 0 returns 0 (kill-thread), as in the kernel. */
static void test_malformed(void **state)
{
	(void)state;
	struct sock_filter loop[] = {BPF_STMT(BPF_JMP | BPF_JA, 0xffffffffu),
				     RET(SECCOMP_RET_ALLOW)};
	struct sock_filter cond_loop[] = {LD_NR, BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 255, 255),
					  RET(SECCOMP_RET_ALLOW)};
	struct sock_filter no_ret[] = {LD_NR, BPF_STMT(BPF_ALU | BPF_ADD | BPF_K, 1)};
	struct sock_filter far[] = {BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 64), RET(SECCOMP_RET_ALLOW)};
	struct sock_filter unaligned[] = {BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 2),
					  RET(SECCOMP_RET_ALLOW)};
	struct sock_filter byte_load[] = {BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 0),
					  RET(SECCOMP_RET_ALLOW)};
	struct sock_filter mod[] = {LD_NR, BPF_STMT(BPF_ALU | BPF_MOD | BPF_K, 3),
				    RET(SECCOMP_RET_ALLOW)};
	struct sock_filter mem[] = {BPF_STMT(BPF_LD | BPF_MEM, 16), RET(SECCOMP_RET_ALLOW)};
	struct sock_filter div_k0[] = {BPF_STMT(BPF_ALU | BPF_DIV | BPF_K, 0),
				       RET(SECCOMP_RET_ALLOW)};
	struct sock_filter div_x0[] = {BPF_STMT(BPF_ALU | BPF_DIV | BPF_X, 0),
				       RET(SECCOMP_RET_ALLOW)};
	struct hp_bpf_prog bad[] = {PROG(loop),	     PROG(cond_loop), PROG(no_ret), PROG(far),
				    PROG(unaligned), PROG(byte_load), PROG(mod),    PROG(mem),
				    PROG(div_k0),    {no_ret, 0}};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
		assert_int_equal(eval1(bad[i], SYS_getpid), SECCOMP_RET_KILL_PROCESS);
	assert_int_equal(eval1(PROG(div_x0), SYS_getpid), SECCOMP_RET_KILL_THREAD);
	const char *name = NULL;
	uint32_t ret = 0;
	struct hp_bpf_prog looping = PROG(loop);
	assert_int_equal(hp_seccomp_denied(&looping, 1, &name, &ret), 1);
}

/* The evaluator agrees with the kernel: a child installs a filter that tests a syscall's
 * first argument and reports what that syscall returned. */
static void test_kernel_agrees(void **state)
{
	(void)state;
	struct sock_filter f[] = {
	    LD_NR,
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_dup, 0, 3),
	    LD_ARG_LO(0),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 12345, 0, 1),
	    RET(SECCOMP_RET_ERRNO | EXDEV),
	    RET(SECCOMP_RET_ALLOW),
	};
	struct hp_bpf_prog p = PROG(f);
	struct seccomp_data d = {.nr = SYS_dup, .arch = AUDIT_ARCH_X86_64, .args = {12345}};
	assert_int_equal(hp_seccomp_eval(&p, 1, &d), SECCOMP_RET_ERRNO | EXDEV);
	d.args[0] = 12346;
	assert_int_equal(hp_seccomp_eval(&p, 1, &d), SECCOMP_RET_ALLOW);

	pid_t child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		struct sock_fprog prog = {sizeof f / sizeof *f, f};
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
		    syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog))
			_exit(100);
		long r = syscall(SYS_dup, 12345);
		_exit(r < 0 && errno == EXDEV ? 0 : 1);
	}
	int st;
	assert_int_equal(waitpid(child, &st, 0), child);
	assert_true(WIFEXITED(st));
	if (WEXITSTATUS(st) == 100)
		skip(); /* no seccomp in this kernel */
	assert_int_equal(WEXITSTATUS(st), 0);
}

static void test_action_names(void **state)
{
	(void)state;
	char buf[64];
	hp_seccomp_action_name(SECCOMP_RET_KILL_THREAD, buf, sizeof buf);
	assert_string_equal(buf, "kill-thread");
	hp_seccomp_action_name(SECCOMP_RET_TRAP | 7, buf, sizeof buf);
	assert_string_equal(buf, "trap: SIGSYS");
	hp_seccomp_action_name(SECCOMP_RET_ERRNO | 4000, buf, sizeof buf);
	assert_string_equal(buf, "errno 4000");
	hp_seccomp_action_name(0x00010000, buf, sizeof buf);
	assert_string_equal(buf, "unknown action 0x10000: kill-process");
}

static void *gettid_thread(void *arg)
{
	*(pid_t *)arg = (pid_t)syscall(SYS_gettid);
	return NULL;
}

/* A task's fields come from one read of its status file (seccomp.c reads a thread's mode
 * and filter count together: read apart, a thread that ended in between had one and not
 * the other, and stress cycles refused to attach). Keys found or not, in any order. */
static void test_task_status(void **state)
{
	(void)state;
	pid_t self = getpid(), tid = (pid_t)syscall(SYS_gettid);
	static const char *const keys[] = {"Seccomp_filters", "Pid", "NoSuchKey", "Seccomp"};
	char v[4][64] = {"", "", "untouched", ""};
	char *const vals[] = {v[0], v[1], v[2], v[3]};
	assert_int_equal(hp_task_status_fields(self, tid, 4, keys, vals, sizeof v[0]), 3);
	assert_int_equal(atoi(v[1]), tid);
	assert_string_equal(v[2], "untouched");
	assert_int_equal(atoi(v[3]), 0);
	assert_int_equal(atoi(v[0]), 0);
	char one[64];
	assert_int_equal(hp_task_status_field(self, 0, "Pid", one, sizeof one), 0);
	assert_int_equal(atoi(one), self);
	assert_int_equal(hp_task_status_field(0, 0, "NoSuchKey", one, sizeof one), -1);
	/* A thread that has ended has no status to read. */
	pthread_t th;
	pid_t gone = 0;
	assert_int_equal(pthread_create(&th, NULL, gettid_thread, &gone), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	for (int i = 0;
	     i < 1000 && hp_task_status_fields(self, gone, 4, keys, vals, sizeof v[0]) >= 0; i++)
		usleep(1000);
	assert_int_equal(hp_task_status_fields(self, gone, 4, keys, vals, sizeof v[0]), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_allow_all),	    cmocka_unit_test(test_errno_on_unrelated),
	    cmocka_unit_test(test_kill_on_needed),  cmocka_unit_test(test_errno_on_needed),
	    cmocka_unit_test(test_clone3_fallback), cmocka_unit_test(test_arch_check),
	    cmocka_unit_test(test_precedence),	    cmocka_unit_test(test_args),
	    cmocka_unit_test(test_instructions),    cmocka_unit_test(test_malformed),
	    cmocka_unit_test(test_kernel_agrees),   cmocka_unit_test(test_action_names),
	    cmocka_unit_test(test_task_status),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
