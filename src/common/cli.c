#include "cli.h"

#include <ctype.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <errno.h>
#include <stdlib.h>

int hp_cli_uint(const char *s, uint64_t lo, uint64_t hi, uint64_t *v)
{
	if (!s || !isdigit((unsigned char)s[0]))
		return -1;
	char *end;
	errno = 0;
	unsigned long long x = strtoull(s, &end, 10);
	if (errno || *end || x < lo || x > hi)
		return -1;
	*v = x;
	return 0;
}

int hp_cli_pid(const char *s, pid_t *pid)
{
	uint64_t v;
	/* The kernel's pid_max limit (PID_MAX_LIMIT) is 2^22. */
	if (hp_cli_uint(s, 1, 1u << 22, &v) < 0)
		return -1;
	*pid = (pid_t)v;
	return 0;
}

int hp_cli_seconds(const char *s, uint64_t *ms)
{
	if (!s || !(isdigit((unsigned char)s[0]) || s[0] == '.'))
		return -1;
	char *end;
	errno = 0;
	double x = strtod(s, &end);
	if (errno || *end || !(x > 0) || x > 366.0 * 24 * 3600)
		return -1;
	uint64_t v = (uint64_t)(x * 1000.0 + 0.5);
	*ms = v ? v : 1;
	return 0;
}

int hp_cli_usage_error(const char *prog, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "%s: ", prog);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry '%s --help' for more information.\n", prog);
	return HP_EXIT_USAGE;
}

int hp_cli_bad_option(const char *prog, int c, char **argv)
{
	if (c == ':')
		return hp_cli_usage_error(prog, "option '%s' needs a value", argv[optind - 1]);
	if (optopt)
		return hp_cli_usage_error(prog, "unknown option '-%c'", optopt);
	return hp_cli_usage_error(prog, "unknown option '%s'", argv[optind - 1]);
}

int hp_cli_pid_operand(const char *prog, int argc, char **argv, pid_t *pid, int *status)
{
	if (optind != argc - 1) {
		*status = hp_cli_usage_error(prog, "%s",
					     optind == argc ? "missing PID" : "too many arguments");
		return -1;
	}
	if (hp_cli_pid(argv[optind], pid) < 0) {
		*status =
		    hp_cli_usage_error(prog, "invalid PID '%s': give a process id", argv[optind]);
		return -1;
	}
	return 0;
}
