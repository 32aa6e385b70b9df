/* unload.c - hp_inject_unload and hp_payload_mapped (see inject.h). */
#define _GNU_SOURCE
#include "inject/inject.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "inject/libcfn.h"
#include "hppaths.h"
#include "inject/maps.h"
#include "inject/remote.h"
#include "inject/safepoint.h"
#include "inject/slack.h"
#include "inject/stubs.h"
#include "inject/tramp.h"
#include "inject/unwind.h"
#include "target.h"

/* Longer than a thread left in a dead heapprof's trampoline waits there. */
#define QUIESCE_MS ((HP_TRAMP_WAIT_S + 1) * 1000)
#define QUIESCE_DELAY_MS 10
/* As long as heapprof_stop once waited for the last round: HP_STOP_WRITE_S for a slow
 * viewer, and more. */
#define PARK_MS ((HP_STOP_WRITE_S + 10) * 1000)
#define FREE_MS 10000
#define MAX_RANGES 16
#define MAX_FDS 16
/* References a killed injector can leave: each attach or detach holds at most two. */
#define MAX_LEAKED_REFS 16

/* What a heapprof that died mid-way can leave in the target besides the payload: its
 * trampoline (tramp.h) and the memfd the payload is loaded from, if it died between
 * memfd_create and close. */
struct leftovers {
	uint64_t ranges[MAX_RANGES][2]; /* the payload's first, then the trampoline */
	int nranges;
	int ntramps;
	int fds[MAX_FDS];
	int nfds;
};

static int memfd_fds(pid_t pid, int *fds, int max)
{
	char name[64], link[256], target[64];
	snprintf(name, sizeof name, "/proc/%d/fd", (int)pid);
	DIR *d = opendir(name);
	if (!d)
		return -1;
	int n = 0;
	size_t plen = strlen("/memfd:" HP_MEMFD_NAME " ");
	struct dirent *de;
	while (n < max && (de = readdir(d))) {
		int fd = atoi(de->d_name);
		if (de->d_name[0] == '.')
			continue;
		snprintf(target, sizeof target, "/proc/%d/fd/%d", (int)pid, fd);
		ssize_t l = readlink(target, link, sizeof link - 1);
		if (l <= 0)
			continue;
		link[l] = '\0';
		if (!strncmp(link, "/memfd:" HP_MEMFD_NAME " ", plen))
			fds[n++] = fd;
	}
	closedir(d);
	return n;
}

/* 1 and *at when a trampoline is written in the target, 0 when none is, -1. */
static int stale_tramp(pid_t pid, uint64_t *at)
{
	int mem = hp_open_mem(pid, O_RDONLY);
	if (mem < 0)
		return -1;
	int r = hp_slack_find(pid, mem, hp_tramp_image(), hp_tramp_len(), at);
	close(mem);
	return r;
}

/* Once no thread can be inside it (wait_quiescent), the trampoline's bytes are zero again,
 * as they were in the target's code pages. */
static int erase_tramp(pid_t pid, const struct leftovers *lo, struct hp_error *err)
{
	for (int i = lo->nranges - lo->ntramps; i < lo->nranges; i++) {
		size_t len = (size_t)(lo->ranges[i][1] - lo->ranges[i][0]);
		int mem = hp_open_mem(pid, O_WRONLY);
		int r = mem >= 0 ? hp_slack_zero(mem, lo->ranges[i][0], len) : -1;
		if (mem >= 0)
			close(mem);
		if (r < 0) {
			hp_error_set(err,
				     "could not erase the trampoline a killed heapprof left in "
				     "process %d (%s); it is unused and harmless",
				     (int)pid, strerror(errno));
			return -1;
		}
	}
	return 0;
}

static int find_leftovers(pid_t pid, struct leftovers *lo)
{
	memset(lo, 0, sizeof *lo);
	struct hp_module_range payload;
	int m = hp_maps_find(pid, hp_is_payload_mapping, &payload);
	if (m < 0)
		return -1;
	if (m) {
		lo->ranges[0][0] = payload.lo;
		lo->ranges[0][1] = payload.hi;
		lo->nranges = 1;
	}
	uint64_t at;
	int t = stale_tramp(pid, &at);
	if (t > 0) {
		lo->ranges[lo->nranges][0] = at;
		lo->ranges[lo->nranges][1] = at + hp_tramp_len();
	}
	int f = memfd_fds(pid, lo->fds, MAX_FDS);
	if (t < 0 || f < 0)
		return -1;
	lo->ntramps = t;
	lo->nranges += t;
	lo->nfds = f;
	return 0;
}

int hp_inject_leftovers(pid_t pid)
{
	struct leftovers lo;
	if (find_leftovers(pid, &lo) < 0)
		return -1;
	return lo.ntramps + lo.nfds > 0;
}

int hp_payload_mapped(pid_t pid)
{
	struct hp_module_range m;
	return hp_maps_find(pid, hp_is_payload_mapping, &m);
}

/* The payload's collector thread (hpabi.h), found by stop_payload. */
struct collector {
	uint64_t at;	  /* heapprof_collector in the target; 0: no payload loaded */
	uint64_t free_fn; /* heapprof_free_memory */
	struct hp_collector_state st;
	pid_t tid; /* st.tid as this process numbers threads (host_tid), once parked */
};

/* The last id of the NSpid line of task tid of pid (of pid when tid is 0): the id in the
 * task's own PID namespace; its count of ids in *depth. 0 without the line. */
static pid_t innermost_id(pid_t pid, pid_t tid, int *depth)
{
	char line[256];
	pid_t id = 0;
	*depth = 0;
	if (hp_task_status_field(pid, tid, "NSpid", line, sizeof line) < 0)
		return 0;
	for (char *p = line, *end;; p = end) {
		long v = strtol(p, &end, 10);
		if (end == p)
			break;
		id = (pid_t)v;
		(*depth)++;
	}
	return id;
}

/* The thread of pid that calls itself inner (the payload's gettid): in a PID namespace (a
 * container) that is the namespace's number, not the one /proc and ptrace use here. 0
 * when no thread has it any more. */
static pid_t host_tid(pid_t pid, pid_t inner)
{
	int depth;
	innermost_id(pid, 0, &depth);
	if (depth <= 1)
		return inner;
	pid_t *tids, found = 0;
	int n = hp_list_threads(pid, &tids);
	for (int i = 0; i < n && !found; i++)
		if (innermost_id(pid, tids[i], &depth) == inner)
			found = tids[i];
	if (n >= 0)
		free(tids);
	return found;
}

/* The entry points of the payload loaded as handle into the held thread's process: known's
 * when it is that load's, else from dlsym. *fresh tells which. */
static int entry_points(struct hp_thread *t, const struct hp_libc_fns *f, uint64_t handle,
			const struct hp_payload_fns *known, struct hp_payload_fns *fns, int *fresh,
			struct hp_error *err)
{
	*fresh = !known || known->handle != handle;
	if (!*fresh) {
		*fns = *known;
		return 0;
	}
	const char *names[] = {HP_RELEASE_SYMBOL, HP_STOP_SYMBOL, HP_FREE_SYMBOL,
			       HP_COLLECTOR_SYMBOL};
	uint64_t *addrs[] = {&fns->release, &fns->stop, &fns->free, &fns->collector};
	for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
		if (hp_call_dlsym(t, f, handle, names[i], addrs[i], err))
			return -1;
		if (!*addrs[i]) {
			hp_error_set(err,
				     "the payload loaded in process %d has no %s: it is not this "
				     "heapprof's; restart the process to remove it",
				     (int)t->pid, names[i]);
			return -1;
		}
	}
	return 0;
}

/* Takes a reference of our own (RTLD_NOLOAD finds the payload by its DT_SONAME), stops
 * the payload and drops that reference again; *handle and col's addresses stay valid
 * through the attach's reference. */
static int stop_payload(pid_t pid, const struct hp_libc_fns *f, const struct hp_payload_fns *known,
			uint64_t *handle, struct collector *col, struct hp_error *err)
{
	struct hp_thread t;
	if (hp_borrow_thread(pid, &t, err))
		return -1;
	char msg[256];
	uint64_t rc = 0;
	struct hp_payload_fns fns = {0};
	int fresh = 1;
	int r = hp_call_dlopen(&t, f, HP_PAYLOAD_SONAME, RTLD_NOW | RTLD_NOLOAD, handle, msg,
			       sizeof msg, err);
	if (!r && !*handle) {
		hp_error_set(err,
			     "process %d maps a heapprof object that is not loaded as %s: it was "
			     "not loaded by this heapprof; restart the process to remove it",
			     (int)pid, HP_PAYLOAD_SONAME);
		r = -1;
	} else if (!r) {
		r = entry_points(&t, f, *handle, known, &fns, &fresh, err);
		col->free_fn = fns.free;
		col->at = fns.collector;
		/* A heapprof-attach that died before it took its copy of the pipe's read end
		 * left the payload's own as the only reader: the last round would wait for it
		 * (hpabi.h). The load that found known took its copy. */
		if (!r && fresh)
			r = hp_remote_call(&t, HP_RELEASE_SYMBOL, fns.release, NULL, 0, &rc, err);
		if (!r)
			r = hp_remote_call(&t, HP_STOP_SYMBOL, fns.stop, NULL, 0, &rc, err);
		if (!r && (int)rc < 0) {
			hp_error_set(err,
				     "%s failed in process %d (%s): the payload stays loaded; try "
				     "heapprof-detach again",
				     HP_STOP_SYMBOL, (int)pid, strerror(-(int)rc));
			r = -1;
		}
		if (!t.dead && hp_call_dlclose(&t, f, *handle, err))
			r = -1;
	}
	if (hp_thread_release(&t, err))
		r = -1;
	return r;
}

struct busy_check {
	const struct leftovers *lo;
	int busy;
};

/* libunwind cannot read the memfd payload's unwind info (nor a trampoline's), so the walk
 * stops at the first such frame: that frame already answers the question. */
static int frame_in_payload(void *ctx, uint64_t ip, const char *name)
{
	(void)name;
	struct busy_check *c = ctx;
	for (int i = 0; i < c->lo->nranges; i++)
		if (ip >= c->lo->ranges[i][0] && ip < c->lo->ranges[i][1])
			c->busy = 1;
	return c->busy;
}

/* 1 if some thread but the parked collector (tid skip) runs payload or trampoline code or
 * has it on its stack, 0 if none, -1 on error. */
static int payload_busy(pid_t pid, const struct leftovers *lo, pid_t skip, struct hp_error *err)
{
	pid_t *tids;
	int n = hp_list_threads(pid, &tids);
	if (n < 0) {
		hp_error_set(err, "process %d exited during detach", (int)pid);
		return -1;
	}
	struct hp_unwinder *u = hp_unwinder_new();
	if (!u) {
		free(tids);
		hp_ptrace_explain(pid, pid, -ENOMEM, err);
		return -1;
	}
	int busy = 0;
	for (int i = 0; i < n && !busy; i++) {
		if (tids[i] == skip)
			continue;
		struct hp_thread t;
		int r = hp_thread_seize(pid, tids[i], &t);
		if (r == -ESRCH)
			continue;
		if (r) {
			hp_ptrace_explain(pid, tids[i], r, err);
			busy = -1;
			break;
		}
		struct busy_check c = {lo, 0};
		hp_unwind(u, t.tid, t.mem_fd, 0, frame_in_payload, &c);
		busy = c.busy;
		if (hp_thread_release(&t, err))
			busy = -1;
	}
	hp_unwinder_free(u);
	free(tids);
	return busy;
}

static void sleep_ms(long ms)
{
	struct timespec d = {ms / 1000, ms % 1000 * 1000000L};
	nanosleep(&d, NULL);
}

/* 1 while the collector's thread is inside payload code. */
static int collector_in_payload(const struct collector *col)
{
	return col->st.phase == HP_COLLECTOR_PARKED || col->st.phase == HP_COLLECTOR_FREEING;
}

/* Holding no thread, waits for the collector to write its last round and park. */
static int wait_parked(pid_t pid, struct collector *col, struct hp_error *err)
{
	if (!col->at)
		return 0;
	int mem = hp_open_mem(pid, O_RDONLY), r = 1;
	for (int waited = 0; r > 0; waited++) {
		if (mem < 0 || pread(mem, &col->st, sizeof col->st, (off_t)col->at) !=
				   (ssize_t)sizeof col->st) {
			hp_error_set(err, "process %d exited during detach", (int)pid);
			r = -1;
		} else if (col->st.phase != HP_COLLECTOR_RUNNING) {
			r = 0;
		} else if (waited >= PARK_MS) {
			hp_error_set(err,
				     "the payload in process %d has not finished its last round "
				     "after %d s: it is stopped but stays loaded; run "
				     "heapprof-detach again",
				     (int)pid, PARK_MS / 1000);
			r = -1;
		} else {
			sleep_ms(1);
		}
	}
	if (mem >= 0)
		close(mem);
	if (!r)
		col->tid = host_tid(pid, col->st.tid);
	return r;
}

static int wait_quiescent(pid_t pid, const struct leftovers *lo, const struct collector *col,
			  struct hp_error *err)
{
	if (!lo->nranges)
		return 0;
	pid_t skip = collector_in_payload(col) ? col->tid : 0;
	for (int waited = 0; waited < QUIESCE_MS; waited += QUIESCE_DELAY_MS) {
		int b = payload_busy(pid, lo, skip, err);
		if (b <= 0)
			return b;
		sleep_ms(QUIESCE_DELAY_MS);
	}
	hp_error_set(err,
		     "a thread of process %d is still inside the payload after %d ms: the payload "
		     "is stopped but stays loaded; run heapprof-detach again",
		     (int)pid, QUIESCE_MS);
	return -1;
}

/* Once no other thread is inside the payload, the parked collector unmaps the payload's
 * memory, while no thread of the target is held; the dlclose after it then has little to
 * do in its borrowed thread. Should the collector not end in time, that dlclose's
 * destructor joins it. */
static int free_payload_memory(pid_t pid, const struct collector *col, struct hp_error *err)
{
	if (!collector_in_payload(col))
		return 0;
	if (col->st.phase == HP_COLLECTOR_PARKED) {
		struct hp_thread t;
		uint64_t rc = 0;
		if (hp_borrow_thread(pid, &t, err))
			return -1;
		int r = hp_remote_call(&t, HP_FREE_SYMBOL, col->free_fn, NULL, 0, &rc, err);
		if (hp_thread_release(&t, err) || r)
			return -1;
	}
	char task[64];
	snprintf(task, sizeof task, "/proc/%d/task/%d", (int)pid, (int)col->tid);
	for (int waited = 0; col->tid && waited < FREE_MS && access(task, F_OK) == 0; waited++)
		sleep_ms(1);
	return 0;
}

/* Drops the attach's reference (handle 0: the payload was not loaded) and closes the
 * leftover memfd in one borrowed thread, then erases a leftover trampoline. */
static int release_attach_ref(pid_t pid, const struct hp_libc_fns *f, uint64_t handle,
			      const struct leftovers *lo, struct hp_error *err)
{
	struct hp_thread t;
	if (hp_borrow_thread(pid, &t, err))
		return -1;
	int r = handle ? hp_call_dlclose(&t, f, handle, err) : 0;
	/* Still loaded: an injector killed between a dlopen and its dlclose (the attach's
	 * RTLD_NOLOAD reference around heapprof_stop) left a reference. Nothing but heapprof
	 * opens the payload by its soname, and the session lock keeps every other heapprof
	 * out, so these are dropped too: each round takes one more reference, which proves
	 * the payload still loaded, and drops two. */
	for (int i = 0; handle && !r && i < MAX_LEAKED_REFS && hp_payload_mapped(pid) == 1; i++) {
		uint64_t h = 0;
		char msg[256];
		r = hp_call_dlopen(&t, f, HP_PAYLOAD_SONAME, RTLD_NOW | RTLD_NOLOAD, &h, msg,
				   sizeof msg, err);
		if (r || !h)
			break;
		r = hp_call_dlclose(&t, f, h, err);
		if (!r)
			r = hp_call_dlclose(&t, f, h, err);
	}
	for (int i = 0; !r && i < lo->nfds; i++)
		r = hp_call_close(&t, f, lo->fds[i], err);
	if (hp_thread_release(&t, err))
		r = -1;
	return r ? r : erase_tramp(pid, lo, err);
}

int hp_inject_unload(pid_t pid, const struct hp_payload_fns *known, struct hp_error *err)
{
	struct leftovers lo;
	if (find_leftovers(pid, &lo) < 0) {
		hp_error_set(err, "process %d does not exist (or exited): check the pid", (int)pid);
		return -1;
	}
	int m = lo.nranges > lo.ntramps;
	if (!m && !lo.ntramps && !lo.nfds)
		return 0;
	struct hp_libc_fns f;
	uint64_t handle = 0;
	struct collector col = {0};
	if (hp_libc_resolve(pid, &f, err) ||
	    (m && stop_payload(pid, &f, known, &handle, &col, err)) ||
	    wait_parked(pid, &col, err) || wait_quiescent(pid, &lo, &col, err) ||
	    free_payload_memory(pid, &col, err) || release_attach_ref(pid, &f, handle, &lo, err))
		return -1;
	m = hp_payload_mapped(pid);
	if (m == 0 && hp_stubs_erase_unused(pid) < 0) {
		hp_error_set(err, "could not erase heapprof's unused stubs in process %d (%s)",
			     (int)pid, strerror(errno));
		return -1;
	}
	if (m != 0) {
		hp_error_set(err,
			     m < 0 ? "process %d exited during detach"
				   : "process %d still maps the payload after dlclose (something "
				     "else holds a reference to it); it is stopped and harmless",
			     (int)pid);
		return -1;
	}
	return 0;
}
