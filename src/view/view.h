/* view.h - what every heapprof-view command shares: the command table entry, option parsing,
 * loading the profile and reporting errors.
 *
 * Contract: a command is one file defining a struct view_cmd and listed in main.c. Its run()
 * gets argv with argv[0] = the command name and returns the exit status: 0, VIEW_EXIT_ERROR
 * after a one-line "heapprof-view: ..." on stderr, or VIEW_EXIT_USAGE for bad arguments.
 * view_parse handles --json, --help and the FILE operand for every command.
 */
#ifndef HEAPPROF_VIEW_VIEW_H
#define HEAPPROF_VIEW_VIEW_H

#include <getopt.h>
#include <stdio.h>

#include "profile.h"

#define VIEW_EXIT_ERROR 1
#define VIEW_EXIT_USAGE 2
#define VIEW_PROG "heapprof-view"

struct view_cmd {
	const char *name;
	const char *summary; /* one line for the command list */
	const char *options; /* help lines of its own options, "" if none */
	int (*run)(int argc, char **argv);
};

extern const struct view_cmd view_cmd_overview;
extern const struct view_cmd view_cmd_hotspots;
extern const struct view_cmd view_cmd_timeline;
extern const struct view_cmd view_cmd_histogram;
extern const struct view_cmd view_cmd_filter;
extern const struct view_cmd view_cmd_tree;
extern const struct view_cmd view_cmd_leaks;
extern const struct view_cmd view_cmd_growth;
extern const struct view_cmd view_cmd_temporary;
extern const struct view_cmd view_cmd_peak;
extern const struct view_cmd view_cmd_flame;
extern const struct view_cmd view_cmd_export;

/* The commands, NULL-terminated (main.c). */
extern const struct view_cmd *const view_cmds[];

struct view_args {
	int json;
	int names_only;	     /* -j: function names without file:line */
	int short_templates; /* -t: template argument lists as <…> */
	const char *file;
};

/* Called for each of the command's own options (the val of its struct option); returns 0 or
 * VIEW_EXIT_USAGE after printing why. */
typedef int (*view_opt_fn)(int val, const char *arg, void *ctx);

/* Parses argv: 0 to go on, -1 when --help was printed (exit 0), or VIEW_EXIT_USAGE. extra is
 * terminated by an all-zero entry and may be NULL. */
int view_parse(const struct view_cmd *c, int argc, char **argv, const struct option *extra,
	       view_opt_fn on_opt, void *ctx, struct view_args *out);
void view_cmd_help(const struct view_cmd *c, FILE *f);

void view_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints "heapprof-view: CMD: ...: see 'heapprof-view CMD --help'" and returns
 * VIEW_EXIT_USAGE. */
int view_usage_error(const struct view_cmd *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Loads args->file with the display style of args, printing the error or the warning; 0 or
 * -1. */
int view_load(const struct view_args *args, struct profile *p);
/* Opens path for writing ("-" or NULL: stdout); NULL after printing why. */
FILE *view_open_output(const char *path);
/* Closes what view_open_output returned; 0, or VIEW_EXIT_ERROR after printing why. */
int view_close_output(FILE *f, const char *path);

/* Parses a --type value (allocations, bytes, live) into a CT_* key of calltree.h; 0 or
 * VIEW_EXIT_USAGE after saying why. */
int view_parse_type(const struct view_cmd *c, const char *arg, int *key);

const char *view_mode_name(const struct profile *p);
const char *view_end_name(const struct profile *p);

/* Whether the per-site numbers are estimates from sampling: 0 if they are exact, else
 * VIEW_SAMPLED_RATE (from the start, --sample-rate) or VIEW_SAMPLED_SWITCH (from a round
 * on, --max-memory reached), with the seq of the first sampled round and the mean bytes
 * between samples from then on. */
enum { VIEW_SAMPLED_RATE = 1, VIEW_SAMPLED_SWITCH = 2 };
int view_sampling(const struct profile *p, uint32_t *from_round, uint64_t *rate);
/* For text output: a paragraph saying so, after a blank line; nothing if exact. */
void view_print_sampling(FILE *f, const struct profile *p);

#endif
