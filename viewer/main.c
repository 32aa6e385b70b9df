/* heapprof-viewer: reads a payload's stream, writes the profile file, shows the rounds.
 * Started by heapprof-attach; see doc/design.md ("Viewer") and records.h. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "hperror.h"
#include "hpstream.h"
#include "profile-writer.h"
#include "report.h"
#include "records.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: heapprof-viewer --fd N --pid PID --output FILE [--batch]\n"
		   "Reads a heapprof payload's stream from fd N until it ends, symbolizes it\n"
		   "while process PID is alive and writes the profile FILE.\n"
		   "  --batch    print one line per round (also when stdout is no terminal)\n"
		   "  --help     show this help\n"
		   "  --version  show the version\n");
}

static int parse_int(const char *s, long min, long max, long *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

static int fail(const char *msg)
{
	fprintf(stderr, "heapprof-viewer: %s\n", msg);
	return 1;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"fd", required_argument, NULL, 'f'},
	    {"pid", required_argument, NULL, 'p'},
	    {"output", required_argument, NULL, 'o'},
	    {"batch", no_argument, NULL, 'b'},
	    {"help", no_argument, NULL, 'h'},
	    {"version", no_argument, NULL, 'V'},
	    {0},
	};
	long fd = -1, pid = -1;
	const char *output = NULL;
	int c;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'f':
			if (parse_int(optarg, 0, INT_MAX, &fd) != 0)
				return fail("--fd needs a file descriptor number");
			break;
		case 'p':
			if (parse_int(optarg, 1, INT_MAX, &pid) != 0)
				return fail("--pid needs a process id");
			break;
		case 'o':
			output = optarg;
			break;
		case 'b':
			/* The line display is the only one so far; --batch keeps it that way. */
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("heapprof-viewer %s\n", PACKAGE_VERSION);
			return 0;
		default:
			fprintf(stderr, "heapprof-viewer: unknown option: try --help\n");
			return 1;
		}
	}
	if (fd < 0 || pid < 0 || !output || optind != argc)
		return fail("--fd, --pid and --output are required: try --help");

	/* Ctrl-C goes to heapprof-attach, which detaches; the stream's EOF ends us. */
	signal(SIGINT, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);

	struct hp_error err = {0};
	struct hp_proc_info si;
	hp_proc_info_read((pid_t)pid, &si);

	struct hp_profile_writer pw;
	if (hp_pw_open(&pw, output, &err) != 0) {
		hp_proc_info_release(&si);
		return fail(err.msg);
	}
	int rc = hp_pw_session(&pw, &si);
	if (rc < 0)
		hp_error_set(&err, "cannot write %s: %s", output, strerror(-rc));

	struct hp_display disp;
	hp_display_lines_init(&disp, stdout);
	disp.start(&disp, (pid_t)pid, si.comm[0] ? si.comm : "?", output);
	hp_proc_info_release(&si);

	struct hp_viewer_session vs;
	if (hp_vs_init(&vs, (pid_t)pid, &pw, &disp, output) != 0)
		hp_error_set(&err, "out of memory");

	struct hp_reader rd;
	if (!err.set && hp_reader_open(&rd, (int)fd) != 0) {
		hp_error_set(&err, "malformed stream: %s", rd.err);
		hp_reader_close(&rd);
	} else if (!err.set) {
		for (;;) {
			uint32_t type, len;
			const uint8_t *body;
			int r = hp_read_record(&rd, &type, &body, &len);
			if (r < 0) {
				hp_error_set(&err, "malformed stream: %s", rd.err);
				break;
			}
			if (r == 0) {
				hp_vs_finish(&vs, &err);
				break;
			}
			if (hp_vs_record(&vs, type, body, len, &err) != 0)
				break;
		}
		hp_reader_close(&rd);
	}
	hp_vs_free(&vs);
	rc = hp_pw_close(&pw);
	if (rc < 0)
		hp_error_set(&err, "cannot write %s: %s", output, strerror(-rc));
	if (err.set)
		return fail(err.msg);
	return 0;
}
