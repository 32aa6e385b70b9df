#include "inject/remote.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <stdlib.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hpabi.h"
#include "inject/faultpoint.h"
#include "inject/slack.h"
#include "inject/tramp.h"

#define RED_ZONE 128
#define EFLAGS_DF 0x400
#define HP_SLOW_CALL_MS 10000
#define HP_CALL_MS 5000

static uint64_t call_sigmask(void)
{
	static const int faults[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGSYS};
	uint64_t m = ~(uint64_t)0;
	for (size_t i = 0; i < sizeof faults / sizeof faults[0]; i++)
		m &= ~((uint64_t)1 << (faults[i] - 1));
	return m;
}

int hp_remote_push(struct hp_thread *t, const void *data, size_t len, uint64_t *addr,
		   struct hp_error *err)
{
	uint64_t top = t->scratch_top;
	if (top == t->regs.rsp)
		top -= RED_ZONE;
	top = (top - len) & ~(uint64_t)15;
	if (pwrite(t->mem_fd, data, len, (off_t)top) != (ssize_t)len) {
		hp_error_set(err, "could not write %zu bytes into process %d's stack (%s)", len,
			     (int)t->pid, strerror(errno));
		return -1;
	}
	t->scratch_top = top;
	*addr = top;
	return 0;
}

int hp_remote_read_str(struct hp_thread *t, uint64_t addr, char *buf, size_t len)
{
	ssize_t n = pread(t->mem_fd, buf, len - 1, (off_t)addr);
	if (n <= 0) {
		/* A short string near the end of a mapping: retry byte-sized reads. */
		for (n = 0; n < (ssize_t)len - 1; n++)
			if (pread(t->mem_fd, buf + n, 1, (off_t)(addr + (uint64_t)n)) != 1)
				break;
		if (n == 0)
			return -1;
	}
	buf[n] = '\0';
	return 0;
}

/* How long a call may run before we stop waiting for it. Loading or unloading a library
 * can wait on the target's own locks (the loader lock, an allocator's) for as long as the
 * target holds them, and so can heapprof_start and heapprof_stop, which walk the loaded
 * modules to patch and restore their GOT slots; the rest are short libc calls. */
static uint64_t call_timeout_ms(const char *what)
{
	static const char *const slow[] = {"dlopen", "dlclose", HP_START_SYMBOL, HP_STOP_SYMBOL};
	for (size_t i = 0; i < sizeof slow / sizeof *slow; i++)
		if (!strcmp(what, slow[i]))
			return HP_SLOW_CALL_MS;
	return HP_CALL_MS;
}

/* 1 and *at for a trampoline already written, else free room (*owned set), 0 when there is
 * neither, -1 when maps can't be read. */
static int find_tramp(pid_t pid, int mem_fd, uint64_t *at, int *owned)
{
	size_t len = hp_tramp_len();
	int found = hp_slack_find(pid, mem_fd, hp_tramp_image(), len, at);
	*owned = 0;
	if (found == 0) {
		found = hp_slack_find_free(pid, mem_fd, len, at);
		*owned = 1;
	}
	return found;
}

uint64_t hp_remote_tramp_hint(pid_t pid)
{
	int mem = hp_open_mem(pid, O_RDONLY);
	if (mem < 0)
		return 0;
	uint64_t at = 0;
	int owned;
	if (find_tramp(pid, mem, &at, &owned) <= 0)
		at = 0;
	close(mem);
	return at;
}

/* The hint is still good when its bytes are the trampoline or zero (slack.h: only the
 * executable's, libc's and the loader's slack is used, and none of them is unmapped). */
static int check_hint(const struct hp_thread *t, int *owned)
{
	size_t len = hp_tramp_len();
	unsigned char cur[256];
	if (!t->tramp_hint || len > sizeof cur ||
	    pread(t->mem_fd, cur, len, (off_t)t->tramp_hint) != (ssize_t)len)
		return 0;
	if (!memcmp(cur, hp_tramp_image(), len)) {
		*owned = 0;
		return 1;
	}
	for (size_t i = 0; i < len; i++)
		if (cur[i])
			return 0;
	*owned = 1;
	return 1;
}

/* Writes the trampoline into zero slack (or finds the one a heapprof that died, or a call
 * still finishing on its own, left: it is shared, and not ours to remove), then the
 * thread's frame on its stack. Neither is reachable before a call's registers are set. */
static int ensure_tramp(struct hp_thread *t, struct hp_error *err)
{
	if (t->tramp)
		return 0;
	size_t len = hp_tramp_len();
	uint64_t at = t->tramp_hint;
	int owned;
	int found = check_hint(t, &owned);
	if (!found)
		found = find_tramp(t->pid, t->mem_fd, &at, &owned);
	if (found <= 0) {
		hp_error_set(err,
			     "process %d has no free room of %zu bytes at the end of its code "
			     "segments for heapprof's return trampoline: heapprof cannot load into "
			     "it",
			     (int)t->pid, len);
		return -1;
	}
	if (owned && pwrite(t->mem_fd, hp_tramp_image(), len, (off_t)at) != (ssize_t)len) {
		hp_error_set(err, "could not write heapprof's trampoline into process %d (%s)",
			     (int)t->pid, strerror(errno));
		return -1;
	}
	t->tramp = at;
	t->tramp_owned = owned;

	size_t flen = hp_tramp_frame_len(t->xstate_len);
	uint64_t top = t->scratch_top == t->regs.rsp ? t->regs.rsp - RED_ZONE : t->scratch_top;
	uint64_t frame = (top - flen) & ~(uint64_t)63;
	unsigned char *img = malloc(flen);
	if (!img) {
		hp_error_set(err, "out of memory");
		return -1;
	}
	struct user_regs_struct resume = hp_resume_regs(&t->regs);
	hp_tramp_frame_build(img, &resume, t->sigmask, t->xstate, t->xstate_len);
	ssize_t n = pwrite(t->mem_fd, img, flen, (off_t)frame);
	free(img);
	if (n != (ssize_t)flen) {
		hp_error_set(err, "could not write to process %d's stack (%s)", (int)t->pid,
			     strerror(errno));
		return -1;
	}
	t->frame = frame;
	t->scratch_top = frame;
	return 0;
}

static int prepare(struct hp_thread *t, uint64_t fn, const uint64_t *args, size_t nargs,
		   struct hp_error *err, const char *what)
{
	if (ensure_tramp(t, err))
		return -1;
	uint64_t top = t->scratch_top == t->regs.rsp ? t->regs.rsp - RED_ZONE : t->scratch_top;
	/* At function entry (rsp + 8) must be 16-aligned: rsp points at the return address. */
	uint64_t sp = (top & ~(uint64_t)15) - 8;
	uint64_t retaddr = hp_tramp_ret(t->tramp);
	if (pwrite(t->mem_fd, &retaddr, sizeof retaddr, (off_t)sp) != sizeof retaddr) {
		hp_error_set(err, "could not write to process %d's stack for %s (%s)", (int)t->pid,
			     what, strerror(errno));
		return -1;
	}
	struct user_regs_struct r = t->regs;
	uint64_t *slots[] = {(uint64_t *)&r.rdi, (uint64_t *)&r.rsi, (uint64_t *)&r.rdx,
			     (uint64_t *)&r.rcx, (uint64_t *)&r.r8,  (uint64_t *)&r.r9};
	for (size_t i = 0; i < nargs && i < 6; i++)
		*slots[i] = args[i];
	r.rip = fn;
	r.rsp = sp;
	r.rbx = t->frame;
	r.rax = 0;		   /* no vector registers used by a variadic callee */
	r.orig_rax = (uint64_t)-1; /* stopped in a syscall: do not restart it */
	r.eflags &= ~(uint64_t)EFLAGS_DF;
	uint64_t mask = call_sigmask(), arm[HP_TRAMP_ARM_WORDS];
	hp_tramp_arm(arm);
	if (pwrite(t->mem_fd, arm, sizeof arm, (off_t)hp_tramp_done_at(t->frame)) != sizeof arm) {
		hp_error_set(err, "could not write to process %d's stack for %s (%s)", (int)t->pid,
			     what, strerror(errno));
		return -1;
	}
	t->modified = 1;
	if (ptrace(PTRACE_SETREGS, t->tid, NULL, &r) < 0 ||
	    ptrace(PTRACE_SETSIGMASK, t->tid, (void *)sizeof mask, &mask) < 0) {
		hp_error_set(err, "could not set up the call to %s in thread %d (%s)", what,
			     (int)t->tid, strerror(errno));
		return -1;
	}
	t->at_signal_stop = 0;
	return 0;
}

static int is_fault(int sig)
{
	return sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE ||
	       sig == SIGTRAP || sig == SIGSYS;
}

/* The call outlived its timeout. It cannot be cut short (a dlopen stopped halfway leaves
 * the loader's state half updated), and waiting forever would hold the thread stopped
 * forever; so the thread is let go: it finishes the call by itself and the trampoline
 * restores it. The payload may or may not end up loaded; heapprof-detach cleans up. */
static void abandon(struct hp_thread *t, const char *what, uint64_t ms, struct hp_error *err)
{
	int st;
	t->abandoned = 1;
	if (ptrace(PTRACE_INTERRUPT, t->tid, NULL, NULL) == 0)
		hp_wait_thread(t->tid, &st, 1000);
	hp_error_set(err,
		     "%s did not return within %llu s in thread %d of process %d (it waits for "
		     "a lock the process holds?): the thread finishes it on its own and then "
		     "resumes where it was; run heapprof-detach %d afterwards to remove "
		     "heapprof",
		     what, (unsigned long long)(ms / 1000), (int)t->tid, (int)t->pid, (int)t->pid);
}

/* 1 once the call has returned into the trampoline (tramp.h). */
static int call_done(void *arg)
{
	const struct hp_thread *t = arg;
	uint64_t done = 0;
	return pread(t->mem_fd, &done, sizeof done, (off_t)hp_tramp_done_at(t->frame)) ==
		   sizeof done &&
	       done == 1;
}

/* At a stop after the call returned: its result, if the thread is still in the trampoline.
 * Outside it, the thread waited out HP_TRAMP_WAIT_S and went back to its work, restored:
 * then it must not be touched again. */
static int take_result(struct hp_thread *t, const char *what, uint64_t *ret, struct hp_error *err)
{
	struct user_regs_struct regs;
	if (ptrace(PTRACE_GETREGS, t->tid, NULL, &regs) < 0) {
		hp_error_set(err, "could not read thread %d after %s (%s)", (int)t->tid, what,
			     strerror(errno));
		return -1;
	}
	if (regs.rip < t->tramp || regs.rip >= t->tramp + hp_tramp_len()) {
		t->modified = 0;
		t->abandoned = 1;
		hp_error_set(
		    err,
		    "heapprof was not scheduled for %d s after %s returned in thread %d of "
		    "process %d, which went back to its work by itself; run heapprof-detach "
		    "%d to remove what heapprof may have left",
		    HP_TRAMP_WAIT_S, what, (int)t->tid, (int)t->pid, (int)t->pid);
		return -1;
	}
	if (pread(t->mem_fd, ret, sizeof *ret, (off_t)hp_tramp_result_at(t->frame)) !=
	    sizeof *ret) {
		hp_error_set(err, "could not read the result of %s in process %d (%s)", what,
			     (int)t->pid, strerror(errno));
		return -1;
	}
	hp_fault_point("HEAPPROF_TEST_KILL_AFTER", what);
	return 0;
}

/* The call runs under PTRACE_CONT: its own syscalls make no stop (under PTRACE_SYSCALL each
 * made two, and on a busy host each stop waited milliseconds for a CPU). Its return is seen
 * in the frame's done word, and the thread then interrupted where it waits for us. */
int hp_remote_call(struct hp_thread *t, const char *what, uint64_t fn, const uint64_t *args,
		   size_t nargs, uint64_t *ret, struct hp_error *err)
{
	/* A thread left to finish a call, or gone back to its work, is no longer ours: a call
	 * set up over it would take the stack its own call still uses, or its registers. */
	if (t->abandoned || t->dead) {
		hp_error_set(err, "thread %d of process %d cannot run %s: it is no longer held",
			     (int)t->tid, (int)t->pid, what);
		return -1;
	}
	if (prepare(t, fn, args, nargs, err, what))
		return -1;
	uint64_t timeout = call_timeout_ms(what);
	struct timespec t0, now;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	long sig = 0;
	int interrupted = 0;
	for (;;) {
		if (ptrace(PTRACE_CONT, t->tid, NULL, (void *)sig) < 0) {
			hp_error_set(err, "could not run %s in thread %d (%s)", what, (int)t->tid,
				     strerror(errno));
			return -1;
		}
		sig = 0;
		hp_fault_point("HEAPPROF_TEST_KILL_IN", what);
		hp_stall_point("HEAPPROF_TEST_STALL_IN", what, HP_TRAMP_WAIT_S * 1000 + 500);
		int st, w;
		do {
			clock_gettime(CLOCK_MONOTONIC, &now);
			uint64_t spent = (uint64_t)(now.tv_sec - t0.tv_sec) * 1000 +
					 (uint64_t)((now.tv_nsec - t0.tv_nsec) / 1000000);
			w = spent >= timeout ? -ETIMEDOUT
					     : hp_wait_thread_or(t->tid, &st, timeout - spent,
								 interrupted ? NULL : call_done, t);
			if (w == 1) {
				if (ptrace(PTRACE_INTERRUPT, t->tid, NULL, NULL) < 0) {
					hp_error_set(err, "could not stop thread %d after %s (%s)",
						     (int)t->tid, what, strerror(errno));
					return -1;
				}
				interrupted = 1;
			}
		} while (w == 1);
		if (w == -ETIMEDOUT) {
			abandon(t, what, timeout, err);
			return -1;
		}
		if (w < 0 || WIFEXITED(st) || WIFSIGNALED(st)) {
			t->dead = 1;
			hp_error_set(err, "process %d exited during the call to %s", (int)t->pid,
				     what);
			return -1;
		}
		int s = WSTOPSIG(st);
		/* Our interrupt, or a group-stop that stands for it (the kernel reports a
		 * PTRACE_INTERRUPT during a group-stop with the stop's signal). */
		if (st >> 16 == PTRACE_EVENT_STOP && interrupted)
			return take_result(t, what, ret, err);
		/* A group-stop before the call returned does not concern it. */
		if (st >> 16)
			continue;
		siginfo_t si;
		if (ptrace(PTRACE_GETSIGINFO, t->tid, NULL, &si) < 0)
			memset(&si, 0, sizeof si);
		if (!is_fault(s) || si.si_code <= 0) {
			/* Sent by someone while our call runs: deliver it, as it would have
			 * been without us. */
			sig = s;
			continue;
		}
		t->at_signal_stop = 1;
		struct user_regs_struct regs;
		ptrace(PTRACE_GETREGS, t->tid, NULL, &regs);
		hp_error_set(err,
			     "%s crashed in process %d (signal %d at %#llx); the thread was "
			     "restored, but check that the process is healthy",
			     what, (int)t->pid, s, regs.rip);
		return -1;
	}
}
