/* slack.h - room for heapprof's trampoline inside code the target already maps.
 *
 * Contract: a slack is the tail of an executable, private, file-backed mapping after the
 * end of its code segment (the PT_LOAD with PF_X, from the program headers the target
 * has in memory), up to the end of that segment's last page. The loader maps those bytes
 * but no code of the target reaches them; with the page-aligned segments of
 * -z separate-code they are the file's zero padding. Reads /proc/PID/maps and, through
 * mem_fd (/proc/PID/mem), the target's memory; nothing is stopped or written.
 */
#ifndef HEAPPROF_INJECT_SLACK_H
#define HEAPPROF_INJECT_SLACK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The first slack (in address order, each starting on a 64-byte boundary) whose first len
 * bytes in the target equal bytes: 1 and *at, 0 when there is none, -1 when maps can't be
 * read. With bytes all zero this finds free room. */
int hp_slack_find(pid_t pid, int mem_fd, const void *bytes, size_t len, uint64_t *at);

#endif
