#define _GNU_SOURCE /* asprintf */
#include "records.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hpalloc.h"
#include "hpstream.h"

struct hp_vs_addr {
	uint64_t addr;
	char *label;	/* NULL until symbolized and its SYMBOL written (pending) */
	bool allocator; /* inside an allocation function: not a call site */
	long site;	/* its index in the site table once a stack has it as call site */
};

/* Stack ids below this always go to the array. */
#define DENSE_STACKS_MIN 65536

int hp_vs_init(struct hp_viewer_session *vs, pid_t pid, struct hp_profile_writer *pw,
	       struct hp_display *disp, const char *output)
{
	memset(vs, 0, sizeof *vs);
	vs->sym = hp_sym_new(pid);
	vs->pw = pw;
	vs->disp = disp;
	vs->output = output;
	vs->sites.track_rates = disp->wants_rates;
	return vs->sym ? 0 : -1;
}

void hp_vs_free(struct hp_viewer_session *vs)
{
	hp_sym_free(vs->sym);
	for (size_t i = 0; i < vs->naddrs; i++)
		free(vs->addrs[i].label);
	free(vs->addrs);
	free(vs->pending);
	free(vs->stack_site);
	hp_keymap_free(&vs->addr_index);
	hp_keymap_free(&vs->sparse_stack_site);
	hp_sites_free(&vs->sites);
	memset(vs, 0, sizeof *vs);
}

static int write_failed(struct hp_viewer_session *vs, int rc, struct hp_error *err)
{
	hp_error_set(err, "cannot write %s: %s", vs->output, strerror(-rc));
	return -1;
}

static int malformed(struct hp_error *err, const char *what)
{
	hp_error_set(err, "malformed stream: %s", what);
	return -1;
}

static int grow(void **arr, size_t *cap, size_t n, size_t elem)
{
	if (n < *cap)
		return 0;
	size_t ncap = *cap ? *cap * 2 : 64;
	if (ncap > UINT32_MAX - 1)
		return -1;
	void *p = realloc(*arr, ncap * elem);
	if (!p)
		return -1;
	*arr = p;
	*cap = ncap;
	return 0;
}

static const char *base_name(const char *file)
{
	const char *base = file ? strrchr(file, '/') : NULL;
	return base ? base + 1 : file ? file : "??";
}

/* As heapprof-view names sites: an inline wrapper (an always_inline xmalloc) is one site
 * per place it is inlined, so the label says into which function and at which line. */
static char *make_label(uint64_t addr, const struct hp_sym_result *r)
{
	char *label = NULL;
	int n;
	if (r->nframes == 0) {
		n = asprintf(&label, "0x%" PRIx64 " (module %u)", addr, r->module_id);
	} else if (r->nframes == 1) {
		const struct hp_sym_frame *f = &r->frames[0];
		n = asprintf(&label, "%s (%s:%u)", f->function ? f->function : "??",
			     base_name(f->file), f->line);
	} else {
		const struct hp_sym_frame *f = &r->frames[0], *c = &r->frames[1];
		bool same = f->file && c->file && strcmp(f->file, c->file) == 0;
		n = asprintf(&label, "%s (inlined into %s) (%s:%u, called at %s%s%u)",
			     f->function ? f->function : "??", c->function ? c->function : "??",
			     base_name(f->file), f->line, same ? "line " : base_name(c->file),
			     same ? "" : ":", c->line);
	}
	return n < 0 ? NULL : label;
}

/* Symbolizes vs->addrs[i] and writes its SYMBOL. */
static int resolve(struct hp_viewer_session *vs, uint32_t i, struct hp_error *err)
{
	struct hp_vs_addr *a = &vs->addrs[i];
	struct hp_sym_result res;
	hp_sym_resolve(vs->sym, a->addr, &res);
	int rc = hp_pw_symbol(vs->pw, a->addr, &res);
	a->label = make_label(a->addr, &res);
	a->allocator =
	    res.nframes > 0 && hp_is_allocator_function(res.frames[res.nframes - 1].function);
	hp_sym_result_clear(&res);
	if (rc < 0)
		return write_failed(vs, rc, err);
	if (!a->label) {
		hp_error_set(err, "out of memory");
		return -1;
	}
	return 0;
}

/* The index of addr's entry in vs->addrs, for the module that owns it now: symbolized
 * (and its SYMBOL written) at once if now, else at the latest when pending ones are
 * (flush_pending). */
static int symbolize(struct hp_viewer_session *vs, uint64_t addr, bool now, uint32_t *idx,
		     struct hp_error *err)
{
	uint32_t module = hp_sym_module_at(vs->sym, addr);
	*idx = hp_keymap_get(&vs->addr_index, addr, module);
	if (*idx != UINT32_MAX)
		return now && !vs->addrs[*idx].label ? resolve(vs, *idx, err) : 0;
	if (grow((void **)&vs->addrs, &vs->addrs_cap, vs->naddrs, sizeof vs->addrs[0]) != 0 ||
	    (!now && grow((void **)&vs->pending, &vs->pending_cap, vs->npending,
			  sizeof vs->pending[0]) != 0) ||
	    hp_keymap_put(&vs->addr_index, addr, module, (uint32_t)vs->naddrs) != 0) {
		hp_error_set(err, "out of memory");
		return -1;
	}
	*idx = (uint32_t)vs->naddrs;
	vs->addrs[vs->naddrs++] = (struct hp_vs_addr){.addr = addr, .site = -1};
	if (now)
		return resolve(vs, *idx, err);
	vs->pending[vs->npending++] = *idx;
	return 0;
}

/* Symbolizes every pending address, while the modules that own them still do. */
static int flush_pending(struct hp_viewer_session *vs, struct hp_error *err)
{
	for (size_t i = 0; i < vs->npending; i++)
		if (!vs->addrs[vs->pending[i]].label && resolve(vs, vs->pending[i], err) != 0)
			return -1;
	vs->npending = 0;
	return 0;
}

static int on_module(struct hp_viewer_session *vs, const uint8_t *body, uint32_t len,
		     struct hp_error *err)
{
	struct hp_module m;
	const uint8_t *p = body, *end = body + len;
	if (!hp_take(&p, end, &m, sizeof m) ||
	    (size_t)(end - p) < (size_t)m.path_len + m.build_id_len)
		return malformed(err, "MODULE record shorter than its path and build-id");
	if (m.flags & HP_MODULE_UNLOADED) {
		hp_sym_remove_module(vs->sym, m.id);
		return 0;
	}
	char path[UINT16_MAX + 1];
	memcpy(path, p, m.path_len);
	path[m.path_len] = '\0';
	hp_sym_add_module(vs->sym, m.id, path, m.bias, m.start, m.end, p + m.path_len,
			  m.build_id_len);
	return 0;
}

static bool dense_id(const struct hp_viewer_session *vs, uint32_t id)
{
	return id < DENSE_STACKS_MIN || id / 4 < vs->nstacks;
}

static int set_stack_site(struct hp_viewer_session *vs, uint32_t id, uint32_t value)
{
	/* An id first seen sparse stays in the map: a STACK record repeating it must win. */
	if (!dense_id(vs, id) || hp_keymap_get(&vs->sparse_stack_site, id, 0) != UINT32_MAX)
		return hp_keymap_put(&vs->sparse_stack_site, id, 0, value);
	if (id >= vs->stack_site_cap) {
		size_t cap = vs->stack_site_cap ? vs->stack_site_cap : 1024;
		while (cap <= id)
			cap *= 2;
		uint32_t *v = realloc(vs->stack_site, cap * sizeof *v);
		if (!v)
			return -1;
		memset(v + vs->stack_site_cap, 0, (cap - vs->stack_site_cap) * sizeof *v);
		vs->stack_site = v;
		vs->stack_site_cap = cap;
	}
	vs->stack_site[id] = value;
	return 0;
}

/* The stack's site + 1, or 0 when it has none or is unknown. */
static uint32_t stack_site(const struct hp_viewer_session *vs, uint32_t id)
{
	if (id < vs->stack_site_cap && vs->stack_site[id])
		return vs->stack_site[id];
	uint32_t v = hp_keymap_get(&vs->sparse_stack_site, id, 0);
	return v == UINT32_MAX ? 0 : v;
}

static uint64_t addr_at(const uint8_t *frames, uint32_t i)
{
	uint64_t addr;
	memcpy(&addr, frames + (size_t)i * sizeof addr, sizeof addr);
	return addr;
}

static int on_stack(struct hp_viewer_session *vs, const uint8_t *body, uint32_t len,
		    struct hp_error *err)
{
	struct hp_stack st;
	const uint8_t *p = body, *end = body + len;
	if (!hp_take(&p, end, &st, sizeof st))
		return malformed(err, "short STACK record");
	if (st.id == 0 || st.depth > HP_MAX_DEPTH || (size_t)(end - p) < (size_t)st.depth * 8)
		return malformed(err, "STACK record with a bad id or depth");
	/* The frames up to the call site (the first outside the allocator) name the site and
	 * are symbolized now; the rest only in the profile, so they wait (flush_pending): a
	 * session's first stacks would otherwise make the viewer load the debug info of
	 * every module they pass through (libc's, compressed, inflated whole) while the
	 * target runs. */
	uint32_t site = UINT32_MAX;
	for (uint32_t i = 0; i < st.depth; i++) {
		uint32_t idx;
		bool at_site = site == UINT32_MAX || vs->addrs[site].allocator;
		if (symbolize(vs, addr_at(p, i), at_site, &idx, err) != 0)
			return -1;
		if (at_site)
			site = idx;
	}
	if (site != UINT32_MAX && vs->addrs[site].site < 0) {
		vs->addrs[site].site = hp_sites_add_site(&vs->sites, vs->addrs[site].label);
		if (vs->addrs[site].site < 0) {
			hp_error_set(err, "out of memory");
			return -1;
		}
	}
	vs->nstacks++;
	if (st.depth && addr_at(p, st.depth - 1) == HP_FRAME_CUT)
		vs->stats.cut_stacks++;
	uint32_t value = site == UINT32_MAX ? 0 : (uint32_t)vs->addrs[site].site + 1;
	if (set_stack_site(vs, st.id, value) != 0) {
		hp_error_set(err, "out of memory");
		return -1;
	}
	return 0;
}

static int on_sites(struct hp_viewer_session *vs, const uint8_t *body, uint32_t len,
		    struct hp_error *err)
{
	struct hp_sites h;
	const uint8_t *p = body, *end = body + len;
	if (!hp_take(&p, end, &h, sizeof h) ||
	    (size_t)(end - p) / sizeof(struct hp_site_delta) < h.count)
		return malformed(err, "SITES record shorter than its count");
	for (uint32_t i = 0; i < h.count; i++) {
		struct hp_site_delta d;
		hp_take(&p, end, &d, sizeof d);
		if (d.size_kind > HP_SIZE_POW2)
			return malformed(err, "SITES entry with an unknown size key");
		uint32_t site = stack_site(vs, d.stack_id);
		if (site == 0)
			continue; /* stack id 0: no stack was recorded for these */
		hp_sites_count(&vs->sites, (size_t)site - 1, &d);
	}
	return 0;
}

/* The viewer has no use for LIVE yet beyond the copy; heapprof-view reads it. */
static int check_live(const uint8_t *body, uint32_t len, struct hp_error *err)
{
	struct hp_live h;
	const uint8_t *p = body, *end = body + len;
	if (!hp_take(&p, end, &h, sizeof h) ||
	    (size_t)(end - p) / sizeof(struct hp_live_site) < h.count)
		return malformed(err, "LIVE record shorter than its count");
	return 0;
}

int hp_vs_record(struct hp_viewer_session *vs, uint32_t type, const uint8_t *body, uint32_t len,
		 struct hp_error *err)
{
	if (!vs->seen_hello && type != HP_REC_HELLO)
		return malformed(err, "the first record is not HELLO");
	switch (type) {
	case HP_REC_HELLO:
		if (vs->seen_hello || len < sizeof(struct hp_hello))
			return malformed(err, "bad or repeated HELLO record");
		vs->seen_hello = true;
		memcpy(&vs->stats.hello, body, sizeof vs->stats.hello);
		break;
	case HP_REC_ROUND:
		if (len < sizeof(struct hp_round))
			return malformed(err, "short ROUND record");
		break;
	case HP_REC_LIVE:
		if (check_live(body, len, err) != 0)
			return -1;
		break;
	case HP_REC_END:
		if (len < sizeof(struct hp_end))
			return malformed(err, "short END record");
		vs->seen_end = true;
		break;
	case HP_REC_SESSION:
	case HP_REC_SYMBOL:
		return malformed(err, "a viewer-only record in the payload's stream");
	default:
		break;
	}

	/* A module may replace those that own pending addresses, and nothing follows END. */
	if ((type == HP_REC_MODULE || type == HP_REC_END) && flush_pending(vs, err) != 0)
		return -1;
	/* Copied before anything derived from it, so SYMBOL records follow their STACK. */
	int rc = hp_pw_record(vs->pw, type, body, len);
	if (rc < 0)
		return write_failed(vs, rc, err);

	switch (type) {
	case HP_REC_MODULE:
		return on_module(vs, body, len, err);
	case HP_REC_STACK:
		return on_stack(vs, body, len, err);
	case HP_REC_SITES:
		return on_sites(vs, body, len, err);
	case HP_REC_ROUND: {
		struct hp_round r;
		memcpy(&r, body, sizeof r);
		hp_stats_round(&vs->stats, &r);
		hp_sites_round(&vs->sites, r.time_ns);
		vs->disp->round(vs->disp, &vs->stats, &vs->sites);
		return 0;
	}
	default:
		return 0;
	}
}

static int by_allocs(const void *a, const void *b)
{
	const struct hp_site_stat *x = a, *y = b;
	if (x->allocs != y->allocs)
		return x->allocs < y->allocs ? 1 : -1;
	return (x->bytes < y->bytes) - (x->bytes > y->bytes);
}

int hp_vs_finish(struct hp_viewer_session *vs, uint32_t reason, struct hp_error *err)
{
	if (!vs->seen_end) {
		if (flush_pending(vs, err) != 0)
			return -1;
		struct hp_end e = {.reason = reason};
		int rc = hp_pw_record(vs->pw, HP_REC_END, &e, sizeof e);
		if (rc < 0)
			return write_failed(vs, rc, err);
		vs->seen_end = true;
	}
	struct hp_site_stat *sites = calloc(vs->sites.n ? vs->sites.n : 1, sizeof *sites);
	if (!sites) {
		hp_error_set(err, "out of memory");
		return -1;
	}
	size_t n = 0;
	for (size_t i = 0; i < vs->sites.n; i++) {
		const struct hp_site *s = &vs->sites.v[i];
		if (s->allocs > 0)
			sites[n++] = (struct hp_site_stat){.label = s->label,
							   .allocs = s->allocs,
							   .bytes = s->alloc_bytes,
							   .temp_frees = s->temp_frees};
	}
	qsort(sites, n, sizeof *sites, by_allocs);
	vs->disp->finish(vs->disp, &vs->stats, sites, n < HP_TOP_SITES ? n : HP_TOP_SITES,
			 vs->output);
	free(sites);
	return 0;
}
