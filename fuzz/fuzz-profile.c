/* fuzz-profile.c - libFuzzer target: a profile file as heapprof-view loads and shows it.
 *
 * Contract: each input is a profile file's bytes, put in a memfd and named by its
 * /proc/self/fd path so that pf_load opens, checks and reads it as it does a file. The
 * loaded profile's error and warning must be one line; then every command of
 * heapprof-view (src/view/main.c, linked with its main renamed hp_view_main) runs on it,
 * as text, as JSON and with the options listed below, into /dev/null. A crash, a sanitizer report,
 * a hang (-timeout) or an allocation beyond -rss_limit_mb is a bug in heapprof-view.
 */
#include "fuzz-input.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>

#include "profile.h"
#include "view-main.h"
#include "view.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int input_fd = -1;
static char input_path[64];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	input_fd = fuzz_input_open("fuzz-profile");
	snprintf(input_path, sizeof input_path, "/proc/self/fd/%d", input_fd);
	/* The commands print to stdout; libFuzzer reports on stderr. */
	int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (null < 0 || dup2(null, STDOUT_FILENO) < 0)
		fuzz_die("fuzz-profile: /dev/null as stdout", strerror(errno));
	close(null);
	return 0;
}

static void load(void)
{
	struct profile p;
	struct hp_error err = {0};
	if (pf_load(&p, input_path, &err) < 0) {
		fuzz_check_line(err.msg);
		return;
	}
	fuzz_check_line(p.warning[0] ? p.warning : NULL);
	pf_free(&p);
}

/* Commands that do nothing without an option, and options that select other code.
 * Names not in view_cmds are skipped, so the list may run ahead of the commands. */
static const char *const extra_runs[][2] = {
    {"export", "--format=collapsed"}, {"export", "--format=pprof"},
    {"export", "--format=massif"},    {"filter", "--size=48"},
    {"hotspots", "--sort=live"},      {"tree", "-t"},
    {"flame", "--type=live"},	      {"leaks", "-j"},
};

/* Runs heapprof-view CMD [OPT] FILE; argv is rebuilt each time since getopt permutes it. */
static void run(const char *cmd, const char *opt)
{
	char prog[] = "heapprof-view", name[32], arg[32], path[sizeof input_path];
	snprintf(name, sizeof name, "%s", cmd);
	snprintf(arg, sizeof arg, "%s", opt ? opt : "");
	snprintf(path, sizeof path, "%s", input_path);
	char *argv[] = {prog, name, opt ? arg : path, opt ? path : NULL, NULL};
	hp_view_main(opt ? 4 : 3, argv);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_input_load(input_fd, data, size);
	load();
	for (size_t i = 0; view_cmds[i]; i++) {
		run(view_cmds[i]->name, NULL);
		run(view_cmds[i]->name, "--json");
		for (size_t k = 0; k < sizeof extra_runs / sizeof extra_runs[0]; k++)
			if (strcmp(extra_runs[k][0], view_cmds[i]->name) == 0)
				run(view_cmds[i]->name, extra_runs[k][1]);
	}
	return 0;
}
