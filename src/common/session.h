/* session.h - the registry through which heapprof-detach finds a live heapprof-attach.
 *
 * Contract: sessions live in a private run directory (/run/heapprof for root, else
 * $XDG_RUNTIME_DIR/heapprof, else /tmp/heapprof-UID), created 0700 and refused unless it is
 * ours, a real directory and mode 0700. A session is the file TARGETPID.session (0600),
 * created exclusively and locked (flock LOCK_EX) by its owner for the owner's whole life;
 * the lock, not the file, says the session is live. A file whose lock nobody holds is stale
 * and is removed by whoever finds it. The owner removes its file before it lets go of the
 * lock (hp_session_remove), so a live file is never left behind. The fd is close-on-exec:
 * a child never inherits the lock.
 */
#ifndef HEAPPROF_SESSION_H
#define HEAPPROF_SESSION_H

#include <limits.h>
#include <sys/types.h>

#include "hperror.h"

struct hp_session_info {
	pid_t attach_pid;	       /* the process holding the lock */
	unsigned long long start_time; /* the target's start time (target.h) */
	pid_t viewer_pid;	       /* 0 until the viewer runs */
	char output[PATH_MAX];	       /* the profile file, absolute */
};

struct hp_session_lock {
	int fd; /* locked; -1 when not held */
	int dirfd;
	char name[32];
	struct hp_session_info info;
};

#define HP_SESSION_INIT                                                                            \
	{                                                                                          \
		.fd = -1, .dirfd = -1                                                              \
	}

/* Fills buf with the run directory, creating and verifying it; -1 and err if unsafe. */
int hp_session_dir(char *buf, size_t len, struct hp_error *err);

/* Creates and locks the session file of target for this process (s starts as
 * HP_SESSION_INIT). A stale file is removed
 * first; a live one is refused (err names the owner). */
int hp_session_create(struct hp_session_lock *s, pid_t target, unsigned long long start_time,
		      const char *output, struct hp_error *err);

/* Records the viewer's pid in the session file. */
int hp_session_set_viewer(struct hp_session_lock *s, pid_t viewer);

/* Removes the file, then releases the lock. Safe on a session never created. */
void hp_session_remove(struct hp_session_lock *s);

/* 1 and *info filled when a live session of target exists, 0 when none does (a stale
 * file is removed), -1 and err when the run directory can't be used. */
int hp_session_live(pid_t target, struct hp_session_info *info, struct hp_error *err);

#endif
