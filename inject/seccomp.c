/* seccomp.c - read and evaluate the target's seccomp filters (see seccomp.h). */
#define _GNU_SOURCE
#include "inject/seccomp.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>

#include "inject/safepoint.h"
#include "target.h"

/* The kernel caps all of a thread's filters at 32768 instructions (MAX_INSNS_PER_PATH),
 * counting 4 extra per filter, so no thread can have more. */
#define MAX_FILTERS 8192

/* The return value of a filter the kernel would not have accepted: the most restrictive,
 * so that heapprof refuses rather than guesses. */
#define MALFORMED SECCOMP_RET_KILL_PROCESS

#define ANON (MAP_PRIVATE | MAP_ANONYMOUS)
#define FILE_FIXED (MAP_PRIVATE | MAP_FIXED | MAP_DENYWRITE)
#define FD_NONE ((uint64_t)-1)
#define THREAD_CLONE_FLAGS                                                                         \
	(CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD | CLONE_SYSVSEM |        \
	 CLONE_SETTLS | CLONE_PARENT_SETTID | CLONE_CHILD_CLEARTID)

#define ERRNO_ANY (-1)

struct need {
	const char *name;
	long nr;
	uint64_t args[6];
	/* 0: any failure harms the target or breaks heapprof; ERRNO_ANY: the caller copes
	 * with any; else the one errno it copes with. */
	int ok_errno;
	int fallback; /* needed only when the entry before failed with ENOSYS */
};

/* Collected from the sources of inject/ and payload/, and from strace of glibc 2.36's dlopen and
 * pthread_create; clock_gettime is left out because it runs in the vDSO, which seccomp
 * does not see. */
static const struct need needs[] = {
    /* The injector: the trampoline's wait for it and the mask the trampoline restores if
     * heapprof died, the payload's memfd. */
    {"select (the trampoline's wait)", SYS_select, {0}, 0, 0},
    {"rt_sigprocmask", SYS_rt_sigprocmask, {SIG_SETMASK, 0, 0, 8}, 0, 0},
    {"memfd_create", SYS_memfd_create, {0, MFD_CLOEXEC}, 0, 0},
    {"close", SYS_close, {0}, 0, 0},
    /* dlopen of /proc/self/fd/N. */
    {"openat", SYS_openat, {(uint64_t)AT_FDCWD, 0, O_RDONLY | O_CLOEXEC}, 0, 0},
    {"read", SYS_read, {0}, 0, 0},
    {"pread64", SYS_pread64, {0}, 0, 0},
    {"newfstatat", SYS_newfstatat, {0, 0, 0, AT_EMPTY_PATH}, 0, 0},
    {"mmap (r-- file)", SYS_mmap, {0, 0, PROT_READ, MAP_PRIVATE | MAP_DENYWRITE}, 0, 0},
    {"mmap (r-x file)", SYS_mmap, {0, 0, PROT_READ | PROT_EXEC, FILE_FIXED}, 0, 0},
    {"mmap (rw- file)", SYS_mmap, {0, 0, PROT_READ | PROT_WRITE, FILE_FIXED}, 0, 0},
    {"mmap (rw- anonymous, fixed)",
     SYS_mmap,
     {0, 0, PROT_READ | PROT_WRITE, ANON | MAP_FIXED, FD_NONE, 0},
     0,
     0},
    {"mprotect (r--)", SYS_mprotect, {0, 0, PROT_READ}, 0, 0},
    {"brk", SYS_brk, {0}, ERRNO_ANY, 0}, /* malloc falls back to mmap */
    /* heapprof_start and the GOT patching. */
    {"getpid", SYS_getpid, {0}, 0, 0},
    {"mmap (rw- anonymous)",
     SYS_mmap,
     {0, 0, PROT_READ | PROT_WRITE, ANON | MAP_NORESERVE, FD_NONE, 0},
     0,
     0},
    {"madvise (MADV_WIPEONFORK)", SYS_madvise, {0, 0, MADV_WIPEONFORK}, 0, 0},
    {"membarrier", SYS_membarrier, {MEMBARRIER_CMD_QUERY}, ERRNO_ANY, 0},
    {"prctl (PR_GET_SECCOMP)", SYS_prctl, {PR_GET_SECCOMP}, ERRNO_ANY, 0},
    {"membarrier", SYS_membarrier, {MEMBARRIER_CMD_GLOBAL}, ERRNO_ANY, 0},
    {"pipe2", SYS_pipe2, {0, O_CLOEXEC}, 0, 0},
    {"write", SYS_write, {0}, 0, 0},
    {"mprotect (rw-)", SYS_mprotect, {0, 0, PROT_READ | PROT_WRITE}, 0, 0},
    {"fcntl (F_SETFL)", SYS_fcntl, {0, F_SETFL, O_NONBLOCK}, 0, 0},
    {"readlink", SYS_readlink, {0}, 0, 0},
    /* heapprof_stop's buffers and dlclose of the payload. */
    {"munmap", SYS_munmap, {0}, 0, 0},
    /* pthread_create of the collector, and the new thread's start and exit in glibc. */
    {"rt_sigaction", SYS_rt_sigaction, {33, 0, 0, 8}, 0, 0}, /* SIGSETXID, first thread */
    {"rt_sigprocmask (SIG_BLOCK)", SYS_rt_sigprocmask, {SIG_BLOCK, 0, 0, 8}, 0, 0},
    {"rt_sigprocmask (SIG_UNBLOCK)", SYS_rt_sigprocmask, {SIG_UNBLOCK, 0, 0, 8}, 0, 0},
    {"mmap (thread stack)", SYS_mmap, {0, 0, PROT_NONE, ANON | MAP_STACK, FD_NONE, 0}, 0, 0},
    {"clone3", SYS_clone3, {0, 88}, ENOSYS, 0}, /* glibc then falls back to clone */
    {"clone", SYS_clone, {THREAD_CLONE_FLAGS}, 0, 1},
    {"rseq", SYS_rseq, {0, 32, 0, 0x53053053}, ERRNO_ANY, 0},
    {"set_robust_list", SYS_set_robust_list, {0, 24}, ERRNO_ANY, 0},
    {"madvise (MADV_DONTNEED)", SYS_madvise, {0, 0, MADV_DONTNEED}, ERRNO_ANY, 0},
    {"exit", SYS_exit, {0}, 0, 0},
    /* The collector's rounds, and the hooks in every thread. */
    {"prctl (PR_SET_NAME)", SYS_prctl, {PR_SET_NAME}, ERRNO_ANY, 0},
    {"futex (FUTEX_WAIT_PRIVATE)", SYS_futex, {0, FUTEX_WAIT_PRIVATE}, 0, 0},
    {"futex (FUTEX_WAKE_PRIVATE)", SYS_futex, {0, FUTEX_WAKE_PRIVATE}, 0, 0},
    {"futex (FUTEX_WAIT_BITSET)", SYS_futex, {0, FUTEX_WAIT_BITSET | FUTEX_CLOCK_REALTIME}, 0, 0},
    {"poll", SYS_poll, {0}, 0, 0},
    {"sched_yield", SYS_sched_yield, {0}, 0, 0},
};

static int load_word(const struct seccomp_data *d, uint32_t k, uint32_t *v)
{
	if (k % 4 || k > sizeof *d - 4)
		return -1;
	memcpy(v, (const unsigned char *)d + k, 4);
	return 0;
}

/* 0 and *a = a op b, or -1 for an operation seccomp does not accept. */
static int alu(uint16_t op, uint32_t *a, uint32_t b)
{
	switch (op) {
	case BPF_ADD:
		*a += b;
		break;
	case BPF_SUB:
		*a -= b;
		break;
	case BPF_MUL:
		*a *= b;
		break;
	case BPF_DIV:
		*a /= b;
		break;
	case BPF_AND:
		*a &= b;
		break;
	case BPF_OR:
		*a |= b;
		break;
	case BPF_XOR:
		*a ^= b;
		break;
	/* The kernel's checker refuses constant shifts of 32 or more; a shift by X is done
	 * by a 32-bit shift instruction, which masks the count. */
	case BPF_LSH:
		*a <<= b & 31;
		break;
	case BPF_RSH:
		*a >>= b & 31;
		break;
	case BPF_NEG:
		*a = -*a;
		break;
	default:
		return -1;
	}
	return 0;
}

static int jump_taken(uint16_t op, uint32_t a, uint32_t b, int *taken)
{
	switch (op) {
	case BPF_JEQ:
		*taken = a == b;
		break;
	case BPF_JGT:
		*taken = a > b;
		break;
	case BPF_JGE:
		*taken = a >= b;
		break;
	case BPF_JSET:
		*taken = (a & b) != 0;
		break;
	default:
		return -1;
	}
	return 0;
}

uint32_t hp_bpf_run(const struct hp_bpf_prog *prog, const struct seccomp_data *d)
{
	uint32_t a = 0, x = 0, mem[BPF_MEMWORDS] = {0};
	size_t len = prog->len;
	if (len == 0 || len > BPF_MAXINSNS)
		return MALFORMED;
	/* pc only grows: every instruction moves it on by at least one. */
	for (uint64_t pc = 0; pc < len;) {
		const struct sock_filter *f = &prog->insns[pc++];
		uint32_t k = f->k;
		uint32_t src = BPF_SRC(f->code) == BPF_X ? x : k;
		int taken;
		switch (BPF_CLASS(f->code)) {
		case BPF_LD:
			if (f->code == (BPF_LD | BPF_W | BPF_ABS)) {
				if (load_word(d, k, &a))
					return MALFORMED;
			} else if (f->code == (BPF_LD | BPF_W | BPF_LEN)) {
				a = sizeof *d;
			} else if (f->code == (BPF_LD | BPF_IMM)) {
				a = k;
			} else if (f->code == (BPF_LD | BPF_MEM) && k < BPF_MEMWORDS) {
				a = mem[k];
			} else {
				return MALFORMED;
			}
			break;
		case BPF_LDX:
			if (f->code == (BPF_LDX | BPF_W | BPF_LEN))
				x = sizeof *d;
			else if (f->code == (BPF_LDX | BPF_IMM))
				x = k;
			else if (f->code == (BPF_LDX | BPF_MEM) && k < BPF_MEMWORDS)
				x = mem[k];
			else
				return MALFORMED;
			break;
		case BPF_ST:
		case BPF_STX:
			if (f->code != BPF_ST && f->code != BPF_STX)
				return MALFORMED;
			if (k >= BPF_MEMWORDS)
				return MALFORMED;
			mem[k] = f->code == BPF_ST ? a : x;
			break;
		case BPF_ALU:
			/* The kernel refuses a constant divisor of 0 and makes the program
			 * return 0 (kill-thread) on a division by X == 0. */
			if (BPF_OP(f->code) == BPF_DIV && src == 0)
				return BPF_SRC(f->code) == BPF_X ? SECCOMP_RET_KILL_THREAD
								 : MALFORMED;
			if (alu(BPF_OP(f->code), &a, src))
				return MALFORMED;
			break;
		case BPF_JMP:
			if (BPF_OP(f->code) == BPF_JA) {
				pc += k;
			} else {
				if (jump_taken(BPF_OP(f->code), a, src, &taken))
					return MALFORMED;
				pc += taken ? f->jt : f->jf;
			}
			break;
		case BPF_RET:
			if (BPF_RVAL(f->code) == BPF_K)
				return k;
			if (BPF_RVAL(f->code) == BPF_A)
				return a;
			return MALFORMED;
		case BPF_MISC:
			if (BPF_MISCOP(f->code) == BPF_TAX)
				x = a;
			else if (BPF_MISCOP(f->code) == BPF_TXA)
				a = x;
			else
				return MALFORMED;
			break;
		default:
			return MALFORMED;
		}
	}
	return MALFORMED; /* ran off the end (or jumped past it) without returning */
}

/* The kernel compares actions as signed numbers: kill-process (0x80000000) is lowest. */
static int32_t action_rank(uint32_t ret)
{
	return (int32_t)(ret & SECCOMP_RET_ACTION_FULL);
}

uint32_t hp_seccomp_eval(const struct hp_bpf_prog *progs, size_t n, const struct seccomp_data *d)
{
	uint32_t ret = SECCOMP_RET_ALLOW;
	for (size_t i = n; i-- > 0;) {
		uint32_t r = hp_bpf_run(&progs[i], d);
		if (action_rank(r) < action_rank(ret))
			ret = r;
	}
	return ret;
}

static const char *fixed_action_name(uint32_t action)
{
	switch (action) {
	case SECCOMP_RET_KILL_PROCESS:
		return "kill-process";
	case SECCOMP_RET_KILL_THREAD:
		return "kill-thread";
	case SECCOMP_RET_TRAP:
		return "trap: SIGSYS";
	case SECCOMP_RET_USER_NOTIF:
		return "user-notif: a supervisor decides";
	case SECCOMP_RET_TRACE:
		return "trace";
	case SECCOMP_RET_LOG:
		return "log";
	case SECCOMP_RET_ALLOW:
		return "allow";
	default:
		return NULL;
	}
}

void hp_seccomp_action_name(uint32_t ret, char *buf, size_t len)
{
	uint32_t action = ret & SECCOMP_RET_ACTION_FULL, data = ret & SECCOMP_RET_DATA;
	const char *name = fixed_action_name(action), *e;
	if (name)
		snprintf(buf, len, "%s", name);
	else if (action != SECCOMP_RET_ERRNO)
		/* The kernel kills the process on an action it does not know. */
		snprintf(buf, len, "unknown action %#x: kill-process", (unsigned)ret);
	else if ((e = strerrorname_np((int)data)))
		snprintf(buf, len, "errno %s", e);
	else
		snprintf(buf, len, "errno %u", (unsigned)data);
}

/* The errno the syscall fails with under ret, or 0 if it does not simply fail. */
static int failing_errno(uint32_t ret)
{
	switch (ret & SECCOMP_RET_ACTION_FULL) {
	case SECCOMP_RET_ERRNO:
		return (int)(ret & SECCOMP_RET_DATA);
	case SECCOMP_RET_TRACE:
		return ENOSYS;
	default:
		return 0;
	}
}

int hp_seccomp_denied(const struct hp_bpf_prog *progs, size_t n, const char **name, uint32_t *ret)
{
	int prev_enosys = 0;
	for (size_t i = 0; i < sizeof needs / sizeof *needs; i++) {
		const struct need *s = &needs[i];
		if (s->fallback && !prev_enosys)
			continue;
		struct seccomp_data d = {.nr = (int)s->nr, .arch = AUDIT_ARCH_X86_64};
		memcpy(d.args, s->args, sizeof d.args);
		uint32_t r = hp_seccomp_eval(progs, n, &d);
		uint32_t action = r & SECCOMP_RET_ACTION_FULL;
		int e = failing_errno(r);
		prev_enosys = e == ENOSYS;
		if (action == SECCOMP_RET_ALLOW || action == SECCOMP_RET_LOG)
			continue;
		if (e && (s->ok_errno == ERRNO_ANY || s->ok_errno == e))
			continue;
		*name = s->name;
		*ret = r;
		return 1;
	}
	return 0;
}

static struct hp_seccomp_status thread_status(pid_t pid, pid_t tid)
{
	struct hp_seccomp_status s = {-1, -1};
	static const char *const keys[] = {"Seccomp", "Seccomp_filters"};
	char mode[32] = "", filters[32] = "";
	char *const vals[] = {mode, filters};
	hp_task_status_fields(pid, tid, 2, keys, vals, sizeof mode);
	if (!*mode)
		return s;
	s.mode = atoi(mode);
	if (*filters)
		s.filters = atoi(filters);
	return s;
}

/* The mode and filter count all threads share in *common, or -1 with err set. A thread
 * that exits meanwhile does not count. */
static int scan_threads(pid_t pid, struct hp_seccomp_status *common, struct hp_error *err)
{
	char comm[32];
	pid_t *tids;
	int n = hp_list_threads(pid, &tids);
	if (n < 0) {
		hp_error_set(err, "process %d does not exist (or exited): check the pid", (int)pid);
		return -1;
	}
	hp_target_comm(pid, comm, sizeof comm);
	int ret = 0;
	pid_t first = 0;
	*common = (struct hp_seccomp_status){0, 0};
	for (int i = 0; i < n && !ret; i++) {
		struct hp_seccomp_status s = thread_status(pid, tids[i]);
		if (s.mode < 0)
			continue;
		if (s.mode == SECCOMP_MODE_STRICT) {
			hp_error_set(err,
				     "process %d (%s) has a thread (%d) in seccomp strict mode, "
				     "which may make no syscall but read, write, exit and "
				     "sigreturn; heapprof cannot be loaded into it",
				     (int)pid, comm, (int)tids[i]);
			ret = -1;
		} else if (!first) {
			first = tids[i];
			*common = s;
		} else if (s.mode != common->mode || s.filters != common->filters) {
			hp_error_set(
			    err,
			    "the threads of process %d (%s) do not share one seccomp "
			    "filter (thread %d has %d filters, thread %d has %d); heapprof "
			    "can only check those of the thread it borrows, so it does not "
			    "load",
			    (int)pid, comm, (int)first, common->filters, (int)tids[i], s.filters);
			ret = -1;
		}
	}
	free(tids);
	return ret;
}

int hp_seccomp_precheck(pid_t pid, struct hp_seccomp_status *common, struct hp_error *err)
{
	return scan_threads(pid, common, err);
}

static void free_progs(struct hp_bpf_prog *progs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free((void *)progs[i].insns);
	free(progs);
}

/* Reads every filter of the held thread tid into *out (oldest first); the count, or -errno
 * of the first read that failed. */
static long read_filters(pid_t tid, struct hp_bpf_prog **out)
{
	struct hp_bpf_prog *progs = NULL;
	size_t n = 0;
	for (;;) {
		long len = ptrace(PTRACE_SECCOMP_GET_FILTER, tid, (void *)n, NULL);
		if (len < 0 && errno == ENOENT && n > 0)
			break;
		if (len <= 0 || len > BPF_MAXINSNS || n == MAX_FILTERS) {
			long e = len < 0 ? -errno : -E2BIG;
			free_progs(progs, n);
			return e;
		}
		struct hp_bpf_prog *np = realloc(progs, (n + 1) * sizeof *np);
		struct sock_filter *insns = malloc((size_t)len * sizeof *insns);
		if (np)
			progs = np;
		if (!np || !insns ||
		    ptrace(PTRACE_SECCOMP_GET_FILTER, tid, (void *)n, insns) != len) {
			long e = !np || !insns ? -ENOMEM : -EAGAIN;
			free(insns);
			free_progs(progs, n);
			return e;
		}
		progs[n].insns = insns;
		progs[n].len = (size_t)len;
		n++;
	}
	*out = progs;
	return (long)n;
}

int hp_seccomp_check(const struct hp_thread *t, const struct hp_seccomp_status *common,
		     struct hp_error *err)
{
	char comm[32], action[64];
	struct hp_seccomp_status now = thread_status(t->pid, t->tid);
	if (now.mode != common->mode || now.filters != common->filters) {
		hp_target_comm(t->pid, comm, sizeof comm);
		hp_error_set(err,
			     "the seccomp filters of process %d (%s) changed while heapprof "
			     "looked at them: try again",
			     (int)t->pid, comm);
		return -1;
	}
	if (common->mode != SECCOMP_MODE_FILTER)
		return 0;
	hp_target_comm(t->pid, comm, sizeof comm);
	struct hp_bpf_prog *progs = NULL;
	long n = read_filters(t->tid, &progs);
	if (n < 0) {
		int e = (int)-n;
		if (e == EACCES || e == EPERM)
			hp_error_set(err,
				     "process %d (%s) has a seccomp filter, and heapprof needs "
				     "CAP_SYS_ADMIN (and no filter of its own) to read it and know "
				     "that loading is safe: run heapprof-attach as root",
				     (int)t->pid, comm);
		else
			hp_error_set(
			    err,
			    "process %d (%s) has a seccomp filter that heapprof cannot read "
			    "(%s) to know that loading is safe; %s",
			    (int)t->pid, comm, strerror(e),
			    e == EINVAL ? "the kernel shows filters only with "
					  "CONFIG_CHECKPOINT_RESTORE"
					: "try again");
		return -1;
	}
	if (common->filters >= 0 && n != common->filters) {
		free_progs(progs, (size_t)n);
		hp_error_set(err,
			     "the seccomp filters of process %d (%s) changed while heapprof read "
			     "them: try again",
			     (int)t->pid, comm);
		return -1;
	}
	const char *name;
	uint32_t ret;
	int denied = hp_seccomp_denied(progs, (size_t)n, &name, &ret);
	free_progs(progs, (size_t)n);
	if (!denied)
		return 0;
	hp_seccomp_action_name(ret, action, sizeof action);
	hp_error_set(err,
		     "process %d (%s) has a seccomp filter that denies %s (%s); heapprof cannot "
		     "be loaded into it: allow that syscall in its filter, or profile it "
		     "without the filter",
		     (int)t->pid, comm, name, action);
	return -1;
}
