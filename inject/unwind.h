/* unwind.h - walk the call stack of a held thread with libunwind-ptrace.
 *
 * Contract: an unwinder serves the walks of one pass over a process's threads: libunwind's
 * address space with its caches, so that a frame's unwind rule, found once, serves every
 * thread stopped at the same code (a server's threads mostly wait at the same few places).
 * Make a new one for each pass: the rules hold only while the mappings stay as they were.
 * hp_unwind needs the thread held (ptrace-stopped) by us, and mem_fd open on its
 * process's /proc/PID/mem (its memory is read a page at a time there). fn is called for each frame,
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

struct hp_unwinder;

/* NULL when out of memory. */
struct hp_unwinder *hp_unwinder_new(void);
void hp_unwinder_free(struct hp_unwinder *u);

int hp_unwind(struct hp_unwinder *u, pid_t tid, int mem_fd, int want_names, hp_frame_fn fn,
	      void *ctx);

#endif
