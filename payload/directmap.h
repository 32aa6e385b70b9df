/* directmap.h - the live map's direct map (livemap.h): its layout, and the common insert
 * and remove, inline in the hooks that call hp_live_insert and hp_live_remove, where a call
 * and the value passed through memory cost a free and a malloc about 30 instructions of
 * some 490. Included by livemap.h only, after struct hp_live_val; everything else of the
 * map (making chunks, admitting pages, the table) is livemap.c's.
 */
#ifndef HEAPPROF_DIRECTMAP_H
#define HEAPPROF_DIRECTMAP_H

#include "payload.h"
#include "stacks.h"
#include "threads.h"

/* The direct map. A chunk serves 1 GiB of addresses: a bitmap of the pages of its words
 * written so far (what it costs), then one word per 16 bytes, and one spare word so that
 * the last granule's block has a word after it too. */
#define DM_CHUNK_SHIFT 30
#define DM_CHUNKS (1u << (47 - DM_CHUNK_SHIFT))
#define DM_WORDS (1ull << (DM_CHUNK_SHIFT - 4))
#define DM_WORDS_PER_PAGE 512u
#define DM_PAGES ((DM_WORDS + 1 + DM_WORDS_PER_PAGE - 1) / DM_WORDS_PER_PAGE)
_Static_assert(4096 / HP_LIVE_DIRECT_BYTES == DM_WORDS_PER_PAGE, "a 4 KiB page of words");

struct dm_chunk {
	_Atomic uint64_t written[(DM_PAGES + 63) / 64];
	_Atomic uint64_t w[DM_WORDS + 1];
};

#define DM_CHUNK_BYTES (sizeof(struct dm_chunk))
/* Besides its pages: the bitmap and the directory page its pointer is in, counted when
 * the chunk is made (a conservative count of what they touch). */
#define DM_CHUNK_FIXED (sizeof(((struct dm_chunk *)0)->written) + 4096)

/* A block's word: bit 62 set and 63 clear; the stack id in bits 0-18, the size in 19-28
 * (0 to DM_SIZE_INLINE, or DM_SIZE_NEXT: the next word holds it, with bit 63 set), sampled
 * in bit 29, the birth in 30-61. The word after a block of more than 16 bytes lies inside
 * the block, so no other live block has its own word there. Most programs' blocks fit the
 * word: with only 0 to 16 bytes there, hash-table's, shbench's, queue's and microbench's
 * every free loaded a second word and every allocation tested and stored one. Bits 0-28
 * and 62 of a word that holds its size are its site's key (threads.h, hp_site_key), so
 * the key's constants lay them out. */
#define DM_BLOCK HP_SITE_INLINE
#define DM_NEXT (1ull << 63)
/* What a removed block leaves in its word: a word once written never reads 0 again, so a
 * nonzero one proves its page admitted and the common insert skips the bitmap (a chain of
 * three dependent loads, directory, bitmap, word, cut to two). */
#define DM_GONE 1ull
#define DM_STACK_BITS HP_SITE_STACK_BITS
#define DM_SIZE_INLINE HP_SITE_INLINE_MAX
#define DM_SIZE_NEXT (DM_SIZE_INLINE + 1)
#define DM_SAMPLED (1ull << 29)
#define DM_BIRTH_SHIFT 30u
_Static_assert(HP_STACKS_MAX_IDS < (1u << DM_STACK_BITS), "stack ids fit in their bits");
_Static_assert(DM_STACK_BITS + HP_SITE_SIZE_BITS == 29, "the size's bits end below sampled's");
_Static_assert(DM_SAMPLED > (HP_SITE_WORD_MASK & ~DM_BLOCK), "a site key leaves sampled out");

extern _Atomic(struct dm_chunk *) *hp_dm_dir
    __attribute__((visibility("hidden"))); /* DM_CHUNKS pointers; NULL: the map is off */

static inline int dm_is_block(uint64_t e)
{
	return (e & (DM_BLOCK | DM_NEXT)) == DM_BLOCK;
}

/* The address bits that rule an address out of the direct map: above its 47 bits, or
 * not 16-byte aligned. */
#define DM_OUTSIDE (~((1ull << 47) - 1) | 15)

/* 1 if dir (hp_dm_dir) is on and the block at addr has its word there, never an entry in
 * the table (nor a count in the filter: the direct map is off when it is on). */
static inline int dm_covers_in(_Atomic(struct dm_chunk *) *dir, uintptr_t addr)
{
	return dir && !(addr & DM_OUTSIDE);
}

static inline int dm_covers(uintptr_t addr)
{
	return dm_covers_in(hp_dm_dir, addr);
}

/* The chunk of an addr dir covers, NULL if none was made. */
static inline struct dm_chunk *dm_chunk_in(_Atomic(struct dm_chunk *) *dir, uintptr_t addr)
{
	return atomic_load_explicit(&dir[addr >> DM_CHUNK_SHIFT], memory_order_acquire);
}

static inline struct dm_chunk *dm_chunk_at(uintptr_t addr)
{
	return dm_chunk_in(hp_dm_dir, addr);
}

static inline _Atomic uint64_t *dm_word(struct dm_chunk *c, uintptr_t addr)
{
	return &c->w[(addr >> 4) & (DM_WORDS - 1)];
}

/* The chunk of addr when dir covers it and the chunk was made, else NULL. */
__attribute__((always_inline)) static inline struct dm_chunk *
dm_chunk_covering(_Atomic(struct dm_chunk *) *dir, uintptr_t addr)
{
	return dm_covers_in(dir, addr) ? dm_chunk_in(dir, addr) : NULL;
}

/* The direct map for the hooks' inline insert and remove (hooks.c), which also add to the
 * thread's site counters without its lock and so need the fence too (threads.h,
 * hp_threads_fenced). Set by hp_hooks_arm: hp_dm_dir and DM_OUTSIDE when both are on,
 * else a directory of one empty entry and a mask of every bit, which lets only address 0
 * through, to that entry: a hook's one test of the address (an and with memory) rules out
 * the address and the map being off alike. Reset with hp_dm_dir. */
extern _Atomic(struct dm_chunk *) *hp_dm_near __attribute__((visibility("hidden")));
extern uint64_t hp_dm_near_outside __attribute__((visibility("hidden")));

/* The chunk of addr in hp_dm_near, NULL if it has none. */
__attribute__((always_inline)) static inline struct dm_chunk *dm_chunk_near(uintptr_t addr)
{
	return (addr & hp_dm_near_outside) ? NULL : dm_chunk_in(hp_dm_near, addr);
}

/* The word of addr in ch, or NULL without a chunk. */
__attribute__((always_inline)) static inline _Atomic uint64_t *dm_word_of(struct dm_chunk *ch,
									  uintptr_t addr)
{
	return ch ? dm_word(ch, addr) : NULL;
}

static inline _Atomic uint64_t *dm_bits(struct dm_chunk *c, uint64_t pg, uint64_t *bit)
{
	*bit = 1ull << (pg & 63);
	return &c->written[pg / 64];
}

/* 1 if page pg of the chunk's words was admitted and written already. */
static inline int dm_page_written(struct dm_chunk *c, uint64_t pg)
{
	uint64_t bit;
	return (atomic_load_explicit(dm_bits(c, pg, &bit), memory_order_relaxed) & bit) != 0;
}

static inline uint64_t dm_page_of(struct dm_chunk *c, const _Atomic uint64_t *w)
{
	return (uint64_t)(w - c->w) / DM_WORDS_PER_PAGE;
}

static inline int dm_written(struct dm_chunk *c, const _Atomic uint64_t *w)
{
	return dm_page_written(c, dm_page_of(c, w));
}

__attribute__((always_inline)) static inline uint64_t dm_pack(struct hp_live_val v)
{
	uint64_t n = v.size & ~HP_LIVE_SAMPLED;
	return DM_BLOCK | v.stack | (n <= DM_SIZE_INLINE ? n : DM_SIZE_NEXT) << DM_STACK_BITS |
	       ((v.size & HP_LIVE_SAMPLED) ? DM_SAMPLED : 0) |
	       (uint64_t)v.birth_ms << DM_BIRTH_SHIFT;
}

static inline uint32_t dm_stack(uint64_t e)
{
	return (uint32_t)(e & ((1u << DM_STACK_BITS) - 1));
}

/* A size word overwritten by another block's (a block freed behind the payload's back,
 * whose memory went to another) leaves the size unknown: 0. */
__attribute__((always_inline)) static inline struct hp_live_val dm_unpack(uint64_t e,
									  const _Atomic uint64_t *w)
{
	struct hp_live_val v = {.stack = dm_stack(e), .birth_ms = (uint32_t)(e >> DM_BIRTH_SHIFT)};
	uint64_t n = e >> DM_STACK_BITS & DM_SIZE_NEXT;
	if (n == DM_SIZE_NEXT) {
		uint64_t x = atomic_load_explicit(w + 1, memory_order_relaxed);
		n = (x & DM_NEXT) ? x & ~DM_NEXT : 0;
	}
	v.size = n | ((e & DM_SAMPLED) ? HP_LIVE_SAMPLED : 0);
	return v;
}

/* Writes v as the block of word w, whose pages are written. Release: hp_live_each, reading
 * the block's word, reads its size word after it. */
static inline void dm_store(_Atomic uint64_t *w, struct hp_live_val v)
{
	uint64_t n = v.size & ~HP_LIVE_SAMPLED;
	if (n > DM_SIZE_INLINE)
		atomic_store_explicit(w + 1, n | DM_NEXT, memory_order_relaxed);
	atomic_store_explicit(w, dm_pack(v), memory_order_release);
}

static inline int dm_remove(_Atomic uint64_t *w, struct hp_live_val *v)
{
	uint64_t e = atomic_load_explicit(w, memory_order_relaxed);
	if (!dm_is_block(e))
		return 0;
	*v = dm_unpack(e, w);
	atomic_store_explicit(w, DM_GONE, memory_order_relaxed);
	return 1;
}

/* The word of the common insert of a block of n bytes at addr in ch (addr's chunk, or
 * NULL), else NULL: a word of a chunk made already, not a block's, whose page was admitted
 * (a word written before, DM_GONE, says so without the bitmap), and whose size word, if it
 * needs one, lies in the same page or one written already. A word never written is a
 * block's first at that address: parse-json's DOM, whose blocks start at other addresses
 * each document, had 45% of its allocations of its first three documents there and 10% of
 * the next three, all out of line. The filter is never on with the direct map. */
__attribute__((always_inline)) static inline _Atomic uint64_t *
dm_word_again(struct dm_chunk *ch, uintptr_t addr, uint64_t n)
{
	if (!ch)
		return NULL;
	_Atomic uint64_t *w = dm_word(ch, addr);
	uint64_t e = atomic_load_explicit(w, memory_order_relaxed);
	if (dm_is_block(e) || (!e && !dm_written(ch, w)) ||
	    (n > DM_SIZE_INLINE && (addr >> 4) % DM_WORDS_PER_PAGE == DM_WORDS_PER_PAGE - 1 &&
	     !dm_written(ch, w + 1)))
		return NULL;
	return w;
}

/* The common insert, done when it returns 1 (dm_word_again). */
__attribute__((always_inline)) static inline int dm_insert_again(uintptr_t addr,
								 struct hp_live_val v)
{
	_Atomic uint64_t *w =
	    dm_word_again(dm_chunk_covering(hp_dm_dir, addr), addr, v.size & ~HP_LIVE_SAMPLED);
	if (!w)
		return 0;
	dm_store(w, v);
	return 1;
}

#endif
