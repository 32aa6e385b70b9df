#include "unwind.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <string.h>
#include <unwind.h>

#include "payload.h"

/* DWARF register numbers on x86_64. */
#define REG_RBP 6
#define REG_RSP 7
#define REG_RA 16

/* A rule packed in one word: valid bit, 31 bits of its address as a check against a slot
 * reused by a flush, the kind, whether rbp was saved and where, the CFA offset. */
enum kind { K_SLOW = 0, K_RSP = 1, K_RBP = 2, K_END = 3 };
#define V_VALID (1ull << 63)
#define V_CHECK(a) (((uint64_t)(a)&0x7fffffffu) << 32)
#define V_SAVED (1u << 2)
#define RBP_SLOTS 511u		 /* rbp saved at most 8 * 511 bytes below the CFA */
#define CFA_MAX ((1u << 20) - 1) /* larger frames take the slow path */

#define CACHE_BITS 15
#define CACHE_SLOTS (1u << CACHE_BITS)
#define CACHE_PROBES 16u
/* Steps a walk with a memo takes before it must have met the last walk's frames. */
#define MEMO_PREFIX 16u

struct __attribute__((aligned(16))) slot {
	_Atomic uint64_t key; /* lookup address; 0 = empty */
	_Atomic uint64_t val;
};

static struct slot *cache;
/* hp_unwind_check_modules's count: a memo of another count is stale. */
_Atomic unsigned long hp_unwind_gen;

/* The main thread's stack ends at the page holding __libc_stack_end; no frame lies above. */
extern void *__libc_stack_end;

#define MAIN_STACK_MAX (64ull << 20)
#define THREAD_STACK_MAX (256ull << 20)

/* The page above __libc_stack_end, found once: sysconf on every walk of the main thread
 * (every allocation of a single-threaded server) cost a call into libc. */
static uintptr_t main_end;

int hp_unwind_init(void)
{
	main_end = hp_page_round((uintptr_t)__libc_stack_end);
	if (!cache)
		cache = hp_map(CACHE_SLOTS * sizeof *cache);
	return cache ? 0 : -1;
}

void hp_unwind_fini(void)
{
	if (cache)
		hp_unmap(cache, CACHE_SLOTS * sizeof *cache);
	cache = NULL;
}

static int subs_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	*(unsigned long long *)arg = info->dlpi_subs;
	return 1;
}

/* A module unloaded may be followed by another at the same address: forget every rule. */
void hp_unwind_check_modules(void)
{
	unsigned long long subs = 0;
	dl_iterate_phdr(subs_cb, &subs);
	if (subs == atomic_load(&hp_unwind_gen) || !cache)
		return;
	atomic_store(&hp_unwind_gen, subs);
	for (unsigned i = 0; i < CACHE_SLOTS; i++) {
		atomic_store_explicit(&cache[i].val, 0, memory_order_relaxed);
		atomic_store_explicit(&cache[i].key, 0, memory_order_release);
	}
}

/* .eh_frame decoding. The data is the loaded module's own, trusted as libgcc trusts it. */

struct cursor {
	const uint8_t *p, *end;
	int bad;
};

static uint64_t uleb(struct cursor *c)
{
	uint64_t v = 0;
	unsigned shift = 0;
	while (c->p < c->end) {
		uint8_t b = *c->p++;
		if (shift < 64)
			v |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
		if (!(b & 0x80))
			return v;
	}
	c->bad = 1;
	return 0;
}

static int64_t sleb(struct cursor *c)
{
	int64_t v = 0;
	unsigned shift = 0;
	while (c->p < c->end) {
		uint8_t b = *c->p++;
		if (shift < 64)
			v |= (int64_t)((uint64_t)(b & 0x7f) << shift);
		shift += 7;
		if (!(b & 0x80)) {
			if (shift < 64 && (b & 0x40))
				v |= -(int64_t)((uint64_t)1 << shift);
			return v;
		}
	}
	c->bad = 1;
	return 0;
}

static uint64_t fixed(struct cursor *c, unsigned n)
{
	uint64_t v = 0;
	if ((size_t)(c->end - c->p) < n) {
		c->bad = 1;
		return 0;
	}
	memcpy(&v, c->p, n);
	c->p += n;
	return v;
}

#define PE_OMIT 0xff

/* Reads a pointer in DW_EH_PE encoding enc: pc-relative or absolute only. */
static uint64_t encoded(struct cursor *c, uint8_t enc)
{
	const uint8_t *at = c->p;
	uint64_t v;
	if (enc == PE_OMIT)
		return 0;
	switch (enc & 0x0f) {
	case 0x00:
		v = fixed(c, 8);
		break;
	case 0x01:
		v = uleb(c);
		break;
	case 0x02:
		v = fixed(c, 2);
		break;
	case 0x03:
		v = fixed(c, 4);
		break;
	case 0x04:
		v = fixed(c, 8);
		break;
	case 0x09:
		v = (uint64_t)sleb(c);
		break;
	case 0x0a:
		v = (uint64_t)(int64_t)(int16_t)fixed(c, 2);
		break;
	case 0x0b:
		v = (uint64_t)(int64_t)(int32_t)fixed(c, 4);
		break;
	case 0x0c:
		v = fixed(c, 8);
		break;
	default:
		c->bad = 1;
		return 0;
	}
	switch (enc & 0x70) {
	case 0x00:
		break;
	case 0x10:
		v += (uint64_t)(uintptr_t)at;
		break;
	default:
		c->bad = 1;
	}
	return v;
}

/* The rows that matter to the fast path: CFA, rbp and the return address. */
enum { RULE_SAME, RULE_OFFSET, RULE_UNDEF, RULE_OTHER };

struct row {
	uint64_t cfa_reg;
	int64_t cfa_off;
	int cfa_expr;
	int rbp, ra;
	int64_t rbp_off, ra_off;
};

struct cie {
	uint64_t code_align;
	int64_t data_align;
	uint8_t fde_enc;
	int has_aug, signal;
	struct cursor insns;
};

static int parse_cie(const uint8_t *p, struct cie *cie)
{
	uint64_t len = 0;
	memcpy(&len, p, 4);
	p += 4;
	if (len == 0xffffffffu || len == 0)
		return -1;
	struct cursor c = {.p = p, .end = p + len};
	if (fixed(&c, 4) != 0)
		return -1;
	uint8_t version = (uint8_t)fixed(&c, 1);
	const char *aug = (const char *)c.p;
	size_t alen = strnlen(aug, (size_t)(c.end - c.p));
	c.p += alen + 1;
	if (aug[0] == 'e' && aug[1] == 'h')
		return -1;
	cie->code_align = uleb(&c);
	cie->data_align = sleb(&c);
	uint64_t ra_reg = version == 1 ? fixed(&c, 1) : uleb(&c);
	cie->fde_enc = 0;
	cie->has_aug = aug[0] == 'z';
	cie->signal = 0;
	if (ra_reg != REG_RA)
		return -1;
	if (cie->has_aug) {
		uint64_t n = uleb(&c);
		struct cursor a = {.p = c.p, .end = c.p + n};
		if (n > (uint64_t)(c.end - c.p))
			return -1;
		c.p += n;
		for (const char *s = aug + 1; *s; s++) {
			switch (*s) {
			case 'L':
				fixed(&a, 1);
				break;
			case 'R':
				cie->fde_enc = (uint8_t)fixed(&a, 1);
				break;
			case 'P':
				encoded(&a, (uint8_t)(fixed(&a, 1) & 0x7f));
				break;
			case 'S':
				cie->signal = 1;
				break;
			case 'B':
				break;
			default:
				return -1;
			}
		}
		if (a.bad)
			return -1;
	} else if (aug[0]) {
		return -1;
	}
	if (c.bad)
		return -1;
	cie->insns = c;
	return 0;
}

#define STATE_DEPTH 8

struct program {
	uint64_t loc, target, code_align;
	int64_t data_align;
	uint8_t fde_enc;
	struct row init; /* the CIE's row, for DW_CFA_restore */
	struct row stack[STATE_DEPTH];
	unsigned depth;
};

static void set_rule(struct row *r, uint64_t reg, int rule, int64_t off)
{
	if (reg == REG_RBP) {
		r->rbp = rule;
		r->rbp_off = off;
	} else if (reg == REG_RA) {
		r->ra = rule;
		r->ra_off = off;
	}
}

static void restore_rule(struct program *pg, struct row *r, uint64_t reg)
{
	if (reg == REG_RBP) {
		r->rbp = pg->init.rbp;
		r->rbp_off = pg->init.rbp_off;
	} else if (reg == REG_RA) {
		r->ra = pg->init.ra;
		r->ra_off = pg->init.ra_off;
	}
}

/* Runs instructions until the row covering pg->target is built. Returns 0, 1 when the
 * target was passed (the row is final), -1 on an instruction the fast path cannot use. */
static int run(struct program *pg, struct cursor *c, struct row *r)
{
	while (c->p < c->end && !c->bad) {
		uint8_t op = *c->p++;
		uint64_t reg, delta = 0;
		switch (op >> 6) {
		case 1:
			delta = (op & 0x3f) * pg->code_align;
			goto advance;
		case 2:
			set_rule(r, op & 0x3f, RULE_OFFSET, (int64_t)uleb(c) * pg->data_align);
			continue;
		case 3:
			restore_rule(pg, r, op & 0x3f);
			continue;
		default:
			break;
		}
		switch (op) {
		case 0x00:
			break; /* nop */
		case 0x01: {
			uint64_t loc = encoded(c, pg->fde_enc);
			if (loc > pg->target)
				return 1;
			pg->loc = loc;
			break;
		}
		case 0x02:
			delta = fixed(c, 1) * pg->code_align;
			goto advance;
		case 0x03:
			delta = fixed(c, 2) * pg->code_align;
			goto advance;
		case 0x04:
			delta = fixed(c, 4) * pg->code_align;
			goto advance;
		case 0x05:
			reg = uleb(c);
			set_rule(r, reg, RULE_OFFSET, (int64_t)uleb(c) * pg->data_align);
			break;
		case 0x06:
			restore_rule(pg, r, uleb(c));
			break;
		case 0x07:
			set_rule(r, uleb(c), RULE_UNDEF, 0);
			break;
		case 0x08:
			set_rule(r, uleb(c), RULE_SAME, 0);
			break;
		case 0x09:
			reg = uleb(c);
			uleb(c);
			set_rule(r, reg, RULE_OTHER, 0);
			break;
		case 0x0a:
			if (pg->depth == STATE_DEPTH)
				return -1;
			pg->stack[pg->depth++] = *r;
			break;
		case 0x0b:
			if (pg->depth == 0)
				return -1;
			/* The CFA rule is part of the saved state too (DWARF 5, 6.4.2.4). */
			*r = pg->stack[--pg->depth];
			break;
		case 0x0c:
			r->cfa_reg = uleb(c);
			r->cfa_off = (int64_t)uleb(c);
			r->cfa_expr = 0;
			break;
		case 0x0d:
			r->cfa_reg = uleb(c);
			r->cfa_expr = 0;
			break;
		case 0x0e:
			r->cfa_off = (int64_t)uleb(c);
			break;
		case 0x0f:
			c->p += uleb(c);
			r->cfa_expr = 1;
			break;
		case 0x10:
		case 0x16:
			reg = uleb(c);
			c->p += uleb(c);
			set_rule(r, reg, RULE_OTHER, 0);
			break;
		case 0x11:
			reg = uleb(c);
			set_rule(r, reg, RULE_OFFSET, sleb(c) * pg->data_align);
			break;
		case 0x12:
			r->cfa_reg = uleb(c);
			r->cfa_off = sleb(c) * pg->data_align;
			r->cfa_expr = 0;
			break;
		case 0x13:
			r->cfa_off = sleb(c) * pg->data_align;
			break;
		case 0x14:
			reg = uleb(c);
			uleb(c);
			set_rule(r, reg, RULE_OTHER, 0);
			break;
		case 0x15:
			reg = uleb(c);
			sleb(c);
			set_rule(r, reg, RULE_OTHER, 0);
			break;
		case 0x2e:
			uleb(c);
			break; /* GNU_args_size: only landing pads need it */
		case 0x2f:
			reg = uleb(c);
			set_rule(r, reg, RULE_OFFSET, -(int64_t)uleb(c) * pg->data_align);
			break;
		default:
			return -1;
		}
		continue;
	advance:
		if (pg->loc + delta > pg->target)
			return 1;
		pg->loc += delta;
	}
	return c->bad ? -1 : 0;
}

/* Finds the FDE covering pc in the module's .eh_frame_hdr search table. */
static const uint8_t *find_fde(uintptr_t pc)
{
	struct dl_find_object dlfo;
	if (_dl_find_object((void *)pc, &dlfo) != 0 || !dlfo.dlfo_eh_frame)
		return NULL;
	const uint8_t *hdr = dlfo.dlfo_eh_frame;
	/* version 1, table of datarel sdata4 pairs */
	if (hdr[0] != 1 || hdr[3] != 0x3b)
		return NULL;
	struct cursor c = {.p = hdr + 4, .end = hdr + 4 + 16};
	encoded(&c, hdr[1]);
	uint64_t n = encoded(&c, hdr[2]);
	if (c.bad || n == 0)
		return NULL;
	const int32_t *tab = (const int32_t *)(const void *)c.p;
	uint64_t lo = 0, hi = n;
	while (hi - lo > 1) {
		uint64_t mid = lo + (hi - lo) / 2;
		if ((uintptr_t)hdr + tab[2 * mid] <= pc)
			lo = mid;
		else
			hi = mid;
	}
	if ((uintptr_t)hdr + tab[2 * lo] > pc)
		return NULL;
	return hdr + tab[2 * lo + 1];
}

/* Derives the packed rule for the code at lookup address pc (0 = slow path). */
static uint64_t derive(uintptr_t pc)
{
	const uint8_t *fde = find_fde(pc);
	if (!fde)
		return 0;
	uint32_t len, cie_off;
	memcpy(&len, fde, 4);
	if (len == 0 || len == 0xffffffffu)
		return 0;
	memcpy(&cie_off, fde + 4, 4);
	struct cie cie;
	if (cie_off == 0 || parse_cie(fde + 4 - cie_off, &cie) < 0 || cie.signal)
		return 0;
	struct cursor c = {.p = fde + 8, .end = fde + 4 + len};
	uint64_t begin = encoded(&c, cie.fde_enc);
	uint64_t range = encoded(&c, cie.fde_enc & 0x0f);
	if (c.bad || pc < begin || pc - begin >= range)
		return 0;
	if (cie.has_aug)
		c.p += uleb(&c);
	struct program pg = {.loc = begin,
			     .target = pc,
			     .code_align = cie.code_align,
			     .data_align = cie.data_align,
			     .fde_enc = cie.fde_enc};
	struct row r = {.cfa_reg = REG_RSP, .rbp = RULE_SAME, .ra = RULE_SAME};
	if (run(&pg, &cie.insns, &r) != 0)
		return 0;
	pg.init = r;
	pg.depth = 0;
	if (run(&pg, &c, &r) < 0 || c.bad)
		return 0;

	uint64_t v = V_VALID | V_CHECK(pc);
	if (r.ra == RULE_UNDEF)
		return v | K_END;
	if (r.cfa_expr || r.ra != RULE_OFFSET || r.ra_off != -8 || r.cfa_off < 8 ||
	    r.cfa_off > CFA_MAX)
		return 0;
	if (r.cfa_reg == REG_RSP)
		v |= K_RSP;
	else if (r.cfa_reg == REG_RBP)
		v |= K_RBP;
	else
		return 0;
	if (r.rbp == RULE_OFFSET) {
		if (r.rbp_off >= 0 || r.rbp_off % 8 || -r.rbp_off / 8 > RBP_SLOTS)
			return 0;
		v |= V_SAVED | (uint64_t)(-r.rbp_off / 8) << 3;
	} else if (r.rbp != RULE_SAME && r.rbp != RULE_UNDEF) {
		return 0;
	}
	return v | (uint64_t)r.cfa_off << 12;
}

static uint32_t slot_of(uintptr_t pc)
{
	return (uint32_t)((pc * 0x9e3779b97f4a7c15ull) >> (64 - CACHE_BITS));
}

__attribute__((noinline)) static uint64_t rule_miss(uintptr_t pc)
{
	if (!cache)
		return derive(pc);
	uint32_t i = slot_of(pc);
	for (unsigned n = 0; n < CACHE_PROBES; n++, i = (i + 1) & (CACHE_SLOTS - 1)) {
		struct slot *s = &cache[i];
		uint64_t k = atomic_load_explicit(&s->key, memory_order_acquire);
		if (k == pc) {
			uint64_t v = atomic_load_explicit(&s->val, memory_order_acquire);
			if ((v & (V_VALID | V_CHECK(~0ull))) == (V_VALID | V_CHECK(pc)))
				return v;
			return derive(pc); /* being written, or being flushed */
		}
		if (k == 0) {
			uint64_t v = derive(pc);
			uint64_t expect = 0;
			if (atomic_compare_exchange_strong(&s->key, &expect, pc))
				atomic_store_explicit(&s->val, v ? v : V_VALID | V_CHECK(pc),
						      memory_order_release);
			return v;
		}
	}
	return derive(pc);
}

/* Most lookups hit the first slot probed: that much is inline. */
static inline uint64_t rule_for(uintptr_t pc)
{
	if (cache) {
		struct slot *s = &cache[slot_of(pc)];
		if (atomic_load_explicit(&s->key, memory_order_acquire) == pc) {
			uint64_t v = atomic_load_explicit(&s->val, memory_order_acquire);
			if ((v & (V_VALID | V_CHECK(~0ull))) == (V_VALID | V_CHECK(pc)))
				return v;
		}
	}
	return rule_miss(pc);
}

/* Where the calling thread's stack ends: reads at or above it could fault. */
static uintptr_t stack_top(uintptr_t sp)
{
	uintptr_t self = hp_self();
	/* A thread made by pthread_create has its descriptor at the top of its stack. */
	if (sp < self && self - sp <= THREAD_STACK_MAX)
		return self;
	if (sp < main_end && main_end - sp <= MAIN_STACK_MAX)
		return main_end;
	return 0;
}

static inline int readable(uintptr_t a, uintptr_t lo, uintptr_t hi)
{
	return a >= lo && a <= hi - 8 && !(a & 7);
}

/* One step of the walk from the frame of code address look, whose stack pointer is *sp:
 * 1 with the caller's frame in *s (and *sp, *bp moved to it), 0 at the end of the stack,
 * -1 when the slow path must walk. */
static inline __attribute__((always_inline)) int walk_step(uintptr_t look, uintptr_t lo,
							   uintptr_t hi, uintptr_t *sp,
							   uintptr_t *bp, struct hp_unwind_step *s)
{
	uint64_t v = rule_for(look);
	unsigned kind = v & 3;
	if (kind == K_SLOW)
		return -1;
	if (kind == K_END)
		return 0;
	uintptr_t cfa = (kind == K_RSP ? *sp : *bp) + (uintptr_t)(v >> 12 & CFA_MAX);
	if (!readable(cfa - 8, lo, hi) || cfa <= *sp)
		return 0;
	uintptr_t ra = *(const uintptr_t *)(cfa - 8);
	s->at = kind == K_RBP ? HP_STEP_READS_BP : 0;
	if (v & V_SAVED) {
		uintptr_t at = cfa - 8 * (uintptr_t)(v >> 3 & RBP_SLOTS);
		if (!readable(at, lo, hi))
			return 0;
		*bp = *(const uintptr_t *)at;
		s->at |= at | (at < *sp ? HP_STEP_BP_LOW : 0);
	}
	if (ra == 0)
		return 0;
	s->cfa = cfa;
	s->ra = ra;
	s->bp = *bp;
	*sp = cfa;
	return 1;
}

static inline int kept(uintptr_t ra, uintptr_t drop_lo, uintptr_t drop_hi)
{
	return ra < drop_lo || ra >= drop_hi;
}

int hp_unwind_regs(uint64_t *frames, unsigned max, uintptr_t drop_lo, uintptr_t drop_hi,
		   uintptr_t pc, uintptr_t sp, uintptr_t bp)
{
	uintptr_t lo = sp, hi = stack_top(sp);
	if (!hi)
		return -1;
	unsigned n = 0;
	uintptr_t look = pc;
	struct hp_unwind_step s;
	while (n < max) {
		int r = walk_step(look, lo, hi, &sp, &bp, &s);
		if (r < 0)
			return -1;
		if (!r)
			break;
		if (kept(s.ra, drop_lo, drop_hi))
			frames[n++] = s.ra;
		look = s.ra - 1;
	}
	return (int)n;
}

size_t hp_unwind_memo_size(unsigned max)
{
	return sizeof(struct hp_unwind_memo) + (max + MEMO_PREFIX) * sizeof(struct hp_unwind_step);
}

static size_t memos_size(unsigned max, unsigned n)
{
	return HP_UNWIND_MEMOS_HEAD + hp_unwind_memo_size(max) * n;
}

static struct hp_unwind_memo *memo_i(struct hp_unwind_memo *first, unsigned i)
{
	return (struct hp_unwind_memo *)((char *)first +
					 hp_unwind_memo_size(first->cap - MEMO_PREFIX) * i);
}

struct hp_unwind_memo *hp_unwind_memos_reserve(unsigned max, unsigned n)
{
	char *p = hp_reserve(memos_size(max, n));
	if (!p)
		return NULL;
	struct hp_unwind_memo *first = (struct hp_unwind_memo *)(p + HP_UNWIND_MEMOS_HEAD);
	first->cap = max + MEMO_PREFIX;
	atomic_fetch_add(&hp_mapped_bytes, HP_UNWIND_MEMOS_HEAD + hp_unwind_memo_size(max));
	return first;
}

int hp_unwind_memos_ready(struct hp_unwind_memo *first, unsigned i)
{
	struct hp_unwind_memo *m = memo_i(first, i);
	if (m->cap)
		return 0;
	m->cap = first->cap;
	atomic_fetch_add(&hp_mapped_bytes, hp_unwind_memo_size(first->cap - MEMO_PREFIX));
	return 1;
}

void hp_unwind_memos_free(struct hp_unwind_memo *first, unsigned n)
{
	unsigned max = first->cap - MEMO_PREFIX;
	uint64_t counted = HP_UNWIND_MEMOS_HEAD;
	for (unsigned i = 0; i < n; i++)
		counted += memo_i(first, i)->cap ? hp_unwind_memo_size(max) : 0;
	hp_unreserve(hp_unwind_memos_head(first), memos_size(max, n));
	atomic_fetch_sub(&hp_mapped_bytes, counted);
}

struct hp_unwind_memo *hp_unwind_memo_new(unsigned max)
{
	return hp_unwind_memos_reserve(max, 1);
}

void hp_unwind_memo_free(struct hp_unwind_memo *m)
{
	hp_unwind_memos_free(m, 1);
}

/* Steps from i on still hold: each return address, and each saved rbp that a later step
 * reads, is still where the walk read it. Steps before i matched already, so each of these
 * has the same CFA rule and the same CFA as before; what the stack now holds there decides
 * the rest. A saved rbp nobody reads is not compared, but must still be readable, as the
 * walk would stop there otherwise. Step i - 1 is a frame of this walk, within [lo, hi),
 * and every later step's CFA is above the one before: with the last CFA at most hi, every
 * return address lies within the stack, and so does a saved rbp not below lo, since it
 * lies below its own step's CFA (the walk read them all aligned). Only one marked
 * HP_STEP_BP_LOW can lie below lo: every other lies at or above the CFA before its own,
 * step i - 1's or a later one. So the loop tests a step's rbp only when it is marked,
 * which code that saves rbp without frame pointers (most of it) never is. The loop is
 * unrolled: a splice checks the rest of the last walk, 17 steps for each node of
 * binary-trees, and the loop's count and branch were a tenth of that. */
static int memo_holds(const struct hp_unwind_memo *m, unsigned i, uintptr_t lo, uintptr_t hi)
{
	if (i < m->n && m->st[m->n - 1].cfa > hi)
		return 0;
#pragma GCC unroll 4
	for (; i < m->n; i++) {
		const struct hp_unwind_step *s = &m->st[i];
		if (*(const uintptr_t *)(s->cfa - 8) != s->ra)
			return 0;
		if (!(s->at & (HP_STEP_BP_LIVE | HP_STEP_BP_LOW)))
			continue;
		uintptr_t at = hp_step_bp_at(s);
		if (at &&
		    (at < lo || ((s->at & HP_STEP_BP_LIVE) && *(const uintptr_t *)at != s->bp)))
			return 0;
	}
	return 1;
}

/* m, a step of the memo, is the frame s of this walk: the rest of the memo's walk would
 * read from s what it read from m. */
static int same_step(const struct hp_unwind_step *m, const struct hp_unwind_step *s)
{
	return m->cfa == s->cfa && m->ra == s->ra && hp_step_bp_at(m) == hp_step_bp_at(s) &&
	       (!(m->at & HP_STEP_BP_LIVE) || m->bp == s->bp);
}

/* Marks steps from..0 whose rbp a later step reads: the next one's rule reads it, or the
 * next one leaves rbp as it is and its rbp is read. The last step's always is, since a
 * later walk may go on from it (a memo cut at max). Stored rbp values of unmarked steps
 * may be stale (memo_holds does not compare them): they are never read, and a step marked
 * again later only fails to match. */
static inline __attribute__((always_inline)) void memo_mark_live(struct hp_unwind_memo *m,
								 unsigned from)
{
	for (unsigned i = from + 1; i-- > 0;) {
		const struct hp_unwind_step *next = &m->st[i + 1];
		int live = i + 1 >= m->n || (next->at & HP_STEP_READS_BP) ||
			   (!hp_step_bp_at(next) && (next->at & HP_STEP_BP_LIVE));
		m->st[i].at =
		    (m->st[i].at & ~(uintptr_t)HP_STEP_BP_LIVE) | (live ? HP_STEP_BP_LIVE : 0);
	}
}

/* The walk's new steps into the memo, unless they were walked there: mostly one (the
 * splice at the first frame), else a few. Not a memcpy of variable length, which GCC makes
 * a rep movsq, whose start alone was a quarter of the memo walk's time. */
static inline void memo_set_prefix(struct hp_unwind_memo *m, const struct hp_unwind_step *pre,
				   unsigned npre)
{
	if (pre == m->st)
		return;
	if (npre)
		m->st[0] = pre[0];
	for (unsigned i = 1; i < npre; i++) {
		m->st[i] = pre[i];
		__asm__("" ::: "memory"); /* or GCC makes the loop that memcpy again */
	}
}

/* Appends a step to the memo while it has room; a walk longer than that leaves none. */
static void memo_put(struct hp_unwind_memo *m, const struct hp_unwind_step *s)
{
	if (m->n < m->cap)
		m->st[m->n++] = *s;
	else
		m->cap_hit = 1;
}

/* walk_step for the function whose frame address (rbp) is frame, built with frame
 * pointers: its CFA is frame + 16, the return address is at frame + 8 and the caller's
 * rbp at frame, exactly what walk_step reads with that function's rule. */
static int frame_step(uintptr_t frame, uintptr_t lo, uintptr_t hi, uintptr_t *sp, uintptr_t *bp,
		      struct hp_unwind_step *s)
{
	if (!readable(frame, lo, hi) || !readable(frame + 8, lo, hi))
		return 0;
	s->cfa = *sp = frame + 16;
	s->ra = *(const uintptr_t *)(frame + 8);
	s->bp = *bp = *(const uintptr_t *)frame;
	s->at = frame;
	return s->ra != 0;
}

/* hp_unwind_memo_repeats: the first step is frame_step's from this frame (so the stack is
 * this thread's), the rest memo_holds'. */
static int memo_repeats_slow(const struct hp_unwind_memo *m, uintptr_t frame)
{
	uintptr_t hi = stack_top(frame);
	if (!hi || !readable(frame + 8, frame, hi))
		return 0;
	if ((m->st[0].at & HP_STEP_BP_LIVE) && *(const uintptr_t *)frame != m->st[0].bp)
		return 0;
	return memo_holds(m, 1, frame, hi);
}

static int memo_check(struct hp_unwind_memo *m, unsigned *k, uintptr_t at, uintptr_t val)
{
	if (*k == HP_MEMO_CHECKS)
		return 0;
	m->chk[2 * *k] = at;
	m->chk[2 * *k + 1] = val;
	++*k;
	return 1;
}

/* memo_repeats_slow's reads as a list, made once they passed. The memo's first step fixes
 * frame and with it the stack's top, so their bounds tests pass again every time; what is
 * left is whether each word still holds what the walk read: a loop of loads and compares
 * with no test of flags or bounds. */
static unsigned memo_checks(struct hp_unwind_memo *m, uintptr_t frame)
{
	unsigned k = 0;
	int room = memo_check(m, &k, frame + 8, m->st[0].ra) &&
		   (!(m->st[0].at & HP_STEP_BP_LIVE) || memo_check(m, &k, frame, m->st[0].bp));
	for (unsigned i = 1; i < m->n; i++) {
		const struct hp_unwind_step *s = &m->st[i];
		room = room && memo_check(m, &k, s->cfa - 8, s->ra);
		if (hp_step_bp_at(s) && (s->at & HP_STEP_BP_LIVE))
			room = room && memo_check(m, &k, hp_step_bp_at(s), s->bp);
	}
	return room ? k + 1 : HP_MEMO_CHECKS_LONG;
}

/* The inline check compares two pairs a turn (hp_unwind_memo_checks_hold): an odd count of
 * pairs gets one more that always holds, the address of its own value word. Returns the
 * count of pairs then. */
static unsigned memo_checks_even(struct hp_unwind_memo *m, unsigned k)
{
	_Static_assert(HP_MEMO_CHECKS % 2 == 0, "an odd count has room for one more");
	if (k % 2) {
		m->chk[2 * k] = m->chk[2 * k + 1] = (uintptr_t)&m->chk[2 * k + 1];
		k++;
	}
	return k;
}

#define MEMO_RETRY_EVERY 16u

int hp_unwind_memo_repeats_slow(struct hp_unwind_memo *m, uintptr_t frame, unsigned max)
{
	if (m->nchk == HP_MEMO_CHECKS_UNMADE && hp_unwind_memo_failing(m) &&
	    ++m->misses % MEMO_RETRY_EVERY)
		return 0;
	if (!hp_unwind_memo_begins(m, frame) || m->cap_hit || m->max != max ||
	    m->gen != atomic_load_explicit(&hp_unwind_gen, memory_order_relaxed))
		return 0;
	/* Made once the walk has repeated: a program whose every allocation is a new stack
	 * (binary-trees) would make them each time for nothing. Nor does such a program have
	 * the walk checked each time: once HP_MEMO_SKIP_AFTER checks in a row failed, only every
	 * MEMO_RETRY_EVERY-th is made. Each depth of its recursion has a memo of its own, and
	 * each walk there takes another path above it, found out only some frames up (94
	 * instructions a node, 75 of them saved). The walk that follows a check left out costs a
	 * program whose memo would have repeated after all no more than one that failed. */
	if (m->nchk == HP_MEMO_CHECKS_UNMADE) {
		if (!memo_repeats_slow(m, frame)) {
			m->misses += m->misses < HP_MEMO_SKIP_AFTER;
			return 0;
		}
		m->misses = 0;
		m->nchk = memo_checks(m, frame);
		m->chk_at = 0;
		if (m->nchk != HP_MEMO_CHECKS_LONG) {
			unsigned k = memo_checks_even(m, m->nchk - 1);
			m->chk_end = m->chk + 2 * k;
			m->chk_from = -2 * (intptr_t)k;
			m->chk_at = frame;
		}
		return 1;
	}
	/* HP_MEMO_CHECKS_LONG: a walk with more words than chk holds reads them in place. */
	return memo_repeats_slow(m, frame);
}

/* The walk when it is the last one again (a loop allocating at one place): the general
 * path below would only rewrite the memo as it is, bar stale rbp values no step reads; so
 * only the frames are copied. 0 when it is not, or when the general path has more to do
 * (the memo's frames reach max before its end, or the last walk was cut at max and this
 * one could go on). */
static int memo_again(uint64_t *frames, unsigned max, uintptr_t drop_lo, uintptr_t drop_hi,
		      uintptr_t frame, struct hp_unwind_memo *m)
{
	if (!hp_unwind_memo_repeats(m, frame, max))
		return 0;
	unsigned n = 0;
	for (unsigned i = 0; i < m->n; i++)
		if (kept(m->st[i].ra, drop_lo, drop_hi)) {
			if (n == max)
				return 0;
			frames[n++] = m->st[i].ra;
		}
	if (m->cut && n < max)
		return 0;
	if (!m->cut)
		m->tail_after = 0;
	m->walked = 1;
	return (int)n;
}

/* The walk from frame's return address on: its first step is frame_step's, each later
 * one walk_step's, with the memos as hp_unwind_memo_from describes (from is m, or another
 * memo of the same max). Inline in hp_unwind_memo_from, its one caller, which GCC left as
 * a call of nine arguments on every walk. */
static inline __attribute__((always_inline)) int
walk_frame_memo(uint64_t *frames, unsigned max, uintptr_t drop_lo, uintptr_t drop_hi,
		uintptr_t frame, struct hp_unwind_memo *m, const struct hp_unwind_memo *from,
		int try_again, int *same)
{
	*same = 0;
	if (m)
		m->tail_after = m->unwritten = HP_UNWIND_NO_TAIL;
	uintptr_t lo = frame, hi = stack_top(frame);
	if (!hi)
		return -1;
	uintptr_t sp = 0, bp = 0;
	if (!m) {
		struct hp_unwind_step s;
		if (max == 0 || !frame_step(frame, lo, hi, &sp, &bp, &s))
			return 0;
		unsigned n = 0;
		if (kept(s.ra, drop_lo, drop_hi))
			frames[n++] = s.ra;
		int r = hp_unwind_regs(frames + n, max - n, drop_lo, drop_hi, s.ra - 1, sp, bp);
		return r < 0 ? -1 : (int)n + r;
	}
	unsigned long gen = atomic_load_explicit(&hp_unwind_gen, memory_order_relaxed);
	/* Whether m's last walk is whole and current, asked only where it is read: to take it
	 * whole (try_again) or to splice against it (from == m). */
	int again =
	    (try_again || from == m) && m->n && !m->cap_hit && m->gen == gen && m->max == max;
	int usable =
	    from == m ? again : from->n && !from->cap_hit && from->gen == gen && from->max == max;
	/* Up to the first frame the last walk had too, steps go to pre: straight into m when
	 * the last walk is another memo's, or the splice would copy them twice. */
	struct hp_unwind_step own[MEMO_PREFIX], *pre = m == from ? own : m->st, s;
	unsigned npre = 0, p = 0, n = 0;
	uintptr_t look = 0;
	int r = 1, spliced = 0, pre_dropped = 0;
	while (n < max && npre < MEMO_PREFIX) {
		r = npre ? walk_step(look, lo, hi, &sp, &bp, &s)
			 : frame_step(frame, lo, hi, &sp, &bp, &s);
		if (r <= 0)
			break;
		if (!npre && again && try_again) {
			int k = memo_again(frames, max, drop_lo, drop_hi, frame, m);
			if (k) {
				*same = 1;
				return k;
			}
		}
		if (kept(s.ra, drop_lo, drop_hi))
			frames[n++] = s.ra;
		else
			pre_dropped = 1;
		look = s.ra - 1;
		pre[npre++] = s;
		if (!usable)
			continue;
		while (p < from->n && from->st[p].cfa < s.cfa)
			p++;
		if (p < from->n && same_step(&from->st[p], &s) && memo_holds(from, p + 1, lo, hi)) {
			spliced = 1;
			break;
		}
	}
	/* From here on the steps change: memo_again's checks (made above) no longer hold. */
	m->nchk = HP_MEMO_CHECKS_UNMADE;
	m->chk_at = 0;
	if (r < 0) {
		m->n = 0;
		return -1;
	}
	if (spliced) {
		int prefix_same = p + 1 == npre;
		for (unsigned i = 0; prefix_same && i < npre; i++)
			prefix_same = from->st[i].ra == pre[i].ra;
		/* The splice step's own frame is the last walk's too. */
		unsigned new_frames = n - kept(pre[npre - 1].ra, drop_lo, drop_hi);
		/* The rest of the last walk, as far as max lets it: unwritten when they are its
		 * steps' return addresses one for one and the walk ends with them (from did not
		 * stop at max), else copied here. */
		unsigned i = p + 1, written = n;
		int lazy = !from->dropped && !from->cut;
		if (lazy) {
			unsigned rest = from->n - i < max - n ? from->n - i : max - n;
			i += rest;
			n += rest;
		} else {
			for (; i < from->n && n < max; i++)
				if (kept(from->st[i].ra, drop_lo, drop_hi))
					frames[n++] = from->st[i].ra;
		}
		unsigned tail = i - (p + 1);
		if (npre + tail > m->cap) {
			for (unsigned j = written; lazy && j < n; j++)
				frames[j] = from->st[p + 1 + j - written].ra;
			m->n = 0;
			return (int)n;
		}
		int truncated = i < from->n, cut = truncated || from->cut;
		m->dropped = pre_dropped || from->dropped;
		if (!cut)
			m->tail_after = new_frames;
		if (m != from) {
			memcpy(&m->st[npre], &from->st[p + 1], tail * sizeof s);
			m->gen = from->gen;
			m->max = from->max;
			m->cap_hit = 0;
		} else if (npre != p + 1) {
			memmove(&m->st[npre], &m->st[p + 1], tail * sizeof s);
		}
		m->cut = cut;
		memo_set_prefix(m, pre, npre);
		m->n = npre + tail;
		m->walked = npre;
		if (lazy && written < n)
			m->unwritten = written;
		*same = prefix_same ? 2 : 0;
		/* Where the last walk stopped at max, this one may go on from its end. */
		if (!m->cut || n == max) {
			/* The tail's marks stand unless it lost its end. */
			memo_mark_live(m, truncated ? m->n - 1 : npre - 1);
			return (int)n;
		}
		s = m->st[m->n - 1];
		sp = s.cfa;
		bp = s.bp;
		look = s.ra - 1;
		r = 1;
		*same = 0;
	} else {
		memo_set_prefix(m, pre, npre);
		m->n = npre;
		m->walked = npre;
		m->dropped = pre_dropped;
	}
	m->gen = gen;
	m->max = max;
	m->cap_hit = 0;
	while (r > 0 && n < max) {
		r = walk_step(look, lo, hi, &sp, &bp, &s);
		if (r < 0) {
			m->n = 0;
			return -1;
		}
		if (!r)
			break;
		if (kept(s.ra, drop_lo, drop_hi))
			frames[n++] = s.ra;
		else
			m->dropped = 1;
		look = s.ra - 1;
		memo_put(m, &s);
		m->walked++;
	}
	m->cut = n == max && r > 0;
	if (m->n)
		memo_mark_live(m, m->n - 1);
	return (int)n;
}

struct slow {
	uint64_t *frames;
	unsigned max, n, skip;
	uintptr_t drop_lo, drop_hi;
	uintptr_t below; /* frames whose CFA is at most this are skipped too */
};

static _Unwind_Reason_Code slow_frame(struct _Unwind_Context *ctx, void *arg)
{
	struct slow *w = arg;
	uintptr_t ip = _Unwind_GetIP(ctx);
	if (ip == 0 || w->n >= w->max)
		return _URC_END_OF_STACK;
	if (w->skip) {
		w->skip--;
		return _URC_NO_REASON;
	}
	if (_Unwind_GetCFA(ctx) <= w->below)
		return _URC_NO_REASON;
	if (ip < w->drop_lo || ip >= w->drop_hi)
		w->frames[w->n++] = ip;
	return _URC_NO_REASON;
}

/* Skips its own frame and the caller's, and those with a CFA at or below below: the first
 * kept is the return into the caller's caller, or into the caller of the function whose
 * CFA is below, as for the fast path. */
__attribute__((noinline)) static unsigned
slow_walk(uint64_t *frames, unsigned max, uintptr_t drop_lo, uintptr_t drop_hi, uintptr_t below)
{
	struct slow w = {frames, max, 0, 2, drop_lo, drop_hi, below};
	_Unwind_Backtrace(slow_frame, &w);
	return w.n;
}

__attribute__((noinline)) unsigned hp_unwind_slow(uint64_t *frames, unsigned max, uintptr_t drop_lo,
						  uintptr_t drop_hi)
{
	unsigned n = slow_walk(frames, max, drop_lo, drop_hi, 0);
	__asm__ volatile("" ::: "memory"); /* no tail call: this frame is counted */
	return n;
}

/* The calling function's own pc, sp and bp: a walk from there starts at its caller. */
#define CAPTURE_REGS(pc, sp, bp)                                                                   \
	__asm__ volatile("lea 0(%%rip), %0\n\t"                                                    \
			 "mov %%rsp, %1\n\t"                                                       \
			 "mov %%rbp, %2"                                                           \
			 : "=r"(pc), "=r"(sp), "=r"(bp))

__attribute__((noinline)) unsigned hp_unwind(uint64_t *frames, unsigned max, uintptr_t drop_lo,
					     uintptr_t drop_hi)
{
	uintptr_t pc, sp, bp;
	CAPTURE_REGS(pc, sp, bp);
	int n = hp_unwind_regs(frames, max, drop_lo, drop_hi, pc, sp, bp);
	if (n < 0)
		n = (int)slow_walk(frames, max, drop_lo, drop_hi, 0);
	__asm__ volatile("" ::: "memory");
	return (unsigned)n;
}

__attribute__((noinline)) unsigned hp_unwind_memo_from(uint64_t *frames, unsigned max,
						       uintptr_t drop_lo, uintptr_t drop_hi,
						       uintptr_t frame, struct hp_unwind_memo *m,
						       const struct hp_unwind_memo *from,
						       int try_again, int *same)
{
	int n = walk_frame_memo(frames, max, drop_lo, drop_hi, frame, m, m ? from : NULL, try_again,
				same);
	if (n < 0)
		n = (int)slow_walk(frames, max, drop_lo, drop_hi, frame + 16);
	__asm__ volatile("" ::: "memory");
	return (unsigned)n;
}

unsigned hp_unwind_memo(uint64_t *frames, unsigned max, uintptr_t drop_lo, uintptr_t drop_hi,
			uintptr_t frame, struct hp_unwind_memo *m, int *same)
{
	unsigned n = hp_unwind_memo_from(frames, max, drop_lo, drop_hi, frame, m, m, 1, same);
	hp_unwind_memo_tail(m, frames, n);
	return n;
}

/* a - frame in units of 8 bytes into *o, if it is one and fits. */
static int rel_off(uintptr_t a, uintptr_t frame, uint16_t *o)
{
	uintptr_t d = a - frame;
	if (a < frame || (d & 7) || d >> 3 > UINT16_MAX)
		return 0;
	*o = (uint16_t)(d >> 3);
	return 1;
}

unsigned hp_unwind_rel_make(const struct hp_unwind_memo *m, uintptr_t frame, uint16_t *out,
			    unsigned cap)
{
	unsigned n = m->n;
	if (!n || m->dropped || m->cap_hit || HP_UNWIND_REL_HEAD + n > cap)
		return 0;
	/* What ended the walk must end it from any frame: max, or a rule that says the stack
	 * ends there. A walk stopped by a bound of this thread's stack could go on elsewhere. */
	if (!m->cut && (rule_for(m->st[n - 1].ra - 1) & 3) != K_END)
		return 0;
	uint16_t *ra = out + HP_UNWIND_REL_HEAD;
	for (unsigned i = 0; i < n; i++)
		if (!rel_off(m->st[i].cfa - 8, frame, &ra[i]))
			return 0;
	/* The memo's marks keep the last step's rbp for a walk that goes on from it; here
	 * nothing reads past the last step. need: whether a later step reads the rbp in
	 * effect after step i, taken from the last step down. */
	unsigned k = HP_UNWIND_REL_HEAD + n, nbp = 0;
	int need = 0;
	for (unsigned i = n; i-- > 0;) {
		const struct hp_unwind_step *s = &m->st[i];
		uintptr_t at = hp_step_bp_at(s);
		uint16_t o;
		/* The walk reads every saved rbp, needed or not, within the stack. */
		if (at && !rel_off(at, frame, &o))
			return 0;
		if (at && need) {
			if (k + 2 > cap || !rel_off(s->bp, frame, &out[k + 1]))
				return 0;
			out[k] = o;
			k += 2;
			nbp++;
		}
		need = (s->at & HP_STEP_READS_BP) || (!at && need);
	}
	uint32_t gen = hp_unwind_rel_gen_now();
	if (gen != (uint32_t)m->gen)
		return 0;
	out[0] = (uint16_t)gen;
	out[1] = (uint16_t)(gen >> 16);
	out[2] = ra[n - 1];
	out[3] = (uint16_t)nbp;
	out[4] = (uint16_t)need;
	return k;
}

int hp_unwind_rel_current(const uint16_t *c)
{
	return hp_unwind_rel_gen(c) == hp_unwind_rel_gen_now();
}

/* 0 where the word at frame + 8 * o[i] is f[i]. */
static inline uintptr_t rel_diff(const uint16_t *o, const uint64_t *f, unsigned i, uintptr_t frame)
{
	return *(const uintptr_t *)(frame + 8 * (uintptr_t)o[i]) ^ f[i];
}

static inline uintptr_t rel_diff4(const uint16_t *o, const uint64_t *f, uintptr_t frame)
{
	return rel_diff(o, f, 0, frame) | rel_diff(o, f, 1, frame) | rel_diff(o, f, 2, frame) |
	       rel_diff(o, f, 3, frame);
}

/* Whether the return address at each offset o[i] from frame is f[i], i < depth. Four words
 * a test: the first four, then from depth % 4 on (the first words again where depth is no
 * multiple of four), as a word read twice costs less than a branch a word: 5 instructions
 * a word where a test each took 7. */
static int rel_ras_hold(const uint16_t *o, const uint64_t *f, unsigned depth, uintptr_t frame)
{
	if (depth < 4) {
		for (unsigned i = 0; i < depth; i++)
			if (rel_diff(o, f, i, frame))
				return 0;
		return 1;
	}
	const uint16_t *end = o + depth;
	if (rel_diff4(o, f, frame))
		return 0;
	unsigned first = ((depth - 1) & 3) + 1;
	for (o += first, f += first; o < end; o += 4, f += 4)
		if (rel_diff4(o, f, frame))
			return 0;
	return 1;
}

/* Every word the walk would read is within the stack (the highest is the last return
 * address, the checks' top) and holds what it held: the same rules then read the same
 * words, as memo_holds argues. */
int hp_unwind_rel_holds(const uint16_t *c, const uint64_t *f, unsigned depth, uintptr_t frame)
{
	if (!hp_unwind_rel_current(c))
		return 0;
	uintptr_t hi = stack_top(frame);
	if (!hi || (frame & 7) || frame + 8 * (uintptr_t)c[2] + 8 > hi)
		return 0;
	const uint16_t *o = c + HP_UNWIND_REL_HEAD;
	if (!rel_ras_hold(o, f, depth, frame))
		return 0;
	o += depth;
	for (unsigned j = 0; j < c[3]; j++, o += 2)
		if (*(const uintptr_t *)(frame + 8 * (uintptr_t)o[0]) !=
		    frame + 8 * (uintptr_t)o[1])
			return 0;
	return 1;
}
