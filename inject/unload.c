/* unload.c - hp_inject_unload and hp_payload_mapped (see inject.h). */
#define _GNU_SOURCE
#include "inject/inject.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "inject/libcfn.h"
#include "hppaths.h"
#include "inject/maps.h"
#include "inject/remote.h"
#include "inject/safepoint.h"
#include "inject/unwind.h"

#define QUIESCE_MS 2000
#define QUIESCE_DELAY_MS 10

int hp_payload_mapped(pid_t pid)
{
	struct hp_module_range m;
	return hp_maps_find(pid, hp_is_payload_mapping, &m);
}

/* Takes a reference of our own (RTLD_NOLOAD finds the payload by its DT_SONAME), stops
 * the payload and drops that reference again; *handle stays valid through the attach's
 * reference. */
static int stop_payload(pid_t pid, const struct hp_libc_fns *f, uint64_t *handle,
			struct hp_error *err)
{
	struct hp_thread t;
	if (hp_borrow_thread(pid, &t, err))
		return -1;
	char msg[256];
	uint64_t stop = 0, rc = 0;
	int r = hp_call_dlopen(&t, f, HP_PAYLOAD_SONAME, RTLD_NOW | RTLD_NOLOAD, handle, msg,
			       sizeof msg, err);
	if (!r && !*handle) {
		hp_error_set(err,
			     "process %d maps a heapprof object that is not loaded as %s: it was "
			     "not loaded by this heapprof; restart the process to remove it",
			     (int)pid, HP_PAYLOAD_SONAME);
		r = -1;
	} else if (!r) {
		r = hp_call_dlsym(&t, f, *handle, HP_STOP_SYMBOL, &stop, err);
		if (!r && !stop) {
			hp_error_set(err, "the loaded payload has no %s: it is not heapprof's",
				     HP_STOP_SYMBOL);
			r = -1;
		}
		if (!r)
			r = hp_remote_call(&t, HP_STOP_SYMBOL, stop, NULL, 0, &rc, err);
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
	uint64_t lo, hi;
	int busy;
};

/* libunwind cannot read the memfd payload's unwind info, so the walk stops at the first
 * payload frame: that frame already answers the question. */
static int frame_in_payload(void *ctx, uint64_t ip, const char *name)
{
	(void)name;
	struct busy_check *c = ctx;
	if (ip >= c->lo && ip < c->hi)
		c->busy = 1;
	return c->busy;
}

/* 1 if some thread runs payload code or has it on its stack, 0 if none, -1 on error. */
static int payload_busy(pid_t pid, const struct hp_module_range *payload, struct hp_error *err)
{
	pid_t *tids;
	int n = hp_list_threads(pid, &tids);
	if (n < 0) {
		hp_error_set(err, "process %d exited during detach", (int)pid);
		return -1;
	}
	int busy = 0;
	for (int i = 0; i < n && !busy; i++) {
		struct hp_thread t;
		int r = hp_thread_seize(pid, tids[i], &t);
		if (r == -ESRCH)
			continue;
		if (r) {
			hp_ptrace_explain(pid, tids[i], r, err);
			free(tids);
			return -1;
		}
		struct busy_check c = {payload->lo, payload->hi, 0};
		hp_unwind(t.tid, 0, frame_in_payload, &c);
		busy = c.busy;
		if (hp_thread_release(&t, err)) {
			free(tids);
			return -1;
		}
	}
	free(tids);
	return busy;
}

static int wait_quiescent(pid_t pid, struct hp_error *err)
{
	struct hp_module_range payload;
	int m = hp_maps_find(pid, hp_is_payload_mapping, &payload);
	if (m <= 0)
		return m < 0 ? -1 : 0;
	for (int waited = 0; waited < QUIESCE_MS; waited += QUIESCE_DELAY_MS) {
		int b = payload_busy(pid, &payload, err);
		if (b <= 0)
			return b;
		struct timespec d = {0, QUIESCE_DELAY_MS * 1000000L};
		nanosleep(&d, NULL);
	}
	hp_error_set(err,
		     "a thread of process %d is still inside the payload after %d ms: the payload "
		     "is stopped but stays loaded; run heapprof-detach again",
		     (int)pid, QUIESCE_MS);
	return -1;
}

static int release_attach_ref(pid_t pid, const struct hp_libc_fns *f, uint64_t handle,
			      struct hp_error *err)
{
	struct hp_thread t;
	if (hp_borrow_thread(pid, &t, err))
		return -1;
	int r = hp_call_dlclose(&t, f, handle, err);
	if (hp_thread_release(&t, err))
		r = -1;
	return r;
}

int hp_inject_unload(pid_t pid, struct hp_error *err)
{
	int m = hp_payload_mapped(pid);
	if (m < 0) {
		hp_error_set(err, "process %d does not exist (or exited): check the pid", (int)pid);
		return -1;
	}
	if (!m)
		return 0;
	struct hp_libc_fns f;
	uint64_t handle = 0;
	if (hp_libc_resolve(pid, &f, err) || stop_payload(pid, &f, &handle, err) ||
	    wait_quiescent(pid, err) || release_attach_ref(pid, &f, handle, err))
		return -1;
	m = hp_payload_mapped(pid);
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
