#include "collector.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "got.h"
#include "hooks.h"
#include "hpformat.h"
#include "hpstream.h"
#include "payload.h"
#include "stacks.h"
#include "threads.h"

#define MAX_MODULES 4096u
#define SITES_PER_REC 65536u

extern _Atomic uint64_t hp_lost_unrecorded;

struct buf {
	uint8_t *p;
	size_t len, cap;
	int oom;
};

struct mod {
	uintptr_t bias, phdr;
	uint32_t id;
	uint32_t seen;
};

static struct {
	int wfd;
	pthread_t thr;
	int running;
	atomic_int stop;
	atomic_int wake; /* futex word */
	uint64_t start_ns;
	struct buf mb, sb;
	struct hp_site_tab merged;
	struct mod *mods;
	uint32_t nmods, next_mod_id;
	uint32_t seq;
	uint64_t allocs, alloc_bytes, frees, freed_bytes;
	char exe[PATH_MAX];
} c = {.wfd = -1};

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint8_t *buf_take(struct buf *b, size_t n)
{
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 65536;
		while (cap < b->len + n)
			cap *= 2;
		uint8_t *p = hp_map(cap);
		if (!p) {
			b->oom = 1;
			return NULL;
		}
		if (b->p) {
			memcpy(p, b->p, b->len);
			hp_unmap(b->p, b->cap);
		}
		b->p = p;
		b->cap = cap;
	}
	uint8_t *r = b->p + b->len;
	b->len += n;
	return r;
}

static void buf_rec(struct buf *b, uint32_t type, const void *x, uint32_t xl, const void *y,
		    uint32_t yl)
{
	uint8_t *d = buf_take(b, sizeof(struct hp_rec_hdr) + xl + yl);
	if (!d)
		return;
	d += hp_rec_put_hdr(d, type, xl + yl);
	memcpy(d, x, xl);
	if (yl)
		memcpy(d + xl, y, yl);
}

static void merge_cb(const struct hp_site_ctr *s, void *arg)
{
	(void)arg;
	hp_site_tab_add(&c.merged, s);
}

static void stack_cb(uint32_t id, const uint64_t *frames, uint32_t depth, void *arg)
{
	(void)arg;
	struct hp_stack s = {.id = id, .depth = depth};
	buf_rec(&c.sb, HP_REC_STACK, &s, sizeof s, frames, depth * (uint32_t)sizeof *frames);
}

static uint16_t build_id(const struct dl_phdr_info *info, const uint8_t **id)
{
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_NOTE)
			continue;
		const uint8_t *p = (const uint8_t *)(info->dlpi_addr + ph->p_vaddr);
		const uint8_t *end = p + ph->p_memsz;
		size_t al = ph->p_align == 8 ? 8 : 4;
		while ((size_t)(end - p) >= sizeof(ElfW(Nhdr))) {
			ElfW(Nhdr) n;
			memcpy(&n, p, sizeof n);
			size_t name_sz = (n.n_namesz + al - 1) & ~(al - 1);
			size_t desc_sz = (n.n_descsz + al - 1) & ~(al - 1);
			const uint8_t *name = p + sizeof n, *desc = name + name_sz;
			if (desc + n.n_descsz > end)
				break;
			if (n.n_type == NT_GNU_BUILD_ID && n.n_namesz == 4 &&
			    memcmp(name, "GNU", 4) == 0 && n.n_descsz <= UINT16_MAX) {
				*id = desc;
				return (uint16_t)n.n_descsz;
			}
			p = desc + desc_sz;
		}
	}
	return 0;
}

static void module_rec(uint32_t id, uint32_t flags, const struct dl_phdr_info *info)
{
	struct hp_module m = {.id = id, .flags = flags};
	const char *path = "";
	const uint8_t *bid = NULL;
	if (info) {
		uintptr_t lo, hi;
		got_module_range(info, &lo, &hi);
		path = info->dlpi_name && info->dlpi_name[0] ? info->dlpi_name : c.exe;
		m.bias = info->dlpi_addr;
		m.start = lo;
		m.end = hi;
		m.build_id_len = build_id(info, &bid);
	}
	size_t pl = strlen(path);
	m.path_len = (uint16_t)(pl > UINT16_MAX ? UINT16_MAX : pl);
	uint8_t *d =
	    buf_take(&c.mb, sizeof(struct hp_rec_hdr) + sizeof m + m.path_len + m.build_id_len);
	if (!d)
		return;
	d += hp_rec_put_hdr(d, HP_REC_MODULE, (uint32_t)(sizeof m + m.path_len + m.build_id_len));
	memcpy(d, &m, sizeof m);
	memcpy(d + sizeof m, path, m.path_len);
	if (m.build_id_len)
		memcpy(d + sizeof m + m.path_len, bid, m.build_id_len);
}

/* Runs under the loader's lock: formats records into memory, never writes the pipe. */
static int module_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	(void)arg;
	if (info->dlpi_addr == hp.base || info->dlpi_phnum == 0)
		return 0;
	for (uint32_t i = 0; i < c.nmods; i++) {
		if (c.mods[i].bias == info->dlpi_addr &&
		    c.mods[i].phdr == (uintptr_t)info->dlpi_phdr) {
			c.mods[i].seen = 1;
			return 0;
		}
	}
	if (c.nmods == MAX_MODULES)
		return 0;
	struct mod *m = &c.mods[c.nmods++];
	*m = (struct mod){.bias = info->dlpi_addr,
			  .phdr = (uintptr_t)info->dlpi_phdr,
			  .id = ++c.next_mod_id,
			  .seen = 1};
	module_rec(m->id, 0, info);
	return 0;
}

static void scan_modules(void)
{
	for (uint32_t i = 0; i < c.nmods; i++)
		c.mods[i].seen = 0;
	dl_iterate_phdr(module_cb, NULL);
	for (uint32_t i = 0; i < c.nmods;) {
		if (c.mods[i].seen) {
			i++;
			continue;
		}
		module_rec(c.mods[i].id, HP_MODULE_UNLOADED, NULL);
		c.mods[i] = c.mods[--c.nmods];
	}
}

static uint64_t rss_bytes(void)
{
	char b[128];
	int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, b, sizeof b - 1);
	close(fd);
	if (n <= 0)
		return 0;
	b[n] = 0;
	const char *p = strchr(b, ' ');
	uint64_t pages = 0;
	for (p = p ? p + 1 : b + n; *p >= '0' && *p <= '9'; p++)
		pages = pages * 10 + (uint64_t)(*p - '0');
	return pages * (uint64_t)sysconf(_SC_PAGESIZE);
}

static void sites_recs(void)
{
	struct hp_site_tab *m = &c.merged;
	uint32_t left = m->count, j = 0;
	while (left > 0) {
		uint32_t n = left < SITES_PER_REC ? left : SITES_PER_REC;
		struct hp_sites h = {.count = n};
		uint8_t *d = buf_take(&c.sb, sizeof(struct hp_rec_hdr) + sizeof h +
						 n * sizeof(struct hp_site_delta));
		if (!d)
			return;
		d += hp_rec_put_hdr(d, HP_REC_SITES,
				    (uint32_t)(sizeof h + n * sizeof(struct hp_site_delta)));
		memcpy(d, &h, sizeof h);
		d += sizeof h;
		for (uint32_t k = 0; k < n; j++) {
			const struct hp_site_ctr *s = &m->e[j];
			if (!s->key)
				continue;
			struct hp_site_delta sd = {
			    .stack_id = s->key - 1,
			    .allocs = s->allocs,
			    .alloc_bytes = s->alloc_bytes,
			    .frees = s->frees,
			    .freed_bytes = s->freed_bytes,
			};
			memcpy(d, &sd, sizeof sd);
			d += sizeof sd;
			c.allocs += s->allocs;
			c.alloc_bytes += s->alloc_bytes;
			c.frees += s->frees;
			c.freed_bytes += s->freed_bytes;
			k++;
		}
		left -= n;
	}
}

/* One round; 0, or -errno if the pipe is gone. */
static int round_once(uint32_t flags)
{
	uint64_t untracked, lost;
	hp_threads_drain(merge_cb, NULL, &untracked, &lost);
	/* Stacks first, modules second: every stack sent was captured while its modules
	 * were loaded, so the module scan that follows sees them. */
	hp_stacks_each_new(stack_cb, NULL);
	scan_modules();
	sites_recs();
	hp_site_tab_clear(&c.merged);
	struct hp_round r = {
	    .seq = ++c.seq,
	    .flags = flags,
	    .time_ns = mono_ns() - c.start_ns,
	    .rss_bytes = rss_bytes(),
	    .allocs = c.allocs,
	    .alloc_bytes = c.alloc_bytes,
	    .frees = c.frees,
	    .freed_bytes = c.freed_bytes,
	    .untracked_frees = untracked,
	    .live_blocks = c.allocs - c.frees,
	    .live_bytes = c.alloc_bytes - c.freed_bytes,
	    .lost = lost + atomic_load(&hp_lost_unrecorded) + (c.mb.oom || c.sb.oom),
	    .payload_bytes = atomic_load(&hp_mapped_bytes) + hp_stacks_bytes(),
	};
	buf_rec(&c.sb, HP_REC_ROUND, &r, sizeof r, NULL, 0);
	int rc = hp_write_all(c.wfd, c.mb.p, c.mb.len);
	if (rc == 0)
		rc = hp_write_all(c.wfd, c.sb.p, c.sb.len);
	c.mb.len = c.sb.len = 0;
	return rc;
}

static void *collector_main(void *arg)
{
	(void)arg;
	prctl(PR_SET_NAME, "heapprof", 0, 0, 0);
	struct hp_thread *self = hp_thread_self();
	if (self)
		self->guard = 1;
	const struct timespec iv = {
	    .tv_sec = hp.args.interval_ms / 1000,
	    .tv_nsec = (long)(hp.args.interval_ms % 1000) * 1000000L,
	};
	for (;;) {
		if (!atomic_load(&c.stop))
			syscall(SYS_futex, &c.wake, FUTEX_WAIT_PRIVATE, 0, &iv, NULL, 0);
		int stop = atomic_load(&c.stop);
		if (round_once(stop ? HP_ROUND_FINAL : 0) < 0) {
			hp_unpatch_all();
			break;
		}
		if (stop) {
			struct hp_end e = {.reason = HP_END_DETACH};
			uint8_t rec[sizeof(struct hp_rec_hdr) + sizeof e];
			hp_rec_put_hdr(rec, HP_REC_END, sizeof e);
			memcpy(rec + sizeof(struct hp_rec_hdr), &e, sizeof e);
			hp_write_all(c.wfd, rec, sizeof rec);
			break;
		}
	}
	close(c.wfd);
	c.wfd = -1;
	return NULL;
}

int hp_collector_start(int wfd, uint64_t start_mono_ns)
{
	c.wfd = wfd;
	c.start_ns = start_mono_ns;
	atomic_store(&c.stop, 0);
	atomic_store(&c.wake, 0);
	if (!c.mods)
		c.mods = hp_map(MAX_MODULES * sizeof *c.mods);
	if (!c.mods)
		return -ENOMEM;
	ssize_t n = readlink("/proc/self/exe", c.exe, sizeof c.exe - 1);
	c.exe[n > 0 ? n : 0] = 0;
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int rc = pthread_create(&c.thr, NULL, collector_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc)
		return -rc;
	c.running = 1;
	return 0;
}

void hp_collector_stop(void)
{
	if (!c.running)
		return;
	atomic_store(&c.stop, 1);
	atomic_store(&c.wake, 1);
	syscall(SYS_futex, &c.wake, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	pthread_join(c.thr, NULL);
	c.running = 0;
}

void hp_collector_forget(void)
{
	if (c.wfd >= 0)
		close(c.wfd);
	c.wfd = -1;
	c.running = 0;
}

void hp_collector_fini(void)
{
	if (c.mb.p)
		hp_unmap(c.mb.p, c.mb.cap);
	if (c.sb.p)
		hp_unmap(c.sb.p, c.sb.cap);
	hp_site_tab_free(&c.merged);
	if (c.mods)
		hp_unmap(c.mods, MAX_MODULES * sizeof *c.mods);
	c.mb = c.sb = (struct buf){0};
	c.mods = NULL;
}
