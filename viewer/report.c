#include "report.h"

#include <inttypes.h>

void hp_stats_round(struct hp_stats *st, const struct hp_round *r)
{
	st->rounds++;
	st->prev = st->last;
	st->last = *r;
	if (r->live_bytes > st->peak_live_bytes)
		st->peak_live_bytes = r->live_bytes;
	if (r->flags & HP_ROUND_SAMPLED)
		st->sampled = true;
}

/* A closed pipe must not cost the profile: once a write fails, stop printing. */
static void flush(struct hp_display *d)
{
	if (fflush(d->out) != 0 || ferror(d->out))
		d->broken = 1;
}

static void lines_start(struct hp_display *d, const struct hp_target_desc *t)
{
	if (d->broken)
		return;
	fprintf(d->out, "# heapprof: pid %d (%s), profile %s\n", (int)t->pid, t->comm, t->file);
	flush(d);
}

static void lines_round(struct hp_display *d, const struct hp_stats *st,
			const struct hp_site_table *sites)
{
	(void)sites;
	if (d->broken)
		return;
	const struct hp_round *r = &st->last;
	fprintf(d->out,
		"round=%u time=%.3f allocs=%llu frees=%llu allocated=%llu live=%llu rss=%llu\n",
		r->seq, (double)r->time_ns / 1e9, (unsigned long long)r->allocs,
		(unsigned long long)r->frees, (unsigned long long)r->alloc_bytes,
		(unsigned long long)r->live_bytes, (unsigned long long)r->rss_bytes);
	flush(d);
}

static enum hp_input lines_input(struct hp_display *d)
{
	(void)d;
	return HP_INPUT_NONE;
}

static void lines_notice(struct hp_display *d, const char *msg)
{
	(void)d;
	fprintf(stderr, "heapprof-viewer: %s\n", msg);
}

static void lines_finish(struct hp_display *d, const struct hp_stats *st,
			 const struct hp_site_stat *sites, size_t nsites, const char *file)
{
	if (d->broken)
		return;
	const struct hp_round *r = &st->last;
	FILE *o = d->out;
	fprintf(o, "# duration %.3f s, %u rounds\n", (double)r->time_ns / 1e9, st->rounds);
	fprintf(o, "# allocations %" PRIu64 ", frees %" PRIu64 ", bytes allocated %" PRIu64 "\n",
		r->allocs, r->frees, r->alloc_bytes);
	fprintf(o, "# live %" PRIu64 " blocks, %" PRIu64 " bytes; peak live %" PRIu64 " bytes\n",
		r->live_blocks, r->live_bytes, st->peak_live_bytes);
	if (st->hello.sample_rate)
		fprintf(o,
			"# per-site numbers are estimates from sampling (--sample-rate %" PRIu64
			")\n",
			st->hello.sample_rate);
	else if (st->sampled)
		fprintf(o, "# per-site numbers are estimates from sampling (--max-memory was "
			   "reached)\n");
	if (st->cut_stacks)
		fprintf(o,
			"# %" PRIu64 " stacks cut short: heapprof's stack table was full "
			"(give --max-memory more, or a smaller --max-depth)\n",
			st->cut_stacks);
	if (nsites > 0)
		fprintf(o, "# top call sites by allocations (temporary: " HP_TEMPORARY_TEXT "):\n");
	for (size_t i = 0; i < nsites; i++)
		fprintf(
		    o, "#   %12" PRIu64 " allocs %14" PRIu64 " bytes %12" PRIu64 " temporary  %s\n",
		    sites[i].allocs, sites[i].bytes, sites[i].temp_frees, sites[i].label);
	fprintf(o, "profile written to %s\n", file);
	flush(d);
}

static void lines_close(struct hp_display *d)
{
	(void)d;
}

void hp_display_lines_init(struct hp_display *d, FILE *out)
{
	*d = (struct hp_display){
	    .start = lines_start,
	    .round = lines_round,
	    .input = lines_input,
	    .notice = lines_notice,
	    .finish = lines_finish,
	    .close = lines_close,
	    .out = out,
	    .input_fd = -1,
	};
}
