/* stubs.h - the stub areas GLOB_DAT slots point at while attached (hpabi.h).
 *
 * Contract: hp_stubs_ensure returns the areas a previous session left in the target
 * (found by their magic) or writes new ones through /proc/PID/mem into the first
 * module with zero room in both its code and its data tail (slack.h); the data area is
 * left zero for the payload to fill. It has nothing to undo: the stubs are unreachable
 * until the payload points a slot at one. Without room, *code = *data = 0.
 * hp_stubs_erase_unused zeroes both areas again when no slot was ever pointed at a stub;
 * a used area stays for good, since code may hold a stub's address. Neither stops a
 * thread.
 */
#ifndef HEAPPROF_INJECT_STUBS_H
#define HEAPPROF_INJECT_STUBS_H

#include <stdint.h>
#include <sys/types.h>

/* 0, or -1 when the target's memory can't be read or written. */
int hp_stubs_ensure(pid_t pid, uint64_t *code, uint64_t *data);

/* 0, or -1 with errno. */
int hp_stubs_erase_unused(pid_t pid);

#endif
