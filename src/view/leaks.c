/* leaks: the sites whose blocks are still allocated at the end, with their ages. */
#include <inttypes.h>
#include <stdlib.h>

#include "json.h"
#include "report.h"
#include "text.h"
#include "view.h"

struct row {
	const struct pf_site *site;
	int ages; /* the numbers come from LIVE records, with ages */
	struct pf_live live;
};

static int cmp_row(const void *a, const void *b)
{
	const struct row *x = a, *y = b;
	if (x->live.bytes != y->live.bytes)
		return x->live.bytes > y->live.bytes ? -1 : 1;
	if (x->live.blocks != y->live.blocks)
		return x->live.blocks > y->live.blocks ? -1 : 1;
	return report_cmp_addr(x->site, y->site);
}

/* With LIVE records they are the truth (exact even when sampling); without them (the target
 * exited before the final round) the sites' counters are all there is, and ages unknown. */
static size_t collect(const struct profile *p, struct row *rows)
{
	size_t n = 0;
	for (size_t i = 0; i < p->nsites; i++) {
		const struct pf_site *s = &p->sites[i];
		struct row r = {.site = s};
		if (p->has_live) {
			if (!s->has_live || !s->live.blocks)
				continue;
			r.ages = 1;
			r.live = s->live;
		} else {
			if (pf_live_blocks(&s->tot) <= 0)
				continue;
			r.live.blocks = (uint64_t)pf_live_blocks(&s->tot);
			r.live.bytes =
			    pf_live_bytes(&s->tot) > 0 ? (uint64_t)pf_live_bytes(&s->tot) : 0;
		}
		rows[n++] = r;
	}
	qsort(rows, n, sizeof *rows, cmp_row);
	return n;
}

static void print_json(const struct profile *p, const struct row *rows, size_t n)
{
	struct json j;
	json_init(&j, stdout);
	json_array_begin(&j);
	for (size_t i = 0; i < n; i++) {
		json_object_begin(&j);
		report_site_json(&j, p, rows[i].site, (int64_t)rows[i].live.blocks,
				 (int64_t)rows[i].live.bytes);
		json_key(&j, "oldest_age_s");
		if (rows[i].ages)
			json_double(&j, (double)rows[i].live.oldest_age_ms / 1e3, 3);
		else
			json_null(&j);
		json_key(&j, "mean_age_s");
		if (rows[i].ages)
			json_double(&j, (double)rows[i].live.mean_age_ms / 1e3, 3);
		else
			json_null(&j);
		json_object_end(&j);
	}
	json_array_end(&j);
}

static void print_text(const struct profile *p, const struct row *rows, size_t n, size_t shown)
{
	char func[512], where[512], b[32], old[32], mean[32];
	if (!n) {
		printf("No live blocks at the end of the profile.\n");
		return;
	}
	int fw = report_func_width(p, rows, shown, sizeof *rows);
	printf("%11s %12s %12s %12s  %-*s  %s\n", "LIVE BLOCKS", "LIVE BYTES", "OLDEST", "MEAN AGE",
	       fw, "FUNCTION", "LOCATION");
	for (size_t i = 0; i < shown; i++) {
		const struct row *r = &rows[i];
		report_names(p, r->site->addr, func, sizeof func, where, sizeof where);
		printf("%11" PRIu64 " %12s %12s %12s  %-*s  %s\n", r->live.blocks,
		       text_bytes(b, sizeof b, r->live.bytes),
		       report_age(old, sizeof old, r->ages, r->live.oldest_age_ms),
		       report_age(mean, sizeof mean, r->ages, r->live.mean_age_ms),
		       where[0] ? fw : 0, func, where);
	}
	if (!p->has_live)
		printf("\nAges unknown: the profile has no LIVE records (the target exited before "
		       "a final round).\n");
	report_shown(shown, n, "sites", "live bytes");
	view_print_sampling(stdout, p);
}

static int run(int argc, char **argv)
{
	struct report_run r;
	int rc = report_start(&r, &view_cmd_leaks, argc, argv, sizeof(struct row));
	if (rc)
		return rc < 0 ? 0 : rc;
	size_t n = collect(&r.p, r.rows), shown = report_count(r.top, r.args.json, n);
	if (r.args.json)
		print_json(&r.p, r.rows, shown);
	else
		print_text(&r.p, r.rows, n, shown);
	return report_end(&r);
}

const struct view_cmd view_cmd_leaks = {
    .name = "leaks",
    .summary = "List the sites with blocks still live at the end, with their ages",
    .options = REPORT_TOP_HELP,
    .run = run,
};
