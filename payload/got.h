/* got.h - finding and rewriting a module's GOT slots.
 *
 * Contract: pure functions on one module, described by the dl_phdr_info that
 * dl_iterate_phdr hands its callback. got_walk reports every R_X86_64_JUMP_SLOT and
 * R_X86_64_GLOB_DAT relocation (DT_JMPREL and DT_RELA tables, each once) with its symbol
 * name and slot address. got_write_all stores a pointer into each of a module's slots with
 * a single aligned store, making each read-only (RELRO) page writable once for all of its
 * slots and giving it back its protection. Call it only from inside the dl_iterate_phdr
 * callback for the module, so that a concurrent dlclose cannot unmap the slots, and never
 * from two threads at once for the same page (dl_iterate_phdr's lock serializes callers).
 */
#ifndef HEAPPROF_GOT_H
#define HEAPPROF_GOT_H

#include <link.h>
#include <stdint.h>

struct got_slot {
	const char *name;
	void **slot;
	uint32_t type; /* R_X86_64_JUMP_SLOT or R_X86_64_GLOB_DAT */
};

typedef void (*got_fn)(const struct got_slot *s, void *arg);

/* Calls fn for each slot; returns how many, or -1 if the module has no usable dynamic
 * section. */
int got_walk(const struct dl_phdr_info *info, got_fn fn, void *arg);

/* The mapped range [*lo, *hi) of the module's PT_LOAD segments. */
void got_module_range(const struct dl_phdr_info *info, uintptr_t *lo, uintptr_t *hi);

/* Sets called[i] when some instruction in the module's executable segments calls or jumps
 * through slots[i] (call/jmp *disp32(%rip), how -fno-plt code calls); a GLOB_DAT slot
 * only read (the address of a function taken by PIC code) is left 0. */
void got_called_through(const struct dl_phdr_info *info, void **const *slots, int n,
			unsigned char *called);

/* Writes values[i] into slots[i] for the first GOT_WRITE_MAX of n; returns how many were
 * written (a slot outside the module or on a page that could not be made writable is
 * not). Each page is made writable and given back its protection once: with two mprotect
 * calls a slot, redis-server's heapprof_stop made 82 syscalls in the thread the injector
 * holds, 28 without. */
#define GOT_WRITE_MAX 128
int got_write_all(const struct dl_phdr_info *info, void **const *slots, void *const *values, int n);

#endif
