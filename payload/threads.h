/* threads.h - per-thread records, found by pthread_self() without TLS.
 *
 * Contract: hp_thread_self returns the calling thread's record from a fixed, mmap'd,
 * open-addressed table (NULL only if the table is full), inserting it on first use. A
 * record whose thread exited is inherited by the next thread with the same pthread_t;
 * that is exact because records only ever add. Only the owning thread touches `guard`.
 * Each record holds two site tables (stack id -> counters): the owner adds to the active
 * one under the record's spinlock (uncontended but for the collector's swap);
 * hp_threads_drain, called by the collector only, swaps each record's tables and hands
 * every counter of the retired one to a callback, then empties it.
 */
#ifndef HEAPPROF_THREADS_H
#define HEAPPROF_THREADS_H

#include <stdint.h>

#include "payload.h"

struct hp_site_ctr {
	uint32_t key; /* stack id + 1; 0 = empty */
	uint32_t reserved;
	uint64_t allocs, alloc_bytes, frees, freed_bytes;
};

/* An open-addressed, growable (mmap) table of counters; also the collector's merge. */
struct hp_site_tab {
	struct hp_site_ctr *e;
	uint32_t mask; /* capacity - 1; e == NULL when empty */
	uint32_t count;
};

struct hp_thread {
	_Atomic uintptr_t key; /* pthread_t; 0 = free */
	int guard;	       /* set while the thread runs payload code on its own behalf */
	hp_spin lock;
	unsigned active;
	struct hp_site_tab tab[2];
	_Atomic uint64_t untracked; /* frees of blocks not in the live map */
	_Atomic uint64_t lost;	    /* events that could not be recorded */
};

int hp_threads_init(void);
void hp_threads_fini(void);
struct hp_thread *hp_thread_self(void);

/* Adds one event's counters for stack_id to the caller's active table. */
void hp_thread_add(struct hp_thread *t, uint32_t stack_id, uint64_t allocs, uint64_t alloc_bytes,
		   uint64_t frees, uint64_t freed_bytes);

typedef void (*hp_site_fn)(const struct hp_site_ctr *c, void *arg);
/* Returns the cumulative untracked and lost counts of all records. */
void hp_threads_drain(hp_site_fn fn, void *arg, uint64_t *untracked, uint64_t *lost);

/* 0, or -1 if the table could not grow (nothing added). */
int hp_site_tab_add(struct hp_site_tab *t, const struct hp_site_ctr *c);
void hp_site_tab_clear(struct hp_site_tab *t);
void hp_site_tab_free(struct hp_site_tab *t);

#endif
