/* u64map.h - an open-addressed map from 64-bit keys to array indexes.
 *
 * Contract: the profile model keeps its records in arrays and finds them by id or address
 * through this map. Keys are arbitrary (untrusted input), values are indexes into the
 * caller's array. The table grows by doubling; u64map_put fails (returns -1) only when
 * memory runs out.
 */
#ifndef HEAPPROF_VIEW_U64MAP_H
#define HEAPPROF_VIEW_U64MAP_H

#include <stddef.h>
#include <stdint.h>

struct u64map {
	uint64_t *keys;
	size_t *vals; /* index + 1; 0 marks an empty slot */
	size_t cap;   /* power of two, or 0 */
	size_t used;
};

/* Index stored for key, or -1 when absent. */
long u64map_get(const struct u64map *m, uint64_t key);
/* Stores key -> val (replacing any previous value); 0 or -1 (out of memory). */
int u64map_put(struct u64map *m, uint64_t key, size_t val);
void u64map_free(struct u64map *m);

#endif
