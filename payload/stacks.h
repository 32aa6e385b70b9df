/* stacks.h - interning call stacks.
 *
 * Contract: the hooks capture a stack with hp_unwind_memo_from (unwind.h) from their own
 * frame address, dropping the payload's text should it appear further up.
 * hp_stack_intern gives equal stacks one id (>= 1) in a global lock-free bounded table. Once
 * the table is full, a stack gets the id of its innermost frames and HP_FRAME_CUT
 * (hpformat.h), from a reserve kept for those; 0 means that reserve is full too. An id is
 * returned only once its frames are fully written, so hp_stacks_each_new (collector only)
 * can hand each stack that any thread holds an id for exactly once, at the latest in the
 * round after; being called once a round, it also has the unwinder forget its rules after
 * a dlclose.
 * hp_stack_intern_after interns a capture whose frames past the first k are the last frames
 * of the stack the thread captured before (the unwinder's tail_after): a cache of the
 * thread's own (hp_stack_cache_new, a few KB of hp_map memory, used by that thread only)
 * maps (that stack, the tail's length, the k new frames) to the id, so a thread that goes
 * back and forth between a few deep stacks does not hash and compare them whole each time.
 * Before the cache it tries the stack interned after that one the time before (a guess kept
 * in the table, checked frame by frame, no hash), for programs whose paths outnumber the
 * cache; only what the guess misses goes into the cache.
 * It returns what hp_stack_intern would.
 * hp_stack_guess spares a thread the walk when its next stack is the one some thread took
 * right after its last one the time before (a recursion's nodes: binary-trees walks every
 * node's path otherwise): that stack, if the checks made from a walk of it
 * (hp_stack_learn, unwind.h's hp_unwind_rel_make) hold from frame, which they do only if a
 * walk from there would return exactly its frames. A thread learns after a walk (the hooks
 * ask only where the walk's memo keeps failing), and the cache keeps the id of its last
 * guess (hp_stack_guessed) and, where the walk reads no rbp, the words its checks read: a
 * stack guessed right after another, which adds at most two words to the other's, is from
 * then on checked as those words and the other's (a delta, made once for the other stack
 * and again after a dlclose, in a sixty-fourth of max_memory), half a cache line read
 * instead of its checks and frames.
 */
#ifndef HEAPPROF_STACKS_H
#define HEAPPROF_STACKS_H

#include <stddef.h>
#include <stdint.h>

/* Ids never exceed this (directmap.h packs them in 19 bits). */
#define HP_STACKS_MAX_IDS (1u << 18)

int hp_stacks_init(uint64_t max_memory);
void hp_stacks_fini(void);

struct hp_unwind_memo;

uint32_t hp_stack_intern(const uint64_t *frames, unsigned depth);

struct hp_stack_cache;
size_t hp_stack_cache_size(void);
struct hp_stack_cache *hp_stack_cache_new(void);
void hp_stack_cache_free(struct hp_stack_cache *c);
/* c may be NULL (then it is hp_stack_intern); last is the id the previous capture got; m
 * is the memo of the capture, whose unwritten frames are written only if they are needed
 * (unwind.h, hp_unwind_memo_tail). */
uint32_t hp_stack_intern_after(struct hp_stack_cache *c, uint32_t last, uint64_t *frames,
			       unsigned depth, unsigned k, const struct hp_unwind_memo *m);

/* Starts loading the frames of the stack interned after last the time before, which
 * hp_stack_intern_after compares first, while the walk runs. */
void hp_stack_prefetch_after(uint32_t last);

uint32_t hp_stack_guess(struct hp_stack_cache *c, uint32_t last, uintptr_t frame);
uint32_t hp_stack_guessed(const struct hp_stack_cache *c);
/* hp_stack_guess after the thread's last guessed stack (hp_stack_guessed). */
uint32_t hp_stack_guess_again(struct hp_stack_cache *c, uintptr_t frame);
/* After a walk from frame into m that got id, the capture before having got last. */
void hp_stack_learn(uint32_t last, uint32_t id, const struct hp_unwind_memo *m, uintptr_t frame);

typedef void (*hp_stack_fn)(uint32_t id, const uint64_t *frames, uint32_t depth, void *arg);
void hp_stacks_each_new(hp_stack_fn fn, void *arg);

/* Bytes of the table in use. */
uint64_t hp_stacks_bytes(void);
/* One more than the largest id handed out so far. */
uint32_t hp_stacks_end(void);

#endif
