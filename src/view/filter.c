/* filter: the stacks that allocate blocks of one size, the candidates for a pool. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "report.h"
#include "text.h"
#include "view.h"

struct filter_opts {
	int has_size;
	uint64_t size;
	long top;
};

enum { OPT_SIZE = 1, OPT_TOP };

static const struct option options[] = {
    {"size", required_argument, NULL, OPT_SIZE},
    {"top", required_argument, NULL, OPT_TOP},
    {0},
};

static int on_opt(int val, const char *arg, void *ctx)
{
	struct filter_opts *o = ctx;
	char *end;
	switch (val) {
	case OPT_SIZE:
		o->size = strtoull(arg, &end, 10);
		if (*arg < '0' || *arg > '9' || *end)
			return view_usage_error(&view_cmd_filter,
						"--size wants a size in bytes, not '%s'", arg);
		o->has_size = 1;
		return 0;
	case OPT_TOP:
		return report_parse_top(&view_cmd_filter, arg, &o->top);
	default:
		return VIEW_EXIT_USAGE;
	}
}

static int cmp_entry(const void *a, const void *b)
{
	const struct pf_stack_size *x = *(const struct pf_stack_size *const *)a,
				   *y = *(const struct pf_stack_size *const *)b;
	if (x->key.tot.allocs != y->key.tot.allocs)
		return x->key.tot.allocs > y->key.tot.allocs ? -1 : 1;
	return x->stack < y->stack ? -1 : x->stack > y->stack;
}

static void print_json(const struct profile *p, const struct pf_size *k,
		       const struct pf_stack_size *const *e, size_t n, size_t shown)
{
	struct json j;
	uint64_t allocs = 0, bytes = 0;
	for (size_t i = 0; i < n; i++) {
		allocs += e[i]->key.tot.allocs;
		bytes += e[i]->key.tot.alloc_bytes;
	}
	json_init(&j, stdout);
	json_object_begin(&j);
	json_kv_str(&j, "kind", k->kind == HP_SIZE_POW2 ? "pow2" : "exact");
	json_kv_u64(&j, "size", k->size);
	json_kv_u64(&j, "size_max", k->kind == HP_SIZE_POW2 ? k->size * 2 - 1 : k->size);
	json_kv_u64(&j, "allocations", allocs);
	json_kv_u64(&j, "allocated_bytes", bytes);
	json_key(&j, "stacks");
	json_array_begin(&j);
	for (size_t i = 0; i < shown; i++) {
		const struct pf_totals *t = &e[i]->key.tot;
		json_object_begin(&j);
		json_kv_u64(&j, "allocations", t->allocs);
		json_kv_u64(&j, "allocated_bytes", t->alloc_bytes);
		json_kv_u64(&j, "frees", t->frees);
		json_kv_u64(&j, "temporary_frees", t->temp_frees);
		json_kv_i64(&j, "live_blocks", pf_live_blocks(t));
		json_kv_i64(&j, "live_bytes", pf_live_bytes(t));
		json_kv_u64(&j, "stack_allocations", p->stacks[e[i]->stack].tot.allocs);
		report_stack_json(&j, p, &p->stacks[e[i]->stack]);
		json_object_end(&j);
	}
	json_array_end(&j);
	json_object_end(&j);
}

static void print_text(const struct profile *p, const struct pf_size *k,
		       const struct pf_stack_size *const *e, size_t n, size_t shown)
{
	char func[512], where[512], b[32], lo[32], hi[32];
	if (k->kind == HP_SIZE_POW2)
		printf("Blocks of %s to %s (sizes above %d bytes are kept by power of two):\n",
		       text_bytes(lo, sizeof lo, k->size), text_bytes(hi, sizeof hi, k->size * 2),
		       HP_EXACT_SIZE_MAX);
	if (!n) {
		printf("No stack allocates blocks of %" PRIu64 " bytes.\n", k->size);
		return;
	}
	printf("%11s %12s %8s  %s\n", "ALLOCATIONS", "BYTES", "SHARE", "STACK (site first)");
	for (size_t i = 0; i < shown; i++) {
		const struct pf_stack *st = &p->stacks[e[i]->stack];
		const struct pf_totals *t = &e[i]->key.tot;
		printf("%11" PRIu64 " %12s %7.1f%%", t->allocs,
		       text_bytes(b, sizeof b, t->alloc_bytes),
		       st->tot.allocs ? 100.0 * (double)t->allocs / (double)st->tot.allocs : 0.0);
		for (uint32_t f = st->site_frame; f < st->depth; f++) {
			report_names(p, st->frames[f], func, sizeof func, where, sizeof where);
			printf("%s%s%s%s%s\n", f == st->site_frame ? "  " : "  <- ", func,
			       where[0] ? " (" : "", where, where[0] ? ")" : "");
			if (f + 1 < st->depth)
				printf("%33s", "");
		}
	}
	printf("\nSHARE: of the stack's allocations that have this size.\n");
	report_shown(shown, n, "stacks", "allocations");
}

static int run(int argc, char **argv)
{
	struct filter_opts o = {.top = -1};
	struct view_args args;
	int rc = view_parse(&view_cmd_filter, argc, argv, options, on_opt, &o, &args);
	if (rc)
		return rc < 0 ? 0 : rc;
	if (!o.has_size)
		return view_usage_error(&view_cmd_filter, "--size N is required");
	struct profile p;
	if (view_load(&args, &p) < 0)
		return VIEW_EXIT_ERROR;
	struct pf_size k = pf_size_key(o.size);
	const struct pf_stack_size **e = malloc((p.nstack_sizes + 1) * sizeof *e);
	if (!e) {
		view_error("out of memory: free memory and retry");
		pf_free(&p);
		return VIEW_EXIT_ERROR;
	}
	size_t n = 0;
	for (size_t i = 0; i < p.nstack_sizes; i++) {
		const struct pf_stack_size *s = &p.stack_sizes[i];
		if (s->key.kind == k.kind && s->key.size == k.size && s->key.tot.allocs &&
		    pf_site_of(&p, &p.stacks[s->stack]) >= 0)
			e[n++] = s;
	}
	qsort(e, n, sizeof *e, cmp_entry);
	size_t shown = report_count(o.top, args.json, n);
	if (args.json)
		print_json(&p, &k, e, n, shown);
	else
		print_text(&p, &k, e, n, shown);
	free(e);
	pf_free(&p);
	return 0;
}

const struct view_cmd view_cmd_filter = {
    .name = "filter",
    .summary = "List the stacks that allocate blocks of exactly N bytes (pool candidates)",
    .options = "  --size N         the block size in bytes (required)\n"
	       "  --top N          show the first N stacks (default 20 in text, all in JSON)\n",
    .run = run,
};
