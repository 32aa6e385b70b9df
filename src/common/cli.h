/* cli.h - what the commands share in reading their command line.
 *
 * Contract: strict number parsing (the whole string, no sign, no overflow); a bad value is
 * the caller's usage error (exit status HP_EXIT_USAGE).
 */
#ifndef HEAPPROF_CLI_H
#define HEAPPROF_CLI_H

#include <stdint.h>
#include <sys/types.h>

#define HP_EXIT_OK 0
#define HP_EXIT_FAIL 1
#define HP_EXIT_USAGE 2

/* 0 and *pid when s is a positive decimal pid, else -1. */
int hp_cli_pid(const char *s, pid_t *pid);

/* 0 and *v when s is a decimal integer in [lo, hi], else -1. */
int hp_cli_uint(const char *s, uint64_t lo, uint64_t hi, uint64_t *v);

/* 0 and *ms when s is a positive number of seconds ("30", "1.5") of at most a year. */
int hp_cli_seconds(const char *s, uint64_t *ms);

#endif
