/* libcfn.h - the target's libc functions the injector calls, and helpers around them.
 *
 * Contract: hp_libc_resolve finds dlopen, dlsym, dlclose, dlerror, memfd_create and close
 * in the target's own libc (glibc >= 2.34 exports the dl* functions from libc.so.6; older
 * glibc has __libc_dlopen_mode, __libc_dlsym and __libc_dlclose, which are used then and
 * have no dlerror). Resolution reads files only; do it before holding a thread.
 * The hp_call_* helpers run one call in a held thread; each fills err on failure.
 */
#ifndef HEAPPROF_INJECT_LIBCFN_H
#define HEAPPROF_INJECT_LIBCFN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "hperror.h"
#include "inject/ptrace.h"

struct hp_libc_fns {
	uint64_t dlopen, dlsym, dlclose, dlerror, memfd_create, close;
};

int hp_libc_resolve(pid_t pid, struct hp_libc_fns *f, struct hp_error *err);

/* handle = dlopen(path, flags); 0 with *handle == 0 is a dlopen that returned NULL, and
 * msg then holds dlerror()'s text. -1 means the call itself failed (err set). */
int hp_call_dlopen(struct hp_thread *t, const struct hp_libc_fns *f, const char *path, int flags,
		   uint64_t *handle, char *msg, size_t msglen, struct hp_error *err);

/* *addr = dlsym(handle, name); 0 (with *addr possibly 0) or -1. */
int hp_call_dlsym(struct hp_thread *t, const struct hp_libc_fns *f, uint64_t handle,
		  const char *name, uint64_t *addr, struct hp_error *err);

/* dlclose(handle); 0 when it returned 0, else -1 with err naming dlerror()'s text. */
int hp_call_dlclose(struct hp_thread *t, const struct hp_libc_fns *f, uint64_t handle,
		    struct hp_error *err);

/* close(fd) in the target. */
int hp_call_close(struct hp_thread *t, const struct hp_libc_fns *f, int fd, struct hp_error *err);

#endif
