#include "inject/unwind.h"

#include <libunwind-ptrace.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "inject/maps.h"

#define MAX_FRAMES 256
#define PAGE 4096u
#define CACHED_PAGES 8
#define NAMES 256

/* The walk's own view of the held thread's memory. libunwind-ptrace reads a word a
 * PTRACE_PEEKDATA: 842 of them for one walk of redis-server's main thread, mostly its
 * search of the unwind tables. Here a read fills a whole page through /proc/PID/mem, and
 * the walk keeps its last few: the thread is stopped, and what is read (its stack, unwind
 * tables) no other thread writes. */
struct walk {
	int mem_fd;
	unsigned next; /* the page to replace next */
	uint64_t at[CACHED_PAGES];
	unsigned char page[CACHED_PAGES][PAGE];
};

struct hp_unwinder {
	unw_addr_space_t as;
	struct walk w;
};

static int cached_read(struct walk *w, unw_word_t addr, unw_word_t *val)
{
	uint64_t base = addr & ~(uint64_t)(PAGE - 1);
	unsigned off = (unsigned)(addr - base);
	if (off > PAGE - sizeof *val)
		return pread(w->mem_fd, val, sizeof *val, (off_t)addr) == sizeof *val ? 0 : -1;
	unsigned i = 0;
	while (i < CACHED_PAGES && w->at[i] != base + 1)
		i++;
	if (i == CACHED_PAGES) {
		i = w->next;
		w->at[i] = 0;
		if (pread(w->mem_fd, w->page[i], PAGE, (off_t)base) != PAGE)
			return -1;
		w->at[i] = base + 1; /* 0 is never a page read */
		w->next = (i + 1) % CACHED_PAGES;
	}
	memcpy(val, w->page[i] + off, sizeof *val);
	return 0;
}

/* The walk in progress: libunwind hands the accessors the argument of unw_init_remote
 * (libunwind-ptrace's own, which its functions pass on to each other), so the cache is
 * found here. The injector walks one thread at a time. */
static struct walk *current;

/* libunwind-ptrace's accessors, memory read as above where a page can be read whole. */
static int access_mem(unw_addr_space_t as, unw_word_t addr, unw_word_t *val, int write, void *arg)
{
	if (!write && current && cached_read(current, addr, val) == 0)
		return 0;
	return _UPT_access_mem(as, addr, val, write, arg);
}

static unw_accessors_t accessors;

/* Function names by place in a file: libunwind-ptrace finds a frame's name by reading
 * /proc/PID/maps and mapping the frame's ELF file again, and looking for its debug file,
 * for every frame of every walk (2 to 6 ms of the detach's first hold of redis-server).
 * The same file at the same offset names the same function, so the names found are kept
 * for the injector's life, across passes and processes: a detach walks the threads the
 * attach walked, mostly where the attach found them. Keyed by the first frame apart, whose
 * ip libunwind looks up as is, not as a return address. */
struct named {
	uint64_t dev, ino, off;
	int first;
	char *name; /* NULL: libunwind found none */
};
static struct named names[NAMES];
static unsigned nnames, next_named;

static const struct hp_file_map *file_of(const struct hp_file_map *m, int n, uint64_t ip)
{
	int lo = 0, hi = n;
	while (lo < hi) {
		int mid = (lo + hi) / 2;
		if (ip < m[mid].lo)
			hi = mid;
		else if (ip >= m[mid].hi)
			lo = mid + 1;
		else
			return &m[mid];
	}
	return NULL;
}

/* The name of the function at the cursor (ip, the first frame or not), NULL if none. */
static const char *frame_name(unw_cursor_t *c, uint64_t ip, int first,
			      const struct hp_file_map *maps, int nmaps, char *buf, size_t len)
{
	unw_word_t off;
	const struct hp_file_map *m = maps ? file_of(maps, nmaps, ip) : NULL;
	if (!m)
		return unw_get_proc_name(c, buf, len, &off) == 0 ? buf : NULL;
	struct named key = {m->dev, m->ino, ip - m->lo + m->off, first, NULL};
	for (unsigned i = 0; i < nnames; i++)
		if (names[i].dev == key.dev && names[i].ino == key.ino && names[i].off == key.off &&
		    names[i].first == first)
			return names[i].name;
	if (unw_get_proc_name(c, buf, len, &off) == 0)
		key.name = strdup(buf);
	unsigned i = nnames < NAMES ? nnames++ : next_named++ % NAMES;
	free(names[i].name);
	names[i] = key;
	return key.name;
}

struct hp_unwinder *hp_unwinder_new(void)
{
	struct hp_unwinder *u = malloc(sizeof *u);
	if (!u)
		return NULL;
	accessors = _UPT_accessors;
	accessors.access_mem = access_mem;
	u->as = unw_create_addr_space(&accessors, 0);
	if (!u->as) {
		free(u);
		return NULL;
	}
	/* Without it each thread's walk reads /proc/PID/maps and maps the ELF file of every
	 * frame's module again: about 6 ms a thread; a detach from 1000 threads took 7.3 s
	 * without it and 1.4 s with it. */
	unw_set_caching_policy(u->as, UNW_CACHE_GLOBAL);
	return u;
}

void hp_unwinder_free(struct hp_unwinder *u)
{
	if (!u)
		return;
	unw_destroy_addr_space(u->as);
	free(u);
}

int hp_unwind(struct hp_unwinder *u, pid_t tid, int mem_fd, int want_names, hp_frame_fn fn,
	      void *ctx)
{
	void *upt = _UPT_create(tid);
	if (!upt)
		return -1;
	struct walk *w = &u->w;
	w->mem_fd = mem_fd;
	w->next = 0;
	memset(w->at, 0, sizeof w->at);
	current = w;
	struct hp_file_map *maps = NULL;
	int nmaps = want_names ? hp_maps_files(tid, &maps) : 0;
	unw_cursor_t c;
	int n = -1;
	if (unw_init_remote(&c, u->as, upt) == 0) {
		n = 0;
		do {
			unw_word_t ip;
			if (unw_get_reg(&c, UNW_REG_IP, &ip) < 0)
				break;
			char name[256];
			const char *nm = want_names
					     ? frame_name(&c, ip, n == 0, nmaps > 0 ? maps : NULL,
							  nmaps, name, sizeof name)
					     : NULL;
			n++;
			if (fn(ctx, ip, nm))
				break;
		} while (n < MAX_FRAMES && unw_step(&c) > 0);
	}
	current = NULL;
	free(maps);
	_UPT_destroy(upt);
	return n;
}
