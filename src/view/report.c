#include "report.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loc.h"
#include "text.h"

int report_parse_top(const struct view_cmd *c, const char *arg, long *top)
{
	char *end;
	*top = strtol(arg, &end, 10);
	if (*arg < '0' || *arg > '9' || *end || *top < 0)
		return view_usage_error(c, "--top wants a number of rows (0 = all), not '%s'", arg);
	return 0;
}

struct top_arg {
	const struct view_cmd *c;
	long top;
};

static int on_top(int val, const char *arg, void *ctx)
{
	struct top_arg *t = ctx;
	return val == 1 ? report_parse_top(t->c, arg, &t->top) : VIEW_EXIT_USAGE;
}

void *report_rows(const struct profile *p, size_t size)
{
	void *rows = calloc(p->nsites + 1, size);
	if (!rows)
		view_error("out of memory sorting %zu sites: free memory and retry", p->nsites);
	return rows;
}

int report_start(struct report_run *r, const struct view_cmd *c, int argc, char **argv,
		 size_t row_size)
{
	static const struct option options[] = {
	    {"top", required_argument, NULL, 1},
	    {0},
	};
	struct top_arg ctx = {c, -1};
	int rc = view_parse(c, argc, argv, options, on_top, &ctx, &r->args);
	r->top = ctx.top;
	if (rc)
		return rc;
	if (view_load(&r->args, &r->p) < 0)
		return VIEW_EXIT_ERROR;
	if (!(r->rows = report_rows(&r->p, row_size))) {
		pf_free(&r->p);
		return VIEW_EXIT_ERROR;
	}
	return 0;
}

int report_end(struct report_run *r)
{
	free(r->rows);
	pf_free(&r->p);
	return 0;
}

size_t report_count(long top, int json, size_t n)
{
	long t = top >= 0 ? top : json ? 0 : REPORT_TEXT_TOP;
	return t > 0 && (size_t)t < n ? (size_t)t : n;
}

static void loc_fields(struct json *j, const struct profile *p, uint64_t addr)
{
	struct pf_loc l;
	loc_get(p, addr, 0, &l);
	json_kv_str(j, "function", l.function);
	json_kv_str(j, "file", l.file);
	json_key(j, "line");
	if (l.line)
		json_u64(j, l.line);
	else
		json_null(j);
	json_kv_str(j, "module", l.module);
	json_key(j, "address");
	json_hex(j, addr);
	/* An inline wrapper's sites differ only by what they are inlined into. */
	json_kv_str(j, "inlined_into", l.caller);
}

static void totals_fields(struct json *j, const struct pf_totals *t, int64_t live_blocks,
			  int64_t live_bytes)
{
	json_kv_u64(j, "allocations", t->allocs);
	json_kv_u64(j, "frees", t->frees);
	json_kv_u64(j, "allocated_bytes", t->alloc_bytes);
	json_kv_u64(j, "freed_bytes", t->freed_bytes);
	json_kv_u64(j, "temporary_frees", t->temp_frees);
	json_kv_i64(j, "live_blocks", live_blocks);
	json_kv_i64(j, "live_bytes", live_bytes);
}

void report_site_json(struct json *j, const struct profile *p, const struct pf_site *s,
		      int64_t live_blocks, int64_t live_bytes)
{
	const struct pf_stack *st = &p->stacks[s->top_stack];
	loc_fields(j, p, s->addr);
	totals_fields(j, &s->tot, live_blocks, live_bytes);
	json_kv_u64(j, "stacks", s->nstacks);
	json_key(j, "stack");
	loc_json_stack(j, p, st, st->site_frame);
}

void report_stack_json(struct json *j, const struct profile *p, const struct pf_stack *st)
{
	loc_fields(j, p, st->frames[st->site_frame]);
	json_key(j, "stack");
	loc_json_stack(j, p, st, st->site_frame);
}

void report_names(const struct profile *p, uint64_t addr, char *func, size_t nf, char *where,
		  size_t nw)
{
	struct pf_loc l;
	loc_get(p, addr, 0, &l);
	text_site_function(func, nf, &l);
	text_site_where(where, nw, &l);
}

int report_func_width(const struct profile *p, const void *rows, size_t n, size_t size)
{
	char func[512];
	int fw = (int)strlen("FUNCTION");
	for (size_t i = 0; i < n; i++) {
		const struct pf_site *s;
		memcpy(&s, (const char *)rows + i * size, sizeof s);
		struct pf_loc l;
		loc_get(p, s->addr, 0, &l);
		int w = (int)strlen(text_site_function(func, sizeof func, &l));
		if (w > fw)
			fw = w < REPORT_FUNC_WIDTH_MAX ? w : REPORT_FUNC_WIDTH_MAX;
	}
	return fw;
}

int report_cmp_addr(const struct pf_site *x, const struct pf_site *y)
{
	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

void report_shown(size_t shown, size_t total, const char *what, const char *key)
{
	if (shown < total)
		printf("\n%zu of %zu %s shown, sorted by %s: --top 0 shows all.\n", shown, total,
		       what, key);
}

char *report_age(char *buf, size_t n, int known, uint64_t ms)
{
	if (!known)
		snprintf(buf, n, "?");
	else
		text_duration(buf, n, ms * 1000000u);
	return buf;
}
