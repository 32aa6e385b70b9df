/* slack.h - room for heapprof's trampoline inside code the target already maps.
 *
 * Contract: a slack is the tail of an executable, private, file-backed mapping after the
 * end of its code segment (the PT_LOAD with PF_X, from the program headers the target
 * has in memory), up to the end of that segment's last page. The loader maps those bytes
 * but no code of the target reaches them; with the page-aligned segments of
 * -z separate-code they are the file's zero padding. Only modules the target can never
 * unload are used: its executable, libc and the dynamic loader. Reads /proc/PID/maps and, through
 * mem_fd (/proc/PID/mem), the target's memory; nothing is stopped or written.
 */
#ifndef HEAPPROF_INJECT_SLACK_H
#define HEAPPROF_INJECT_SLACK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The first 64-byte boundary in a slack (slacks in address order) where the target holds
 * len bytes equal to bytes: 1 and *at, 0 when there is none, -1 when maps can't be read.
 * With bytes all zero this finds free room. */
int hp_slack_find(pid_t pid, int mem_fd, const void *bytes, size_t len, uint64_t *at);

/* hp_slack_find for len zero bytes (len at most a page). */
int hp_slack_find_free(pid_t pid, int mem_fd, size_t len, uint64_t *at);

/* Writes len zero bytes (at most a page) at addr in the target: 0, or -1 with errno. */
int hp_slack_zero(int mem_fd, uint64_t addr, size_t len);

/* The first module whose code tail and data tail hold code_len and data_len zero bytes
 * from a 64-byte boundary: 1 and both addresses, 0 when there is none, -1. */
int hp_slack_find_free_pair(pid_t pid, int mem_fd, size_t code_len, size_t data_len, uint64_t *code,
			    uint64_t *data);

#endif
