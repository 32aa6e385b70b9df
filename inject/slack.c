/* slack.c - hp_slack_find (see slack.h). */
#include "inject/slack.h"

#include <elf.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "inject/maps.h"

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
			   &pathpos) < 4)
			continue;
		line[strcspn(line, "\n")] = '\0';
		if (pathpos && line[pathpos] == '/')
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

/* The tails of one module: after its code segment, and after its last writable one. */
struct tails {
	uint64_t code_lo, code_hi;
	uint64_t data_lo, data_hi; /* 0, 0 when there is none */
};

static int writable(const struct mapping *m, size_t n, uint64_t lo, uint64_t hi)
{
	for (size_t i = 0; i < n; i++)
		if (lo >= m[i].lo && hi <= m[i].hi)
			return !strcmp(m[i].perms, "rw-p");
	return 0;
}

static uint64_t page_up(uint64_t v)
{
	return (v + PAGE - 1) & ~(uint64_t)(PAGE - 1);
}

/* The tails of the object whose offset-0 mapping is base, x being its executable mapping;
 * 0 if they can't be told. */
static int module_tails(int mem_fd, uint64_t base, const struct mapping *x, const struct mapping *m,
			size_t n, struct tails *t)
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
	*t = (struct tails){0};
	for (int i = 0; seen && i < eh.e_phnum; i++) {
		if (ph[i].p_type != PT_LOAD)
			continue;
		uint64_t end = bias + ph[i].p_vaddr + ph[i].p_memsz;
		if ((ph[i].p_flags & PF_X) && ph[i].p_memsz == ph[i].p_filesz && end > x->lo &&
		    end < x->hi) {
			t->code_lo = (end + 63) & ~(uint64_t)63;
			t->code_hi = page_up(end) < x->hi ? page_up(end) : x->hi;
		}
		/* The loader zeroes the rest of a segment's last page after its bss. */
		if ((ph[i].p_flags & PF_W) && end > t->data_lo && end % PAGE &&
		    writable(m, n, end, page_up(end))) {
			t->data_lo = (end + 63) & ~(uint64_t)63;
			t->data_hi = page_up(end);
		}
	}
	return t->code_lo && t->code_lo < t->code_hi;
}

/* What we write must outlive any dlclose of the target's: only the executable, libc and
 * the dynamic loader qualify. */
static int never_unloaded(const struct mapping *m, const char *exe_path)
{
	return !strcmp(m->path, exe_path) || hp_maps_is_libc(m->path) || hp_maps_is_loader(m->path);
}

/* Calls fn(ctx, tails) for each module with a code tail, in address order, until it
 * returns nonzero. */
static int slack_each(pid_t pid, int mem_fd, int (*fn)(void *ctx, const struct tails *t), void *ctx)
{
	struct mapping *m;
	size_t n;
	if (read_mappings(pid, &m, &n) < 0)
		return -1;
	char exe[64], exe_path[PATH_MAX];
	snprintf(exe, sizeof exe, "/proc/%d/exe", (int)pid);
	ssize_t l = readlink(exe, exe_path, sizeof exe_path - 1);
	exe_path[l > 0 ? l : 0] = '\0';
	int r = 0;
	for (size_t i = 0; i < n && !r; i++) {
		if (strcmp(m[i].perms, "r-xp") || !m[i].path[0] || !never_unloaded(&m[i], exe_path))
			continue;
		uint64_t base = 0;
		for (size_t j = 0; j < n && !base; j++)
			if (!m[j].off && !strcmp(m[j].path, m[i].path))
				base = m[j].lo;
		struct tails t;
		if (base && module_tails(mem_fd, base, &m[i], m, n, &t))
			r = fn(ctx, &t);
	}
	free(m);
	return r;
}

static const unsigned char zero_page[PAGE];

struct find {
	int mem_fd;
	const void *bytes;
	size_t len, data_len;
	unsigned char buf[PAGE];
	uint64_t at, data_at;
};

/* The first 64-byte boundary in [lo, hi) where the target holds len bytes equal to bytes,
 * or 0. A tail is less than a page. */
static uint64_t holds(struct find *f, uint64_t lo, uint64_t hi, const void *bytes, size_t len)
{
	size_t n = (size_t)(hi - lo);
	if (n > sizeof f->buf || len > n || pread(f->mem_fd, f->buf, n, (off_t)lo) != (ssize_t)n)
		return 0;
	for (size_t o = 0; o + len <= n; o += 64)
		if (!memcmp(f->buf + o, bytes, len))
			return lo + o;
	return 0;
}

static int match(void *ctx, const struct tails *t)
{
	struct find *f = ctx;
	f->at = holds(f, t->code_lo, t->code_hi, f->bytes, f->len);
	return f->at != 0;
}

int hp_slack_find(pid_t pid, int mem_fd, const void *bytes, size_t len, uint64_t *at)
{
	struct find *f = calloc(1, sizeof *f);
	if (!f)
		return -1;
	*f = (struct find){.mem_fd = mem_fd, .bytes = bytes, .len = len};
	int r = slack_each(pid, mem_fd, match, f);
	if (r > 0)
		*at = f->at;
	free(f);
	return r;
}

int hp_slack_find_free(pid_t pid, int mem_fd, size_t len, uint64_t *at)
{
	return len <= PAGE ? hp_slack_find(pid, mem_fd, zero_page, len, at) : 0;
}

int hp_slack_zero(int mem_fd, uint64_t addr, size_t len)
{
	if (len > PAGE) {
		errno = EINVAL;
		return -1;
	}
	return pwrite(mem_fd, zero_page, len, (off_t)addr) == (ssize_t)len ? 0 : -1;
}

static int match_pair(void *ctx, const struct tails *t)
{
	struct find *f = ctx;
	if (!t->data_lo)
		return 0;
	f->at = holds(f, t->code_lo, t->code_hi, f->bytes, f->len);
	f->data_at = f->at ? holds(f, t->data_lo, t->data_hi, f->bytes, f->data_len) : 0;
	return f->data_at != 0;
}

int hp_slack_find_free_pair(pid_t pid, int mem_fd, size_t code_len, size_t data_len, uint64_t *code,
			    uint64_t *data)
{
	struct find *f = calloc(1, sizeof *f);
	if (!f)
		return -1;
	*f = (struct find){
	    .mem_fd = mem_fd, .bytes = zero_page, .len = code_len, .data_len = data_len};
	int r = code_len <= PAGE && data_len <= PAGE ? slack_each(pid, mem_fd, match_pair, f) : 0;
	if (r > 0) {
		*code = f->at;
		*data = f->data_at;
	}
	free(f);
	return r;
}
