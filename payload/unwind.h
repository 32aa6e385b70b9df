/* unwind.h - x86_64 stack walking from cached per-address CFA rules.
 *
 * Not libunwind, which keeps a pipe open and registers a thread-exit destructor, so
 * unloading it would break the target; the results equal libgcc's _Unwind_Backtrace
 * (linked in privately) frame for frame.
 * Contract: hp_unwind fills frames[] with return addresses, starting with the one into its
 * own caller, and returns the depth; frames inside [drop_lo, drop_hi) are skipped and do not
 * count towards max. For each code address it derives from the module's .eh_frame (found
 * with glibc's lock-free _dl_find_object) how to find the caller: CFA = rsp+N or rbp+N,
 * rbp saved at CFA-N or unchanged, return address at CFA-8. Rules are kept in a global,
 * bounded, lock-free table in hp_map memory (counted in hp_mapped_bytes). A frame the fast path
 * cannot handle (expression rules, other CFA registers, signal frames, no FDE, stack bounds
 * unknown) makes the whole capture fall back to hp_unwind_slow (_Unwind_Backtrace), so
 * the result always equals hp_unwind_slow's. Reads of the stack stay within the calling
 * thread's stack and the walk stops rather than fault on a corrupt one.
 * hp_unwind works without the table (slower) when hp_unwind_init was not called or failed.
 * hp_unwind_check_modules (one thread, outside hooks) empties the table after a dlclose.
 * hp_unwind_memo walks from a frame address instead: the rbp of a function of the calling
 * thread built with frame pointers (the payload's hooks), so frames[0] is that function's
 * return address and no frame below it is walked. With one thread's memo of its last walk,
 * once a step reaches a frame that walk had (same CFA and return address, and the same rbp
 * where a later step reads it), the rest of it is taken if every return address, and every
 * saved rbp a later step reads, is still there, which is what a walk would read with the
 * same rules; no rule is looked up for those frames. An rbp that no later step reads (code
 * without frame pointers uses it as a scratch register) need not match, so a walk splices
 * at the first frame it shares with the last one. *same says the frames equal the last
 * walk's; the memo's walked says how many steps this walk took by the rules. The memo may
 * be NULL. hp_unwind_memo_from does the same with two memos of one thread: it splices against
 * one's walk and keeps the result in the other.
 */
#ifndef HEAPPROF_UNWIND_H
#define HEAPPROF_UNWIND_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <emmintrin.h>

#include "hpformat.h"

/* One frame of a walk: its CFA, the return address read at CFA-8, and rbp after the step
 * with the address it was read from (hp_step_bp_at; 0: rbp unchanged); in the flags
 * (HP_STEP_*), whether the step's rule read rbp (the CFA is rbp + N), whether rbp was
 * read from below the step before's CFA (the frame of a later walk may begin above it),
 * and, in a memo, whether a later step reads this rbp. The flags live in the low bits of
 * the address, which the walk only ever reads aligned: 32 bytes a step, where 40 made a
 * splice's copy a fifth longer and the memos a fifth larger. */
#define HP_STEP_READS_BP 1u
#define HP_STEP_BP_LIVE 2u
#define HP_STEP_BP_LOW 4u
#define HP_STEP_FLAGS 7u
struct hp_unwind_step {
	uintptr_t cfa, ra, bp;
	uintptr_t at; /* the address rbp was read from | the flags */
};

static inline uintptr_t hp_step_bp_at(const struct hp_unwind_step *s)
{
	return s->at & ~(uintptr_t)HP_STEP_FLAGS;
}

#define HP_UNWIND_NO_TAIL (~0u)

#define HP_MEMO_CHECKS 32u
#define HP_MEMO_CHECKS_UNMADE 0u
#define HP_MEMO_CHECKS_LONG (~0u)

/* A thread's last walk; zeroed = none. */
struct hp_unwind_memo {
	unsigned long gen; /* hp_unwind_check_modules's count when it was taken */
	unsigned n, cap;   /* steps held, room */
	unsigned max;	   /* the max it was taken with */
	int cut;	   /* stopped at max rather than at the end of the stack */
	int cap_hit;	   /* had more steps than room: unusable */
	unsigned walked;   /* steps the last walk took by the rules, not from the memo */
	/* After a walk: k when its frames past the first k are the walk before's last frames
	 * (it spliced, and neither walk stopped at max), else HP_UNWIND_NO_TAIL. */
	unsigned tail_after;
	/* After hp_unwind_memo_from: the frames from unwritten on (HP_UNWIND_NO_TAIL: none)
	 * were not written; they are the return addresses of the steps borrowed from the last
	 * walk, those after the walked ones (hp_unwind_memo_tail). */
	unsigned unwritten;
	int dropped;   /* some step's return address was dropped (in [drop_lo, drop_hi)) */
	uint32_t id;   /* the caller's, kept with the walk (the payload's hooks: its stack id) */
	uint16_t next; /* the caller's too (the hooks: the memo that followed this one) */
	/* Checks of this walk (hp_unwind_memo_repeats) that failed in a row before one passed;
	 * the caller zeroes it when it takes the memo for walks of another path. */
	unsigned misses;
	/* hp_unwind_memo_repeats's words, made from the steps when the walk first repeats:
	 * HP_MEMO_CHECKS_UNMADE, _LONG (more words than chk holds), else 1 + the number of
	 * (address, value) pairs in chk, the first one the return address at frame + 8. */
	unsigned nchk;
	/* The frame the walk began at while chk holds its words, else 0: all the inline check
	 * needs to know besides the modules' count and max. */
	uintptr_t chk_at;
	/* While chk_at is set, the inline check's loop as it runs: the end of its pairs and
	 * its count up to 0 (-2 * the pairs, two at least and even), kept so as not to work
	 * them out from nchk at every allocation. */
	const uintptr_t *chk_end;
	intptr_t chk_from;
	uintptr_t chk[2 * HP_MEMO_CHECKS];
	struct hp_unwind_step st[];
};

int hp_unwind_init(void);
void hp_unwind_fini(void);
void hp_unwind_check_modules(void);

unsigned hp_unwind(uint64_t *frames, unsigned max, uintptr_t drop_lo, uintptr_t drop_hi);
unsigned hp_unwind_slow(uint64_t *frames, unsigned max, uintptr_t drop_lo, uintptr_t drop_hi);

/* A memo for walks of at most max frames (cap = max + 16 steps), in hp_map memory of
 * hp_unwind_memo_size bytes; NULL when none could be mapped. hp_unwind_memos_reserve
 * reserves n of them in one go, the i-th i * hp_unwind_memo_size(max) bytes after the
 * first, behind HP_UNWIND_MEMOS_HEAD zeroed bytes that are the caller's
 * (hp_unwind_memos_head: the payload's hooks keep there which walk each memo began with,
 * and the order the memos are taken in).
 * Only the first is ready for walks: each other one is made ready by hp_unwind_memos_ready
 * before its first use, and its pages are touched and counted in hp_mapped_bytes only then
 * (a thread of one allocation path uses two of its 28 memos: 7 KB, not 87). */
#define HP_UNWIND_MEMOS_HEAD 1024u
size_t hp_unwind_memo_size(unsigned max);
struct hp_unwind_memo *hp_unwind_memo_new(unsigned max);
void hp_unwind_memo_free(struct hp_unwind_memo *m);
struct hp_unwind_memo *hp_unwind_memos_reserve(unsigned max, unsigned n);
/* 1 when memo i was not ready before. */
int hp_unwind_memos_ready(struct hp_unwind_memo *first, unsigned i);
void hp_unwind_memos_free(struct hp_unwind_memo *m, unsigned n);
static inline void *hp_unwind_memos_head(struct hp_unwind_memo *first)
{
	return (char *)first - HP_UNWIND_MEMOS_HEAD;
}
unsigned hp_unwind_memo(uint64_t *frames, unsigned max, uintptr_t drop_lo, uintptr_t drop_hi,
			uintptr_t frame, struct hp_unwind_memo *m, int *same);
/* 1 if m's last walk began at frame: its first step, like every walk's from a frame
 * address, read the return address at frame + 8 and the caller's rbp at frame. */
static inline int hp_unwind_memo_begins(const struct hp_unwind_memo *m, uintptr_t frame)
{
	return m->n && hp_step_bp_at(&m->st[0]) == frame &&
	       m->st[0].ra == *(const uintptr_t *)(frame + 8);
}
/* 1 if a walk from frame with max would be m's last walk again, without walking: m's first
 * step began at frame, and every return address and every saved rbp a later step reads is
 * still in place (the modules unchanged since). The id kept with the walk is then the
 * walk's. It may say 0 without looking, for a memo whose checks keep failing (misses):
 * the caller then walks, and finds the same frames all the same. Inline, as every
 * allocation of full mode that repeats a path asks it: its common case is a loop over m's
 * words, the rest hp_unwind_memo_repeats_slow's. */
extern _Atomic unsigned long hp_unwind_gen __attribute__((visibility("hidden")));
int hp_unwind_memo_repeats_slow(struct hp_unwind_memo *m, uintptr_t frame, unsigned max);
static inline int hp_unwind_memo_checks_hold(const struct hp_unwind_memo *m)
{
	/* Counted up to 0 from below the end: the count is the loop's test. There is always a
	 * pair, the return address at the frame's (memo_checks), so the count is tested only
	 * after it. Two pairs a turn, their differences ored and tested once (an odd count is
	 * made even with a pair that always holds): 5 instructions a pair, not 6. */
	const uintptr_t *end = m->chk_end;
	intptr_t i = m->chk_from;
	do {
		if ((*(const uintptr_t *)end[i] ^ end[i + 1]) |
		    (*(const uintptr_t *)end[i + 2] ^ end[i + 3]))
			return 0;
	} while (i += 4);
	return 1;
}
/* 1 if m's checks were made at frame, with the modules as they are. */
static inline int hp_unwind_memo_checks_at(const struct hp_unwind_memo *m, uintptr_t frame)
{
	return m->chk_at == frame &&
	       m->gen == atomic_load_explicit(&hp_unwind_gen, memory_order_relaxed);
}
/* 1 if m's checks were made at frame and all hold; 0 too when they were not made there
 * (hp_unwind_memo_repeats then knows more). For a memo only ever walked with one max,
 * which its checks were made for: max is not tested (3 instructions an allocation of the
 * hooks'). */
static inline int hp_unwind_memo_holds(const struct hp_unwind_memo *m, uintptr_t frame)
{
	return hp_unwind_memo_checks_at(m, frame) && hp_unwind_memo_checks_hold(m);
}
static inline int hp_unwind_memo_repeats(struct hp_unwind_memo *m, uintptr_t frame, unsigned max)
{
	if (!hp_unwind_memo_checks_at(m, frame) || m->max != max)
		return hp_unwind_memo_repeats_slow(m, frame, max);
	return hp_unwind_memo_checks_hold(m);
}
/* Checks of m that failed this many times in a row (misses) say its path keeps changing,
 * as each depth's of a recursion does: its walks are then seldom made again. */
#define HP_MEMO_SKIP_AFTER 4u
static inline int hp_unwind_memo_failing(const struct hp_unwind_memo *m)
{
	return m->misses >= HP_MEMO_SKIP_AFTER;
}
/* The same walk with two memos: it splices against from's last walk and leaves its own in
 * m (from may be m; both made with the same max); first, though, it is taken whole from m
 * when it is m's last walk again (unless try_again is 0: the caller found
 * hp_unwind_memo_repeats false already). *same is then 1 (m's last walk), or 2 when the
 * frames are from's last walk's, and m's tail_after is counted against from's walk.
 * The frames a splice takes from from's walk may be left unwritten (m's unwritten): a
 * caller that reads them calls hp_unwind_memo_tail first. The first tail_after frames are
 * always written, so a caller that knows the stack from those and from's (stacks.c) saves
 * the copy. */
unsigned hp_unwind_memo_from(uint64_t *frames, unsigned max, uintptr_t drop_lo, uintptr_t drop_hi,
			     uintptr_t frame, struct hp_unwind_memo *m,
			     const struct hp_unwind_memo *from, int try_again, int *same);

/* Writes the frames hp_unwind_memo_from left unwritten, n in all; m may be NULL. */
static inline void hp_unwind_memo_tail(const struct hp_unwind_memo *m, uint64_t *frames, unsigned n)
{
	if (!m || m->unwritten == HP_UNWIND_NO_TAIL)
		return;
	const struct hp_unwind_step *s = &m->st[m->walked];
	for (unsigned i = m->unwritten; i < n; i++)
		frames[i] = (s++)->ra;
}

/* A walk as checks that hold for it from any frame address: for a program that takes
 * many paths in turn, none of which its memos hold (binary-trees' nodes, each a new path),
 * a stack's checks let a later allocation take that stack without a walk. Words of 16
 * bits, offsets from the frame in units of 8 bytes: HP_UNWIND_REL_HEAD of them (the
 * modules' count in two, the highest offset read, the count of rbp checks, and 1 if a step
 * reads the hook's own rbp, else 0), then the return address's offset of each step, then
 * an (offset, value's offset) pair for each saved rbp a later step reads.
 * hp_unwind_rel_make makes them from a memo just walked from frame, into out (cap words):
 * how many words, 0 when they cannot express that walk (frames dropped, offsets past 16
 * bits, a walk that ended other than at a rule's end of the stack or at max).
 * hp_unwind_rel_holds: 1 if a walk from frame now would take the same steps, whose return
 * addresses are f (depth of them), as the one the checks were made from. */
#define HP_UNWIND_REL_HEAD 5u
unsigned hp_unwind_rel_make(const struct hp_unwind_memo *m, uintptr_t frame, uint16_t *out,
			    unsigned cap);
int hp_unwind_rel_holds(const uint16_t *c, const uint64_t *f, unsigned depth, uintptr_t frame);
/* The modules' count in force now, and the one checks c were made under, as the checks
 * keep it (its low 32 bits). */
static inline uint32_t hp_unwind_rel_gen_now(void)
{
	return (uint32_t)atomic_load_explicit(&hp_unwind_gen, memory_order_relaxed);
}

static inline uint32_t hp_unwind_rel_gen(const uint16_t *c)
{
	return (uint32_t)c[0] | (uint32_t)c[1] << 16;
}

/* 1 if checks c were made under the modules' count in force now. */
int hp_unwind_rel_current(const uint16_t *c);

/* A return address of a walk and where it was read. A walk that reads no rbp is made of
 * return addresses and frame sizes alone: from the address of one of its return addresses
 * on, it goes the same way wherever it began, so a thread that keeps the words of the
 * stack it checked last (outermost first) can check the next one as the words that stack
 * adds (stacks.c, the guess's deltas). */
struct hp_unwind_word {
	uintptr_t at;
	uint64_t ra;
};

/* 1 if checks c read no rbp, so that hp_unwind_rel_word describes their walk. */
static inline int hp_unwind_rel_plain(const uint16_t *c)
{
	return !c[3] && !c[4];
}

/* Of checks c that held from frame, with return addresses f: step i's word. */
static inline struct hp_unwind_word hp_unwind_rel_word(const uint16_t *c, const uint64_t *f,
						       unsigned i, uintptr_t frame)
{
	return (struct hp_unwind_word){frame + 8 * (uintptr_t)c[HP_UNWIND_REL_HEAD + i], f[i]};
}

#define HP_UNWIND_ADDED 2

/* A thread's copy of the words of the stack it checked last, outermost first, with room
 * for a delta's added words past the deepest stack. Values and addresses in arrays of their
 * own: two words are compared at a time, their values loaded into one register and xored
 * with a 16-byte pair of ra[], where a word a time took a load of its value, an xor with
 * memory and an or (binary-trees' node, some 22 words: 334.9 payload instructions to
 * 314.3, and about a tenth more nodes a second). */
#define HP_UNWIND_WORDS_MAX (HP_MAX_DEPTH + HP_UNWIND_ADDED)
struct hp_unwind_words {
	_Alignas(16) uint64_t ra[HP_UNWIND_WORDS_MAX];
	uintptr_t at[HP_UNWIND_WORDS_MAX];
};
_Static_assert(HP_UNWIND_WORDS_MAX % 2 == 0, "ra[] in 16-byte pairs");

static inline void hp_unwind_words_put(struct hp_unwind_words *w, unsigned i,
				       struct hp_unwind_word x)
{
	w->at[i] = x.at;
	w->ra[i] = x.ra;
}

static inline struct hp_unwind_word hp_unwind_words_get(const struct hp_unwind_words *w, unsigned i)
{
	return (struct hp_unwind_word){w->at[i], w->ra[i]};
}

/* The values of the words at at[0] and at[1], xored with ra[0] and ra[1] (16-byte
 * aligned). */
static inline __m128i hp_unwind_pair_diff(const uintptr_t *at, const uint64_t *ra)
{
	__m128i v = _mm_loadl_epi64((const __m128i *)at[0]);
	v = _mm_castpd_si128(_mm_loadh_pd(_mm_castsi128_pd(v), (const double *)at[1]));
	return _mm_xor_si128(v, _mm_load_si128((const __m128i *)ra));
}

/* 1 if a walk from frame now would take up to HP_UNWIND_ADDED steps, whose return
 * addresses ra[] are at offsets off[] from it (all below join), and then go on as the plain
 * walk whose first keep words (keep >= 1) w holds did from its word keep - 1, found at
 * frame + 8 * join: every one of those words holds. Fewer steps are given by repeating a
 * word (the join's, if none), since comparing a word twice costs less than a loop.
 * The caller vouches that w's words are of the calling thread's stack, found below its top
 * by the check that took them (a thread's stack keeps its top: stacks.c keeps them per
 * thread record, whose pthread_t is that top): frame, tied to word keep - 1 by join, is
 * then below them on the same stack, and every word read lies between frame and word 0,
 * so none can fault. Inline, with no bound of its own to look up, as a recursion's every
 * node asks it (stacks.c, the guess's deltas). One test at the end, as
 * hp_unwind_rel_holds's. */
static inline int hp_unwind_words_hold(const struct hp_unwind_words *w, unsigned keep,
				       unsigned join, const uint16_t *off, const uint64_t *ra,
				       uintptr_t frame)
{
	if (w->at[keep - 1] != frame + 8 * (uintptr_t)join)
		return 0;
	_Static_assert(HP_UNWIND_ADDED == 2, "the added words, compared below");
	uintptr_t diff = (*(const uintptr_t *)(frame + 8 * (uintptr_t)off[0]) ^ ra[0]) |
			 (*(const uintptr_t *)(frame + 8 * (uintptr_t)off[1]) ^ ra[1]);
	if (keep & 1)
		diff |= *(const uintptr_t *)w->at[keep - 1] ^ w->ra[keep - 1];
	__m128i acc = _mm_cvtsi64_si128((long long)diff);
	const uintptr_t *at = w->at;
	const uint64_t *r = w->ra, *end = w->ra + (keep & ~1u);
	if (keep & 2) {
		acc = _mm_or_si128(acc, hp_unwind_pair_diff(at, r));
		at += 2;
		r += 2;
	}
	for (; r < end; at += 4, r += 4)
		acc = _mm_or_si128(acc, _mm_or_si128(hp_unwind_pair_diff(at, r),
						     hp_unwind_pair_diff(at + 2, r + 2)));
	return !_mm_cvtsi128_si64(_mm_or_si128(acc, _mm_unpackhi_epi64(acc, acc)));
}

/* The walk from a given register state of the calling thread (pc exact, not a return
 * address); -1 when the slow path must do it. */
int hp_unwind_regs(uint64_t *frames, unsigned max, uintptr_t drop_lo, uintptr_t drop_hi,
		   uintptr_t pc, uintptr_t sp, uintptr_t bp);

#endif
