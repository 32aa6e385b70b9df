/* remote.h - run a function inside a held thread of the target and read/write its memory.
 *
 * Contract: hp_remote_call runs fn(args...) in the thread held by t, from the registers it
 * was found with: arguments in rdi..r9, rsp below the 128-byte red zone and below every
 * byte pushed so far, 16-byte aligned at the call, orig_rax = -1 (so an interrupted syscall
 * is not rewound into our call; it is issued again on release), and all signals blocked
 * except the synchronous fault signals (the kernel resets the handler of a fault signal
 * that arrives blocked). The return address is the thread's trampoline (tramp.h), written
 * into code-segment slack through /proc/PID/mem before the first call: should we die at
 * any point after that, the thread restores itself. The call runs under PTRACE_CONT, so its
 * own syscalls stop nothing; it is over when the trampoline sets the frame's done word,
 * and the thread is then interrupted in the trampoline's wait, its result read from the
 * frame, and left in that stop (hp_thread_release restores it). A thread found back at its
 * work instead (the wait outlasted, heapprof not scheduled) is left alone and err says so.
 * A call still running after 10 s (dlopen, dlclose, heapprof_start/stop) or 5 s (the
 * rest) is abandoned: the thread is let go to finish it and restore itself, and err says
 * so; no further call runs in an abandoned thread. Any other outcome fills err too.
 * hp_remote_push copies bytes onto the thread's stack below the red zone and returns
 * their address; they stay valid until the thread is released.
 */
#ifndef HEAPPROF_INJECT_REMOTE_H
#define HEAPPROF_INJECT_REMOTE_H

#include <stddef.h>
#include <stdint.h>

#include "hperror.h"
#include "inject/ptrace.h"

int hp_remote_call(struct hp_thread *t, const char *what, uint64_t fn, const uint64_t *args,
		   size_t nargs, uint64_t *ret, struct hp_error *err);

/* Where a call's trampoline would go in pid (the one a heapprof that died left, else free
 * slack; tramp.h), found before any thread is held, since the search reads /proc/PID/maps:
 * hundreds of milliseconds in a process with thousands of threads. The first call of a hold
 * with t->tramp_hint set checks those bytes again and searches only if they changed.
 * 0 if nothing was found. */
uint64_t hp_remote_tramp_hint(pid_t pid);

int hp_remote_push(struct hp_thread *t, const void *data, size_t len, uint64_t *addr,
		   struct hp_error *err);

/* Reads a NUL-terminated string of at most len-1 bytes; 0 or -1 with errno. */
int hp_remote_read_str(struct hp_thread *t, uint64_t addr, char *buf, size_t len);

#endif
