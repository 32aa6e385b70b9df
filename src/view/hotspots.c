/* hotspots: allocation sites ranked by allocations, bytes, live bytes or temporary frees. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "report.h"
#include "text.h"
#include "view.h"

enum sort_key { SORT_ALLOCS, SORT_BYTES, SORT_LIVE, SORT_TEMP };

struct hotspots_opts {
	long top; /* -1 = not given */
	enum sort_key sort;
};

struct row {
	const struct pf_site *site;
	int64_t key, key2; /* descending */
};

enum { OPT_TOP = 1, OPT_SORT };

static const struct option options[] = {
    {"top", required_argument, NULL, OPT_TOP},
    {"sort", required_argument, NULL, OPT_SORT},
    {0},
};

static int on_opt(int val, const char *arg, void *ctx)
{
	struct hotspots_opts *o = ctx;
	switch (val) {
	case OPT_TOP:
		return report_parse_top(&view_cmd_hotspots, arg, &o->top);
	case OPT_SORT:
		if (strcmp(arg, "allocations") == 0)
			o->sort = SORT_ALLOCS;
		else if (strcmp(arg, "bytes") == 0)
			o->sort = SORT_BYTES;
		else if (strcmp(arg, "live") == 0)
			o->sort = SORT_LIVE;
		else if (strcmp(arg, "temporary") == 0)
			o->sort = SORT_TEMP;
		else
			return view_usage_error(
			    &view_cmd_hotspots,
			    "--sort wants allocations, bytes, live or temporary, "
			    "not '%s'",
			    arg);
		return 0;
	default:
		return VIEW_EXIT_USAGE;
	}
}

static int cmp_row(const void *a, const void *b)
{
	const struct row *x = a, *y = b;
	if (x->key != y->key)
		return x->key > y->key ? -1 : 1;
	if (x->key2 != y->key2)
		return x->key2 > y->key2 ? -1 : 1;
	return report_cmp_addr(x->site, y->site);
}

static struct row *sorted_rows(const struct profile *p, enum sort_key sort)
{
	struct row *rows = report_rows(p, sizeof *rows);
	if (!rows)
		return NULL;
	for (size_t i = 0; i < p->nsites; i++) {
		const struct pf_site *s = &p->sites[i];
		rows[i].site = s;
		switch (sort) {
		case SORT_ALLOCS:
			rows[i].key = (int64_t)s->tot.allocs;
			rows[i].key2 = (int64_t)s->tot.alloc_bytes;
			break;
		case SORT_BYTES:
			rows[i].key = (int64_t)s->tot.alloc_bytes;
			rows[i].key2 = (int64_t)s->tot.allocs;
			break;
		case SORT_LIVE:
			rows[i].key = pf_live_bytes(&s->tot);
			rows[i].key2 = pf_live_blocks(&s->tot);
			break;
		case SORT_TEMP:
			rows[i].key = (int64_t)s->tot.temp_frees;
			rows[i].key2 = (int64_t)s->tot.allocs;
			break;
		}
	}
	qsort(rows, p->nsites, sizeof *rows, cmp_row);
	return rows;
}

static void print_json(const struct profile *p, const struct row *rows, size_t n)
{
	struct json j;
	json_init(&j, stdout);
	json_array_begin(&j);
	for (size_t i = 0; i < n; i++) {
		const struct pf_site *s = rows[i].site;
		json_object_begin(&j);
		report_site_json(&j, p, s, pf_live_blocks(&s->tot), pf_live_bytes(&s->tot));
		json_object_end(&j);
	}
	json_array_end(&j);
}

static const char *sort_name(enum sort_key k)
{
	return k == SORT_BYTES	? "bytes"
	       : k == SORT_LIVE ? "live bytes"
	       : k == SORT_TEMP ? "temporary frees"
				: "allocations";
}

static void print_text(const struct profile *p, const struct row *rows, size_t n,
		       const struct hotspots_opts *o)
{
	char func[512], where[512], a[32], b[32];
	if (!p->nsites) {
		printf("No allocation sites: the profile has no stacks with numbers (stacks are "
		       "recorded in full mode only).\n");
		return;
	}
	int fw = report_func_width(p, rows, n, sizeof *rows);
	printf("%11s %12s %12s  %-*s  %s\n", "ALLOCATIONS", "BYTES", "LIVE", fw, "FUNCTION",
	       "LOCATION");
	for (size_t i = 0; i < n; i++) {
		const struct pf_site *s = rows[i].site;
		report_names(p, s->addr, func, sizeof func, where, sizeof where);
		printf("%11" PRIu64 " %12s %12s  %-*s  %s\n", s->tot.allocs,
		       text_bytes(a, sizeof a, s->tot.alloc_bytes),
		       text_sbytes(b, sizeof b, pf_live_bytes(&s->tot)), where[0] ? fw : 0, func,
		       where);
	}
	if (n < p->nsites)
		printf("\n%zu of %zu sites shown, sorted by %s: --top 0 shows all.\n", n, p->nsites,
		       sort_name(o->sort));
	view_print_sampling(stdout, p);
}

static int run(int argc, char **argv)
{
	struct hotspots_opts o = {.top = -1, .sort = SORT_ALLOCS};
	struct view_args args;
	int rc = view_parse(&view_cmd_hotspots, argc, argv, options, on_opt, &o, &args);
	if (rc)
		return rc < 0 ? 0 : rc;
	struct profile p;
	if (view_load(&args, &p) < 0)
		return VIEW_EXIT_ERROR;
	struct row *rows = sorted_rows(&p, o.sort);
	if (!rows) {
		pf_free(&p);
		return VIEW_EXIT_ERROR;
	}
	size_t n = report_count(o.top, args.json, p.nsites);
	if (args.json)
		print_json(&p, rows, n);
	else
		print_text(&p, rows, n, &o);
	free(rows);
	pf_free(&p);
	return 0;
}

const struct view_cmd view_cmd_hotspots = {
    .name = "hotspots",
    .summary = "List the allocation sites, the most active first",
    .options = "  --top N          show the first N sites (default 20 in text, all in JSON;\n"
	       "                   0 = all)\n"
	       "  --sort KEY       rank by allocations (default), bytes, live or temporary\n",
    .run = run,
};
