#include "inject/libcfn.h"

#include <stdio.h>
#include <string.h>

#include "inject/elfsym.h"
#include "inject/maps.h"
#include "inject/remote.h"

enum {
	FN_DLOPEN,
	FN_DLSYM,
	FN_DLCLOSE,
	FN_DLERROR,
	FN_MEMFD,
	FN_CLOSE,
	FN_OLD_DLOPEN,
	FN_OLD_DLSYM,
	FN_OLD_DLCLOSE,
	FN_COUNT
};

int hp_libc_resolve(pid_t pid, struct hp_libc_fns *f, struct hp_error *err)
{
	static const char *const names[FN_COUNT] = {"dlopen",
						    "dlsym",
						    "dlclose",
						    "dlerror",
						    "memfd_create",
						    "close",
						    "__libc_dlopen_mode",
						    "__libc_dlsym",
						    "__libc_dlclose"};
	struct hp_module_range libc;
	int r = hp_maps_find(pid, hp_maps_is_libc, &libc);
	if (r < 0) {
		hp_error_set(err, "process %d does not exist (or exited): check the pid", (int)pid);
		return -1;
	}
	if (r == 0) {
		hp_error_set(err,
			     "process %d does not use a shared glibc (no libc.so in its maps): "
			     "heapprof can only attach to dynamically linked glibc programs",
			     (int)pid);
		return -1;
	}
	uint64_t a[FN_COUNT];
	if (hp_elf_symbols(pid, libc.path, libc.base, names, a, FN_COUNT) < 0) {
		hp_error_set(err,
			     "cannot read the symbols of %s in process %d: is the file still "
			     "there?",
			     libc.path, (int)pid);
		return -1;
	}
	*f = (struct hp_libc_fns){a[FN_DLOPEN],	 a[FN_DLSYM], a[FN_DLCLOSE],
				  a[FN_DLERROR], a[FN_MEMFD], a[FN_CLOSE]};
	if (!f->dlopen || !f->dlsym || !f->dlclose) {
		f->dlopen = a[FN_OLD_DLOPEN];
		f->dlsym = a[FN_OLD_DLSYM];
		f->dlclose = a[FN_OLD_DLCLOSE];
		f->dlerror = 0;
	}
	if (!f->dlopen || !f->dlsym || !f->dlclose || !f->memfd_create || !f->close) {
		hp_error_set(err,
			     "%s in process %d lacks dlopen or memfd_create: heapprof needs glibc "
			     ">= 2.27",
			     libc.path, (int)pid);
		return -1;
	}
	return 0;
}

static void remote_dlerror(struct hp_thread *t, const struct hp_libc_fns *f, char *msg, size_t len)
{
	uint64_t p = 0;
	snprintf(msg, len, "no reason given");
	if (f->dlerror && !hp_remote_call(t, "dlerror", f->dlerror, NULL, 0, &p, NULL) && p)
		hp_remote_read_str(t, p, msg, len);
}

int hp_call_dlopen(struct hp_thread *t, const struct hp_libc_fns *f, const char *path, int flags,
		   uint64_t *handle, char *msg, size_t msglen, struct hp_error *err)
{
	uint64_t a[2] = {0, (uint64_t)flags};
	if (hp_remote_push(t, path, strlen(path) + 1, &a[0], err) ||
	    hp_remote_call(t, "dlopen", f->dlopen, a, 2, handle, err))
		return -1;
	if (!*handle)
		remote_dlerror(t, f, msg, msglen);
	return 0;
}

int hp_call_dlsym(struct hp_thread *t, const struct hp_libc_fns *f, uint64_t handle,
		  const char *name, uint64_t *addr, struct hp_error *err)
{
	uint64_t a[2] = {handle, 0};
	if (hp_remote_push(t, name, strlen(name) + 1, &a[1], err))
		return -1;
	return hp_remote_call(t, "dlsym", f->dlsym, a, 2, addr, err);
}

int hp_call_dlclose(struct hp_thread *t, const struct hp_libc_fns *f, uint64_t handle,
		    struct hp_error *err)
{
	uint64_t rc;
	if (hp_remote_call(t, "dlclose", f->dlclose, &handle, 1, &rc, err))
		return -1;
	if ((int)rc != 0) {
		char msg[256];
		remote_dlerror(t, f, msg, sizeof msg);
		hp_error_set(err, "dlclose of the payload failed in process %d: %s", (int)t->pid,
			     msg);
		return -1;
	}
	return 0;
}

int hp_call_close(struct hp_thread *t, const struct hp_libc_fns *f, int fd, struct hp_error *err)
{
	uint64_t a = (uint64_t)fd, rc;
	return hp_remote_call(t, "close", f->close, &a, 1, &rc, err);
}
