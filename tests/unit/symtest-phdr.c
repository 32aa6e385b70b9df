#define _GNU_SOURCE
#include "symtest-phdr.h"

#include <elf.h>
#include <link.h>
#include <string.h>
#include <unistd.h>

struct search {
	uint64_t addr;
	struct symtest_module *out;
	int found;
};

static void read_build_id(const struct dl_phdr_info *info, const ElfW(Phdr) * ph,
			  struct symtest_module *m)
{
	const uint8_t *p = (const uint8_t *)(info->dlpi_addr + ph->p_vaddr);
	const uint8_t *end = p + ph->p_memsz;
	while ((size_t)(end - p) >= sizeof(ElfW(Nhdr))) {
		const ElfW(Nhdr) *n = (const void *)p;
		const uint8_t *name = p + sizeof *n;
		const uint8_t *desc = name + ((n->n_namesz + 3) & ~3u);
		if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 && !memcmp(name, "GNU", 4) &&
		    n->n_descsz <= sizeof m->build_id) {
			memcpy(m->build_id, desc, n->n_descsz);
			m->build_id_len = n->n_descsz;
			return;
		}
		p = desc + ((n->n_descsz + 3) & ~3u);
	}
}

static int visit(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	struct search *s = data;
	uint64_t lo = UINT64_MAX, hi = 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD)
			continue;
		uint64_t a = info->dlpi_addr + ph->p_vaddr;
		if (a < lo)
			lo = a;
		if (a + ph->p_memsz > hi)
			hi = a + ph->p_memsz;
	}
	if (s->addr < lo || s->addr >= hi)
		return 0;
	struct symtest_module *m = s->out;
	memset(m, 0, sizeof *m);
	m->bias = info->dlpi_addr;
	m->start = lo;
	m->end = hi;
	if (info->dlpi_name && info->dlpi_name[0]) {
		strncpy(m->path, info->dlpi_name, sizeof m->path - 1);
	} else {
		ssize_t n = readlink("/proc/self/exe", m->path, sizeof m->path - 1);
		m->path[n > 0 ? n : 0] = '\0';
	}
	for (int i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_NOTE && !m->build_id_len)
			read_build_id(info, &info->dlpi_phdr[i], m);
	s->found = 1;
	return 1;
}

int symtest_find_module(const void *addr, struct symtest_module *out)
{
	struct search s = {.addr = (uint64_t)(uintptr_t)addr, .out = out};
	dl_iterate_phdr(visit, &s);
	return s.found ? 0 : -1;
}
