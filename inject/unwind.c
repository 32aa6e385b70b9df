#include "inject/unwind.h"

#include <libunwind-ptrace.h>
#include <stddef.h>

#define MAX_FRAMES 256

int hp_unwind(pid_t tid, int want_names, hp_frame_fn fn, void *ctx)
{
	unw_addr_space_t as = unw_create_addr_space(&_UPT_accessors, 0);
	if (!as)
		return -1;
	void *upt = _UPT_create(tid);
	if (!upt) {
		unw_destroy_addr_space(as);
		return -1;
	}
	unw_cursor_t c;
	int n = -1;
	if (unw_init_remote(&c, as, upt) == 0) {
		n = 0;
		do {
			unw_word_t ip;
			if (unw_get_reg(&c, UNW_REG_IP, &ip) < 0)
				break;
			char name[256];
			unw_word_t off;
			const char *nm = NULL;
			if (want_names && unw_get_proc_name(&c, name, sizeof name, &off) == 0)
				nm = name;
			n++;
			if (fn(ctx, ip, nm))
				break;
		} while (n < MAX_FRAMES && unw_step(&c) > 0);
	}
	_UPT_destroy(upt);
	unw_destroy_addr_space(as);
	return n;
}
