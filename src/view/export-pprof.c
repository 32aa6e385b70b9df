/* pprof: profile.proto encoded by hand (varints and length-delimited fields), gzipped.
 * Field numbers are those of github.com/google/pprof/proto/profile.proto. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "export.h"
#include "loc.h"
#include "text.h"
#include "u64map.h"
#include "view.h"

enum { WT_VARINT = 0, WT_LEN = 2 };

enum {
	PROFILE_SAMPLE_TYPE = 1,
	PROFILE_SAMPLE = 2,
	PROFILE_MAPPING = 3,
	PROFILE_LOCATION = 4,
	PROFILE_FUNCTION = 5,
	PROFILE_STRING_TABLE = 6,
	PROFILE_TIME_NANOS = 9,
	PROFILE_DURATION_NANOS = 10,
	PROFILE_PERIOD_TYPE = 11,
	PROFILE_PERIOD = 12,
	PROFILE_COMMENT = 13,
	PROFILE_DEFAULT_SAMPLE_TYPE = 14,
};

struct pb {
	uint8_t *b;
	size_t n, cap;
	int nomem;
};

static void pb_put(struct pb *p, const void *d, size_t len)
{
	if (p->nomem || !len)
		return;
	if (p->n + len > p->cap) {
		size_t ncap = p->cap ? p->cap : 256;
		while (ncap < p->n + len)
			ncap *= 2;
		uint8_t *nb = realloc(p->b, ncap);
		if (!nb) {
			p->nomem = 1;
			return;
		}
		p->b = nb;
		p->cap = ncap;
	}
	memcpy(p->b + p->n, d, len);
	p->n += len;
}

static void pb_varint(struct pb *p, uint64_t v)
{
	uint8_t b[10];
	size_t n = 0;
	do {
		b[n] = (uint8_t)(v & 0x7f);
		v >>= 7;
		if (v)
			b[n] |= 0x80;
		n++;
	} while (v);
	pb_put(p, b, n);
}

static void pb_uint(struct pb *p, uint32_t field, uint64_t v)
{
	pb_varint(p, (uint64_t)field << 3 | WT_VARINT);
	pb_varint(p, v);
}

static void pb_bytes(struct pb *p, uint32_t field, const void *d, size_t len)
{
	pb_varint(p, (uint64_t)field << 3 | WT_LEN);
	pb_varint(p, len);
	pb_put(p, d, len);
}

/* Appends sub as a length-delimited field and empties it for reuse. */
static void pb_msg(struct pb *p, uint32_t field, struct pb *sub)
{
	if (sub->nomem)
		p->nomem = 1;
	pb_bytes(p, field, sub->b, sub->n);
	sub->n = 0;
}

static void pb_free(struct pb *p)
{
	free(p->b);
}

struct enc {
	const struct profile *p;
	struct pb strings, mappings, locations, functions, samples;
	uint64_t nstrings, nfunctions, nlocations;
	struct u64map str_by_hash, func_by_key, loc_by_addr;
	char **strs; /* for checking hash hits */
	size_t cap_strs;
	int nomem;
};

static uint64_t hash(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

/* Index of s in the string table. A hash shared by two strings just gives the second its
 * own entry: the table may hold duplicates. */
static uint64_t str(struct enc *e, const char *s)
{
	if (!s)
		s = "";
	uint64_t h = hash(s);
	long i = u64map_get(&e->str_by_hash, h);
	if (i >= 0 && strcmp(e->strs[i], s) == 0)
		return (uint64_t)i;
	if (e->nstrings == e->cap_strs) {
		size_t ncap = e->cap_strs ? e->cap_strs * 2 : 256;
		char **ns = reallocarray(e->strs, ncap, sizeof *ns);
		if (!ns) {
			e->nomem = 1;
			return 0;
		}
		e->strs = ns;
		e->cap_strs = ncap;
	}
	char *copy = strdup(s);
	if (!copy || (i < 0 && u64map_put(&e->str_by_hash, h, e->nstrings) < 0)) {
		free(copy);
		e->nomem = 1;
		return 0;
	}
	e->strs[e->nstrings] = copy;
	pb_bytes(&e->strings, PROFILE_STRING_TABLE, s, strlen(s));
	return e->nstrings++;
}

static uint64_t function_id(struct enc *e, const char *name, const char *file)
{
	uint64_t ni = str(e, name), fi = str(e, file);
	uint64_t key = ni << 32 | fi;
	long i = u64map_get(&e->func_by_key, key);
	if (i >= 0)
		return (uint64_t)i;
	uint64_t id = ++e->nfunctions;
	if (u64map_put(&e->func_by_key, key, id) < 0)
		e->nomem = 1;
	struct pb f = {0};
	pb_uint(&f, 1, id);
	pb_uint(&f, 2, ni);
	pb_uint(&f, 3, ni);
	pb_uint(&f, 4, fi);
	pb_msg(&e->functions, PROFILE_FUNCTION, &f);
	pb_free(&f);
	return id;
}

static uint64_t location_id(struct enc *e, uint64_t addr)
{
	long i = u64map_get(&e->loc_by_addr, addr);
	if (i >= 0)
		return (uint64_t)i;
	uint64_t id = ++e->nlocations;
	if (u64map_put(&e->loc_by_addr, addr, id) < 0)
		e->nomem = 1;
	struct pb l = {0}, line = {0};
	pb_uint(&l, 1, id);
	const struct pf_module *m = pf_module_of(e->p, addr);
	if (m)
		pb_uint(&l, 2, (uint64_t)(m - e->p->modules) + 1);
	pb_uint(&l, 3, addr);
	uint32_t n = loc_levels(e->p, addr);
	/* Innermost inlined function first, the real function last: as pprof wants them. */
	for (uint32_t k = 0; k < n; k++) {
		struct pf_loc lc;
		char name[512];
		loc_get(e->p, addr, k, &lc);
		pb_uint(&line, 1, function_id(e, text_function(name, sizeof name, &lc), lc.file));
		if (lc.line)
			pb_uint(&line, 2, lc.line);
		pb_msg(&l, 4, &line);
	}
	pb_msg(&e->locations, PROFILE_LOCATION, &l);
	pb_free(&l);
	pb_free(&line);
	return id;
}

static void mappings(struct enc *e)
{
	struct pb m = {0};
	for (size_t i = 0; i < e->p->nmodules; i++) {
		const struct pf_module *mod = &e->p->modules[i];
		char hex[2 * 255 + 1] = "";
		for (size_t k = 0; k < mod->build_id_len && k < 255; k++)
			snprintf(hex + 2 * k, 3, "%02x", mod->build_id[k]);
		pb_uint(&m, 1, i + 1);
		pb_uint(&m, 2, mod->start);
		pb_uint(&m, 3, mod->end);
		pb_uint(&m, 4, mod->start - mod->bias);
		pb_uint(&m, 5, str(e, mod->path ? mod->path : e->p->session.exe));
		pb_uint(&m, 6, str(e, hex));
		for (uint32_t f = 7; f <= 10; f++)
			pb_uint(&m, f, 1);
		pb_msg(&e->mappings, PROFILE_MAPPING, &m);
	}
	pb_free(&m);
}

static void samples(struct enc *e)
{
	const struct profile *p = e->p;
	struct pb s = {0}, packed = {0};
	for (size_t i = 0; i < p->nstacks; i++) {
		const struct pf_stack *st = &p->stacks[i];
		if (pf_site_of(p, st) < 0)
			continue;
		for (uint32_t f = st->site_frame; f < st->depth; f++)
			pb_varint(&packed, location_id(e, st->frames[f]));
		pb_msg(&s, 1, &packed);
		int64_t lb = pf_live_blocks(&st->tot), ly = pf_live_bytes(&st->tot);
		pb_varint(&packed, st->tot.allocs);
		pb_varint(&packed, st->tot.alloc_bytes);
		pb_varint(&packed, lb > 0 ? (uint64_t)lb : 0);
		pb_varint(&packed, ly > 0 ? (uint64_t)ly : 0);
		pb_msg(&s, 2, &packed);
		pb_msg(&e->samples, PROFILE_SAMPLE, &s);
	}
	pb_free(&s);
	pb_free(&packed);
}

static void value_type(struct enc *e, struct pb *out, uint32_t field, const char *type,
		       const char *unit)
{
	struct pb v = {0};
	pb_uint(&v, 1, str(e, type));
	pb_uint(&v, 2, str(e, unit));
	pb_msg(out, field, &v);
	pb_free(&v);
}

static int encode(struct enc *e, struct pb *out)
{
	const struct profile *p = e->p;
	str(e, ""); /* string_table[0] must be "" */
	static const char *const types[][2] = {{"alloc_objects", "count"},
					       {"alloc_space", "bytes"},
					       {"inuse_objects", "count"},
					       {"inuse_space", "bytes"}};
	for (size_t i = 0; i < 4; i++)
		value_type(e, out, PROFILE_SAMPLE_TYPE, types[i][0], types[i][1]);
	mappings(e);
	samples(e);
	value_type(e, out, PROFILE_PERIOD_TYPE, "space", "bytes");
	const struct hp_round *last = pf_last_round(p);
	pb_put(out, e->samples.b, e->samples.n);
	pb_put(out, e->mappings.b, e->mappings.n);
	pb_put(out, e->locations.b, e->locations.n);
	pb_put(out, e->functions.b, e->functions.n);
	if (p->session.attach_real_ns)
		pb_uint(out, PROFILE_TIME_NANOS, p->session.attach_real_ns);
	if (last)
		pb_uint(out, PROFILE_DURATION_NANOS, last->time_ns);
	/* A profile switched to sampling by --max-memory has the rate it switched to, and a
	 * comment saying from which round: pprof has one period for the whole profile. */
	uint32_t from;
	uint64_t rate;
	int sampled = view_sampling(p, &from, &rate);
	pb_uint(out, PROFILE_PERIOD, sampled ? rate : 0);
	if (sampled == VIEW_SAMPLED_SWITCH) {
		char note[128];
		snprintf(note, sizeof note,
			 "heapprof: per-site numbers from round %" PRIu32
			 " on are estimates (--max-memory was reached)",
			 from);
		pb_uint(out, PROFILE_COMMENT, str(e, note));
	}
	pb_uint(out, PROFILE_DEFAULT_SAMPLE_TYPE, str(e, "inuse_space"));
	pb_put(out, e->strings.b, e->strings.n);
	return e->nomem || out->nomem || e->samples.nomem || e->mappings.nomem ||
		       e->locations.nomem || e->functions.nomem || e->strings.nomem
		   ? -1
		   : 0;
}

static int gzip_out(FILE *f, const struct pb *in)
{
	z_stream z = {0};
	uint8_t buf[65536];
	if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) !=
	    Z_OK)
		return -1;
	z.next_in = in->b;
	z.avail_in = (uInt)in->n;
	int rc;
	do {
		z.next_out = buf;
		z.avail_out = sizeof buf;
		rc = deflate(&z, Z_FINISH);
		if (rc == Z_STREAM_ERROR)
			break;
		fwrite(buf, 1, sizeof buf - z.avail_out, f);
	} while (rc != Z_STREAM_END);
	deflateEnd(&z);
	return rc == Z_STREAM_END && !ferror(f) ? 0 : -1;
}

int export_pprof(FILE *f, const struct profile *p)
{
	struct enc e = {.p = p};
	struct pb out = {0};
	int rc = encode(&e, &out);
	if (rc < 0)
		view_error("out of memory encoding the pprof profile: free memory and retry");
	else if (out.n > UINT32_MAX || gzip_out(f, &out) < 0) {
		view_error("cannot compress or write the pprof profile: check the disk");
		rc = -1;
	}
	for (uint64_t i = 0; i < e.nstrings; i++)
		free(e.strs[i]);
	free(e.strs);
	pb_free(&out);
	pb_free(&e.strings);
	pb_free(&e.mappings);
	pb_free(&e.locations);
	pb_free(&e.functions);
	pb_free(&e.samples);
	u64map_free(&e.str_by_hash);
	u64map_free(&e.func_by_key);
	u64map_free(&e.loc_by_addr);
	return rc;
}
