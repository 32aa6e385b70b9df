#include "u64map.h"

#include <stdlib.h>

static size_t slot_of(uint64_t key, size_t cap)
{
	/* Addresses share their low bits' alignment; mixing spreads them over the table. */
	key ^= key >> 33;
	key *= 0xff51afd7ed558ccdull;
	key ^= key >> 33;
	return (size_t)key & (cap - 1);
}

long u64map_get(const struct u64map *m, uint64_t key)
{
	if (!m->cap)
		return -1;
	for (size_t i = slot_of(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
		if (!m->vals[i])
			return -1;
		if (m->keys[i] == key)
			return (long)(m->vals[i] - 1);
	}
}

static void insert(uint64_t *keys, size_t *vals, size_t cap, uint64_t key, size_t val1)
{
	size_t i = slot_of(key, cap);
	while (vals[i] && keys[i] != key)
		i = (i + 1) & (cap - 1);
	keys[i] = key;
	vals[i] = val1;
}

static int grow(struct u64map *m)
{
	size_t cap = m->cap ? m->cap * 2 : 64;
	uint64_t *keys = calloc(cap, sizeof *keys);
	size_t *vals = calloc(cap, sizeof *vals);
	if (!keys || !vals) {
		free(keys);
		free(vals);
		return -1;
	}
	for (size_t i = 0; i < m->cap; i++)
		if (m->vals[i])
			insert(keys, vals, cap, m->keys[i], m->vals[i]);
	free(m->keys);
	free(m->vals);
	m->keys = keys;
	m->vals = vals;
	m->cap = cap;
	return 0;
}

int u64map_put(struct u64map *m, uint64_t key, size_t val)
{
	/* Keep the load factor under 1/2 so probe sequences stay short. */
	if ((m->used + 1) * 2 > m->cap && grow(m) < 0)
		return -1;
	size_t i = slot_of(key, m->cap);
	while (m->vals[i] && m->keys[i] != key)
		i = (i + 1) & (m->cap - 1);
	if (!m->vals[i])
		m->used++;
	m->keys[i] = key;
	m->vals[i] = val + 1;
	return 0;
}

void u64map_free(struct u64map *m)
{
	free(m->keys);
	free(m->vals);
	m->keys = NULL;
	m->vals = NULL;
	m->cap = 0;
	m->used = 0;
}
