/* slack.c - hp_slack_find (see slack.h). */
#include "inject/slack.h"

#include <elf.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PAGE 4096u
#define MAX_PHDRS 64

struct mapping {
	uint64_t lo, hi, off;
	char perms[8];
	char path[PATH_MAX];
};

static int read_mappings(pid_t pid, struct mapping **out, size_t *n)
{
	char name[64], line[PATH_MAX + 128];
	snprintf(name, sizeof name, "/proc/%d/maps", (int)pid);
	FILE *f = fopen(name, "re");
	if (!f)
		return -1;
	struct mapping *m = NULL;
	size_t len = 0, cap = 0;
	while (fgets(line, sizeof line, f)) {
		struct mapping e = {0};
		int pathpos = 0;
		if (sscanf(line, "%lx-%lx %7s %lx %*s %*u %n", &e.lo, &e.hi, e.perms, &e.off,
			   &pathpos) < 4 ||
		    !pathpos || line[pathpos] != '/')
			continue;
		line[strcspn(line, "\n")] = '\0';
		snprintf(e.path, sizeof e.path, "%s", line + pathpos);
		if (len == cap) {
			cap = cap ? 2 * cap : 64;
			struct mapping *g = realloc(m, cap * sizeof *m);
			if (!g) {
				free(m);
				fclose(f);
				return -1;
			}
			m = g;
		}
		m[len++] = e;
	}
	fclose(f);
	*out = m;
	*n = len;
	return 0;
}

/* The end of the executable segment that lies in x, from the headers of the object whose
 * offset-0 mapping is base; 0 if it can't be told. */
static uint64_t code_end(int mem_fd, uint64_t base, const struct mapping *x)
{
	Elf64_Ehdr eh;
	Elf64_Phdr ph[MAX_PHDRS];
	if (pread(mem_fd, &eh, sizeof eh, (off_t)base) != (ssize_t)sizeof eh ||
	    memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_phentsize != sizeof(Elf64_Phdr) || !eh.e_phnum || eh.e_phnum > MAX_PHDRS)
		return 0;
	size_t len = eh.e_phnum * sizeof *ph;
	if (pread(mem_fd, ph, len, (off_t)(base + eh.e_phoff)) != (ssize_t)len)
		return 0;
	/* The first PT_LOAD maps file offset 0 at base. */
	uint64_t bias = 0;
	int seen = 0;
	for (int i = 0; i < eh.e_phnum && !seen; i++)
		if (ph[i].p_type == PT_LOAD && !ph[i].p_offset) {
			bias = base - (ph[i].p_vaddr & ~(uint64_t)(PAGE - 1));
			seen = 1;
		}
	for (int i = 0; seen && i < eh.e_phnum; i++) {
		if (ph[i].p_type != PT_LOAD || !(ph[i].p_flags & PF_X) ||
		    ph[i].p_memsz != ph[i].p_filesz)
			continue;
		uint64_t end = bias + ph[i].p_vaddr + ph[i].p_memsz;
		if (end > x->lo && end < x->hi)
			return end;
	}
	return 0;
}

/* Calls fn(ctx, lo, hi) for each slack in address order until it returns nonzero. */
static int slack_each(pid_t pid, int mem_fd, int (*fn)(void *ctx, uint64_t lo, uint64_t hi),
		      void *ctx)
{
	struct mapping *m;
	size_t n;
	if (read_mappings(pid, &m, &n) < 0)
		return -1;
	int r = 0;
	for (size_t i = 0; i < n && !r; i++) {
		if (strcmp(m[i].perms, "r-xp"))
			continue;
		uint64_t base = 0;
		for (size_t j = 0; j < n && !base; j++)
			if (!m[j].off && !strcmp(m[j].path, m[i].path))
				base = m[j].lo;
		uint64_t end = base ? code_end(mem_fd, base, &m[i]) : 0;
		if (!end)
			continue;
		uint64_t lo = (end + 63) & ~(uint64_t)63;
		uint64_t hi = (end + PAGE - 1) & ~(uint64_t)(PAGE - 1);
		if (hi > m[i].hi)
			hi = m[i].hi;
		if (lo < hi)
			r = fn(ctx, lo, hi);
	}
	free(m);
	return r;
}

struct find {
	int mem_fd;
	const void *bytes;
	size_t len;
	unsigned char *buf;
	uint64_t at;
};

static int match(void *ctx, uint64_t lo, uint64_t hi)
{
	struct find *f = ctx;
	if (hi - lo < f->len || pread(f->mem_fd, f->buf, f->len, (off_t)lo) != (ssize_t)f->len ||
	    memcmp(f->buf, f->bytes, f->len))
		return 0;
	f->at = lo;
	return 1;
}

int hp_slack_find(pid_t pid, int mem_fd, const void *bytes, size_t len, uint64_t *at)
{
	struct find f = {mem_fd, bytes, len, malloc(len), 0};
	if (!f.buf)
		return -1;
	int r = slack_each(pid, mem_fd, match, &f);
	free(f.buf);
	if (r > 0)
		*at = f.at;
	return r;
}
