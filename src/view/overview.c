/* overview: the session, its totals and peaks. */
#include <inttypes.h>
#include <string.h>

#include "json.h"
#include "text.h"
#include "view.h"

struct overview {
	const struct hp_round *last;
	struct hp_round zero; /* stands in for the last round when there is none */
	uint64_t peak_rss;
	uint64_t peak_payload; /* heapprof's own memory in the process */
	uint64_t duration_ns;
	size_t cut_stacks; /* ending in HP_FRAME_CUT */
};

static void compute(const struct profile *p, struct overview *o)
{
	memset(o, 0, sizeof *o);
	o->last = pf_last_round(p);
	if (!o->last)
		o->last = &o->zero;
	o->duration_ns = o->last->time_ns;
	for (size_t i = 0; i < p->nrounds; i++) {
		if (p->rounds[i].rss_bytes > o->peak_rss)
			o->peak_rss = p->rounds[i].rss_bytes;
		if (p->rounds[i].payload_bytes > o->peak_payload)
			o->peak_payload = p->rounds[i].payload_bytes;
	}
	for (size_t i = 0; i < p->nstacks; i++) {
		const struct pf_stack *s = &p->stacks[i];
		o->cut_stacks += s->depth && s->frames[s->depth - 1] == HP_FRAME_CUT;
	}
}

static int has_pid(const struct profile *p, uint32_t *pid)
{
	if (p->session.present)
		*pid = p->session.pid;
	else if (p->has_hello)
		*pid = p->hello.pid;
	else
		return 0;
	return 1;
}

static void print_json(const struct profile *p, const struct overview *o)
{
	const struct hp_round *r = o->last;
	struct json j;
	uint32_t pid;
	json_init(&j, stdout);
	json_object_begin(&j);
	json_key(&j, "pid");
	if (has_pid(p, &pid))
		json_u64(&j, pid);
	else
		json_null(&j);
	json_kv_str(&j, "command", p->session.comm);
	json_kv_str(&j, "exe", p->session.exe);
	json_key(&j, "cmdline");
	json_array_begin(&j);
	const char *c = p->session.cmdline;
	for (size_t i = 0; c && i < p->session.cmdline_len;) {
		size_t len = strnlen(c + i, p->session.cmdline_len - i);
		json_strn(&j, c + i, len);
		i += len + 1;
	}
	json_array_end(&j);
	json_kv_str(&j, "host", p->session.host);
	json_kv_str(&j, "mode", view_mode_name(p));
	json_key(&j, "interval_ms");
	if (p->has_hello)
		json_u64(&j, p->hello.interval_ms);
	else
		json_null(&j);
	uint32_t from;
	uint64_t rate;
	int sampled = view_sampling(p, &from, &rate);
	json_key(&j, "sampled_from_round");
	if (sampled)
		json_u64(&j, from);
	else
		json_null(&j);
	json_kv_u64(&j, "sample_rate", sampled ? rate : 0);
	json_key(&j, "duration_s");
	json_double(&j, (double)o->duration_ns / 1e9, 3);
	json_kv_u64(&j, "rounds", p->nrounds);
	json_kv_u64(&j, "allocations", r->allocs);
	json_kv_u64(&j, "frees", r->frees);
	json_kv_u64(&j, "allocated_bytes", r->alloc_bytes);
	json_kv_u64(&j, "freed_bytes", r->freed_bytes);
	json_kv_u64(&j, "live_blocks", r->live_blocks);
	json_kv_u64(&j, "live_bytes", r->live_bytes);
	json_kv_u64(&j, "peak_live_bytes", p->peak_live_bytes);
	json_kv_u64(&j, "untracked_frees", r->untracked_frees);
	json_kv_u64(&j, "lost", r->lost);
	json_kv_u64(&j, "peak_rss_bytes", o->peak_rss);
	json_kv_u64(&j, "payload_bytes", r->payload_bytes);
	json_kv_u64(&j, "peak_payload_bytes", o->peak_payload);
	json_kv_u64(&j, "sites", p->nsites);
	json_kv_u64(&j, "stacks", p->nstacks);
	json_kv_u64(&j, "cut_stacks", o->cut_stacks);
	json_kv_u64(&j, "modules", p->nmodules);
	json_kv_str(&j, "end_reason", view_end_name(p));
	json_object_end(&j);
}

static void print_text(const struct profile *p, const struct overview *o)
{
	const struct hp_round *r = o->last;
	char a[64], b[64], s[1024];
	uint32_t pid;
	if (has_pid(p, &pid))
		printf("Program:         %s (pid %" PRIu32 ")\n",
		       p->session.comm ? text_clean(s, sizeof s, p->session.comm) : "?", pid);
	if (p->session.exe)
		printf("Executable:      %s\n", text_clean(s, sizeof s, p->session.exe));
	if (p->session.cmdline_len) {
		char joined[1024];
		size_t n = p->session.cmdline_len < sizeof joined - 1 ? p->session.cmdline_len
								      : sizeof joined - 1;
		memcpy(joined, p->session.cmdline, n);
		joined[n] = '\0';
		/* Arguments are NUL-separated; a trailing separator is not an argument. */
		while (n > 0 && joined[n - 1] == '\0')
			n--;
		for (size_t i = 0; i < n; i++)
			if (joined[i] == '\0')
				joined[i] = ' ';
		printf("Command line:    %s\n", text_clean(s, sizeof s, joined));
	}
	if (p->has_hello)
		printf("Mode:            %s, a round every %" PRIu32 " ms\n", view_mode_name(p),
		       p->hello.interval_ms);
	uint32_t from;
	uint64_t rate;
	int sampled = view_sampling(p, &from, &rate);
	if (sampled)
		printf("Sampling:        one allocation every %s on average from round %" PRIu32
		       "%s\n",
		       text_bytes(a, sizeof a, rate), from,
		       sampled == VIEW_SAMPLED_RATE ? " (--sample-rate)"
						    : " on (--max-memory was reached)");
	printf("Duration:        %s, %zu round%s, ended by %s\n",
	       text_duration(a, sizeof a, o->duration_ns), p->nrounds, p->nrounds == 1 ? "" : "s",
	       view_end_name(p));
	printf("\n");
	printf("Allocations:     %" PRIu64 " (%s)\n", r->allocs,
	       text_bytes(a, sizeof a, r->alloc_bytes));
	printf("Frees:           %" PRIu64 " (%s)\n", r->frees,
	       text_bytes(a, sizeof a, r->freed_bytes));
	printf("Live at end:     %" PRIu64 " blocks, %s\n", r->live_blocks,
	       text_bytes(a, sizeof a, r->live_bytes));
	printf("Peak live:       %s\n", text_bytes(a, sizeof a, p->peak_live_bytes));
	printf("Peak RSS:        %s\n", text_bytes(b, sizeof b, o->peak_rss));
	printf("Profiler memory: %s at most (heapprof's tables in the process; --max-memory)\n",
	       text_bytes(b, sizeof b, o->peak_payload));
	printf("Untracked frees: %" PRIu64 " (%sblocks allocated before attach)\n",
	       r->untracked_frees, sampled ? "estimated: frees of " : "");
	if (r->lost)
		printf("Lost events:     %" PRIu64 " (a bound of the profiler was reached)\n",
		       r->lost);
	printf("Sites:           %zu allocation sites, %zu stacks, %zu modules\n", p->nsites,
	       p->nstacks, p->nmodules);
	if (o->cut_stacks)
		printf("Cut stacks:      %zu, their outer frames dropped: heapprof's stack table "
		       "was full (--max-memory)\n",
		       o->cut_stacks);
}

static int run(int argc, char **argv)
{
	struct view_args args;
	int rc = view_parse(&view_cmd_overview, argc, argv, NULL, NULL, NULL, &args);
	if (rc)
		return rc < 0 ? 0 : rc;
	struct profile p;
	if (view_load(&args, &p) < 0)
		return VIEW_EXIT_ERROR;
	struct overview o;
	compute(&p, &o);
	if (args.json)
		print_json(&p, &o);
	else
		print_text(&p, &o);
	pf_free(&p);
	return 0;
}

const struct view_cmd view_cmd_overview = {
    .name = "overview",
    .summary = "Show the session, its totals and peaks",
    .options = "",
    .run = run,
};
