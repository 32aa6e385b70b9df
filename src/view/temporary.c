/* temporary: the sites whose blocks are freed right after allocation (hpformat.h's
 * temporary blocks): churn that a stack buffer or a reused object would avoid. */
#include <inttypes.h>
#include <stdlib.h>

#include "json.h"
#include "report.h"
#include "text.h"
#include "view.h"

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
	return report_cmp_addr(x, y);
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
	int fw = report_func_width(p, s, shown, sizeof *s);
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
	struct report_run r;
	int rc = report_start(&r, &view_cmd_temporary, argc, argv, sizeof(struct pf_site *));
	if (rc)
		return rc < 0 ? 0 : rc;
	const struct pf_site **s = r.rows;
	size_t n = 0;
	for (size_t i = 0; i < r.p.nsites; i++)
		if (r.p.sites[i].tot.temp_frees)
			s[n++] = &r.p.sites[i];
	qsort(s, n, sizeof *s, cmp_site);
	size_t shown = report_count(r.top, r.args.json, n);
	if (r.args.json)
		print_json(&r.p, s, shown);
	else
		print_text(&r.p, s, n, shown);
	return report_end(&r);
}

const struct view_cmd view_cmd_temporary = {
    .name = "temporary",
    .summary = "List the sites whose blocks are freed before their thread allocates again",
    .options = REPORT_TOP_HELP,
    .run = run,
};
