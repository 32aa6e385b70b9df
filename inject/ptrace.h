/* ptrace.h - stop one thread of a target and give it back exactly as found.
 *
 * Contract: hp_thread_seize attaches to ONE thread with PTRACE_SEIZE + PTRACE_INTERRUPT and
 * waits for it with waitpid(tid, __WALL) only (the caller has other children). It saves
 * the general registers, the whole extended FP state (NT_X86_XSTATE, size as the kernel
 * reports it) and the signal mask. If the thread reports a signal instead of the
 * interrupt, that signal-delivery-stop becomes the stop we work from and the signal (with
 * its siginfo) is handed back on detach. hp_thread_release restores whatever was changed
 * and detaches; it is safe on every path, including after the thread died.
 * While a thread is held, SIGINT/SIGTERM/SIGHUP/SIGQUIT are blocked in the calling thread
 * so that a Ctrl-C cannot kill us in the middle of a remote call (the kernel would then
 * detach a hijacked thread); they are delivered on release.
 */
#ifndef HEAPPROF_INJECT_PTRACE_H
#define HEAPPROF_INJECT_PTRACE_H

#include <signal.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/user.h>
#include <time.h>

#include "hperror.h"

struct hp_thread {
	pid_t pid, tid;
	int mem_fd;		      /* /proc/PID/mem, for remote.c */
	struct user_regs_struct regs; /* as found */
	void *xstate;
	size_t xstate_len;
	uint64_t sigmask;
	int stop_sig; /* signal reported instead of the interrupt, handed back on detach */
	siginfo_t stop_info;
	int at_signal_stop; /* the current stop is a signal-delivery-stop */
	int modified;	    /* registers or mask differ from what was found */
	int dead;	    /* the thread (or process) exited while held */
	int attached;
	uint64_t scratch_top; /* remote.c: lowest byte of target stack used so far */
	uint64_t tramp;	      /* the trampoline's base in the target (tramp.h); 0: none yet */
	int tramp_owned;      /* written by this hold, so erased by its release */
	uint64_t tramp_hint;  /* where the trampoline was found before the hold; 0: unknown */
	uint64_t frame;	      /* the thread's frame for the trampoline, on its stack */
	int abandoned;	      /* a call outlived its timeout and finishes on its own */
	sigset_t caller_mask;
	struct timespec seized_at;
};

/* 0 on success; otherwise -errno and nothing is held: -EPERM (not allowed or already
 * traced), -ESRCH (thread gone), -EBUSY (the process is job-control stopped). err is left
 * alone so the caller can try another thread; hp_ptrace_explain turns the code into a
 * message. */
int hp_thread_seize(pid_t pid, pid_t tid, struct hp_thread *t);

/* Restores and detaches. Returns 0, or -1 with err set if the thread could not be given
 * back (it died, or the kernel refused). */
int hp_thread_release(struct hp_thread *t, struct hp_error *err);

/* Fills err with why seizing tid of pid failed with -code and what to do about it. */
void hp_ptrace_explain(pid_t pid, pid_t tid, int code, struct hp_error *err);

/* Waits up to timeout_ms for a ptrace stop or the end of thread tid: 0 and *status,
 * -ETIMEDOUT, or -errno. */
int hp_wait_thread(pid_t tid, int *status, uint64_t timeout_ms);
/* The same, and 1 as soon as ready(arg) returns nonzero, looked at between two looks for
 * a stop. */
int hp_wait_thread_or(pid_t tid, int *status, uint64_t timeout_ms, int (*ready)(void *), void *arg);

/* 1 if /proc/PID still names a live process. */
int hp_process_alive(pid_t pid);

/* The target's memory, /proc/PID/mem opened with flags | O_CLOEXEC: read and written
 * without stopping anything (a tracer's rights suffice). -1 with errno. */
int hp_open_mem(pid_t pid, int flags);

#endif
