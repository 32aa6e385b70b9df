#include "inject/ptrace.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "inject/faultpoint.h"
#include "inject/inject.h"
#include "inject/slack.h"
#include "inject/tramp.h"
#include "target.h"

/* Large enough for every xsave layout known (AMX makes it ~11 KiB); the kernel shortens
 * iov_len to the real size and we restore exactly that many bytes. */
#define XSTATE_MAX (64 * 1024)
#define ERESTARTNOHAND_CODE 514
#define SPIN_NS 100000u /* hp_wait_thread */
/* The longest sleep between two looks: what it may add to a call that runs long. */
#define MAX_DELAY_NS 320000

static uint64_t longest_stop_ns; /* hp_inject_longest_stop_ns */

static void block_caller_signals(struct hp_thread *t)
{
	sigset_t s;
	sigemptyset(&s);
	sigaddset(&s, SIGINT);
	sigaddset(&s, SIGTERM);
	sigaddset(&s, SIGHUP);
	sigaddset(&s, SIGQUIT);
	pthread_sigmask(SIG_BLOCK, &s, &t->caller_mask);
}

static int wait_thread(pid_t tid, int *status)
{
	for (;;) {
		pid_t r = waitpid(tid, status, __WALL);
		if (r == tid)
			return 0;
		if (r < 0 && errno != EINTR)
			return -errno;
	}
}

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Polled, not signal driven: the callers block SIGCHLD for their own use. For the first
 * SPIN_NS it yields instead of sleeping: a sleep of 10 us lasts 100 us on a virtual
 * machine, and most stops and calls come sooner (when a call's every syscall made two
 * stops, a dlclose that unmapped the tables of 1000 threads held its thread 3.1 s rather
 * than 1.4 s). The sleep then grows from 10 us, so a long wait costs little. */
int hp_wait_thread_or(pid_t tid, int *status, uint64_t timeout_ms, int (*ready)(void *), void *arg)
{
	uint64_t start = mono_ns(), deadline = start + timeout_ms * 1000000u;
	long delay_ns = 10000;
	for (;;) {
		pid_t r = waitpid(tid, status, __WALL | WNOHANG);
		if (r == tid)
			return 0;
		if (r < 0 && errno != EINTR)
			return -errno;
		if (ready && ready(arg))
			return 1;
		uint64_t now = mono_ns();
		if (now >= deadline)
			return -ETIMEDOUT;
		if (now - start < SPIN_NS) {
			sched_yield();
			continue;
		}
		struct timespec d = {0, delay_ns};
		nanosleep(&d, NULL);
		if (delay_ns < MAX_DELAY_NS)
			delay_ns *= 2;
	}
}

int hp_wait_thread(pid_t tid, int *status, uint64_t timeout_ms)
{
	return hp_wait_thread_or(tid, status, timeout_ms, NULL, NULL);
}

/* These syscalls fail with EINTR when their thread is merely stopped and resumed (see
 * signal(7)), and our PTRACE_INTERRUPT is such a stop. When no signal of the target's own
 * is involved, the EINTR is ours: mark the syscall restartable, so that it is issued again
 * on release (with its original timeout, so a timed wait may last longer, never shorter). */
static void unfail_interrupted(struct hp_thread *t)
{
	static const long calls[] = {SYS_epoll_wait,  SYS_epoll_pwait, SYS_epoll_pwait2,
				     SYS_semop,	      SYS_semtimedop,  SYS_rt_sigtimedwait,
				     SYS_io_getevents};
	if (t->stop_sig || (int64_t)t->regs.rax != -EINTR)
		return;
	for (size_t i = 0; i < sizeof calls / sizeof *calls; i++)
		if ((long)t->regs.orig_rax == calls[i]) {
			t->regs.rax = (uint64_t)-ERESTARTNOHAND_CODE;
			t->modified = 1;
			return;
		}
}

static int save_state(struct hp_thread *t)
{
	if (ptrace(PTRACE_GETREGS, t->tid, NULL, &t->regs) < 0)
		return -errno;
	t->xstate = malloc(XSTATE_MAX);
	if (!t->xstate)
		return -ENOMEM;
	struct iovec iov = {t->xstate, XSTATE_MAX};
	if (ptrace(PTRACE_GETREGSET, t->tid, (void *)NT_X86_XSTATE, &iov) < 0)
		return -errno;
	t->xstate_len = iov.iov_len;
	if (ptrace(PTRACE_GETSIGMASK, t->tid, (void *)sizeof t->sigmask, &t->sigmask) < 0)
		return -errno;
	t->mem_fd = hp_open_mem(t->pid, O_RDWR);
	if (t->mem_fd < 0)
		return -errno;
	t->scratch_top = t->regs.rsp;
	unfail_interrupted(t);
	return 0;
}

/* Takes whatever stop comes first after the interrupt: the interrupt stop itself, or a
 * signal-delivery-stop (the interrupt then stays pending and shows up as an extra event
 * stop later, which remote.c steps over). */
static int wait_first_stop(struct hp_thread *t)
{
	int st;
	int r = wait_thread(t->tid, &st);
	if (r)
		return r;
	if (WIFEXITED(st) || WIFSIGNALED(st)) {
		t->dead = 1;
		return -ESRCH;
	}
	int sig = WSTOPSIG(st);
	if (st >> 16) {
		/* An event stop reporting a stop signal is a group-stop: the process is
		 * job-control stopped and would not run our call. */
		if (sig != SIGTRAP)
			return -EBUSY;
		return 0;
	}
	t->at_signal_stop = 1;
	t->stop_sig = sig;
	if (ptrace(PTRACE_GETSIGINFO, t->tid, NULL, &t->stop_info) < 0)
		return -errno;
	return 0;
}

int hp_thread_seize(pid_t pid, pid_t tid, struct hp_thread *t)
{
	memset(t, 0, sizeof *t);
	t->pid = pid;
	t->tid = tid;
	t->mem_fd = -1;
	block_caller_signals(t);
	if (ptrace(PTRACE_SEIZE, tid, NULL, (void *)PTRACE_O_TRACESYSGOOD) < 0) {
		int e = errno;
		pthread_sigmask(SIG_SETMASK, &t->caller_mask, NULL);
		return -e;
	}
	t->attached = 1;
	clock_gettime(CLOCK_MONOTONIC, &t->seized_at);
	int r = ptrace(PTRACE_INTERRUPT, tid, NULL, NULL) < 0 ? -errno : 0;
	if (!r)
		r = wait_first_stop(t);
	if (!r)
		r = save_state(t);
	if (r) {
		hp_thread_release(t, NULL);
		return r;
	}
	return 0;
}

/* No thread runs the trampoline any more: the one that did is held and restored, and a
 * call that outlived its timeout (which keeps it) never comes here. */
static void erase_tramp(struct hp_thread *t)
{
	hp_slack_zero(t->mem_fd, t->tramp, hp_tramp_len());
}

/* The registers are the resume registers (tramp.h): an interrupted syscall is issued again
 * by the thread itself, whatever kind of stop it is released from. */
static int restore_state(struct hp_thread *t)
{
	struct iovec iov = {t->xstate, t->xstate_len};
	struct user_regs_struct r = hp_resume_regs(&t->regs);
	/* The registers last: until they are set the thread is still in a call or at the
	 * trampoline, which restores the mask and the extended state again if we die. */
	if (ptrace(PTRACE_SETSIGMASK, t->tid, (void *)sizeof t->sigmask, &t->sigmask) < 0 ||
	    ptrace(PTRACE_SETREGSET, t->tid, (void *)NT_X86_XSTATE, &iov) < 0 ||
	    ptrace(PTRACE_SETREGS, t->tid, NULL, &r) < 0)
		return -errno;
	return 0;
}

/* Nanoseconds since the thread was seized. */
static uint64_t held_ns(const struct hp_thread *t)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (uint64_t)(now.tv_sec - t->seized_at.tv_sec) * 1000000000u +
	       (uint64_t)(now.tv_nsec - t->seized_at.tv_nsec);
}

/* The hold ends as PTRACE_DETACH starts the thread again: timed after it, it also took
 * the time the woken thread kept the injector off its CPU, 2 to 8 ms on a 2-CPU host, when
 * the thread was running already. */
static void note_held(const struct hp_thread *t)
{
	uint64_t held = held_ns(t);
	if (held > longest_stop_ns)
		longest_stop_ns = held;
}

int hp_thread_release(struct hp_thread *t, struct hp_error *err)
{
	int ret = 0;
	if (t->attached && !t->dead && t->abandoned) {
		/* Still inside the call: the trampoline restores the thread when it returns. */
		note_held(t);
		ptrace(PTRACE_DETACH, t->tid, NULL, NULL);
	} else if (t->attached && !t->dead) {
		/* At the trampoline's stop the resume registers (orig_rax -1) skip its
		 * syscall; elsewhere they replace the call's. Should we die before they
		 * are set, the trampoline restores the thread itself. */
		if (t->modified && restore_state(t) < 0) {
			if (!t->dead)
				hp_error_set(err,
					     "could not restore thread %d of process %d (%s): the "
					     "process may misbehave; restart it if it does",
					     (int)t->tid, (int)t->pid, strerror(errno));
			ret = -1;
		} else if (t->tramp_owned) {
			hp_fault_point("HEAPPROF_TEST_KILL_AFTER", "restore");
			erase_tramp(t);
		}
		long sig = 0;
		if (t->stop_sig && t->at_signal_stop) {
			/* Delivered as if it had never been intercepted, with its own siginfo.
			 * No call ever runs from such a stop (safepoint.h). */
			ptrace(PTRACE_SETSIGINFO, t->tid, NULL, &t->stop_info);
			sig = t->stop_sig;
		}
		note_held(t);
		if (ptrace(PTRACE_DETACH, t->tid, NULL, (void *)sig) < 0 && errno != ESRCH) {
			hp_error_set(err, "could not detach from thread %d of process %d (%s)",
				     (int)t->tid, (int)t->pid, strerror(errno));
			ret = -1;
		}
	} else if (t->attached && t->dead) {
		note_held(t);
		hp_error_set(err, "process %d exited while heapprof held one of its threads",
			     (int)t->pid);
		ret = -1;
	}
	t->attached = 0;
	if (t->mem_fd >= 0)
		close(t->mem_fd);
	t->mem_fd = -1;
	free(t->xstate);
	t->xstate = NULL;
	pthread_sigmask(SIG_SETMASK, &t->caller_mask, NULL);
	return ret;
}

int hp_process_alive(pid_t pid)
{
	char name[64];
	snprintf(name, sizeof name, "/proc/%d/stat", (int)pid);
	FILE *f = fopen(name, "re");
	if (!f)
		return 0;
	char state = 0;
	int n = fscanf(f, "%*d (%*[^)]) %c", &state);
	fclose(f);
	return n == 1 && state != 'Z' && state != 'X';
}

static int tracer_of(pid_t pid, pid_t tid)
{
	char v[32];
	return hp_task_status_field(pid, tid, "TracerPid", v, sizeof v) == 0 ? atoi(v) : 0;
}

static int read_int_file(const char *path, int *v)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	int n = fscanf(f, "%d", v);
	fclose(f);
	return n == 1 ? 0 : -1;
}

static void explain_eperm(pid_t pid, pid_t tid, struct hp_error *err)
{
	int tracer = tracer_of(pid, tid);
	if (tracer) {
		hp_error_set(err,
			     "process %d is already traced by process %d (a debugger or another "
			     "heapprof?): detach it first and try again",
			     (int)pid, tracer);
		return;
	}
	int scope = 0;
	if (!read_int_file("/proc/sys/kernel/yama/ptrace_scope", &scope) && scope > 0) {
		hp_error_set(
		    err,
		    "not allowed to ptrace process %d: kernel.yama.ptrace_scope is %d; run "
		    "as root or with CAP_SYS_PTRACE, or set it to 0 with "
		    "sysctl kernel.yama.ptrace_scope=0",
		    (int)pid, scope);
		return;
	}
	hp_error_set(err,
		     "not allowed to ptrace process %d: run as its owner or root (CAP_SYS_PTRACE); "
		     "a setuid or otherwise non-dumpable process cannot be traced",
		     (int)pid);
}

void hp_ptrace_explain(pid_t pid, pid_t tid, int code, struct hp_error *err)
{
	switch (code) {
	case -EPERM:
		explain_eperm(pid, tid, err);
		break;
	case -ESRCH:
		if (!hp_process_alive(pid))
			hp_error_set(err, "process %d does not exist (or exited): check the pid",
				     (int)pid);
		else
			hp_error_set(err, "thread %d of process %d exited: try again", (int)tid,
				     (int)pid);
		break;
	case -EBUSY:
		hp_error_set(
		    err,
		    "process %d is stopped (job control): resume it with kill -CONT %d and "
		    "try again",
		    (int)pid, (int)pid);
		break;
	case -ENOMEM:
		hp_error_set(err,
			     "heapprof ran out of memory checking the threads of process %d: free "
			     "memory and try again",
			     (int)pid);
		break;
	default:
		hp_error_set(err, "could not stop thread %d of process %d: %s", (int)tid, (int)pid,
			     strerror(-code));
	}
}

int hp_open_mem(pid_t pid, int flags)
{
	char name[64];
	snprintf(name, sizeof name, "/proc/%d/mem", (int)pid);
	return open(name, flags | O_CLOEXEC);
}

uint64_t hp_inject_longest_stop_ns(void)
{
	uint64_t l = longest_stop_ns;
	longest_stop_ns = 0;
	return l;
}
