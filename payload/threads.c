#include "threads.h"

#include <pthread.h>
#include <string.h>

#define THREADS_CAP 16384u /* records; the table is reserved, pages are touched on use */
#define SITE_TAB_MIN 64u

static struct hp_thread *threads;

int hp_threads_init(void)
{
	threads = hp_map(THREADS_CAP * sizeof *threads);
	return threads ? 0 : -1;
}

void hp_threads_fini(void)
{
	if (!threads)
		return;
	for (unsigned i = 0; i < THREADS_CAP; i++) {
		hp_site_tab_free(&threads[i].tab[0]);
		hp_site_tab_free(&threads[i].tab[1]);
	}
	hp_unmap(threads, THREADS_CAP * sizeof *threads);
	threads = NULL;
}

struct hp_thread *hp_thread_self(void)
{
	uintptr_t self = (uintptr_t)pthread_self();
	unsigned i = (unsigned)hp_hash64(self) & (THREADS_CAP - 1);
	for (unsigned n = 0; n < THREADS_CAP; n++, i = (i + 1) & (THREADS_CAP - 1)) {
		struct hp_thread *t = &threads[i];
		uintptr_t k = atomic_load_explicit(&t->key, memory_order_acquire);
		if (k == self)
			return t;
		if (k == 0) {
			uintptr_t expect = 0;
			if (atomic_compare_exchange_strong(&t->key, &expect, self))
				return t;
			if (expect == self)
				return t;
		}
	}
	return NULL;
}

static int tab_resize(struct hp_site_tab *t, uint32_t cap)
{
	struct hp_site_ctr *e = hp_map(cap * sizeof *e);
	if (!e)
		return -1;
	struct hp_site_tab n = {.e = e, .mask = cap - 1, .count = 0};
	for (uint32_t i = 0; t->e && i <= t->mask; i++)
		if (t->e[i].key)
			hp_site_tab_add(&n, &t->e[i]);
	hp_site_tab_free(t);
	*t = n;
	return 0;
}

int hp_site_tab_add(struct hp_site_tab *t, const struct hp_site_ctr *c)
{
	if (!t->e && tab_resize(t, SITE_TAB_MIN) < 0)
		return -1;
	if ((t->count + 1) * 4 > (t->mask + 1) * 3 && tab_resize(t, (t->mask + 1) * 2) < 0)
		return -1;
	uint32_t i = (uint32_t)hp_hash64(c->key) & t->mask;
	for (;; i = (i + 1) & t->mask) {
		struct hp_site_ctr *e = &t->e[i];
		if (e->key == c->key) {
			e->allocs += c->allocs;
			e->alloc_bytes += c->alloc_bytes;
			e->frees += c->frees;
			e->freed_bytes += c->freed_bytes;
			return 0;
		}
		if (e->key == 0) {
			*e = *c;
			t->count++;
			return 0;
		}
	}
}

void hp_site_tab_clear(struct hp_site_tab *t)
{
	if (t->e && t->count)
		memset(t->e, 0, (t->mask + 1) * sizeof *t->e);
	t->count = 0;
}

void hp_site_tab_free(struct hp_site_tab *t)
{
	if (t->e)
		hp_unmap(t->e, (t->mask + 1) * sizeof *t->e);
	*t = (struct hp_site_tab){0};
}

void hp_thread_add(struct hp_thread *t, uint32_t stack_id, uint64_t allocs, uint64_t alloc_bytes,
		   uint64_t frees, uint64_t freed_bytes)
{
	struct hp_site_ctr c = {
	    .key = stack_id + 1,
	    .allocs = allocs,
	    .alloc_bytes = alloc_bytes,
	    .frees = frees,
	    .freed_bytes = freed_bytes,
	};
	hp_spin_lock(&t->lock);
	int rc = hp_site_tab_add(&t->tab[t->active], &c);
	hp_spin_unlock(&t->lock);
	if (rc < 0)
		atomic_fetch_add_explicit(&t->lost, 1, memory_order_relaxed);
}

void hp_threads_drain(hp_site_fn fn, void *arg, uint64_t *untracked, uint64_t *lost)
{
	uint64_t u = 0, l = 0;
	for (unsigned i = 0; i < THREADS_CAP; i++) {
		struct hp_thread *t = &threads[i];
		if (!atomic_load_explicit(&t->key, memory_order_acquire))
			continue;
		hp_spin_lock(&t->lock);
		unsigned old = t->active;
		t->active ^= 1;
		hp_spin_unlock(&t->lock);
		/* The owner now writes only the other table: this one is ours until the
		 * next swap, which only we make. */
		struct hp_site_tab *tab = &t->tab[old];
		for (uint32_t j = 0; tab->e && tab->count && j <= tab->mask; j++)
			if (tab->e[j].key)
				fn(&tab->e[j], arg);
		hp_site_tab_clear(tab);
		u += atomic_load_explicit(&t->untracked, memory_order_relaxed);
		l += atomic_load_explicit(&t->lost, memory_order_relaxed);
	}
	*untracked = u;
	*lost = l;
}
