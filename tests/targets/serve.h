/* serve.h - the command loop of the test targets that replay one workload on demand
 * (tree-target, order-target).
 *
 * Contract: target_serve prints "ready", then reads commands, one per line, from stdin and
 * answers on stdout (flushed): "go" runs go() and answers "done"; "flip" toggles *flipped
 * and answers "flipped"; "ping" answers "pong" without allocating; "exit" or the end of
 * input returns. An unknown command is reported on stderr under prog's name.
 */
#ifndef HEAPPROF_TARGET_SERVE_H
#define HEAPPROF_TARGET_SERVE_H

#include <stdio.h>
#include <string.h>

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
