/* start.c - heapprof_start / heapprof_stop / heapprof_free_memory (hpabi.h) and the
 * payload's lifetime.
 *
 * One session per load: start after stop returns -EBUSY (the injector dlcloses the
 * payload after a stop, and a fresh load starts with fresh state). heapprof_stop never
 * unmaps anything, because a thread may still be inside a hook; the collector unmaps it
 * all when the injector, having seen no other thread in payload code, calls
 * heapprof_free_memory, or the destructor has it do so (or does it itself when no
 * collector runs).
 */
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "collector.h"
#include "got.h"
#include "hooks.h"
#include "hpabi.h"
#include "hpformat.h"
#include "hpstream.h"
#include "livemap.h"
#include "payload.h"
#include "stacks.h"
#include "threads.h"

enum { ST_IDLE, ST_RUNNING, ST_STOPPED };

static pthread_mutex_t state_lock = PTHREAD_MUTEX_INITIALIZER;
static int state = ST_IDLE;
static struct hp_parent_only po_none = {.parent = 1};
/* The process the payload was loaded into; its forked children inherit the payload but
 * not its session. */
static pid_t loaded_pid;
/* The pipe's read end until the injector has its own copy (hpabi.h). */
static atomic_int pending_rfd = -1;

struct hp_payload hp = {
    .po = &po_none, .self_flip = HP_SELF_STOPPED, .alloc_flip = HP_SELF_STOPPED};

static uint64_t coarse_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

uint32_t hp_now_ms(void)
{
	return (uint32_t)(coarse_ms() - hp.start_ms);
}

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int self_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	(void)arg;
	uintptr_t lo, hi, me = (uintptr_t)&self_cb;
	got_module_range(info, &lo, &hi);
	if (me < lo || me >= hi)
		return 0;
	hp.base = info->dlpi_addr;
	hp.text_lo = lo;
	hp.text_hi = hi;
	return 1;
}

static int validate(const struct hp_start_args *a)
{
	if (!a || a->abi_version != HP_ABI_VERSION)
		return -EINVAL;
	if (a->mode != HP_MODE_BASIC && a->mode != HP_MODE_EXTENDED && a->mode != HP_MODE_FULL)
		return -EINVAL;
	if (a->interval_ms < 10 || a->max_depth < 1 || a->max_depth > HP_MAX_DEPTH)
		return -EINVAL;
	if (a->max_memory && a->max_memory < HP_MIN_MAX_MEMORY)
		return -EINVAL;
	return 0;
}

static void release_memory(void)
{
	hp_collector_fini();
	hp_stacks_fini();
	hp_live_fini();
	hp_threads_fini();
}

static int write_hello(int fd, uint64_t mono)
{
	uint8_t
	    b[sizeof(struct hp_file_header) + sizeof(struct hp_rec_hdr) + sizeof(struct hp_hello)];
	struct hp_file_header fh = {.version = HP_FORMAT_VERSION};
	memcpy(fh.magic, HP_MAGIC, sizeof fh.magic);
	struct hp_hello h = {
	    .pid = (uint32_t)getpid(),
	    .mode = hp.args.mode,
	    .interval_ms = hp.args.interval_ms,
	    .max_depth = hp.args.max_depth,
	    .sample_rate = hp.args.sample_rate,
	    .start_mono_ns = mono,
	    .start_real_ns = clock_ns(CLOCK_REALTIME),
	};
	memcpy(b, &fh, sizeof fh);
	size_t o = sizeof fh + hp_rec_put_hdr(b + sizeof fh, HP_REC_HELLO, sizeof h);
	memcpy(b + o, &h, sizeof h);
	/* The pipe is empty and far larger than this: one write cannot be short. */
	return write(fd, b, sizeof b) == (ssize_t)sizeof b ? 0 : -EIO;
}

/* *patched tells whether hooks may have run: then the memory must stay until unload. */
static int start_locked(const struct hp_start_args *args, int *patched)
{
	hp.args = *args;
	hp.start_ms = coarse_ms();
	atomic_store(&hp_round_ms, 0);
	atomic_store(&hp.rate, args->sample_rate);
	atomic_store(&hp.went_sampled, 0);
	hp.max_memory = args->max_memory;
	if (!hp.max_memory) {
		uint64_t rss = hp_rss_bytes();
		hp.max_memory = rss / 100 * HP_DEFAULT_MAX_MEMORY_PCT;
		if (hp.max_memory < HP_DEFAULT_MAX_MEMORY)
			hp.max_memory = HP_DEFAULT_MAX_MEMORY;
	}
	if (!dl_iterate_phdr(self_cb, NULL))
		return -ENOENT;
	if (hp.po == &po_none) {
		struct hp_parent_only *po = hp_map(sizeof *po);
		if (!po)
			return -ENOMEM;
		if (madvise(po, hp_page_round(sizeof *po), MADV_WIPEONFORK) < 0) {
			int e = -errno;
			hp_unmap(po, sizeof *po);
			return e;
		}
		po->parent = 1;
		hp.po = po;
	}
	/* Asked once: each asking is four syscalls in the held thread. */
	int reserve_free = hp_reserve_is_free();
	if (hp_threads_init(reserve_free) < 0 ||
	    hp_live_init(args->mode == HP_MODE_FULL && args->sample_rate > 0, reserve_free) < 0 ||
	    hp_stacks_init(hp.max_memory) < 0)
		return -ENOMEM;
	/* From here on this (borrowed) thread's own allocations are the payload's. */
	struct hp_thread *self = hp_thread_self();
	if (self)
		hp_thread_guard(self);
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0) {
		int e = -errno;
		if (self)
			hp_thread_unguard(self);
		return e;
	}
	uint64_t mono = clock_ns(CLOCK_MONOTONIC);
	int rc = write_hello(p[1], mono);
	if (rc == 0) {
		hp_hooks_resolve();
		hp_hooks_arm();
		*patched = 1;
		hp_patch_all();
		rc = hp_collector_start(p[1], mono, release_memory);
		if (rc < 0)
			hp_unpatch_all();
	}
	if (self)
		hp_thread_unguard(self);
	if (rc < 0) {
		close(p[0]);
		close(p[1]);
		return rc;
	}
	atomic_store(&pending_rfd, p[0]);
	return p[0];
}

HP_EXPORT int heapprof_start(const struct hp_start_args *args)
{
	int rc = validate(args);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&state_lock);
	if (state != ST_IDLE) {
		pthread_mutex_unlock(&state_lock);
		return -EBUSY;
	}
	int patched = 0;
	rc = start_locked(args, &patched);
	if (rc >= 0)
		state = ST_RUNNING;
	else if (patched)
		state = ST_STOPPED;
	else
		release_memory();
	pthread_mutex_unlock(&state_lock);
	return rc;
}

HP_EXPORT int heapprof_stop(void)
{
	pthread_mutex_lock(&state_lock);
	/* A child forked past the fork hook has not heard yet that the collector is its
	 * parent's: its heapprof_collector must not make a detach wait for that thread. */
	if (getpid() != loaded_pid)
		hp_collector_forget_late();
	if (state == ST_RUNNING) {
		hp_unpatch_all();
		hp_collector_stop();
		state = ST_STOPPED;
	}
	hp_collector_reap();
	pthread_mutex_unlock(&state_lock);
	return 0;
}

HP_EXPORT int heapprof_free_memory(void)
{
	pthread_mutex_lock(&state_lock);
	if (state == ST_STOPPED && getpid() == loaded_pid)
		hp_collector_free();
	pthread_mutex_unlock(&state_lock);
	return 0;
}

/* Whichever of the injector and the collector comes first closes the fd; the other finds
 * -1, so a number the target has reused since is never closed. */
HP_EXPORT int heapprof_release_pipe(void)
{
	int fd = atomic_exchange(&pending_rfd, -1);
	if (fd >= 0)
		close(fd);
	return 0;
}

__attribute__((constructor)) static void payload_load(void)
{
	loaded_pid = getpid();
}

/* In a forked child, at its exit, nothing is done: the fork may have caught the injector's
 * thread inside start or stop, holding state_lock for good. */
__attribute__((destructor)) static void payload_unload(void)
{
	if (getpid() != loaded_pid)
		return;
	heapprof_stop();
	heapprof_release_pipe();
	pthread_mutex_lock(&state_lock);
	hp_collector_end();
	pthread_mutex_unlock(&state_lock);
	release_memory();
	hp_threads_unload();
	if (hp.po != &po_none) {
		struct hp_parent_only *po = hp.po;
		hp.po = &po_none;
		hp_unmap(po, sizeof *po);
	}
}
