/* collector.h - the "heapprof" thread that streams rounds to the pipe.
 *
 * Contract: hp_collector_start starts the thread (every signal blocked, so a closed pipe
 * can never raise SIGPIPE in the target) writing to wfd, which it then owns. Every
 * interval it writes new MODULEs, new STACKs, the SITES deltas and the ROUND, with
 * blocking writes; the final round (full mode) also walks the live map once for the LIVE
 * records. It converts the threads' HP_FX counters to the format's integers (rounding each
 * entry of each round), and makes the stack-0 entries of basic and extended modes from
 * the threads' totals. It also switches to sampling when the stack table has taken the
 * payload past max_memory (the live map and site tables ask before they grow). If a write fails it
 * restores every slot and closes wfd (quiet). hp_collector_stop (after the slots were
 * restored) asks it for a final round and END, then to close wfd, and returns at once.
 * Either way it then parks (heapprof_collector, hpabi.h) until hp_collector_free, after
 * which it calls free_all (which unmaps all of the payload's memory, its own with
 * hp_collector_fini) and ends. hp_collector_free must come only once no other thread can
 * be inside payload code. hp_collector_reap joins a collector that has ended;
 * hp_collector_end stops, frees and joins it, for the payload's destructor.
 */
#ifndef HEAPPROF_COLLECTOR_H
#define HEAPPROF_COLLECTOR_H

#include <stdint.h>

int hp_collector_start(int wfd, uint64_t start_mono_ns, void (*free_all)(void));
void hp_collector_stop(void);
void hp_collector_free(void);
void hp_collector_reap(void);
void hp_collector_end(void);
void hp_collector_fini(void);
/* After a dlopen, from any thread: sends the modules it loaded with this round, so a
 * library unloaded before the round ends still names its stacks. first_stack:
 * hp_stacks_end() before the dlopen began; a load into another module's addresses goes to
 * the viewer after the stacks interned before it. */
void hp_collector_note_modules(uint32_t first_stack);
/* In a forked child: the pipe belongs to the parent's session. */
void hp_collector_forget(void);
/* In a child forked past the fork hook (daemon(), a raw clone), from its first hooked
 * call: the same, once, closing the fd only if it is still the pipe (the child may have
 * closed it and reused the number). */
void hp_collector_forget_late(void);
/* The process's resident set, from /proc/self/statm (0 if unreadable). */
uint64_t hp_rss_bytes(void);

#endif
