/* tree: the call tree from main outwards to the allocation sites, or (-r) from each site out
 * to its callers, with allocations, bytes and live bytes per node. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "calltree.h"
#include "json.h"
#include "text.h"
#include "view.h"

#define TEXT_MIN_SHARE_DEFAULT 1.0
#define TEXT_INDENT_MAX 60

struct tree_opts {
	int reversed;
	int key;	  /* CT_* */
	double min_share; /* percent; < 0 = not given */
};

struct walk {
	const struct calltree *t;
	const struct tree_opts *o;
	struct json *j;
	size_t next_id;
	int64_t total;
	size_t hidden;
	int nomem;
};

enum { OPT_REVERSED = 'r', OPT_TYPE = 1, OPT_MIN };

static const struct option options[] = {
    {"reversed", no_argument, NULL, OPT_REVERSED},
    {"type", required_argument, NULL, OPT_TYPE},
    {"min", required_argument, NULL, OPT_MIN},
    {0},
};

static int on_opt(int val, const char *arg, void *ctx)
{
	struct tree_opts *o = ctx;
	char *end;
	switch (val) {
	case OPT_REVERSED:
		o->reversed = 1;
		return 0;
	case OPT_TYPE:
		return view_parse_type(&view_cmd_tree, arg, &o->key);
	case OPT_MIN:
		o->min_share = strtod(arg, &end);
		if (end == arg || *end || !(o->min_share >= 0 && o->min_share <= 100))
			return view_usage_error(&view_cmd_tree,
						"--min wants a percentage from 0 to 100, not '%s'",
						arg);
		return 0;
	default:
		return VIEW_EXIT_USAGE;
	}
}

static void walk_json(struct walk *w, size_t i, size_t parent_id, unsigned depth)
{
	const struct ct_node *n = &w->t->nodes[i];
	size_t id = w->next_id++;
	json_object_begin(w->j);
	json_kv_u64(w->j, "id", id);
	json_key(w->j, "parent");
	if (i)
		json_u64(w->j, parent_id);
	else
		json_null(w->j);
	json_kv_u64(w->j, "depth", depth);
	json_kv_str(w->j, "name", n->label);
	json_key(w->j, "address");
	if (i)
		json_hex(w->j, n->addr);
	else
		json_null(w->j);
	json_kv_i64(w->j, "allocations", n->v[CT_ALLOCS]);
	json_kv_i64(w->j, "allocated_bytes", n->v[CT_BYTES]);
	json_kv_i64(w->j, "live_bytes", n->v[CT_LIVE]);
	json_object_end(w->j);
	size_t nc;
	size_t *c = ct_children(w->t, i, w->o->key, &nc);
	if (nc && !c)
		w->nomem = 1;
	for (size_t k = 0; c && k < nc; k++)
		walk_json(w, c[k], id, depth + 1);
	free(c);
}

static void walk_text(struct walk *w, size_t i, unsigned depth)
{
	const struct ct_node *n = &w->t->nodes[i];
	char b[32], l[32];
	double pct = w->total ? 100.0 * (double)n->v[w->o->key] / (double)w->total : 0;
	unsigned ind = depth * 2 < TEXT_INDENT_MAX ? depth * 2 : TEXT_INDENT_MAX;
	printf("%6.1f%% %11" PRId64 " %11s %11s  %*s%s\n", pct, n->v[CT_ALLOCS],
	       text_sbytes(b, sizeof b, n->v[CT_BYTES]), text_sbytes(l, sizeof l, n->v[CT_LIVE]),
	       (int)ind, "", n->label);
	size_t nc;
	size_t *c = ct_children(w->t, i, w->o->key, &nc);
	if (nc && !c)
		w->nomem = 1;
	for (size_t k = 0; c && k < nc; k++) {
		const struct ct_node *ch = &w->t->nodes[c[k]];
		double cp = w->total ? 100.0 * (double)ch->v[w->o->key] / (double)w->total : 0;
		if (cp < w->o->min_share || ch->v[w->o->key] <= 0)
			w->hidden++;
		else
			walk_text(w, c[k], depth + 1);
	}
	free(c);
}

static int run(int argc, char **argv)
{
	struct tree_opts o = {.key = CT_ALLOCS, .min_share = -1};
	struct view_args args;
	int rc = view_parse(&view_cmd_tree, argc, argv, options, on_opt, &o, &args);
	if (rc)
		return rc < 0 ? 0 : rc;
	struct profile p;
	if (view_load(&args, &p) < 0)
		return VIEW_EXIT_ERROR;
	struct calltree t;
	if (ct_build(&t, &p, o.reversed, NULL, NULL) < 0) {
		view_error("out of memory building the call tree: free memory and retry");
		pf_free(&p);
		return VIEW_EXIT_ERROR;
	}
	if (o.min_share < 0)
		o.min_share = args.json ? 0 : TEXT_MIN_SHARE_DEFAULT;
	struct walk w = {.t = &t, .o = &o, .total = t.nodes[0].v[o.key]};
	if (args.json) {
		struct json j;
		json_init(&j, stdout);
		w.j = &j;
		json_array_begin(&j);
		walk_json(&w, 0, 0, 0);
		json_array_end(&j);
	} else if (t.n == 1) {
		printf("No stacks with numbers (stacks are recorded in full mode only).\n");
	} else {
		printf("%7s %11s %11s %11s  %s\n", "SHARE", "ALLOCATIONS", "BYTES", "LIVE",
		       o.reversed ? "SITE, THEN ITS CALLERS" : "CALLS, FROM THE OUTERMOST");
		walk_text(&w, 0, 0);
		if (w.hidden)
			printf("\n%zu nodes under %.1f%% hidden: --min 0 shows all.\n", w.hidden,
			       o.min_share);
		view_print_sampling(stdout, &p);
	}
	ct_free(&t);
	pf_free(&p);
	if (w.nomem) {
		view_error("out of memory walking the call tree: the output is incomplete");
		return VIEW_EXIT_ERROR;
	}
	return 0;
}

const struct view_cmd view_cmd_tree = {
    .name = "tree",
    .summary = "Show the call tree with allocations, bytes and live bytes per node",
    .options = "  -r, --reversed   from each allocation site out to its callers\n"
	       "  --type KEY       share and order by allocations (default), bytes or live\n"
	       "  --min PCT        hide nodes under PCT% of the total (default 1 in text,\n"
	       "                   0 in JSON, which lists every node)\n",
    .run = run,
};
