/* fuzz-stream.c - libFuzzer target: the round stream as heapprof-viewer reads it.
 *
 * Contract: each input is the bytes of a payload's pipe. They go through a memfd to the
 * real reader (hpstream.c) and, record by record, to the real session logic
 * (viewer/records.c) the way viewer/main.c drives them: modules reach the real libdw
 * symbolizer (pid 0, so paths are opened as given), the profile is written to /dev/null
 * and the round lines to /dev/null. Malformed input must end in a one-line error; a
 * crash, a sanitizer report, a hang (-timeout) or an allocation beyond -rss_limit_mb is a
 * bug in the viewer.
 */
#include "fuzz-input.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hpstream.h"
#include "records.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int input_fd = -1;
static FILE *devnull;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	input_fd = fuzz_input_open("fuzz-stream");
	devnull = fopen("/dev/null", "w");
	if (!devnull) {
		perror("fuzz-stream: /dev/null");
		exit(1);
	}
	return 0;
}

static void session(struct hp_display *disp, struct hp_error *err)
{
	struct hp_profile_writer pw;
	if (hp_pw_open(&pw, "/dev/null", err) != 0)
		fuzz_die("fuzz-stream: cannot open /dev/null as the profile", err->msg);
	struct hp_viewer_session vs;
	if (hp_vs_init(&vs, 0, &pw, disp, "/dev/null") != 0)
		fuzz_die("fuzz-stream: hp_vs_init", "out of memory");
	struct hp_reader rd;
	if (hp_reader_open(&rd, input_fd) != 0) {
		hp_error_set(err, "malformed stream: %s", rd.err);
	} else {
		for (;;) {
			uint32_t type, len;
			const uint8_t *body;
			int r = hp_read_record(&rd, &type, &body, &len);
			if (r < 0 && rd.cut) {
				hp_vs_finish(&vs, HP_END_CUT_SHORT, err);
				break;
			}
			if (r < 0) {
				hp_error_set(err, "malformed stream: %s", rd.err);
				break;
			}
			if (r == 0) {
				hp_vs_finish(&vs, HP_END_TARGET_EXIT, err);
				break;
			}
			if (hp_vs_record(&vs, type, body, len, err) != 0)
				break;
		}
	}
	hp_reader_close(&rd);
	hp_vs_free(&vs);
	int rc = hp_pw_close(&pw);
	if (rc < 0)
		fuzz_die("fuzz-stream: closing /dev/null", strerror(-rc));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_input_load(input_fd, data, size);
	struct hp_display disp;
	hp_display_lines_init(&disp, devnull);
	struct hp_error err = {0};
	session(&disp, &err);
	fuzz_check_line(err.set ? err.msg : NULL);
	return 0;
}
