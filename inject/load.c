/* load.c - hp_inject_load: memfd + remote dlopen + heapprof_start (see inject.h). */
#define _GNU_SOURCE
#include "inject/inject.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "inject/elfsym.h"
#include "inject/libcfn.h"
#include "inject/remote.h"
#include "inject/safepoint.h"
#include "inject/seccomp.h"
#include "inject/stubs.h"

struct blob {
	char *data;
	size_t len;
};

static int read_payload(const char *path, struct blob *b, struct hp_error *err)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0 || st.st_size <= 0 ||
	    !(b->data = malloc((size_t)st.st_size))) {
		hp_error_set(err, "cannot read the payload %s (%s): check the installation", path,
			     strerror(errno ? errno : EINVAL));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	b->len = 0;
	while (b->len < (size_t)st.st_size) {
		ssize_t n = read(fd, b->data + b->len, (size_t)st.st_size - b->len);
		if (n <= 0) {
			hp_error_set(err, "cannot read the payload %s (%s): check the installation",
				     path, n ? strerror(errno) : "short read");
			close(fd);
			return -1;
		}
		b->len += (size_t)n;
	}
	close(fd);
	return 0;
}

/* Writes through /proc/PID/fd/N, so the target never reads a path of ours. */
static int fill_memfd(pid_t pid, int fd, const struct blob *b, struct hp_error *err)
{
	char name[64];
	snprintf(name, sizeof name, "/proc/%d/fd/%d", (int)pid, fd);
	int w = open(name, O_WRONLY | O_CLOEXEC);
	size_t off = 0;
	while (w >= 0 && off < b->len) {
		ssize_t n = write(w, b->data + off, b->len - off);
		if (n <= 0)
			break;
		off += (size_t)n;
	}
	if (off < b->len)
		hp_error_set(err, "cannot write the payload into process %d's memfd (%s)", (int)pid,
			     strerror(errno));
	if (w >= 0)
		close(w);
	return off < b->len ? -1 : 0;
}

/* The entry points of the payload just loaded as handle from b: its link_map's l_addr
 * (the first member, a public ABI of <link.h>) is its load bias, and b the very bytes the
 * loader mapped. Asked of dlsym instead, each was a remote call in the held thread: two in
 * the attach's hold, four in its detach's. */
static int payload_fns(struct hp_thread *t, const struct blob *b, uint64_t handle,
		       struct hp_payload_fns *fns, struct hp_error *err)
{
	static const char *const names[] = {HP_START_SYMBOL, HP_RELEASE_SYMBOL, HP_STOP_SYMBOL,
					    HP_FREE_SYMBOL, HP_COLLECTOR_SYMBOL};
	uint64_t bias, a[sizeof names / sizeof *names];
	if (pread(t->mem_fd, &bias, sizeof bias, (off_t)handle) != (ssize_t)sizeof bias) {
		hp_error_set(err, "cannot read the payload's link map in process %d (%s)",
			     (int)t->pid, strerror(errno));
		return -1;
	}
	if (hp_elf_symbols_image(b->data, b->len, bias, names, a, sizeof names / sizeof *names) !=
	    (int)(sizeof names / sizeof *names)) {
		hp_error_set(err,
			     "the payload lacks one of heapprof's entry points (%s ...): the "
			     "installation is broken",
			     HP_START_SYMBOL);
		return -1;
	}
	*fns = (struct hp_payload_fns){.handle = handle,
				       .start = a[0],
				       .release = a[1],
				       .stop = a[2],
				       .free = a[3],
				       .collector = a[4]};
	return 0;
}

/* memfd_create, the blob written into it, a dlopen of it and the memfd closed. 0 with
 * *handle 0 and msg set when the dlopen failed; -1, the target put back, when anything
 * else did. */
static int dlopen_blob(struct hp_thread *t, const struct hp_libc_fns *f, const struct blob *b,
		       uint64_t *handle, char *msg, size_t msglen, struct hp_error *err)
{
	pid_t pid = t->pid;
	uint64_t a[2], rc;
	*handle = 0;
	if (hp_remote_push(t, HP_MEMFD_NAME, sizeof HP_MEMFD_NAME, &a[0], err))
		return -1;
	a[1] = MFD_CLOEXEC;
	if (hp_remote_call(t, "memfd_create", f->memfd_create, a, 2, &rc, err))
		return -1;
	int memfd = (int)rc;
	if (memfd < 0) {
		hp_error_set(err,
			     "memfd_create failed in process %d (a seccomp filter?): heapprof "
			     "cannot load into it",
			     (int)pid);
		return -1;
	}
	char path[64];
	snprintf(path, sizeof path, "/proc/self/fd/%d", memfd);
	int r = fill_memfd(pid, memfd, b, err);
	if (!r)
		r = hp_call_dlopen(t, f, path, RTLD_NOW | RTLD_LOCAL, handle, msg, msglen, err);
	/* The mapping keeps the memfd's contents; the fd itself must not stay behind. */
	if (hp_call_close(t, f, memfd, err) || r) {
		if (*handle && !t->dead)
			hp_call_dlclose(t, f, *handle, err);
		*handle = 0;
		return -1;
	}
	return 0;
}

/* dlopen's complaint when a module's initial-exec TLS finds no room left in the static
 * TLS block (glibc's optional surplus, taken by the target's own dlopened modules). */
static int no_static_tls(const char *msg)
{
	return strstr(msg, "static TLS") != NULL;
}

/* Everything from memfd_create to having our own copy of the pipe's read end: the payload
 * b, or fb (if it has one) where b finds no static TLS. On failure the target is put back:
 * started payload stopped, handle closed, fds closed. */
static int load_in_thread(struct hp_thread *t, const struct hp_libc_fns *f, const struct blob *b,
			  const struct blob *fb, const struct hp_start_args *args, int *pipe_fd,
			  struct hp_payload_fns *fns, struct hp_error *err)
{
	pid_t pid = t->pid;
	uint64_t a[1], rc, handle;
	char path[64], msg[256];
	if (dlopen_blob(t, f, b, &handle, msg, sizeof msg, err))
		return -1;
	int fallback = !handle && no_static_tls(msg);
	if (fallback && !fb->len) {
		hp_error_set(err,
			     "dlopen of the payload failed in process %d: %s; the fallback "
			     "payload, which needs none, is not installed beside it: reinstall "
			     "heapprof",
			     (int)pid, msg);
		return -1;
	}
	if (fallback) {
		if (dlopen_blob(t, f, fb, &handle, msg, sizeof msg, err))
			return -1;
		b = fb;
	}
	if (!handle) {
		hp_error_set(err, "dlopen of the payload failed in process %d: %s", (int)pid, msg);
		return -1;
	}
	if (payload_fns(t, b, handle, fns, err))
		goto undo;
	fns->fallback = fallback;
	if (hp_remote_push(t, args, sizeof *args, &a[0], err) ||
	    hp_remote_call(t, HP_START_SYMBOL, fns->start, a, 1, &rc, err))
		goto undo;
	int rfd = (int)rc;
	if (rfd < 0) {
		hp_error_set(err, "%s failed in process %d: %s", HP_START_SYMBOL, (int)pid,
			     strerror(-rfd));
		goto undo;
	}
	snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)pid, rfd);
	*pipe_fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st = {0};
	int ok = *pipe_fd >= 0 && fstat(*pipe_fd, &st) == 0 && S_ISFIFO(st.st_mode);
	if (!ok)
		hp_error_set(err, "cannot open the payload's pipe %s (%s): attach again", path,
			     *pipe_fd < 0 ? strerror(errno) : "not a pipe any more");
	/* The payload closes its copy itself: a remote close() of rfd would close whatever
	 * the target has put at that number if the payload's grace period ran out. */
	if (hp_remote_call(t, HP_RELEASE_SYMBOL, fns->release, NULL, 0, &rc, err) || !ok)
		goto stop;
	return 0;
stop:
	hp_remote_call(t, HP_STOP_SYMBOL, fns->stop, NULL, 0, &rc, err);
	if (*pipe_fd >= 0)
		close(*pipe_fd);
	*pipe_fd = -1;
undo:
	if (handle && !t->dead)
		hp_call_dlclose(t, f, handle, err);
	return -1;
}

int hp_inject_load(pid_t pid, const char *payload_path, const char *fallback_path,
		   const struct hp_start_args *args, int *pipe_fd, struct hp_payload_fns *fns,
		   struct hp_error *err)
{
	*pipe_fd = -1;
	int mapped = hp_payload_mapped(pid);
	if (mapped < 0) {
		hp_error_set(err, "process %d does not exist (or exited): check the pid", (int)pid);
		return -1;
	}
	if (mapped || hp_inject_leftovers(pid) > 0) {
		hp_error_set(err,
			     "a heapprof payload is already loaded in process %d: run "
			     "heapprof-detach %d first",
			     (int)pid, (int)pid);
		return -1;
	}
	struct hp_seccomp_status filters;
	if (hp_seccomp_precheck(pid, &filters, err))
		return -1;
	struct hp_libc_fns f;
	if (hp_libc_resolve(pid, &f, err))
		return -1;
	struct blob b = {0}, fb = {0};
	if (read_payload(payload_path, &b, err))
		return -1;
	if (fallback_path && read_payload(fallback_path, &fb, err)) {
		free(b.data);
		return -1;
	}
	/* Written before a thread is held: finding the room reads /proc/PID/maps, which took
	 * over 500 ms of the hold in a process of 3000 threads. */
	struct hp_start_args sa = *args;
	int r = hp_stubs_ensure(pid, &sa.stub_code, &sa.stub_data);
	struct hp_thread t;
	if (r < 0)
		hp_error_set(err, "could not write heapprof's stubs into process %d (%s)", (int)pid,
			     strerror(errno));
	else
		r = hp_borrow_thread(pid, &t, err);
	if (!r) {
		/* Filters can only be read from a stopped thread, and the borrowed one's are
		 * those our calls run under. */
		r = hp_seccomp_check(&t, &filters, err);
		if (!r)
			r = load_in_thread(&t, &f, &b, &fb, &sa, pipe_fd, fns, err);
		if (hp_thread_release(&t, err) && !r) {
			close(*pipe_fd);
			*pipe_fd = -1;
			r = -1;
		}
	}
	/* A payload that never started left its stubs unused. */
	if (r && hp_payload_mapped(pid) == 0)
		hp_stubs_erase_unused(pid);
	free(b.data);
	free(fb.data);
	return r;
}
