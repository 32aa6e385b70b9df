/* seccomp.h - would the target's seccomp filters let heapprof in without harm?
 *
 * Contract: syscalls the tracer makes a tracee execute are subject to the tracee's filters,
 * so before any remote call the injector asks here whether every syscall the injection,
 * glibc's dlopen and pthread_create and the payload make in the target would be let
 * through; a filter that kills, traps or leaves the decision to a supervisor on any of
 * them makes heapprof refuse, with one line naming the process, the syscall and the
 * filter's action, before anything is done to the target.
 *
 * Filters belong to threads. Every thread's mode and filter count come from
 * /proc/PID/task/TID/status (Seccomp, Seccomp_filters); the filters themselves only from
 * PTRACE_SECCOMP_GET_FILTER, which needs CAP_SYS_ADMIN, a kernel with
 * CONFIG_CHECKPOINT_RESTORE and a ptrace-stopped thread: the borrowed one. The borrowed
 * thread runs the injection and creates the collector thread, which inherits its filters;
 * the hooks run in every thread. So heapprof refuses when any thread is in strict mode,
 * when the threads do not all have the same mode and number of filters (it assumes that
 * threads with as many filters share them: filters are inherited, and
 * SECCOMP_FILTER_FLAG_TSYNC installs one filter in every thread), and when the borrowed
 * thread's filters cannot be read. A filter installed after the check is not seen.
 *
 * Each syscall is evaluated with arch AUDIT_ARCH_X86_64, instruction_pointer 0, and the
 * arguments heapprof or glibc pass where a filter may plausibly test them (protections
 * and flags of mmap and mprotect, open flags, futex, fcntl, madvise, prctl, membarrier and
 * rt_sigprocmask operations, clone flags); addresses, lengths and most fds are 0. ALLOW
 * and LOG pass. ERRNO passes only where the caller copes with the failure (glibc falls
 * back from clone3 to clone on ENOSYS; rseq, set_robust_list, PR_SET_NAME and membarrier
 * are optional). TRACE is taken as ERRNO(ENOSYS), which is what the kernel does when the
 * tracer (heapprof, or nobody) did not ask for seccomp events.
 */
#ifndef HEAPPROF_INJECT_SECCOMP_H
#define HEAPPROF_INJECT_SECCOMP_H

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "hperror.h"
#include "inject/ptrace.h"

struct hp_bpf_prog {
	const struct sock_filter *insns;
	size_t len;
};

/* What one classic-BPF seccomp filter returns for d. A program the kernel would not have
 * accepted (an unknown instruction, a load outside struct seccomp_data, a jump past the
 * end, no return) gives SECCOMP_RET_KILL_PROCESS. Jumps only go forward, so a run takes at
 * most len steps. */
uint32_t hp_bpf_run(const struct hp_bpf_prog *prog, const struct seccomp_data *d);

/* The kernel's verdict for d under n filters, progs[0] the oldest (the order of
 * PTRACE_SECCOMP_GET_FILTER indexes): the lowest action wins, and among equal actions the
 * newest filter's data. n == 0 allows. */
uint32_t hp_seccomp_eval(const struct hp_bpf_prog *progs, size_t n, const struct seccomp_data *d);

/* The action of a filter's return value, e.g. "kill-process" or "errno EPERM". */
void hp_seccomp_action_name(uint32_t ret, char *buf, size_t len);

/* 0 when progs let every syscall heapprof makes through; else 1, with *name the first
 * syscall refused and *ret the filters' return value for it. */
int hp_seccomp_denied(const struct hp_bpf_prog *progs, size_t n, const char **name, uint32_t *ret);

/* A thread's Seccomp and Seccomp_filters lines of /proc/PID/task/TID/status. */
struct hp_seccomp_status {
	int mode;    /* 0 none, 1 strict, 2 filter; -1 unreadable (thread gone) */
	int filters; /* -1 when the kernel does not show it (before 5.9) */
};

/* Before any thread is stopped: refuses (-1, err set) when a thread of pid is in strict
 * mode or the threads differ in mode or filter count; 0 otherwise, with what they share in
 * *common. */
int hp_seccomp_precheck(pid_t pid, struct hp_seccomp_status *common, struct hp_error *err);

/* With t held and before any remote call: the borrowed thread's status must still be
 * *common (only its own is read again here: all threads' took 30 to 230 ms of the hold
 * in a process of 3000), then its filters are read and evaluated. 0: heapprof may go on;
 * -1: err says why not. */
int hp_seccomp_check(const struct hp_thread *t, const struct hp_seccomp_status *common,
		     struct hp_error *err);

#endif
