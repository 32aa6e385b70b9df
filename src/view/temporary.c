/* temporary: the sites whose blocks are freed right after allocation (hpformat.h's
 * temporary blocks): churn that a stack buffer or a reused object would avoid. */
#include <inttypes.h>
#include <stdlib.h>

#include "json.h"
#include "report.h"
#include "text.h"
#include "view.h"

enum { OPT_TOP = 1 };

static const struct option options[] = {
    {"top", required_argument, NULL, OPT_TOP},
    {0},
};

static int on_opt(int val, const char *arg, void *ctx)
{
	return val == OPT_TOP ? report_parse_top(&view_cmd_temporary, arg, ctx) : VIEW_EXIT_USAGE;
}

static double share(const struct pf_site *s)
{
	return s->tot.allocs ? (double)s->tot.temp_frees / (double)s->tot.allocs : 0;
}

static int cmp_site(const void *a, const void *b)
{
	const struct pf_site *x = *(const struct pf_site *const *)a,
			     *y = *(const struct pf_site *const *)b;
	if (x->tot.temp_frees != y->tot.temp_frees)
		return x->tot.temp_frees > y->tot.temp_frees ? -1 : 1;
	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static void print_json(const struct profile *p, const struct pf_site *const *s, size_t n)
{
	struct json j;
	json_init(&j, stdout);
	json_array_begin(&j);
	for (size_t i = 0; i < n; i++) {
		json_object_begin(&j);
		report_site_json(&j, p, s[i], pf_live_blocks(&s[i]->tot),
				 pf_live_bytes(&s[i]->tot));
		json_key(&j, "temporary_share");
		json_double(&j, share(s[i]), 4);
		json_object_end(&j);
	}
	json_array_end(&j);
}

static void print_text(const struct profile *p, const struct pf_site *const *s, size_t n,
		       size_t shown)
{
	char func[512], where[512];
	if (!n) {
		printf("No temporary blocks (blocks " HP_TEMPORARY_TEXT ").\n");
		return;
	}
	uint64_t *addrs = malloc(shown * sizeof *addrs + 1);
	for (size_t i = 0; addrs && i < shown; i++)
		addrs[i] = s[i]->addr;
	int fw = addrs ? report_func_width(p, addrs, shown) : REPORT_FUNC_WIDTH_MAX;
	free(addrs);
	printf("%11s %11s %7s  %-*s  %s\n", "TEMPORARY", "ALLOCATIONS", "SHARE", fw, "FUNCTION",
	       "LOCATION");
	for (size_t i = 0; i < shown; i++) {
		report_names(p, s[i]->addr, func, sizeof func, where, sizeof where);
		printf("%11" PRIu64 " %11" PRIu64 " %6.1f%%  %-*s  %s\n", s[i]->tot.temp_frees,
		       s[i]->tot.allocs, 100 * share(s[i]), where[0] ? fw : 0, func, where);
	}
	printf("\nTEMPORARY: blocks " HP_TEMPORARY_TEXT "; SHARE: of the site's "
	       "allocations.\n");
	report_shown(shown, n, "sites", "temporary blocks");
	view_print_sampling(stdout, p);
}

static int run(int argc, char **argv)
{
	long top = -1;
	struct view_args args;
	int rc = view_parse(&view_cmd_temporary, argc, argv, options, on_opt, &top, &args);
	if (rc)
		return rc < 0 ? 0 : rc;
	struct profile p;
	if (view_load(&args, &p) < 0)
		return VIEW_EXIT_ERROR;
	const struct pf_site **s = malloc((p.nsites + 1) * sizeof *s);
	if (!s) {
		view_error("out of memory sorting %zu sites: free memory and retry", p.nsites);
		pf_free(&p);
		return VIEW_EXIT_ERROR;
	}
	size_t n = 0;
	for (size_t i = 0; i < p.nsites; i++)
		if (p.sites[i].tot.temp_frees)
			s[n++] = &p.sites[i];
	qsort(s, n, sizeof *s, cmp_site);
	size_t shown = report_count(top, args.json, n);
	if (args.json)
		print_json(&p, s, shown);
	else
		print_text(&p, s, n, shown);
	free(s);
	pf_free(&p);
	return 0;
}

const struct view_cmd view_cmd_temporary = {
    .name = "temporary",
    .summary = "List the sites whose blocks are freed before their thread allocates again",
    .options = "  --top N          show the first N sites (default 20 in text, all in JSON)\n",
    .run = run,
};
