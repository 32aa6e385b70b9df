/* heapprof-view: analyses a profile file written by heapprof-attach. */
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "view.h"

const struct view_cmd *const view_cmds[] = {
    &view_cmd_overview,
    &view_cmd_timeline,
    &view_cmd_histogram,
    &view_cmd_filter,
    &view_cmd_tree,
    &view_cmd_hotspots,
    &view_cmd_leaks,
    &view_cmd_growth,
    &view_cmd_temporary,
    &view_cmd_peak,
    &view_cmd_flame,
    &view_cmd_export,
    NULL,
};

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: %s COMMAND [OPTIONS] FILE\n"
		"       %s COMMAND --help\n"
		"       %s --help | --version\n"
		"Analyse a heap profile written by heapprof-attach.\n\nCommands:\n",
		VIEW_PROG, VIEW_PROG, VIEW_PROG);
	for (size_t i = 0; view_cmds[i]; i++)
		fprintf(f, "  %-10s %s\n", view_cmds[i]->name, view_cmds[i]->summary);
	fprintf(f, "\nOptions of every command:\n"
		   "  --json           print JSON instead of text (not flame, export)\n"
		   "  -j               function names only, without file:line\n"
		   "  -t               shorten C++ template arguments to <\xe2\x80\xa6>\n"
		   "  --help           show the help of the command\n");
	for (size_t i = 0; view_cmds[i]; i++)
		if (view_cmds[i]->options[0])
			fprintf(f, "\nOptions of %s:\n%s", view_cmds[i]->name,
				view_cmds[i]->options);
	fprintf(f, "\nExit status: 0 on success, 1 on an error, 2 on bad arguments.\n");
}

static void command_list(char *buf, size_t n)
{
	size_t o = 0;
	buf[0] = '\0';
	for (size_t i = 0; view_cmds[i] && o < n; i++)
		o += (size_t)snprintf(buf + o, n - o, "%s%s", i ? ", " : "", view_cmds[i]->name);
}

int main(int argc, char **argv)
{
	char list[256];
	command_list(list, sizeof list);
	if (argc < 2) {
		view_error("no command given: use one of %s (see '%s --help')", list, VIEW_PROG);
		return VIEW_EXIT_USAGE;
	}
	const char *name = argv[1];
	if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0) {
		usage(stdout);
		return 0;
	}
	if (strcmp(name, "--version") == 0) {
		printf("%s %s\n", VIEW_PROG, PACKAGE_VERSION);
		return 0;
	}
	const struct view_cmd *cmd = NULL;
	for (size_t i = 0; view_cmds[i]; i++)
		if (strcmp(view_cmds[i]->name, name) == 0)
			cmd = view_cmds[i];
	if (!cmd) {
		if (name[0] == '-')
			view_error("unknown option %s: give a command first, one of %s (see '%s "
				   "--help')",
				   name, list, VIEW_PROG);
		else
			view_error("unknown command '%s': use one of %s (see '%s --help')", name,
				   list, VIEW_PROG);
		return VIEW_EXIT_USAGE;
	}
	int rc = cmd->run(argc - 1, argv + 1);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		view_error("cannot write the output: check the disk or the pipe it goes to");
		return VIEW_EXIT_ERROR;
	}
	return rc;
}
