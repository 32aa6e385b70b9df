/* unwind.h - walk the call stack of a held thread with libunwind-ptrace.
 *
 * Contract: the thread must be held (ptrace-stopped) by us. fn is called for each frame,
 * innermost first, with its ip and, when want_names is set, the name of its function
 * (NULL if unknown); fn returns nonzero to stop the walk, e.g. before libunwind has to
 * step out of code whose unwind info it cannot read. Returns the number of frames seen,
 * or -1 if the walk could not even start.
 */
#ifndef HEAPPROF_INJECT_UNWIND_H
#define HEAPPROF_INJECT_UNWIND_H

#include <stdint.h>
#include <sys/types.h>

typedef int (*hp_frame_fn)(void *ctx, uint64_t ip, const char *name);

int hp_unwind(pid_t tid, int want_names, hp_frame_fn fn, void *ctx);

#endif
