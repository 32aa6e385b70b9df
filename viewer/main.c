/* heapprof-viewer: reads a payload's stream, writes the profile file, shows the rounds.
 * Started by heapprof-attach; see docs/design.md ("Viewer") and records.h. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "hperror.h"
#include "hpstream.h"
#include "live.h"
#include "profile-writer.h"
#include "report.h"
#include "records.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: heapprof-viewer --fd N --pid PID --output FILE [--batch]\n"
		   "Reads a heapprof payload's stream from fd N until it ends, symbolizes it\n"
		   "while process PID is alive and writes the profile FILE.\n"
		   "  --batch    print one line per round; without it, a terminal on stdin and\n"
		   "             stdout gets the full-screen live view\n"
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

/* The command line as one string, arguments separated by spaces. */
static void join_cmdline(const struct hp_proc_info *si, char *buf, size_t cap)
{
	size_t n = si->cmdline_len < cap ? si->cmdline_len : cap - 1;
	if (si->cmdline)
		memcpy(buf, si->cmdline, n);
	while (n > 0 && buf[n - 1] == '\0')
		n--;
	buf[n] = '\0';
	for (size_t i = 0; i < n; i++)
		if (buf[i] == '\0' || buf[i] == '\n' || buf[i] == '\t')
			buf[i] = ' ';
}

/* 'q' in the live view: heapprof-attach, our parent, detaches on SIGTERM and the stream's
 * end then ends us. Anyone else is not sent a signal. */
static void ask_detach(struct hp_display *disp)
{
	pid_t parent = getppid();
	char path[64], comm[32] = "";
	snprintf(path, sizeof path, "/proc/%d/comm", (int)parent);
	FILE *f = fopen(path, "r");
	if (f) {
		if (!fgets(comm, sizeof comm, f))
			comm[0] = '\0';
		fclose(f);
	}
	comm[strcspn(comm, "\n")] = '\0';
	if (strcmp(comm, "heapprof-attach") != 0) {
		disp->notice(disp, "not started by heapprof-attach: cannot detach from here");
		return;
	}
	if (kill(parent, SIGTERM) < 0) {
		char msg[128];
		snprintf(msg, sizeof msg, "cannot ask heapprof-attach to detach: %s",
			 strerror(errno));
		disp->notice(disp, msg);
		return;
	}
	disp->notice(disp, "detaching...");
}

/* Waits until the stream has a record to read, serving the display's input meanwhile.
 * 0 when readable, -1 with err set. */
static int wait_stream(int fd, struct hp_display *disp, struct hp_error *err)
{
	if (disp->input_fd < 0)
		return 0;
	for (;;) {
		struct pollfd p[2] = {{.fd = fd, .events = POLLIN},
				      {.fd = disp->input_fd, .events = POLLIN}};
		int n = poll(p, 2, -1);
		if (n < 0 && errno != EINTR) {
			hp_error_set(err, "cannot wait for the stream: %s", strerror(errno));
			return -1;
		}
		/* EINTR is a resize (SIGWINCH): the display redraws. */
		if (n < 0 || p[1].revents) {
			if (disp->input(disp) == HP_INPUT_DETACH)
				ask_detach(disp);
			if (p[1].revents & (POLLHUP | POLLERR | POLLNVAL))
				disp->input_fd = -1; /* the terminal is gone: just read on */
		}
		if (n > 0 && p[0].revents)
			return 0;
		if (disp->input_fd < 0)
			return 0;
	}
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
	bool batch = false;
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
			batch = true;
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

	/* Ctrl-C and a hangup go to heapprof-attach too, which detaches; the stream's EOF
	 * ends us once the profile has all of it. */
	signal(SIGINT, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
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
	if (batch || hp_display_live_init(&disp) != 0)
		hp_display_lines_init(&disp, stdout);
	char cmdline[1024];
	join_cmdline(&si, cmdline, sizeof cmdline);
	struct hp_target_desc desc = {
	    .pid = (pid_t)pid,
	    .comm = si.comm[0] ? si.comm : "?",
	    .cmdline = cmdline,
	    .file = output,
	};
	disp.start(&disp, &desc);
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
			if (!hp_reader_buffered(&rd) && wait_stream((int)fd, &disp, &err) != 0)
				break;
			int r = hp_read_record(&rd, &type, &body, &len);
			if (r < 0 && rd.cut) {
				fprintf(stderr,
					"heapprof-viewer: the stream ended inside a record (%s): "
					"the payload gave up waiting for this viewer; the profile "
					"ends at the last whole round\n",
					rd.err);
				hp_vs_finish(&vs, HP_END_CUT_SHORT, &err);
				break;
			}
			if (r < 0) {
				hp_error_set(&err, "malformed stream: %s", rd.err);
				break;
			}
			if (r == 0) {
				hp_vs_finish(&vs, HP_END_TARGET_EXIT, &err);
				break;
			}
			if (hp_vs_record(&vs, type, body, len, &err) != 0)
				break;
		}
		hp_reader_close(&rd);
	}
	disp.close(&disp);
	hp_vs_free(&vs);
	rc = hp_pw_close(&pw);
	if (rc < 0)
		hp_error_set(&err, "cannot write %s: %s", output, strerror(-rc));
	if (err.set)
		return fail(err.msg);
	return 0;
}
