/* serve.h - the argument and the command loop of the test targets that replay one workload
 * on demand (tree-target, order-target).
 *
 * Contract: target_arg returns the one argument, a number from lo to hi, or prints
 * "usage: PROG WHAT (LO to HI)" and exits 2. target_serve prints "ready", then reads commands, one
 * per line, from stdin and answers on stdout (flushed): "go" runs go() and answers "done"; "flip"
 * toggles *flipped and answers "flipped"; "ping" answers "pong" without allocating; "exit" or the
 * end of input returns. An unknown command is reported on stderr under prog's name.
 */
#ifndef HEAPPROF_TARGET_SERVE_H
#define HEAPPROF_TARGET_SERVE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned long target_arg(int argc, char **argv, const char *prog, const char *what,
				unsigned long lo, unsigned long hi)
{
	char *end = NULL;
	unsigned long n = argc == 2 ? strtoul(argv[1], &end, 10) : 0;

	if (argc != 2 || *argv[1] == '\0' || *end != '\0' || n < lo || n > hi) {
		fprintf(stderr, "usage: %s %s (%lu to %lu)\n", prog, what, lo, hi);
		exit(2);
	}
	return n;
}

static void target_serve(const char *prog, void (*go)(void), unsigned *flipped)
{
	char line[64];

	puts("ready");
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		line[strcspn(line, "\n")] = '\0';
		if (!strcmp(line, "go")) {
			go();
			puts("done");
		} else if (!strcmp(line, "flip")) {
			*flipped = !*flipped;
			puts("flipped");
		} else if (!strcmp(line, "ping")) {
			puts("pong");
		} else if (!strcmp(line, "exit")) {
			break;
		} else {
			fprintf(stderr, "%s: unknown command '%s'\n", prog, line);
		}
		fflush(stdout);
	}
}

#endif
