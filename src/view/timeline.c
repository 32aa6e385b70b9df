/* timeline: the totals of every round, as deltas and cumulative. */
#include <inttypes.h>

#include "json.h"
#include "text.h"
#include "view.h"

static void print_json(const struct profile *p)
{
	struct json j;
	json_init(&j, stdout);
	json_array_begin(&j);
	const struct hp_round zero = {0};
	for (size_t i = 0; i < p->nrounds; i++) {
		const struct hp_round *r = &p->rounds[i], *prev = i ? &p->rounds[i - 1] : &zero;
		json_object_begin(&j);
		json_kv_u64(&j, "round", r->seq);
		json_key(&j, "time_s");
		json_double(&j, (double)r->time_ns / 1e9, 3);
		json_kv_u64(&j, "allocations", r->allocs - prev->allocs);
		json_kv_u64(&j, "frees", r->frees - prev->frees);
		json_kv_u64(&j, "allocated_bytes", r->alloc_bytes - prev->alloc_bytes);
		json_kv_u64(&j, "freed_bytes", r->freed_bytes - prev->freed_bytes);
		json_kv_u64(&j, "total_allocations", r->allocs);
		json_kv_u64(&j, "total_frees", r->frees);
		json_kv_u64(&j, "total_allocated_bytes", r->alloc_bytes);
		json_kv_u64(&j, "total_freed_bytes", r->freed_bytes);
		json_kv_u64(&j, "live_blocks", r->live_blocks);
		json_kv_u64(&j, "live_bytes", r->live_bytes);
		json_kv_i64(&j, "live_bytes_change", (int64_t)(r->live_bytes - prev->live_bytes));
		json_kv_u64(&j, "rss_bytes", r->rss_bytes);
		json_kv_u64(&j, "payload_bytes", r->payload_bytes);
		json_kv_u64(&j, "lost", r->lost);
		json_key(&j, "sampled");
		json_bool(&j, (r->flags & HP_ROUND_SAMPLED) != 0);
		json_key(&j, "final");
		json_bool(&j, (r->flags & HP_ROUND_FINAL) != 0);
		json_object_end(&j);
	}
	json_array_end(&j);
}

static void print_text(const struct profile *p)
{
	char ab[32], tb[32], lb[32], dl[32], rss[32];
	if (!p->nrounds) {
		printf("No complete rounds in the profile.\n");
		return;
	}
	printf("%5s %9s %10s %10s %11s %13s %11s %11s %11s\n", "ROUND", "TIME", "ALLOCS", "FREES",
	       "BYTES", "TOTAL BYTES", "LIVE", "LIVE +/-", "RSS");
	const struct hp_round zero = {0};
	for (size_t i = 0; i < p->nrounds; i++) {
		const struct hp_round *r = &p->rounds[i], *prev = i ? &p->rounds[i - 1] : &zero;
		printf("%5" PRIu32 " %8.1fs %10" PRIu64 " %10" PRIu64 " %11s %13s %11s %11s "
		       "%11s%s\n",
		       r->seq, (double)r->time_ns / 1e9, r->allocs - prev->allocs,
		       r->frees - prev->frees,
		       text_bytes(ab, sizeof ab, r->alloc_bytes - prev->alloc_bytes),
		       text_bytes(tb, sizeof tb, r->alloc_bytes),
		       text_bytes(lb, sizeof lb, r->live_bytes),
		       text_sbytes(dl, sizeof dl, (int64_t)(r->live_bytes - prev->live_bytes)),
		       text_bytes(rss, sizeof rss, r->rss_bytes),
		       r->flags & HP_ROUND_SAMPLED ? "  sampled" : "");
	}
}

static int run(int argc, char **argv)
{
	struct view_args args;
	int rc = view_parse(&view_cmd_timeline, argc, argv, NULL, NULL, NULL, &args);
	if (rc)
		return rc < 0 ? 0 : rc;
	struct profile p;
	if (view_load(&args, &p) < 0)
		return VIEW_EXIT_ERROR;
	if (args.json)
		print_json(&p);
	else
		print_text(&p);
	pf_free(&p);
	return 0;
}

const struct view_cmd view_cmd_timeline = {
    .name = "timeline",
    .summary = "Show every round: allocations, frees, bytes, live bytes and RSS",
    .options = "",
    .run = run,
};
