/* growth: the sites whose live bytes grow, fastest first: what is leaking right now. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>

#include "growth-fit.h"
#include "json.h"
#include "report.h"
#include "text.h"
#include "view.h"

struct row {
	const struct pf_site *site;
	struct gf_fit fit;
};

static int cmp_row(const void *a, const void *b)
{
	const struct row *x = a, *y = b;
	if (x->fit.slope != y->fit.slope)
		return x->fit.slope > y->fit.slope ? -1 : 1;
	return report_cmp_addr(x->site, y->site);
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
		json_key(&j, "slope_bytes_per_s");
		json_double(&j, rows[i].fit.slope, 3);
		json_key(&j, "r2");
		json_double(&j, rows[i].fit.r2, 4);
		json_object_end(&j);
	}
	json_array_end(&j);
}

static void print_text(const struct profile *p, const struct row *rows, size_t n, size_t shown)
{
	char func[512], where[512], rate[40], live[32];
	if (!n) {
		printf("No site's live bytes grow across the %zu rounds.\n", p->nrounds);
		return;
	}
	int fw = report_func_width(p, rows, shown, sizeof *rows);
	printf("%14s %6s %12s  %-*s  %s\n", "GROWTH", "R2", "LIVE", fw, "FUNCTION", "LOCATION");
	for (size_t i = 0; i < shown; i++) {
		const struct pf_site *s = rows[i].site;
		char b[32];
		snprintf(rate, sizeof rate, "%s/s",
			 text_bytes(b, sizeof b, (uint64_t)llround(rows[i].fit.slope)));
		report_names(p, s->addr, func, sizeof func, where, sizeof where);
		printf("%14s %6.3f %12s  %-*s  %s\n", rate, rows[i].fit.r2,
		       text_sbytes(live, sizeof live, pf_live_bytes(&s->tot)), where[0] ? fw : 0,
		       func, where);
	}
	printf("\nGROWTH: least-squares slope of the site's live bytes over the rounds; R2 near 1: "
	       "steady growth.\n");
	report_shown(shown, n, "sites", "growth");
	view_print_sampling(stdout, p);
}

static int run(int argc, char **argv)
{
	struct report_run r;
	int rc = report_start(&r, &view_cmd_growth, argc, argv, sizeof(struct row));
	if (rc)
		return rc < 0 ? 0 : rc;
	struct gf_fit *fit = calloc(r.p.nsites + 1, sizeof *fit);
	if (!fit || gf_fit_sites(&r.p, fit) < 0) {
		view_error("out of memory fitting %zu sites: free memory and retry", r.p.nsites);
		free(fit);
		report_end(&r);
		return VIEW_EXIT_ERROR;
	}
	struct row *rows = r.rows;
	size_t n = 0;
	for (size_t i = 0; i < r.p.nsites; i++)
		if (fit[i].slope > 0)
			rows[n++] = (struct row){&r.p.sites[i], fit[i]};
	qsort(rows, n, sizeof *rows, cmp_row);
	size_t shown = report_count(r.top, r.args.json, n);
	if (r.args.json)
		print_json(&r.p, rows, shown);
	else
		print_text(&r.p, rows, n, shown);
	free(fit);
	return report_end(&r);
}

const struct view_cmd view_cmd_growth = {
    .name = "growth",
    .summary = "Rank the sites by how fast their live bytes grow (least-squares slope, r2)",
    .options = REPORT_TOP_HELP,
    .run = run,
};
