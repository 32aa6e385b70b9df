#include "keymap.h"

#include <stdlib.h>

static size_t hash(uint64_t a, uint32_t b)
{
	uint64_t h = (a ^ ((uint64_t)b << 32 | b)) * 0x9e3779b97f4a7c15ull;
	return (size_t)(h ^ (h >> 29));
}

static struct hp_keymap_slot *find(const struct hp_keymap *m, uint64_t a, uint32_t b)
{
	size_t mask = m->cap - 1;
	for (size_t i = hash(a, b) & mask;; i = (i + 1) & mask) {
		struct hp_keymap_slot *s = &m->slots[i];
		if (s->value == UINT32_MAX || (s->a == a && s->b == b))
			return s;
	}
}

uint32_t hp_keymap_get(const struct hp_keymap *m, uint64_t a, uint32_t b)
{
	if (m->cap == 0)
		return UINT32_MAX;
	return find(m, a, b)->value;
}

static int grow(struct hp_keymap *m)
{
	size_t cap = m->cap ? m->cap * 2 : 64;
	struct hp_keymap_slot *slots = malloc(cap * sizeof *slots);
	if (!slots)
		return -1;
	for (size_t i = 0; i < cap; i++)
		slots[i].value = UINT32_MAX;
	struct hp_keymap old = *m;
	m->slots = slots;
	m->cap = cap;
	for (size_t i = 0; i < old.cap; i++)
		if (old.slots[i].value != UINT32_MAX)
			*find(m, old.slots[i].a, old.slots[i].b) = old.slots[i];
	free(old.slots);
	return 0;
}

int hp_keymap_put(struct hp_keymap *m, uint64_t a, uint32_t b, uint32_t value)
{
	if ((m->used + 1) * 2 > m->cap && grow(m) != 0)
		return -1;
	struct hp_keymap_slot *s = find(m, a, b);
	if (s->value == UINT32_MAX)
		m->used++;
	*s = (struct hp_keymap_slot){.a = a, .b = b, .value = value};
	return 0;
}

void hp_keymap_free(struct hp_keymap *m)
{
	free(m->slots);
	*m = (struct hp_keymap){0};
}
