/* safepoint.h - choose and hold one thread of the target that can safely run our calls.
 *
 * Contract: reads /proc/PID/task/TID/syscall for every thread without stopping anything
 * and tries threads in this order: blocked in a syscall other than futex, blocked in
 * futex, anything else (running). Only the candidate is seized. It is rejected if it is
 * stopped for a signal of its own (it gets it back at once, so no signal ever depends on
 * us staying alive), if it is stopped at a syscall whose instruction capstone does not
 * confirm at rip-2, or if any frame of its stack (libunwind-ptrace) lies in the dynamic
 * loader, in heapprof's payload or in an allocator, loader, fork or exit function: a
 * remote dlopen there would deadlock on a lock the thread itself holds, and a
 * heapprof_stop inside a hook would wait, through the collector, for a payload lock or
 * count the thread itself is in the middle of. A rejected thread is released at once;
 * after a pass finds none, the pass is repeated a few times after a short delay (for up to
 * 3 s when the payload was the reason). At most one thread is held at a time. On success
 * *t is held, with the trampoline's place found beforehand (hp_remote_tramp_hint), and the
 * caller must hp_thread_release it.
 */
#ifndef HEAPPROF_INJECT_SAFEPOINT_H
#define HEAPPROF_INJECT_SAFEPOINT_H

#include <sys/types.h>

#include "hperror.h"
#include "inject/ptrace.h"

int hp_borrow_thread(pid_t pid, struct hp_thread *t, struct hp_error *err);

/* The threads of pid, in /proc order; returns the count (*tids malloc'd) or -1. */
int hp_list_threads(pid_t pid, pid_t **tids);

#endif
