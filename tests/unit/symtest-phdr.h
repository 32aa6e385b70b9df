/* symtest-phdr.h - a loaded module of this process as the payload would announce it
 * (path, bias, address range, build-id), found with dl_iterate_phdr. For the tests. */
#ifndef HEAPPROF_TESTS_SYMTEST_PHDR_H
#define HEAPPROF_TESTS_SYMTEST_PHDR_H

#include <stddef.h>
#include <stdint.h>

struct symtest_module {
	char path[4096];
	uint64_t bias, start, end;
	uint8_t build_id[64];
	size_t build_id_len;
};

/* The module containing addr; the main program's path comes from /proc/self/exe.
 * 0, or -1 if no module contains it. */
int symtest_find_module(const void *addr, struct symtest_module *out);

#endif
