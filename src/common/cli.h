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

/* Prints "PROG: message" and a pointer to --help on stderr; returns HP_EXIT_USAGE. */
int hp_cli_usage_error(const char *prog, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The usage error for what getopt_long just rejected (c is ':' for a missing value). */
int hp_cli_bad_option(const char *prog, int c, char **argv);

/* After the options: exactly one operand, a pid. 0 and *pid, else -1 and *status set. */
int hp_cli_pid_operand(const char *prog, int argc, char **argv, pid_t *pid, int *status);

/* 0 and *pid when s is a positive decimal pid, else -1. */
int hp_cli_pid(const char *s, pid_t *pid);

/* 0 and *v when s is a decimal integer in [lo, hi], else -1. */
int hp_cli_uint(const char *s, uint64_t lo, uint64_t hi, uint64_t *v);

/* 0 and *ms when s is a positive number of seconds ("30", "1.5") of at most a year. */
int hp_cli_seconds(const char *s, uint64_t *ms);

#endif
