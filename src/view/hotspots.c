/* hotspots: allocation sites ranked by allocations, bytes or live bytes. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "text.h"
#include "view.h"

#define TEXT_TOP_DEFAULT 20
#define FUNC_WIDTH_MAX 60

enum sort_key { SORT_ALLOCS, SORT_BYTES, SORT_LIVE };

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
	char *end;
	switch (val) {
	case OPT_TOP:
		o->top = strtol(arg, &end, 10);
		if (*arg < '0' || *arg > '9' || *end || o->top < 0)
			return view_usage_error(&view_cmd_hotspots,
						"--top wants a number of sites (0 = all), not '%s'",
						arg);
		return 0;
	case OPT_SORT:
		if (strcmp(arg, "allocations") == 0)
			o->sort = SORT_ALLOCS;
		else if (strcmp(arg, "bytes") == 0)
			o->sort = SORT_BYTES;
		else if (strcmp(arg, "live") == 0)
			o->sort = SORT_LIVE;
		else
			return view_usage_error(&view_cmd_hotspots,
						"--sort wants allocations, bytes or live, not '%s'",
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
	/* Equal numbers: by address, so the output is the same on every run. */
	return x->site->addr < y->site->addr ? -1 : x->site->addr > y->site->addr;
}

static struct row *sorted_rows(const struct profile *p, enum sort_key sort)
{
	struct row *rows = calloc(p->nsites ? p->nsites : 1, sizeof *rows);
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
		const struct pf_stack *st = &p->stacks[s->top_stack];
		struct pf_loc l;
		loc_get(p, s->addr, 0, &l);
		json_object_begin(&j);
		json_kv_str(&j, "function", l.function);
		json_kv_str(&j, "file", l.file);
		json_key(&j, "line");
		if (l.line)
			json_u64(&j, l.line);
		else
			json_null(&j);
		json_kv_str(&j, "module", l.module);
		json_key(&j, "address");
		json_hex(&j, s->addr);
		json_kv_u64(&j, "allocations", s->tot.allocs);
		json_kv_u64(&j, "frees", s->tot.frees);
		json_kv_u64(&j, "allocated_bytes", s->tot.alloc_bytes);
		json_kv_u64(&j, "freed_bytes", s->tot.freed_bytes);
		json_kv_i64(&j, "live_blocks", pf_live_blocks(&s->tot));
		json_kv_i64(&j, "live_bytes", pf_live_bytes(&s->tot));
		json_kv_u64(&j, "stacks", s->nstacks);
		json_key(&j, "stack");
		loc_json_stack(&j, p, st, st->site_frame);
		json_object_end(&j);
	}
	json_array_end(&j);
}

static const char *sort_name(enum sort_key k)
{
	return k == SORT_BYTES ? "bytes" : k == SORT_LIVE ? "live bytes" : "allocations";
}

static void print_text(const struct profile *p, const struct row *rows, size_t n,
		       const struct hotspots_opts *o)
{
	char func[512], where[512], a[32], b[32];
	int fw = (int)strlen("FUNCTION");
	if (!p->nsites) {
		printf("No allocation sites: the profile has no stacks with numbers (stacks are "
		       "recorded in full mode only).\n");
		return;
	}
	for (size_t i = 0; i < n; i++) {
		struct pf_loc l;
		loc_get(p, rows[i].site->addr, 0, &l);
		int w = (int)strlen(text_function(func, sizeof func, &l));
		if (w > fw)
			fw = w < FUNC_WIDTH_MAX ? w : FUNC_WIDTH_MAX;
	}
	printf("%11s %12s %12s  %-*s  %s\n", "ALLOCATIONS", "BYTES", "LIVE", fw, "FUNCTION",
	       "LOCATION");
	for (size_t i = 0; i < n; i++) {
		const struct pf_site *s = rows[i].site;
		struct pf_loc l;
		loc_get(p, s->addr, 0, &l);
		text_function(func, sizeof func, &l);
		text_where(where, sizeof where, &l);
		printf("%11" PRIu64 " %12s %12s  %-*s  %s\n", s->tot.allocs,
		       text_bytes(a, sizeof a, s->tot.alloc_bytes),
		       text_sbytes(b, sizeof b, pf_live_bytes(&s->tot)), where[0] ? fw : 0, func,
		       where);
	}
	if (n < p->nsites)
		printf("\n%zu of %zu sites shown, sorted by %s: --top 0 shows all.\n", n, p->nsites,
		       sort_name(o->sort));
}

static int run(int argc, char **argv)
{
	struct hotspots_opts o = {.top = -1, .sort = SORT_ALLOCS};
	struct view_args args;
	int rc = view_parse(&view_cmd_hotspots, argc, argv, options, on_opt, &o, &args);
	if (rc)
		return rc < 0 ? 0 : rc;
	struct profile p;
	if (view_load(args.file, &p) < 0)
		return VIEW_EXIT_ERROR;
	struct row *rows = sorted_rows(&p, o.sort);
	if (!rows) {
		view_error("out of memory sorting %zu sites: free memory and retry", p.nsites);
		pf_free(&p);
		return VIEW_EXIT_ERROR;
	}
	long top = o.top >= 0 ? o.top : args.json ? 0 : TEXT_TOP_DEFAULT;
	size_t n = top > 0 && (size_t)top < p.nsites ? (size_t)top : p.nsites;
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
	       "  --sort KEY       rank by allocations (default), bytes or live\n",
    .run = run,
};
