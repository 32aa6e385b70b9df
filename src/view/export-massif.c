/* massif: the massif.out text format, one snapshot per round (at most MAX_SNAPSHOTS, evenly
 * spread, always with the peak), a few of them with a heap tree from the allocation site
 * out to the callers, by live bytes at that round. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "calltree.h"
#include "export.h"
#include "text.h"
#include "view.h"

#define MAX_SNAPSHOTS 200
#define DETAILED_EVERY 10
#define THRESHOLD_PCT 1.0 /* massif's default: smaller children are summed on one line */

static void live_at(const struct profile *p, const struct pf_stack *st, int64_t v[CT_NVAL],
		    void *ctx)
{
	(void)p;
	struct pf_point pt = pf_stack_live_at(st, *(const size_t *)ctx);
	v[CT_LIVE] = pt.live_bytes > 0 ? pt.live_bytes : 0;
}

/* massif.out strips "#..." as a comment and reads one line per node. */
static void put_label(FILE *f, const char *s)
{
	for (; *s; s++)
		fputc(*s == '#' || *s == '\n' ? '?' : *s, f);
}

static void node(FILE *f, const struct calltree *t, size_t i, unsigned depth, int64_t total,
		 int *nomem)
{
	size_t nc;
	size_t *c = ct_children(t, i, CT_LIVE, &nc);
	if (nc && !c)
		*nomem = 1;
	size_t big = 0;
	int64_t small = 0;
	size_t nsmall = 0;
	for (size_t k = 0; c && k < nc; k++) {
		int64_t v = t->nodes[c[k]].v[CT_LIVE];
		if (v > 0 && 100.0 * (double)v / (double)total >= THRESHOLD_PCT)
			big++;
		else if (v > 0) {
			small += v;
			nsmall++;
		}
	}
	fprintf(f, "%*sn%zu: %" PRId64 " ", (int)depth, "", big + (nsmall > 0),
		t->nodes[i].v[CT_LIVE]);
	if (i)
		fprintf(f, "0x%" PRIx64 ": ", t->nodes[i].addr);
	put_label(f, i ? t->nodes[i].label
		       : "(heap allocation functions) malloc/new/new[], --alloc-fns, etc.");
	fputc('\n', f);
	for (size_t k = 0; k < big; k++)
		node(f, t, c[k], depth + 1, total, nomem);
	if (nsmall)
		fprintf(f, "%*sn0: %" PRId64 " in %zu place%s, below massif's threshold (%.2f%%)\n",
			(int)depth + 1, "", small, nsmall, nsmall > 1 ? "s" : "", THRESHOLD_PCT);
	free(c);
}

static int heap_tree(FILE *f, const struct profile *p, size_t r)
{
	struct calltree t;
	int nomem = 0;
	if (ct_build(&t, p, 1, live_at, &r) < 0)
		return -1;
	int64_t total = t.nodes[0].v[CT_LIVE];
	node(f, &t, 0, 0, total > 0 ? total : 1, &nomem);
	ct_free(&t);
	return nomem ? -1 : 0;
}

static void header(FILE *f, const struct profile *p)
{
	char clean[4096];
	fputs("desc: heapprof", f);
	if (p->session.present)
		fprintf(f, " (pid %" PRIu32 ")", p->session.pid);
	fputs("\ncmd: ", f);
	const char *c = p->session.cmdline;
	for (size_t i = 0; c && i < p->session.cmdline_len;) {
		size_t len = strnlen(c + i, p->session.cmdline_len - i);
		char *arg = strndup(c + i, len);
		if (arg) {
			fprintf(f, "%s", i ? " " : "");
			put_label(f, text_clean(clean, sizeof clean, arg));
		}
		free(arg);
		i += len + 1;
	}
	if (!c)
		put_label(f, p->session.comm ? text_clean(clean, sizeof clean, p->session.comm)
					     : "(unknown)");
	fputs("\ntime_unit: ms\n", f);
}

int export_massif(FILE *f, const struct profile *p)
{
	header(f, p);
	size_t n = p->nrounds, peak = pf_peak_round(p);
	size_t step = n > MAX_SNAPSHOTS ? (n + MAX_SNAPSHOTS - 2) / (MAX_SNAPSHOTS - 1) : 1;
	size_t snap = 0;
	for (size_t r = 0; r < n; r++) {
		if (r % step && r != peak && r + 1 != n)
			continue;
		const struct hp_round *rd = &p->rounds[r];
		fprintf(f,
			"#-----------\nsnapshot=%zu\n#-----------\ntime=%" PRIu64
			"\nmem_heap_B=%" PRIu64 "\nmem_heap_extra_B=0\nmem_stacks_B=0\n",
			snap, rd->time_ns / 1000000u, rd->live_bytes);
		int detailed = r == peak || snap % DETAILED_EVERY == DETAILED_EVERY - 1;
		if (!detailed) {
			fputs("heap_tree=empty\n", f);
		} else {
			fprintf(f, "heap_tree=%s\n", r == peak ? "peak" : "detailed");
			if (heap_tree(f, p, r) < 0) {
				view_error("out of memory building a heap tree: free memory and "
					   "retry");
				return -1;
			}
		}
		snap++;
	}
	return ferror(f) ? -1 : 0;
}
