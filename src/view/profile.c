#include "profile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hpstream.h"
#include "hpzsource.h"

/* A SITES entry waiting for the ROUND that makes it count. */
struct pending {
	uint32_t stack_id;
	uint32_t size_kind;
	uint64_t size;
	struct pf_totals d;
};

struct loader {
	struct profile *p;
	size_t cap_modules, cap_stacks, cap_symbols, cap_rounds, cap_sizes, cap_stack_sizes;
	struct pending *pending;
	size_t npending, cap_pending;
};

enum { REC_OK = 0, REC_MALFORMED = 1, REC_NOMEM = -1 };

static int reserve(void **arr, size_t *cap, size_t n, size_t elem)
{
	if (n < *cap)
		return 0;
	size_t ncap = *cap ? *cap * 2 : 16;
	void *na = reallocarray(*arr, ncap, elem);
	if (!na)
		return -1;
	*arr = na;
	*cap = ncap;
	return 0;
}

/* Copies len bytes of the body into a NUL-terminated string; *out NULL when len is 0. */
static int take_str(const uint8_t **q, const uint8_t *end, size_t len, char **out)
{
	*out = NULL;
	if ((size_t)(end - *q) < len)
		return REC_MALFORMED;
	if (!len)
		return REC_OK;
	char *s = malloc(len + 1);
	if (!s)
		return REC_NOMEM;
	memcpy(s, *q, len);
	s[len] = '\0';
	*q += len;
	*out = s;
	return REC_OK;
}

static void session_free(struct pf_session *s)
{
	free(s->comm);
	free(s->exe);
	free(s->cmdline);
	free(s->host);
	memset(s, 0, sizeof *s);
}

static int rec_session(struct loader *l, const uint8_t *q, const uint8_t *end)
{
	struct hp_session h;
	struct pf_session s = {.present = 1};
	if (l->p->session.present || !hp_take(&q, end, &h, sizeof h))
		return REC_MALFORMED;
	if ((uint64_t)h.comm_len + h.exe_len + h.cmdline_len + h.host_len > (uint64_t)(end - q))
		return REC_MALFORMED;
	s.pid = h.pid;
	s.attach_real_ns = h.attach_real_ns;
	s.cmdline_len = h.cmdline_len;
	int rc = take_str(&q, end, h.comm_len, &s.comm);
	if (rc == REC_OK)
		rc = take_str(&q, end, h.exe_len, &s.exe);
	if (rc == REC_OK)
		rc = take_str(&q, end, h.cmdline_len, &s.cmdline);
	if (rc == REC_OK)
		rc = take_str(&q, end, h.host_len, &s.host);
	if (rc != REC_OK) {
		session_free(&s);
		return rc;
	}
	l->p->session = s;
	return REC_OK;
}

static int rec_hello(struct loader *l, const uint8_t *q, const uint8_t *end)
{
	struct hp_hello h;
	if (l->p->has_hello || !hp_take(&q, end, &h, sizeof h))
		return REC_MALFORMED;
	l->p->hello = h;
	l->p->has_hello = 1;
	return REC_OK;
}

static int rec_module(struct loader *l, const uint8_t *q, const uint8_t *end)
{
	struct profile *p = l->p;
	struct hp_module h;
	if (!hp_take(&q, end, &h, sizeof h))
		return REC_MALFORMED;
	if ((size_t)h.path_len + h.build_id_len > (size_t)(end - q))
		return REC_MALFORMED;
	long i = u64map_get(&p->module_by_id, h.id);
	if (i >= 0 && (h.flags & HP_MODULE_UNLOADED)) {
		/* An unload notice: the module keeps its range for addresses seen before. */
		p->modules[i].flags |= HP_MODULE_UNLOADED;
		return REC_OK;
	}
	if (i >= 0)
		return REC_MALFORMED;
	struct pf_module m = {
	    .id = h.id, .flags = h.flags, .bias = h.bias, .start = h.start, .end = h.end};
	char *bid;
	int rc = take_str(&q, end, h.path_len, &m.path);
	if (rc == REC_OK)
		rc = take_str(&q, end, h.build_id_len, &bid);
	if (rc != REC_OK) {
		free(m.path);
		return rc;
	}
	m.build_id = (uint8_t *)bid;
	m.build_id_len = h.build_id_len;
	if (reserve((void **)&p->modules, &l->cap_modules, p->nmodules, sizeof m) < 0 ||
	    u64map_put(&p->module_by_id, m.id, p->nmodules) < 0) {
		free(m.path);
		free(m.build_id);
		return REC_NOMEM;
	}
	p->modules[p->nmodules++] = m;
	return REC_OK;
}

static int rec_stack(struct loader *l, const uint8_t *q, const uint8_t *end)
{
	struct profile *p = l->p;
	struct hp_stack h;
	if (!hp_take(&q, end, &h, sizeof h))
		return REC_MALFORMED;
	if (h.id == 0 || (uint64_t)h.depth * sizeof(uint64_t) > (uint64_t)(end - q) ||
	    u64map_get(&p->stack_by_id, h.id) >= 0)
		return REC_MALFORMED;
	struct pf_stack s = {.id = h.id, .depth = h.depth};
	if (h.depth) {
		s.frames = malloc(h.depth * sizeof(uint64_t));
		if (!s.frames)
			return REC_NOMEM;
		memcpy(s.frames, q, h.depth * sizeof(uint64_t));
	}
	if (reserve((void **)&p->stacks, &l->cap_stacks, p->nstacks, sizeof s) < 0 ||
	    u64map_put(&p->stack_by_id, s.id, p->nstacks) < 0) {
		free(s.frames);
		return REC_NOMEM;
	}
	p->stacks[p->nstacks++] = s;
	return REC_OK;
}

void pf_symbol_free(struct pf_symbol *s)
{
	for (uint32_t i = 0; i < s->nframes; i++) {
		free(s->frames[i].function);
		free(s->frames[i].file);
	}
	free(s->frames);
}

static int rec_symbol(struct loader *l, const uint8_t *q, const uint8_t *end)
{
	struct profile *p = l->p;
	struct hp_symbol h;
	if (!hp_take(&q, end, &h, sizeof h))
		return REC_MALFORMED;
	/* Each frame takes at least its fixed part: this bounds the allocation below. */
	if (h.nframes > HP_MAX_INLINE ||
	    (uint64_t)h.nframes * sizeof(struct hp_symbol_frame) > (uint64_t)(end - q) ||
	    u64map_get(&p->symbol_by_addr, h.addr) >= 0)
		return REC_MALFORMED;
	struct pf_symbol s = {.addr = h.addr, .module_id = h.module_id};
	if (h.nframes) {
		s.frames = calloc(h.nframes, sizeof *s.frames);
		if (!s.frames)
			return REC_NOMEM;
	}
	int rc = REC_OK;
	for (uint32_t i = 0; i < h.nframes && rc == REC_OK; i++) {
		struct hp_symbol_frame f;
		if (!hp_take(&q, end, &f, sizeof f)) {
			rc = REC_MALFORMED;
			break;
		}
		s.nframes = i + 1;
		s.frames[i].line = f.line;
		s.frames[i].column = f.column;
		rc = take_str(&q, end, f.func_len, &s.frames[i].function);
		if (rc == REC_OK)
			rc = take_str(&q, end, f.file_len, &s.frames[i].file);
	}
	if (rc == REC_OK &&
	    (reserve((void **)&p->symbols, &l->cap_symbols, p->nsymbols, sizeof s) < 0 ||
	     u64map_put(&p->symbol_by_addr, s.addr, p->nsymbols) < 0))
		rc = REC_NOMEM;
	if (rc != REC_OK) {
		pf_symbol_free(&s);
		return rc;
	}
	p->symbols[p->nsymbols++] = s;
	return REC_OK;
}

static int rec_sites(struct loader *l, const uint8_t *q, const uint8_t *end)
{
	struct hp_sites h;
	if (!hp_take(&q, end, &h, sizeof h) ||
	    (uint64_t)h.count * sizeof(struct hp_site_delta) > (uint64_t)(end - q))
		return REC_MALFORMED;
	for (uint32_t i = 0; i < h.count; i++) {
		struct hp_site_delta d;
		hp_take(&q, end, &d, sizeof d);
		if (reserve((void **)&l->pending, &l->cap_pending, l->npending,
			    sizeof *l->pending) < 0)
			return REC_NOMEM;
		l->pending[l->npending++] = (struct pending){
		    .stack_id = d.stack_id,
		    .size_kind = d.size_kind,
		    .size = d.size,
		    .d = {.allocs = d.allocs,
			  .alloc_bytes = d.alloc_bytes,
			  .frees = d.frees,
			  .freed_bytes = d.freed_bytes,
			  .temp_frees = d.temp_frees},
		};
	}
	return REC_OK;
}

static int rec_live(struct loader *l, const uint8_t *q, const uint8_t *end)
{
	struct profile *p = l->p;
	struct hp_live h;
	if (!hp_take(&q, end, &h, sizeof h) ||
	    (uint64_t)h.count * sizeof(struct hp_live_site) > (uint64_t)(end - q))
		return REC_MALFORMED;
	int bad = 0;
	for (uint32_t i = 0; i < h.count; i++) {
		struct hp_live_site e;
		hp_take(&q, end, &e, sizeof e);
		long s = u64map_get(&p->stack_by_id, e.stack_id);
		if (s < 0) {
			bad = 1;
			continue;
		}
		struct pf_stack *st = &p->stacks[s];
		pf_live_merge(&st->live,
			      &(struct pf_live){e.blocks, e.bytes, e.oldest_age_ms, e.mean_age_ms});
		st->has_live = 1;
		p->has_live = 1;
	}
	return bad ? REC_MALFORMED : REC_OK;
}

static void add_totals(struct pf_totals *t, const struct pf_totals *d)
{
	t->allocs += d->allocs;
	t->alloc_bytes += d->alloc_bytes;
	t->frees += d->frees;
	t->freed_bytes += d->freed_bytes;
	t->temp_frees += d->temp_frees;
}

struct pf_size pf_size_key(uint64_t size)
{
	if (size <= HP_EXACT_SIZE_MAX)
		return (struct pf_size){.kind = HP_SIZE_EXACT, .size = size};
	return (struct pf_size){.kind = HP_SIZE_POW2, .size = 1ull << (63 - __builtin_clzll(size))};
}

/* A small integer naming a size key: exact sizes as themselves, buckets after them. */
static uint64_t size_code(const struct pf_size *k)
{
	if (k->kind == HP_SIZE_EXACT)
		return k->size;
	return HP_EXACT_SIZE_MAX + 1 + (uint64_t)__builtin_ctzll(k->size);
}

static struct pf_size norm_key(uint32_t kind, uint64_t size)
{
	/* Bucket 4096 is [4097, 8192): 4096 itself has an exact key. */
	if (kind == HP_SIZE_POW2 && size >= HP_EXACT_SIZE_MAX)
		return (struct pf_size){.kind = HP_SIZE_POW2,
					.size = 1ull << (63 - __builtin_clzll(size))};
	return pf_size_key(size);
}

static int add_size(struct loader *l, const struct pending *e, long stack)
{
	struct profile *p = l->p;
	struct pf_size k = norm_key(e->size_kind, e->size);
	uint64_t code = size_code(&k);
	long i = u64map_get(&p->size_by_code, code);
	if (i < 0) {
		if (reserve((void **)&p->sizes, &l->cap_sizes, p->nsizes, sizeof *p->sizes) < 0 ||
		    u64map_put(&p->size_by_code, code, p->nsizes) < 0)
			return REC_NOMEM;
		i = (long)p->nsizes++;
		p->sizes[i] = k;
	}
	add_totals(&p->sizes[i].tot, &e->d);
	if (stack < 0)
		return REC_OK;
	/* Codes stay below 2^13, stack indexes below 2^40: the pair fits one key. */
	uint64_t key = (uint64_t)stack << 16 | code;
	i = u64map_get(&p->stack_size_by_code, key);
	if (i < 0) {
		if (reserve((void **)&p->stack_sizes, &l->cap_stack_sizes, p->nstack_sizes,
			    sizeof *p->stack_sizes) < 0 ||
		    u64map_put(&p->stack_size_by_code, key, p->nstack_sizes) < 0)
			return REC_NOMEM;
		i = (long)p->nstack_sizes++;
		p->stack_sizes[i] = (struct pf_stack_size){.stack = (size_t)stack, .key = k};
	}
	add_totals(&p->stack_sizes[i].key.tot, &e->d);
	return REC_OK;
}

/* Records the stack's live numbers after round r, once per round. */
static int add_point(struct pf_stack *st, size_t r)
{
	struct pf_point pt = {r, pf_live_blocks(&st->tot), pf_live_bytes(&st->tot)};
	if (st->nseries && st->series[st->nseries - 1].round == r) {
		st->series[st->nseries - 1] = pt;
		return REC_OK;
	}
	/* Most of a long session's stacks change in a few rounds only: their series start
	 * small, where the shared reserve() would give each of millions of them 16 points. */
	if (st->nseries == st->cap_series) {
		size_t cap = st->cap_series ? st->cap_series * 2 : 1;
		struct pf_point *v = reallocarray(st->series, cap, sizeof *v);
		if (!v)
			return REC_NOMEM;
		st->series = v;
		st->cap_series = cap;
	}
	st->series[st->nseries++] = pt;
	return REC_OK;
}

static int rec_round(struct loader *l, const uint8_t *q, const uint8_t *end)
{
	struct profile *p = l->p;
	struct hp_round h;
	if (!hp_take(&q, end, &h, sizeof h))
		return REC_MALFORMED;
	if (reserve((void **)&p->rounds, &l->cap_rounds, p->nrounds, sizeof h) < 0)
		return REC_NOMEM;
	size_t r = p->nrounds++;
	p->rounds[r] = h;
	if (h.live_bytes > p->peak_live_bytes)
		p->peak_live_bytes = h.live_bytes;
	if ((h.flags & HP_ROUND_SAMPLED) && !p->first_sampled)
		p->first_sampled = r + 1;
	int rc = REC_OK;
	for (size_t i = 0; i < l->npending && rc == REC_OK; i++) {
		const struct pending *e = &l->pending[i];
		long s = u64map_get(&p->stack_by_id, e->stack_id);
		add_totals(s >= 0 ? &p->stacks[s].tot : &p->unattributed, &e->d);
		if (e->size_kind != HP_SIZE_NONE)
			rc = add_size(l, e, s);
		if (rc == REC_OK && s >= 0)
			rc = add_point(&p->stacks[s], r);
	}
	l->npending = 0;
	return rc;
}

static int rec_end(struct loader *l, const uint8_t *q, const uint8_t *end)
{
	struct hp_end h;
	if (!hp_take(&q, end, &h, sizeof h))
		return REC_MALFORMED;
	l->p->has_end = 1;
	l->p->end_reason = h.reason;
	return REC_OK;
}

static int dispatch(struct loader *l, uint32_t type, const uint8_t *body, uint32_t len)
{
	const uint8_t *end = body + len;
	switch (type) {
	case HP_REC_SESSION:
		return rec_session(l, body, end);
	case HP_REC_HELLO:
		return rec_hello(l, body, end);
	case HP_REC_MODULE:
		return rec_module(l, body, end);
	case HP_REC_STACK:
		return rec_stack(l, body, end);
	case HP_REC_SYMBOL:
		return rec_symbol(l, body, end);
	case HP_REC_SITES:
		return rec_sites(l, body, end);
	case HP_REC_ROUND:
		return rec_round(l, body, end);
	case HP_REC_END:
		return rec_end(l, body, end);
	case HP_REC_LIVE:
		return rec_live(l, body, end);
	default:
		l->p->skipped_records++;
		return REC_OK;
	}
}

/* Says what is wrong with a header hp_reader_open rejected, from the bytes it read. */
static void explain_header(const struct hp_reader *r, const char *path, struct hp_error *err)
{
	const struct hp_file_header *h = &r->header;
	if (r->header_len == 0)
		hp_error_set(err,
			     "%s is empty, not a heapprof profile: give a profile written by "
			     "heapprof-attach",
			     path);
	else if (r->header_len < sizeof *h || memcmp(h->magic, HP_MAGIC, sizeof h->magic) != 0)
		hp_error_set(err,
			     "%s is not a heapprof profile: give a profile written by "
			     "heapprof-attach",
			     path);
	else if (h->version > HP_FORMAT_VERSION)
		hp_error_set(err,
			     "%s has format version %u, newer than this heapprof-view reads "
			     "(%u): use a newer heapprof-view",
			     path, h->version, HP_FORMAT_VERSION);
	else
		hp_error_set(err,
			     "%s has format version %u, which this heapprof-view no longer "
			     "reads (it reads %u): use the heapprof-view that wrote it",
			     path, h->version, HP_FORMAT_VERSION);
}

static void read_error(const struct hp_zsource *z, const struct hp_reader *r, const char *path,
		       struct hp_error *err)
{
	if (z->corrupt)
		hp_error_set(err, "%s is damaged: %s", path, r->err);
	else
		hp_error_set(err, "cannot read %s: %s: check that it is a readable file", path,
			     r->err);
}

static int open_profile(const char *path, struct hp_error *err)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		const char *hint = errno == ENOENT   ? "check the path"
				   : errno == EACCES ? "check its permissions or run as its owner"
						     : "check the file";
		hp_error_set(err, "cannot open %s: %s: %s", path, strerror(errno), hint);
		return -1;
	}
	struct stat st;
	if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
		hp_error_set(err, "%s is a directory: give a profile file", path);
		close(fd);
		return -1;
	}
	return fd;
}

int pf_load(struct profile *p, const char *path, struct hp_error *err)
{
	memset(p, 0, sizeof *p);
	int fd = open_profile(path, err);
	if (fd < 0)
		return -1;
	struct hp_zsource z;
	hp_zsource_init(&z, fd);
	struct hp_reader r;
	if (hp_reader_open_source(&r, hp_zsource_read, &z) < 0) {
		if (z.failed)
			read_error(&z, &r, path, err);
		else
			explain_header(&r, path, err);
		hp_reader_close(&r);
		hp_zsource_free(&z);
		close(fd);
		return -1;
	}
	struct loader l = {.p = p};
	int rc, nomem = 0;
	uint32_t type, len;
	const uint8_t *body;
	while ((rc = hp_read_record(&r, &type, &body, &len)) == 1) {
		p->records++;
		int d = dispatch(&l, type, body, len);
		if (d == REC_NOMEM) {
			nomem = 1;
			break;
		}
		if (d == REC_MALFORMED)
			p->malformed_records++;
	}
	/* Data decoded after damage cannot be trusted, so a damaged file shows nothing. */
	int damaged = rc < 0 && z.corrupt;
	if (nomem)
		hp_error_set(err, "out of memory loading %s: free memory or view a smaller profile",
			     path);
	else if (damaged)
		read_error(&z, &r, path, err);
	else if (rc < 0)
		snprintf(p->warning, sizeof p->warning,
			 "%s is cut short (%s): showing the %zu complete rounds", path, r.err,
			 p->nrounds);
	else if (!p->has_end)
		snprintf(p->warning, sizeof p->warning,
			 "%s has no END record (the session was killed?): showing the %zu complete "
			 "rounds",
			 path, p->nrounds);
	else if (p->malformed_records)
		snprintf(p->warning, sizeof p->warning,
			 "%s has %llu malformed records, skipped: the numbers may be incomplete",
			 path, (unsigned long long)p->malformed_records);
	free(l.pending);
	hp_reader_close(&r);
	hp_zsource_free(&z);
	close(fd);
	if (nomem || damaged) {
		pf_free(p);
		return -1;
	}
	if (pf_build_sites(p) < 0) {
		hp_error_set(err, "out of memory loading %s: free memory or view a smaller profile",
			     path);
		pf_free(p);
		return -1;
	}
	return 0;
}

void pf_free(struct profile *p)
{
	session_free(&p->session);
	for (size_t i = 0; i < p->nmodules; i++) {
		free(p->modules[i].path);
		free(p->modules[i].build_id);
	}
	for (size_t i = 0; i < p->nstacks; i++) {
		free(p->stacks[i].frames);
		free(p->stacks[i].series);
	}
	for (size_t i = 0; i < p->nsymbols; i++)
		pf_symbol_free(&p->symbols[i]);
	free(p->modules);
	free(p->stacks);
	free(p->symbols);
	free(p->rounds);
	free(p->sites);
	free(p->sizes);
	free(p->stack_sizes);
	u64map_free(&p->size_by_code);
	u64map_free(&p->stack_size_by_code);
	u64map_free(&p->module_by_id);
	u64map_free(&p->stack_by_id);
	u64map_free(&p->symbol_by_addr);
	u64map_free(&p->site_by_addr);
	free(p->module_canon);
	memset(p, 0, sizeof *p);
}

const struct hp_round *pf_last_round(const struct profile *p)
{
	return p->nrounds ? &p->rounds[p->nrounds - 1] : NULL;
}

const struct pf_symbol *pf_symbol_at(const struct profile *p, uint64_t addr)
{
	long i = u64map_get(&p->symbol_by_addr, addr);
	return i >= 0 ? &p->symbols[i] : NULL;
}

const struct pf_module *pf_module_of(const struct profile *p, uint64_t addr)
{
	const struct pf_symbol *s = pf_symbol_at(p, addr);
	if (s && s->module_id) {
		long i = u64map_get(&p->module_by_id, s->module_id);
		if (i >= 0)
			return &p->modules[i];
	}
	/* A later module may reuse the range of an unloaded one: the newest wins. */
	for (size_t i = p->nmodules; i-- > 0;)
		if (addr >= p->modules[i].start && addr < p->modules[i].end)
			return &p->modules[i];
	return NULL;
}

struct pf_point pf_stack_live_at(const struct pf_stack *st, size_t r)
{
	/* The last point at or before r. */
	size_t lo = 0, hi = st->nseries;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (st->series[mid].round <= r)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return (struct pf_point){.round = r};
	return st->series[lo - 1];
}

size_t pf_peak_round(const struct profile *p)
{
	size_t best = 0;
	for (size_t i = 1; i < p->nrounds; i++)
		if (p->rounds[i].live_bytes > p->rounds[best].live_bytes)
			best = i;
	return best;
}
