/* target.h - can a process be profiled, and is it still the process we attached to.
 *
 * Contract: everything here only reads /proc (and opens /proc/PID/mem to ask the kernel's
 * ptrace-attach rule); nothing is ever done to the target. A refusal fills err with one
 * line naming the process, what is wrong and what the user can do. A process is identified
 * by its pid and its start time (field 22 of /proc/PID/stat), so a reused pid is noticed.
 */
#ifndef HEAPPROF_TARGET_H
#define HEAPPROF_TARGET_H

#include <stddef.h>
#include <sys/types.h>

#include "hperror.h"

/* 0 when pid exists (not a zombie, not stopped), we may ptrace it and nobody traces it
 * yet. A stopped process is refused, not resumed: stopping it was someone's decision. */
int hp_target_check_traceable(pid_t pid, struct hp_error *err);

/* hp_target_check_traceable, plus: not profiled already (no live session, no heapprof
 * mapping), a 64-bit program, dynamically linked against glibc. */
int hp_target_check(pid_t pid, struct hp_error *err);

/* The process's name (/proc/PID/comm, at most 15 bytes); "?" when unreadable. */
void hp_target_comm(pid_t pid, char *buf, size_t len);

/* 0 and *start (clock ticks since boot) when pid exists, -1 when it does not. */
int hp_target_start_time(pid_t pid, unsigned long long *start);

/* 1 while pid runs (not a zombie) and started at start, else 0. */
int hp_target_alive(pid_t pid, unsigned long long start);

/* 1 while pid is stopped (by a signal, or in a tracer's stop), else 0. */
int hp_target_stopped(pid_t pid);

/* 0 and the value after "Key:" (blanks before it skipped, the newline dropped) in val
 * when the status file has a line for key, else -1: the status of task tid of pid, of
 * pid itself when tid is 0, of this process when pid is 0. */
int hp_task_status_field(pid_t pid, pid_t tid, const char *key, char *val, size_t len);

/* The same for n keys (n <= 64) from one read of the file, so that a task's fields are
 * of one moment (a thread that ends between two reads would have some and not others):
 * vals[i] gets keys[i]'s value; the number of keys found, -1 if the file cannot be read. */
int hp_task_status_fields(pid_t pid, pid_t tid, unsigned n, const char *const *keys,
			  char *const *vals, size_t len);

/* 1 if /proc/PID/maps shows the payload, 0 if not, -1 if maps can't be read. */
int hp_target_has_payload(pid_t pid);

#endif
