/* keymap.h - an open-addressed hash map from a (64-bit, 32-bit) key to a 32-bit value.
 *
 * Contract: grows by doubling at half load; memory is proportional to the entries
 * inserted, which the viewer bounds by the stream's bytes. No deletion.
 */
#ifndef HEAPPROF_VIEWER_KEYMAP_H
#define HEAPPROF_VIEWER_KEYMAP_H

#include <stddef.h>
#include <stdint.h>

struct hp_keymap_slot {
	uint64_t a;
	uint32_t b;
	uint32_t value; /* UINT32_MAX: empty */
};

struct hp_keymap {
	struct hp_keymap_slot *slots;
	size_t cap; /* power of two or 0 */
	size_t used;
};

/* The value for the key, or UINT32_MAX. */
uint32_t hp_keymap_get(const struct hp_keymap *m, uint64_t a, uint32_t b);
/* Inserts or replaces; value must not be UINT32_MAX. 0, or -1 when out of memory. */
int hp_keymap_put(struct hp_keymap *m, uint64_t a, uint32_t b, uint32_t value);
void hp_keymap_free(struct hp_keymap *m);

#endif
