/* export: the profile in formats other tools read (export.h). */
#include <string.h>

#include "calltree.h"
#include "export.h"
#include "view.h"

enum format { FMT_NONE, FMT_COLLAPSED, FMT_PPROF, FMT_MASSIF };

struct export_opts {
	enum format format;
	int key;
	const char *output;
};

enum { OPT_FORMAT = 1, OPT_TYPE, OPT_OUTPUT = 'o' };

static const struct option options[] = {
    {"format", required_argument, NULL, OPT_FORMAT},
    {"type", required_argument, NULL, OPT_TYPE},
    {"output", required_argument, NULL, OPT_OUTPUT},
    {0},
};

static int on_opt(int val, const char *arg, void *ctx)
{
	struct export_opts *o = ctx;
	switch (val) {
	case OPT_FORMAT:
		if (strcmp(arg, "collapsed") == 0)
			o->format = FMT_COLLAPSED;
		else if (strcmp(arg, "pprof") == 0)
			o->format = FMT_PPROF;
		else if (strcmp(arg, "massif") == 0)
			o->format = FMT_MASSIF;
		else
			return view_usage_error(&view_cmd_export,
						"--format wants collapsed, pprof or massif, not "
						"'%s'",
						arg);
		return 0;
	case OPT_TYPE:
		return view_parse_type(&view_cmd_export, arg, &o->key);
	case OPT_OUTPUT:
		o->output = arg;
		return 0;
	default:
		return VIEW_EXIT_USAGE;
	}
}

static int run(int argc, char **argv)
{
	struct export_opts o = {.key = CT_ALLOCS};
	struct view_args args;
	int rc = view_parse(&view_cmd_export, argc, argv, options, on_opt, &o, &args);
	if (rc)
		return rc < 0 ? 0 : rc;
	if (o.format == FMT_NONE)
		return view_usage_error(&view_cmd_export,
					"--format is required: collapsed, pprof or massif");
	if (args.json)
		return view_usage_error(&view_cmd_export,
					"--json does not apply: the export formats are defined by "
					"the tools that read them");
	struct profile p;
	if (view_load(&args, &p) < 0)
		return VIEW_EXIT_ERROR;
	FILE *f = view_open_output(o.output);
	if (!f) {
		pf_free(&p);
		return VIEW_EXIT_ERROR;
	}
	int w = o.format == FMT_COLLAPSED ? export_collapsed(f, &p, o.key)
		: o.format == FMT_PPROF	  ? export_pprof(f, &p)
					  : export_massif(f, &p);
	rc = w < 0 ? VIEW_EXIT_ERROR : 0;
	if (view_close_output(f, o.output))
		rc = VIEW_EXIT_ERROR;
	pf_free(&p);
	return rc;
}

const struct view_cmd view_cmd_export = {
    .name = "export",
    .summary = "Write the profile for other tools: collapsed stacks, pprof or massif",
    .options = "  --format FMT     collapsed (flamegraph.pl, speedscope), pprof (gzipped\n"
	       "                   profile.proto: go tool pprof) or massif (ms_print)\n"
	       "  --type KEY       collapsed values: allocations (default), bytes or live\n"
	       "  -o, --output FILE  write to FILE instead of standard output\n",
    .run = run,
};
