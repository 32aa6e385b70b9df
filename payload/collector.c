#include "collector.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "buildid.h"
#include "got.h"
#include "hooks.h"
#include "hpformat.h"
#include "hpstream.h"
#include "livemap.h"
#include "payload.h"
#include "stacks.h"
#include "threads.h"

#define MAX_MODULES 4096u
/* Records of these many entries fit in a buffer's first BUF_FIRST bytes (sb_take). */
#define SITES_PER_REC 1024u
#define LIVE_PER_REC 1024u
/* Once stopping, how long the last round waits for a pipe nobody drains before giving the
 * stream up: STOP_STALL_NS without a byte taken, or HP_STOP_WRITE_S in all. A viewer
 * reading a busy server's modules with libdw on a loaded machine can take nothing for over
 * a second and still be alive; the injector waits longer than that for heapprof_stop. */
#define STOP_STALL_NS 3000000000ull
#define STOP_WRITE_NS (HP_STOP_WRITE_S * 1000000000ull)

extern _Atomic uint64_t hp_lost_unrecorded;

struct buf {
	uint8_t *p;
	size_t len, cap;
	int oom;
};

struct mod {
	uintptr_t bias, phdr;
	uintptr_t lo, hi; /* its mapped range */
	uint32_t id;
	uint8_t seen;
	uint8_t gone; /* unloaded; its UNLOADED record waits one round */
};

/* The module table and mb are shared with hp_collector_note_modules, which a dlopen in any
 * thread calls; noting says whether a collector runs. */
static pthread_mutex_t mods_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int noting;

static struct {
	atomic_int wfd; /* exchanged for -1 before a close: a forked child may close its copy */
	dev_t pipe_dev; /* what wfd is, for a child that finds it late */
	ino_t pipe_ino;
	pthread_t thr;
	int running; /* thr is to be joined */
	void (*free_all)(void);
	atomic_int stop;
	atomic_int wake; /* futex word */
	uint64_t start_ns;
	uint64_t stop_by;  /* when writes give up, once stopping; 0 before */
	int taking_stacks; /* the round's stacks are going into sb (sb_flush) */
	int flush_rc;	   /* the first failed write of the round's early flushes; 0 */
	struct buf mb, mb_spare, sb;
	/* Loads into the range of a module already sent, each with the first stack id
	 * interned after its load began in its MODULE record's reserved field: the viewer
	 * must read the stacks of the module it replaces first (held_emit). nheld: records. */
	struct buf hold;
	atomic_uint nheld;
	struct hp_site_tab merged;
	struct mod *mods;
	uint32_t nmods, next_mod_id;
	uint32_t seq;
	struct hp_sum prev; /* the threads' totals at the previous round */
	/* Full mode: every round's sites' allocations less their frees, weighted (HP_FX),
	 * since start; modulo 2^64, read as signed (live_sums_add). */
	uint64_t live_fx, live_bytes_fx;
	char exe[PATH_MAX];
} c = {.wfd = -1};

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#define BUF_FIRST 65536u

/* A buffer's first BUF_FIRST bytes are mapped at the start, before anything is admitted
 * against max_memory, so they count as the fixed part. The round's records go out
 * whenever they fill it (sb_take), so only a record larger than that makes it grow: that
 * is asked for, and a refusal switches the session to sampling, but the buffer grows all
 * the same, since a record left out would leave later ones naming stacks never sent. */
static uint8_t *buf_take(struct buf *b, size_t n)
{
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : BUF_FIRST;
		while (cap < b->len + n)
			cap *= 2;
		if (b->cap)
			hp_mem_admit(cap - b->cap);
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

static int buf_first(struct buf *b)
{
	if (b->cap)
		return 0;
	b->p = hp_map(BUF_FIRST);
	if (!b->p)
		return -1;
	b->cap = BUF_FIRST;
	return 0;
}

static uint8_t *sb_take(size_t n);
static void sb_rec(uint32_t type, const void *x, uint32_t xl, const void *y, uint32_t yl);

static void merge_cb(const struct hp_site_ctr *s, void *arg)
{
	(void)arg;
	hp_site_tab_add(&c.merged, s);
}

/* The held loads (c.hold) whose first stack id is at most upto go into sb, in the order they
 * were noted, with the reserved field zeroed as the format wants it. A record is sized under
 * mods_lock, given its room in sb without it (sb_take may flush, which takes the lock), and
 * copied under it: only the collector takes records off the front. */
static void held_emit(uint32_t upto)
{
	while (atomic_load_explicit(&c.nheld, memory_order_relaxed)) {
		struct hp_rec_hdr h;
		struct hp_module m;
		pthread_mutex_lock(&mods_lock);
		memcpy(&h, c.hold.p, sizeof h);
		memcpy(&m, c.hold.p + sizeof h, sizeof m);
		pthread_mutex_unlock(&mods_lock);
		if (m.reserved > upto)
			return;
		size_t n = sizeof h + h.len;
		uint8_t *d = sb_take(n);
		pthread_mutex_lock(&mods_lock);
		if (d) {
			memcpy(d, c.hold.p, n);
			memset(d + sizeof h + offsetof(struct hp_module, reserved), 0,
			       sizeof m.reserved);
		}
		memmove(c.hold.p, c.hold.p + n, c.hold.len - n);
		c.hold.len -= n;
		atomic_fetch_sub(&c.nheld, 1);
		pthread_mutex_unlock(&mods_lock);
	}
}

static void stack_cb(uint32_t id, const uint64_t *frames, uint32_t depth, void *arg)
{
	(void)arg;
	held_emit(id);
	struct hp_stack s = {.id = id, .depth = depth};
	sb_rec(HP_REC_STACK, &s, sizeof s, frames, depth * (uint32_t)sizeof *frames);
}

/* 0, or -1 when b had no room (b->oom: the round counts it lost). */
static int module_rec(struct buf *b, const struct mod *mod, const struct dl_phdr_info *info,
		      uint32_t first_stack)
{
	struct hp_module m = {.id = mod->id,
			      .bias = info->dlpi_addr,
			      .start = mod->lo,
			      .end = mod->hi,
			      .reserved = first_stack};
	const char *path = info->dlpi_name && info->dlpi_name[0] ? info->dlpi_name : c.exe;
	const uint8_t *bid = NULL;
	m.build_id_len = hp_build_id(info, &bid);
	size_t pl = strlen(path);
	m.path_len = (uint16_t)(pl > UINT16_MAX ? UINT16_MAX : pl);
	uint8_t *d =
	    buf_take(b, sizeof(struct hp_rec_hdr) + sizeof m + m.path_len + m.build_id_len);
	if (!d)
		return -1;
	d += hp_rec_put_hdr(d, HP_REC_MODULE, (uint32_t)(sizeof m + m.path_len + m.build_id_len));
	memcpy(d, &m, sizeof m);
	memcpy(d + sizeof m, path, m.path_len);
	if (m.build_id_len)
		memcpy(d + sizeof m + m.path_len, bid, m.build_id_len);
	return 0;
}

/* Runs under the loader's lock and mods_lock: formats records into memory, never writes
 * the pipe. arg: the first stack id that may lie in a module loaded now (a uint32_t). */
static int module_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	if (info->dlpi_addr == hp.base || info->dlpi_phnum == 0)
		return 0;
	for (uint32_t i = 0; i < c.nmods; i++) {
		if (!c.mods[i].gone && c.mods[i].bias == info->dlpi_addr &&
		    c.mods[i].phdr == (uintptr_t)info->dlpi_phdr) {
			c.mods[i].seen = 1;
			return 0;
		}
	}
	if (c.nmods == MAX_MODULES)
		return 0;
	struct mod *m = &c.mods[c.nmods];
	*m = (struct mod){.bias = info->dlpi_addr,
			  .phdr = (uintptr_t)info->dlpi_phdr,
			  .id = ++c.next_mod_id,
			  .seen = 1};
	got_module_range(info, &m->lo, &m->hi);
	/* A library unloaded and another loaded at its addresses within one round: the
	 * stacks of the first, interned before this load began, must reach the viewer
	 * before the record that replaces it there (held_emit). */
	int reuses = 0;
	for (uint32_t i = 0; i < c.nmods && !reuses; i++)
		reuses = c.mods[i].lo < m->hi && m->lo < c.mods[i].hi;
	c.nmods++;
	if (!reuses) {
		(void)module_rec(&c.mb, m, info, 0);
		return 0;
	}
	if (module_rec(&c.hold, m, info, *(const uint32_t *)arg) == 0)
		atomic_fetch_add(&c.nheld, 1);
	return 0;
}

static void drop_gone(void)
{
	for (uint32_t i = 0; i < c.nmods;) {
		if (!c.mods[i].gone) {
			i++;
			continue;
		}
		sb_rec(HP_REC_MODULE,
		       &(struct hp_module){.id = c.mods[i].id, .flags = HP_MODULE_UNLOADED},
		       sizeof(struct hp_module), NULL, 0);
		c.mods[i] = c.mods[--c.nmods];
	}
}

/* Under mods_lock, after the round's stacks went into sb. A module found unloaded is
 * announced in sb a round later (at once in the final round): a stack captured in it just
 * before its dlclose may have been interned after this round's stacks were taken, and the
 * viewer must still know the module when that stack arrives. first: module_cb's arg. */
static void scan_modules(int final, uint32_t first)
{
	drop_gone();
	for (uint32_t i = 0; i < c.nmods; i++)
		c.mods[i].seen = 0;
	dl_iterate_phdr(module_cb, &first);
	for (uint32_t i = 0; i < c.nmods; i++)
		c.mods[i].gone = !c.mods[i].seen;
	if (final)
		drop_gone();
}

void hp_collector_note_modules(uint32_t first_stack)
{
	if (!atomic_load(&noting))
		return;
	pthread_mutex_lock(&mods_lock);
	if (atomic_load(&noting))
		dl_iterate_phdr(module_cb, &first_stack);
	pthread_mutex_unlock(&mods_lock);
}

uint64_t hp_rss_bytes(void)
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

/* Non-blocking writes, so a stop is never held up for good by a stalled reader. */
static int write_out(const void *buf, size_t len)
{
	const uint8_t *p = buf;
	uint64_t stall_by = 0;
	while (len) {
		ssize_t n = write(c.wfd, p, len);
		if (n > 0) {
			p += n;
			len -= (size_t)n;
			stall_by = 0;
			continue;
		}
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			return -errno;
		struct pollfd pfd = {.fd = c.wfd, .events = POLLOUT};
		poll(&pfd, 1, 100);
		if (atomic_load(&c.stop)) {
			uint64_t now = mono_ns();
			if (!c.stop_by)
				c.stop_by = now + STOP_WRITE_NS;
			if (!stall_by)
				stall_by = now + STOP_STALL_NS;
			if (now > stall_by || now > c.stop_by)
				return -ETIMEDOUT;
		}
	}
	return 0;
}

/* The module records so far, after a scan (whole: scan_modules, as at a round's end; else
 * only the modules loaded since): the other buffer takes mb's place, under mods_lock since
 * a dlopen in any thread writes there. mods_done gives it back once written. */
static struct buf mods_take(int whole, int final)
{
	pthread_mutex_lock(&mods_lock);
	uint32_t first = hp_stacks_end();
	if (whole)
		scan_modules(final, first);
	else
		dl_iterate_phdr(module_cb, &first);
	struct buf mods = c.mb;
	c.mb = c.mb_spare;
	pthread_mutex_unlock(&mods_lock);
	return mods;
}

static void mods_done(struct buf *mods)
{
	mods->len = 0;
	c.mb_spare = *mods;
}

/* sb is full: what it holds goes out now, so that it keeps the size max_memory counted.
 * While the round's stacks go in, the modules loaded since the last scan go first, as
 * round_once sends them: a stack may lie in one. After a failed write nothing more is
 * written; round_once returns the error. */
static void sb_flush(void)
{
	if (!c.flush_rc && c.taking_stacks) {
		struct buf mods = mods_take(0, 0);
		c.flush_rc = write_out(mods.p, mods.len);
		mods_done(&mods);
	}
	if (!c.flush_rc)
		c.flush_rc = write_out(c.sb.p, c.sb.len);
	c.sb.len = 0;
}

static uint8_t *sb_take(size_t n)
{
	if (c.sb.len && c.sb.len + n > c.sb.cap)
		sb_flush();
	return buf_take(&c.sb, n);
}

static void sb_rec(uint32_t type, const void *x, uint32_t xl, const void *y, uint32_t yl)
{
	uint8_t *d = sb_take(sizeof(struct hp_rec_hdr) + xl + yl);
	if (!d)
		return;
	d += hp_rec_put_hdr(d, type, xl + yl);
	memcpy(d, x, xl);
	if (yl)
		memcpy(d + xl, y, yl);
}

static uint64_t fx_round(uint64_t v)
{
	return (v + HP_FX_ONE / 2) >> HP_FX;
}

/* A site's bytes: implied by an exact size key, else its companion's (threads.h). */
static void put_site(uint8_t **d, const struct hp_site_ctr *s)
{
	uint32_t code = hp_site_key_code(s->key), kind = code >> 24;
	uint64_t size = kind == HP_SIZE_EXACT  ? (code & 0xffffffu)
			: kind == HP_SIZE_POW2 ? 1ull << (code & 63)
					       : 0;
	uint64_t ab, fb;
	if (!hp_site_has_bytes(s->key)) {
		ab = s->allocs * size;
		fb = s->frees * size;
	} else {
		const struct hp_site_ctr *b = hp_site_tab_find(&c.merged, s->key | HP_SITE_BYTES);
		ab = b ? b->allocs : 0;
		fb = b ? b->frees : 0;
	}
	struct hp_site_delta sd = {
	    .stack_id = hp_site_key_stack(s->key),
	    .size_kind = kind,
	    .size = size,
	    .allocs = fx_round(s->allocs),
	    .alloc_bytes = fx_round(ab),
	    .frees = fx_round(s->frees),
	    .freed_bytes = fx_round(fb),
	    .temp_frees = fx_round(s->temp_frees),
	};
	memcpy(*d, &sd, sizeof sd);
	*d += sizeof sd;
}

/* Basic and extended modes: the threads count frees (and basic also allocations) in their
 * totals only; this round's share goes to the (0, HP_SIZE_NONE) entry. */
static void totals_site(const struct hp_sum *now)
{
	uint64_t key = hp_site_key(0, (uint32_t)HP_SIZE_NONE << 24);
	struct hp_site_ctr s = {.key = key, .frees = (now->frees - c.prev.frees) << HP_FX},
			   b = {.key = key | HP_SITE_BYTES,
				.frees = (now->freed_bytes - c.prev.freed_bytes) << HP_FX};
	if (hp.args.mode == HP_MODE_BASIC) {
		s.allocs = (now->allocs - c.prev.allocs) << HP_FX;
		b.allocs = (now->alloc_bytes - c.prev.alloc_bytes) << HP_FX;
	} else if (!s.frees) {
		return;
	}
	hp_site_tab_add(&c.merged, &s);
	hp_site_tab_add(&c.merged, &b);
}

/* Full mode: the round's sites into the session's live sums (round_totals). A sampled
 * block counts its weight while it lives, a block the live map was never given nothing. */
static void live_sums_add(void)
{
	const struct hp_site_tab *m = &c.merged;
	for (uint32_t i = 0; m->e && i <= m->mask; i++) {
		const struct hp_site_ctr *s = &m->e[i];
		uint64_t d = s->allocs - s->frees;
		if (!s->key)
			continue;
		if (s->key & HP_SITE_BYTES) {
			c.live_bytes_fx += d;
		} else {
			c.live_fx += d;
			if (!hp_site_has_bytes(s->key))
				c.live_bytes_fx += d * (hp_site_key_code(s->key) & 0xffffffu);
		}
	}
}

static uint64_t live_round(uint64_t v)
{
	return (int64_t)v > 0 ? fx_round(v) : 0;
}

static void sites_recs(void)
{
	struct hp_site_tab *m = &c.merged;
	uint32_t left = m->count, j = 0;
	for (uint32_t i = 0; m->e && i <= m->mask; i++)
		left -= (m->e[i].key & HP_SITE_BYTES) != 0;
	while (left > 0) {
		uint32_t n = left < SITES_PER_REC ? left : SITES_PER_REC;
		struct hp_sites h = {.count = n};
		uint8_t *d = sb_take(sizeof(struct hp_rec_hdr) + sizeof h +
				     n * sizeof(struct hp_site_delta));
		if (!d)
			return;
		d += hp_rec_put_hdr(d, HP_REC_SITES,
				    (uint32_t)(sizeof h + n * sizeof(struct hp_site_delta)));
		memcpy(d, &h, sizeof h);
		d += sizeof h;
		for (uint32_t k = 0; k < n; j++) {
			if (!m->e[j].key || (m->e[j].key & HP_SITE_BYTES))
				continue;
			put_site(&d, &m->e[j]);
			k++;
		}
		left -= n;
	}
}

/* The final round's LIVE records: the live map aggregated per stack, weighted like the
 * sites. Only the collector runs this, once. */
struct live_agg {
	uint32_t key; /* stack id + 1; 0 = empty */
	uint32_t oldest_birth;
	uint64_t blocks, bytes; /* HP_FX */
	double age_sum;		/* weighted, in ms */
};

static struct {
	struct live_agg *e;
	uint32_t mask, count;
	uint32_t now;
	uint64_t rate;
	int full;
} la;

/* A block of stack 0 (even the stack table's reserve was full: its allocation counted
 * lost) has no STACK record for a LIVE entry to name. */
static void live_cb(const struct hp_live_val *v, void *arg)
{
	(void)arg;
	if (!v->stack)
		return;
	uint64_t n = v->size & ~HP_LIVE_SAMPLED, w = HP_FX_ONE;
	uint32_t i = (uint32_t)hp_hash64(v->stack + 1) & la.mask;
	while (la.e[i].key && la.e[i].key != v->stack + 1)
		i = (i + 1) & la.mask;
	struct live_agg *a = &la.e[i];
	if (!a->key) {
		if ((la.count + 1) * 4 > (la.mask + 1) * 3) {
			la.full = 1;
			return;
		}
		*a = (struct live_agg){.key = v->stack + 1, .oldest_birth = v->birth_ms};
		la.count++;
	}
	if (v->size & HP_LIVE_SAMPLED) {
		w = hp_weight_fx(n, la.rate);
	}
	a->blocks += w;
	a->bytes += hp_event_bytes(w, n);
	uint32_t age = la.now - v->birth_ms;
	a->age_sum += (double)age * (double)w / HP_FX_ONE;
	if ((int32_t)(v->birth_ms - a->oldest_birth) < 0)
		a->oldest_birth = v->birth_ms;
}

/* Walks the map before the stacks of this round are sent: every stack id in the map was
 * published before its block was inserted, so hp_stacks_each_new sends it after. */
static void live_collect(void)
{
	uint64_t want = ((uint64_t)hp_stacks_end() + 1024) * 2, cap = 1024;
	while (cap < want)
		cap *= 2;
	/* Within max_memory, with fewer slots if need be: the sites that do not fit are
	 * counted lost (full), none if not even the least table fits. */
	while (cap > 1024 && !hp_mem_fits(cap * sizeof *la.e))
		cap /= 2;
	la.full = 0;
	la.e = hp_mem_fits(cap * sizeof *la.e) ? hp_map(cap * sizeof *la.e) : NULL;
	if (!la.e) {
		la.full = 1;
		return;
	}
	la.mask = (uint32_t)cap - 1;
	la.count = 0;
	la.now = hp_now_ms();
	la.rate = atomic_load(&hp.rate);
	hp_live_each(live_cb, NULL);
}

static void live_recs(void)
{
	if (!la.e)
		return;
	uint32_t left = la.count, j = 0;
	while (left > 0) {
		uint32_t n = left < LIVE_PER_REC ? left : LIVE_PER_REC;
		struct hp_live h = {.count = n};
		uint32_t len = (uint32_t)(sizeof h + n * sizeof(struct hp_live_site));
		uint8_t *d = sb_take(sizeof(struct hp_rec_hdr) + len);
		if (!d)
			break;
		d += hp_rec_put_hdr(d, HP_REC_LIVE, len);
		memcpy(d, &h, sizeof h);
		d += sizeof h;
		for (uint32_t k = 0; k < n; j++) {
			const struct live_agg *a = &la.e[j];
			if (!a->key)
				continue;
			double blocks = (double)a->blocks / HP_FX_ONE;
			struct hp_live_site ls = {
			    .stack_id = a->key - 1,
			    .blocks = fx_round(a->blocks),
			    .bytes = fx_round(a->bytes),
			    .oldest_age_ms = la.now - a->oldest_birth,
			    .mean_age_ms = (uint64_t)(a->age_sum / blocks + 0.5),
			};
			memcpy(d, &ls, sizeof ls);
			d += sizeof ls;
			k++;
		}
		left -= n;
	}
	hp_unmap(la.e, ((size_t)la.mask + 1) * sizeof *la.e);
	la.e = NULL;
}

static uint64_t clamp_sub(uint64_t a, uint64_t b)
{
	return a > b ? a - b : 0;
}

/* The ROUND's totals (hpformat.h). Recording every block, they are the threads' counts.
 * Under sampling the live figures are the sites' sums, whose error is that of the few
 * sampled blocks that live, and the frees are what those leave of the allocations, which
 * are counted exactly. From the threads' counts, each sampled free standing for its
 * weight, they carried the error of all that was ever freed: hash-table after a switch
 * showed 23 MiB live where some 10 lived, in 0 blocks, since there every free is counted,
 * a miss being an unsampled block or one from before attach. The frees counted beyond
 * those the allocations account for are taken as the latter, so frees and
 * untracked_frees still add up to what was counted. */
static void round_totals(struct hp_round *r, const struct hp_sum *now, int full)
{
	r->allocs = now->allocs;
	r->alloc_bytes = now->alloc_bytes;
	r->frees = now->frees;
	r->freed_bytes = now->freed_bytes;
	r->untracked_frees = now->untracked;
	if (!full) {
		r->live_blocks = clamp_sub(now->allocs, now->frees);
		r->live_bytes = clamp_sub(now->alloc_usable, now->freed_bytes);
		return;
	}
	r->live_blocks = live_round(c.live_fx);
	r->live_bytes = live_round(c.live_bytes_fx);
	if (!atomic_load_explicit(&hp.rate, memory_order_relaxed))
		return;
	uint64_t gone = clamp_sub(now->allocs, r->live_blocks);
	if (hp_live_filter) {
		r->frees = gone;
	} else {
		uint64_t before = clamp_sub(now->frees, gone);
		if (before > now->missed)
			before = now->missed;
		r->frees -= before;
		r->untracked_frees += before;
	}
	r->freed_bytes = clamp_sub(now->alloc_bytes, r->live_bytes);
}

/* One round; 0, or -errno if the pipe is gone. */
static int round_once(uint32_t flags)
{
	struct hp_sum now;
	int full = hp.args.mode == HP_MODE_FULL;
	hp_threads_drain(merge_cb, NULL, &now);
	if (!full)
		totals_site(&now);
	else if (flags & HP_ROUND_FINAL)
		live_collect();
	/* Stacks first, modules second: every stack sent was captured while its modules
	 * were loaded, so the module scan that follows sees them, or a dlopen noted them. The
	 * loads go out before the stacks (mb is written first), the unloads after. */
	c.taking_stacks = 1;
	hp_stacks_each_new(stack_cb, NULL);
	c.taking_stacks = 0;
	struct buf mods = mods_take(1, flags & HP_ROUND_FINAL);
	/* Out now, ahead of the stacks still in sb: the records below may fill sb and flush
	 * it, and a stack the viewer meets before its module stays unnamed in the profile
	 * (a first round of 4000 sites did that to every stack of seccomp-target). */
	if (!c.flush_rc)
		c.flush_rc = write_out(mods.p, mods.len);
	int mods_oom = mods.oom;
	mods_done(&mods);
	held_emit(UINT32_MAX);
	if (full)
		live_sums_add();
	sites_recs();
	hp_site_tab_clear(&c.merged);
	live_recs();
	c.prev = now;
	uint64_t held = atomic_load(&hp_mapped_bytes) + hp_stacks_bytes();
	if (held > hp.max_memory)
		hp_go_sampled();
	if (atomic_load(&hp.went_sampled))
		flags |= HP_ROUND_SAMPLED;
	struct hp_round r = {
	    .seq = ++c.seq,
	    .flags = flags,
	    .time_ns = mono_ns() - c.start_ns,
	    .rss_bytes = hp_rss_bytes(),
	    .lost = now.lost + atomic_load(&hp_lost_unrecorded) +
		    (mods_oom || c.sb.oom || c.hold.oom) + la.full,
	    .payload_bytes = held,
	};
	round_totals(&r, &now, full);
	sb_rec(HP_REC_ROUND, &r, sizeof r, NULL, 0);
	int rc = c.flush_rc ? c.flush_rc : write_out(c.sb.p, c.sb.len);
	c.sb.len = 0;
	c.flush_rc = 0;
	return rc;
}

_Atomic uint32_t hp_round_ms;

HP_EXPORT struct hp_collector_state heapprof_collector;

static void phase_set(uint32_t phase)
{
	__atomic_store_n(&heapprof_collector.phase, phase, __ATOMIC_SEQ_CST);
	if (phase == HP_COLLECTOR_NONE)
		heapprof_collector.tid = 0;
}

static void *collector_main(void *arg)
{
	(void)arg;
	heapprof_collector.tid = (int32_t)syscall(SYS_gettid);
	prctl(PR_SET_NAME, HP_COLLECTOR_NAME, 0, 0, 0);
	struct hp_thread *self = hp_thread_self();
	if (self)
		hp_thread_guard(self);
	const struct timespec iv = {
	    .tv_sec = hp.args.interval_ms / 1000,
	    .tv_nsec = (long)(hp.args.interval_ms % 1000) * 1000000L,
	};
	for (;;) {
		if (!atomic_load(&c.stop))
			syscall(SYS_futex, &c.wake, FUTEX_WAIT_PRIVATE, 0, &iv, NULL, 0);
		int stop = atomic_load(&c.stop);
		/* Woken by heapprof_stop, most likely in a thread the injector holds: the waker
		 * goes back to its trampoline first, rather than wait for a CPU through the whole
		 * last round (a woken thread takes the waker's CPU). The same before the free. */
		if (stop)
			sched_yield();
		atomic_store_explicit(&hp_round_ms, hp_now_ms(), memory_order_relaxed);
		if (mono_ns() - c.start_ns >= HP_PIPE_GRACE_S * 1000000000ull)
			heapprof_release_pipe();
		if (round_once(stop ? HP_ROUND_FINAL : 0) < 0) {
			hp_unpatch_all();
			break;
		}
		if (stop) {
			struct hp_end e = {.reason = HP_END_DETACH};
			uint8_t rec[sizeof(struct hp_rec_hdr) + sizeof e];
			hp_rec_put_hdr(rec, HP_REC_END, sizeof e);
			memcpy(rec + sizeof(struct hp_rec_hdr), &e, sizeof e);
			write_out(rec, sizeof rec);
			break;
		}
	}
	close(atomic_exchange(&c.wfd, -1));
	pthread_mutex_lock(&mods_lock);
	atomic_store(&noting, 0);
	pthread_mutex_unlock(&mods_lock);
	uint32_t running = HP_COLLECTOR_RUNNING;
	__atomic_compare_exchange_n(&heapprof_collector.phase, &running, HP_COLLECTOR_PARKED, 0,
				    __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
	while (__atomic_load_n(&heapprof_collector.phase, __ATOMIC_SEQ_CST) == HP_COLLECTOR_PARKED)
		syscall(SYS_futex, &heapprof_collector.phase, FUTEX_WAIT_PRIVATE,
			HP_COLLECTOR_PARKED, NULL, NULL, 0);
	sched_yield(); /* heapprof_free_memory's thread is held too */
	c.free_all();
	return NULL;
}

int hp_collector_start(int wfd, uint64_t start_mono_ns, void (*free_all)(void))
{
	c.wfd = wfd;
	c.free_all = free_all;
	struct stat st;
	if (fstat(wfd, &st) == 0) {
		c.pipe_dev = st.st_dev;
		c.pipe_ino = st.st_ino;
	}
	c.start_ns = start_mono_ns;
	if (buf_first(&c.sb) < 0 || buf_first(&c.mb) < 0 || buf_first(&c.mb_spare) < 0)
		return -ENOMEM;
	/* A pipe made by heapprof_start has no other status flag to keep. */
	fcntl(wfd, F_SETFL, O_NONBLOCK);
	atomic_store(&c.stop, 0);
	atomic_store(&c.wake, 0);
	c.stop_by = 0;
	if (!c.mods)
		c.mods = hp_map(MAX_MODULES * sizeof *c.mods);
	if (!c.mods)
		return -ENOMEM;
	ssize_t n = readlink("/proc/self/exe", c.exe, sizeof c.exe - 1);
	c.exe[n > 0 ? n : 0] = 0;
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	atomic_store(&noting, 1);
	phase_set(HP_COLLECTOR_RUNNING);
	int rc = pthread_create(&c.thr, NULL, collector_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		atomic_store(&noting, 0);
		phase_set(HP_COLLECTOR_NONE);
		return -rc;
	}
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
}

void hp_collector_free(void)
{
	uint32_t p = __atomic_load_n(&heapprof_collector.phase, __ATOMIC_SEQ_CST);
	if (!c.running || (p != HP_COLLECTOR_RUNNING && p != HP_COLLECTOR_PARKED))
		return;
	phase_set(HP_COLLECTOR_FREEING);
	syscall(SYS_futex, &heapprof_collector.phase, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

void hp_collector_reap(void)
{
	if (c.running &&
	    __atomic_load_n(&heapprof_collector.phase, __ATOMIC_SEQ_CST) == HP_COLLECTOR_FREEING &&
	    pthread_tryjoin_np(c.thr, NULL) == 0) {
		c.running = 0;
		phase_set(HP_COLLECTOR_NONE);
	}
}

void hp_collector_end(void)
{
	if (!c.running)
		return;
	hp_collector_stop();
	hp_collector_free();
	pthread_join(c.thr, NULL);
	c.running = 0;
	phase_set(HP_COLLECTOR_NONE);
}

static void forget(int verify)
{
	int fd = atomic_exchange(&c.wfd, -1);
	struct stat st;
	if (fd >= 0 && (!verify || (fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode) &&
				    st.st_dev == c.pipe_dev && st.st_ino == c.pipe_ino)))
		close(fd);
	c.running = 0;
	phase_set(HP_COLLECTOR_NONE);
	atomic_store(&noting, 0);
	mods_lock = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
}

void hp_collector_forget(void)
{
	forget(0);
}

void hp_collector_forget_late(void)
{
	static atomic_int done;
	if (!atomic_exchange(&done, 1))
		forget(1);
}

void hp_collector_fini(void)
{
	if (c.mb.p)
		hp_unmap(c.mb.p, c.mb.cap);
	if (c.mb_spare.p)
		hp_unmap(c.mb_spare.p, c.mb_spare.cap);
	if (c.sb.p)
		hp_unmap(c.sb.p, c.sb.cap);
	if (c.hold.p)
		hp_unmap(c.hold.p, c.hold.cap);
	hp_site_tab_free(&c.merged);
	if (c.mods)
		hp_unmap(c.mods, MAX_MODULES * sizeof *c.mods);
	c.mb = c.mb_spare = c.sb = c.hold = (struct buf){0};
	atomic_store(&c.nheld, 0);
	c.mods = NULL;
}
