/* peak: live memory by site at the round with the most live bytes. */
#include <inttypes.h>
#include <stdlib.h>

#include "json.h"
#include "report.h"
#include "text.h"
#include "view.h"

struct row {
	const struct pf_site *site;
	int64_t blocks, bytes; /* live at the peak round */
};

static int cmp_row(const void *a, const void *b)
{
	const struct row *x = a, *y = b;
	if (x->bytes != y->bytes)
		return x->bytes > y->bytes ? -1 : 1;
	return report_cmp_addr(x->site, y->site);
}

static size_t collect(const struct profile *p, size_t round, struct row *rows)
{
	for (size_t i = 0; i < p->nsites; i++)
		rows[i] = (struct row){.site = &p->sites[i]};
	for (size_t i = 0; i < p->nstacks; i++) {
		long s = pf_site_of(p, &p->stacks[i]);
		if (s < 0)
			continue;
		struct pf_point pt = pf_stack_live_at(&p->stacks[i], round);
		rows[s].blocks += pt.live_blocks;
		rows[s].bytes += pt.live_bytes;
	}
	size_t n = 0;
	for (size_t i = 0; i < p->nsites; i++)
		if (rows[i].bytes > 0)
			rows[n++] = rows[i];
	qsort(rows, n, sizeof *rows, cmp_row);
	return n;
}

static void print_json(const struct profile *p, const struct hp_round *r, const struct row *rows,
		       size_t n)
{
	struct json j;
	json_init(&j, stdout);
	json_object_begin(&j);
	json_key(&j, "round");
	if (r)
		json_u64(&j, r->seq);
	else
		json_null(&j);
	json_key(&j, "time_s");
	json_double(&j, r ? (double)r->time_ns / 1e9 : 0, 3);
	json_kv_u64(&j, "live_bytes", r ? r->live_bytes : 0);
	json_kv_u64(&j, "live_blocks", r ? r->live_blocks : 0);
	json_kv_u64(&j, "rss_bytes", r ? r->rss_bytes : 0);
	json_key(&j, "sites");
	json_array_begin(&j);
	for (size_t i = 0; i < n; i++) {
		const struct pf_site *s = rows[i].site;
		json_object_begin(&j);
		report_site_json(&j, p, s, pf_live_blocks(&s->tot), pf_live_bytes(&s->tot));
		json_kv_i64(&j, "peak_live_blocks", rows[i].blocks);
		json_kv_i64(&j, "peak_live_bytes", rows[i].bytes);
		json_object_end(&j);
	}
	json_array_end(&j);
	json_object_end(&j);
}

static void print_text(const struct profile *p, const struct hp_round *r, const struct row *rows,
		       size_t n, size_t shown)
{
	char func[512], where[512], b[32], t[32];
	if (!r) {
		printf("No complete rounds in the profile.\n");
		return;
	}
	printf("Peak: %s live in %" PRIu64 " blocks at round %" PRIu32 " (%s).\n\n",
	       text_bytes(b, sizeof b, r->live_bytes), r->live_blocks, r->seq,
	       text_duration(t, sizeof t, r->time_ns));
	if (!n) {
		printf("No site had live bytes then.\n");
		return;
	}
	int fw = report_func_width(p, rows, shown, sizeof *rows);
	printf("%12s %7s %11s  %-*s  %s\n", "LIVE BYTES", "SHARE", "LIVE BLOCKS", fw, "FUNCTION",
	       "LOCATION");
	for (size_t i = 0; i < shown; i++) {
		report_names(p, rows[i].site->addr, func, sizeof func, where, sizeof where);
		printf("%12s %6.1f%% %11" PRId64 "  %-*s  %s\n",
		       text_sbytes(b, sizeof b, rows[i].bytes),
		       r->live_bytes ? 100.0 * (double)rows[i].bytes / (double)r->live_bytes : 0.0,
		       rows[i].blocks, where[0] ? fw : 0, func, where);
	}
	report_shown(shown, n, "sites", "live bytes at the peak");
	view_print_sampling(stdout, p);
}

static int run(int argc, char **argv)
{
	struct report_run r;
	int rc = report_start(&r, &view_cmd_peak, argc, argv, sizeof(struct row));
	if (rc)
		return rc < 0 ? 0 : rc;
	size_t peak = pf_peak_round(&r.p);
	const struct hp_round *round = r.p.nrounds ? &r.p.rounds[peak] : NULL;
	size_t n = round ? collect(&r.p, peak, r.rows) : 0,
	       shown = report_count(r.top, r.args.json, n);
	if (r.args.json)
		print_json(&r.p, round, r.rows, shown);
	else
		print_text(&r.p, round, r.rows, n, shown);
	return report_end(&r);
}

const struct view_cmd view_cmd_peak = {
    .name = "peak",
    .summary = "Show live memory by site at the round with the most live bytes",
    .options = REPORT_TOP_HELP,
    .run = run,
};
