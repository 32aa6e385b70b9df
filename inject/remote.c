#include "inject/remote.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#define RED_ZONE 128
#define EFLAGS_DF 0x400

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

static int prepare(struct hp_thread *t, uint64_t fn, const uint64_t *args, size_t nargs,
		   struct hp_error *err, const char *what)
{
	uint64_t top = t->scratch_top == t->regs.rsp ? t->regs.rsp - RED_ZONE : t->scratch_top;
	/* At function entry (rsp + 8) must be 16-aligned: rsp points at the return address. */
	uint64_t sp = (top & ~(uint64_t)15) - 8;
	uint64_t zero = 0;
	if (pwrite(t->mem_fd, &zero, sizeof zero, (off_t)sp) != sizeof zero) {
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
	r.rax = 0; /* no vector registers used by a variadic callee */
	r.orig_rax = (uint64_t)-1;
	r.eflags &= ~(uint64_t)EFLAGS_DF;
	uint64_t mask = call_sigmask();
	t->modified = 1;
	if (ptrace(PTRACE_SETREGS, t->tid, NULL, &r) < 0 ||
	    ptrace(PTRACE_SETSIGMASK, t->tid, (void *)sizeof mask, &mask) < 0) {
		hp_error_set(err, "could not set up the call to %s in thread %d (%s)", what,
			     (int)t->tid, strerror(errno));
		return -1;
	}
	return 0;
}

static int is_fault(int sig)
{
	return sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE ||
	       sig == SIGTRAP || sig == SIGSYS;
}

int hp_remote_call(struct hp_thread *t, const char *what, uint64_t fn, const uint64_t *args,
		   size_t nargs, uint64_t *ret, struct hp_error *err)
{
	if (prepare(t, fn, args, nargs, err, what))
		return -1;
	long sig = 0;
	for (;;) {
		if (ptrace(PTRACE_CONT, t->tid, NULL, (void *)sig) < 0) {
			hp_error_set(err, "could not run %s in thread %d (%s)", what, (int)t->tid,
				     strerror(errno));
			return -1;
		}
		sig = 0;
		int st;
		pid_t r;
		while ((r = waitpid(t->tid, &st, __WALL)) < 0 && errno == EINTR)
			;
		if (r < 0 || WIFEXITED(st) || WIFSIGNALED(st)) {
			t->dead = 1;
			hp_error_set(err, "process %d exited during the call to %s", (int)t->pid,
				     what);
			return -1;
		}
		/* Event stops: the interrupt left pending by a signal-delivery-stop at seize,
		 * or a group-stop; neither concerns our call. */
		if (st >> 16)
			continue;
		int s = WSTOPSIG(st);
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
		if (ptrace(PTRACE_GETREGS, t->tid, NULL, &regs) < 0) {
			hp_error_set(err, "could not read thread %d after %s (%s)", (int)t->tid,
				     what, strerror(errno));
			return -1;
		}
		if (s == SIGSEGV && regs.rip == 0) {
			*ret = regs.rax;
			return 0;
		}
		hp_error_set(err,
			     "%s crashed in process %d (signal %d at %#llx); the thread was "
			     "restored, but check that the process is healthy",
			     what, (int)t->pid, s, regs.rip);
		return -1;
	}
}
