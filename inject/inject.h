/* inject.h - borrow a thread of a running process to load or unload the payload.
 *
 * Contract: only one thread of the target is ever stopped at a time, for as short as
 * possible; every other thread keeps running. A borrowed thread is returned with its
 * general registers, extended FP state, signal mask and interrupted syscall exactly as
 * found, and any signal that arrived for it meanwhile is handed back. On any failure the
 * target is left as found and err says what failed and what to do.
 * The caller has already checked that the target can be profiled (target.h).
 */
#ifndef HEAPPROF_INJECT_H
#define HEAPPROF_INJECT_H

#include <stdint.h>
#include <sys/types.h>

#include "hpabi.h"
#include "hperror.h"

/* The loaded payload's handle and entry points (hpabi.h). The attach finds them in the file
 * it loaded, at the load bias the loader reports, rather than by a remote dlsym each in the
 * held thread; its detach calls them the same way. */
struct hp_payload_fns {
	uint64_t handle, start, release, stop, free, collector;
	int fallback; /* the fallback payload was loaded (hp_inject_load) */
};

/* Loads the payload file into pid and starts it with args. The payload keeps each thread's
 * record in initial-exec TLS, which a dlopen can only place in glibc's static TLS surplus;
 * where the target's own modules have used it up, the fallback file (NULL: none), which
 * finds records by a hash, is loaded instead in the same hold. On success returns 0,
 * *pipe_fd is our own fd for the read end of the payload's pipe (O_CLOEXEC) and *fns says
 * where the payload is and which one it is. */
int hp_inject_load(pid_t pid, const char *payload_path, const char *fallback_path,
		   const struct hp_start_args *args, int *pipe_fd, struct hp_payload_fns *fns,
		   struct hp_error *err);

/* Stops the payload (it writes its last round to the pipe if a reader still holds it),
 * waits until no thread executes payload code, unloads it, removes the leftovers of a
 * heapprof that died (hp_inject_leftovers) and verifies that /proc/PID/maps shows no
 * heapprof mapping. 0 only when verified. known is what this session's load found (NULL
 * for a payload another process loaded), trusted while the payload is loaded as its handle;
 * otherwise the payload's entry points are asked of dlsym. */
int hp_inject_unload(pid_t pid, const struct hp_payload_fns *known, struct hp_error *err);

/* 1 if a heapprof that died left something else behind in pid (a trampoline of an
 * unfinished call, the payload's memfd still open), 0 if not, -1 if /proc can't be read.
 * hp_inject_unload removes these too; hp_inject_load refuses while there are any. */
int hp_inject_leftovers(pid_t pid);

/* The longest time any thread of a target was stopped, from its seize to its release,
 * since the last call: what an attach or a detach cost the target, for the user. */
uint64_t hp_inject_longest_stop_ns(void);

/* 1 if /proc/PID/maps shows a heapprof mapping, 0 if not, -1 if maps can't be read. */
int hp_payload_mapped(pid_t pid);

#endif
