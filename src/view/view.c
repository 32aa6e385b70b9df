#include "view.h"

#include "calltree.h"
#include "late-symbols.h"
#include "text.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define COMMON_OPTIONS                                                                             \
	"  --json           print JSON instead of text\n"                                          \
	"  -j               function names only, without file:line\n"                              \
	"  -t               shorten C++ template arguments to <\xe2\x80\xa6>\n"                    \
	"  --help           show this help\n"

void view_cmd_help(const struct view_cmd *c, FILE *f)
{
	fprintf(f, "Usage: %s %s [OPTIONS] FILE\n%s.\n\nOptions:\n%s%s", VIEW_PROG, c->name,
		c->summary, c->options, COMMON_OPTIONS);
}

void view_error(const char *fmt, ...)
{
	va_list ap;
	fputs(VIEW_PROG ": ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int view_usage_error(const struct view_cmd *c, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "%s: %s: ", VIEW_PROG, c->name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, ": see '%s %s --help'\n", VIEW_PROG, c->name);
	return VIEW_EXIT_USAGE;
}

enum { OPT_JSON = 0x1000, OPT_HELP };

int view_parse(const struct view_cmd *c, int argc, char **argv, const struct option *extra,
	       view_opt_fn on_opt, void *ctx, struct view_args *out)
{
	static const struct option common[] = {
	    {"json", no_argument, NULL, OPT_JSON},
	    {"help", no_argument, NULL, OPT_HELP},
	};
	struct option opts[32];
	size_t n = 0;
	for (size_t i = 0; i < sizeof common / sizeof common[0]; i++)
		opts[n++] = common[i];
	for (size_t i = 0; extra && extra[i].name && n + 1 < sizeof opts / sizeof opts[0]; i++)
		opts[n++] = extra[i];
	memset(&opts[n], 0, sizeof opts[n]);

	/* Commands may add short options of their own (val < 0x80, e.g. -r, -o). */
	char short_opts[32] = ":hjt";
	size_t ns = strlen(short_opts);
	for (size_t i = 0; extra && extra[i].name; i++)
		if (extra[i].val > ' ' && extra[i].val < 0x7f && ns + 2 < sizeof short_opts) {
			short_opts[ns++] = (char)extra[i].val;
			if (extra[i].has_arg == required_argument)
				short_opts[ns++] = ':';
		}
	short_opts[ns] = '\0';
	memset(out, 0, sizeof *out);
	opterr = 0;
	optind = 1;
	int o;
	/* Leading ':' makes a missing argument ':' rather than '?'. */
	while ((o = getopt_long(argc, argv, short_opts, opts, NULL)) != -1) {
		switch (o) {
		case OPT_JSON:
			out->json = 1;
			break;
		case 'j':
			out->names_only = 1;
			break;
		case 't':
			out->short_templates = 1;
			break;
		case 'h':
		case OPT_HELP:
			view_cmd_help(c, stdout);
			return -1;
		case ':':
			return view_usage_error(c, "option %s needs a value", argv[optind - 1]);
		case '?':
			if (optopt > 0 && optopt < 0x80)
				return view_usage_error(c, "unknown option -%c", optopt);
			if (strchr(argv[optind - 1], '='))
				return view_usage_error(c,
							"unknown option, or one that takes no "
							"value: %s",
							argv[optind - 1]);
			return view_usage_error(c, "unknown option %s", argv[optind - 1]);
		default: {
			int rc = on_opt ? on_opt(o, optarg, ctx) : VIEW_EXIT_USAGE;
			if (rc)
				return rc;
		}
		}
	}
	if (optind >= argc)
		return view_usage_error(c, "no profile FILE given");
	if (optind + 1 < argc)
		return view_usage_error(c, "unexpected argument '%s' after %s", argv[optind + 1],
					argv[optind]);
	out->file = argv[optind];
	return 0;
}

int view_load(const struct view_args *args, struct profile *p)
{
	struct hp_error err = {0};
	if (pf_load(p, args->file, &err) < 0) {
		view_error("%s", err.msg);
		return -1;
	}
	ssize_t named = pf_name_unnamed(p);
	if (named < 0 || pf_apply_style(p, args->names_only, args->short_templates) < 0) {
		view_error("out of memory loading %s: free memory or view a smaller profile",
			   args->file);
		pf_free(p);
		return -1;
	}
	if (p->warning[0])
		view_error("warning: %s", p->warning);
	if (named > 0)
		view_error(
		    "note: named %zd frames that %s left as module+offset, from the modules' "
		    "files on this machine (same build-ids)",
		    named, args->file);
	return 0;
}

FILE *view_open_output(const char *path)
{
	if (!path || strcmp(path, "-") == 0)
		return stdout;
	FILE *f = fopen(path, "we");
	if (!f)
		view_error("cannot create %s: %s: check the directory and its permissions", path,
			   strerror(errno));
	return f;
}

int view_close_output(FILE *f, const char *path)
{
	if (f == stdout)
		return 0;
	if (ferror(f) | fclose(f)) {
		view_error("cannot write %s: check the disk", path);
		return VIEW_EXIT_ERROR;
	}
	return 0;
}

const char *view_mode_name(const struct profile *p)
{
	if (!p->has_hello)
		return NULL;
	switch (p->hello.mode) {
	case HP_MODE_BASIC:
		return "basic";
	case HP_MODE_EXTENDED:
		return "extended";
	case HP_MODE_FULL:
		return "full";
	default:
		return "unknown";
	}
}

const char *view_end_name(const struct profile *p)
{
	if (!p->has_end)
		return "incomplete";
	switch (p->end_reason) {
	case HP_END_DETACH:
		return "detach";
	case HP_END_ERROR:
		return "error";
	case HP_END_TARGET_EXIT:
		return "target-exit";
	case HP_END_CUT_SHORT:
		return "cut-short";
	default:
		return "unknown";
	}
}

int view_sampling(const struct profile *p, uint32_t *from_round, uint64_t *rate)
{
	if (p->has_hello && p->hello.sample_rate) {
		*from_round = 1;
		*rate = p->hello.sample_rate;
		return VIEW_SAMPLED_RATE;
	}
	if (!p->first_sampled)
		return 0;
	*from_round = p->rounds[p->first_sampled - 1].seq;
	*rate = HP_SWITCH_SAMPLE_RATE;
	return VIEW_SAMPLED_SWITCH;
}

void view_print_sampling(FILE *f, const struct profile *p)
{
	uint32_t from;
	uint64_t rate;
	char b[64];
	int how = view_sampling(p, &from, &rate);
	if (!how)
		return;
	text_bytes(b, sizeof b, rate);
	if (how == VIEW_SAMPLED_SWITCH)
		fprintf(f,
			"\nPer-site numbers from round %" PRIu32 " on are estimates: --max-memory "
			"was reached, and\nheapprof sampled one allocation every %s on average "
			"from then on.\n",
			from, b);
	else
		fprintf(
		    f,
		    "\nPer-site numbers are estimates: the session sampled one allocation every "
		    "%s on\naverage (--sample-rate).\n",
		    b);
}

int view_parse_type(const struct view_cmd *c, const char *arg, int *key)
{
	if (strcmp(arg, "allocations") == 0)
		*key = CT_ALLOCS;
	else if (strcmp(arg, "bytes") == 0)
		*key = CT_BYTES;
	else if (strcmp(arg, "live") == 0)
		*key = CT_LIVE;
	else
		return view_usage_error(c, "--type wants allocations, bytes or live, not '%s'",
					arg);
	return 0;
}
