#include "view.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define COMMON_OPTIONS                                                                             \
	"  --json           print JSON instead of text\n"                                          \
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

	memset(out, 0, sizeof *out);
	opterr = 0;
	optind = 1;
	int o;
	/* Leading ':' makes a missing argument ':' rather than '?'. */
	while ((o = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (o) {
		case OPT_JSON:
			out->json = 1;
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

int view_load(const char *path, struct profile *p)
{
	struct hp_error err = {0};
	if (pf_load(p, path, &err) < 0) {
		view_error("%s", err.msg);
		return -1;
	}
	if (p->warning[0])
		view_error("warning: %s", p->warning);
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
	default:
		return "unknown";
	}
}
