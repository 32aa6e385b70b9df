#include "cli.h"

#include <ctype.h>
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
