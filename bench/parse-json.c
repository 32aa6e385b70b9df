/* parse-json.c - every thread parses the same JSON document into a DOM on the heap (one
 * block per value, key and string, arrays grown with realloc), checks it and frees it. The
 * thesis parsed a 170 MB file; here the document is generated in memory at start, --size-kb
 * kilobytes (default 4096) of records with nested objects, arrays, escapes and numbers.
 *
 * A step parses, checks and frees the whole document. An op is one allocation call (malloc
 * or realloc) made while building the DOM; all of them are freed within the step.
 */
#include "common.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum jtype { J_NULL, J_FALSE, J_TRUE, J_NUMBER, J_STRING, J_ARRAY, J_OBJECT };

struct jmember;

struct jvalue {
	enum jtype type;
	union {
		double number;
		struct {
			char *chars;
			size_t len;
		} string;
		struct {
			struct jvalue **items;
			size_t len;
		} array;
		struct {
			struct jmember *members;
			size_t len;
		} object;
	} u;
};

struct jmember {
	char *key;
	struct jvalue *value;
};

/* A growable text buffer: the generated document, and the parser's string scratch. */
struct sbuf {
	char *data;
	size_t len;
	size_t cap;
};

struct parser {
	const char *p;
	struct sbuf scratch;
	uint64_t allocs;
};

static long size_kb = 4096;
static char *doc;
static size_t doc_records;
static double doc_id_sum;

static const struct bench_param params[] = {
    {"size-kb", &size_kb, 1, 1048576, "size of the generated document in KiB"},
    {0},
};

static void sbuf_reserve(struct sbuf *b, size_t extra)
{
	if (b->len + extra + 1 <= b->cap)
		return;
	while (b->len + extra + 1 > b->cap)
		b->cap = b->cap ? 2 * b->cap : 4096;
	b->data = realloc(b->data, b->cap);
	if (!b->data)
		bench_oom("text buffer");
}

static void sbuf_putc(struct sbuf *b, char c)
{
	sbuf_reserve(b, 1);
	b->data[b->len++] = c;
	b->data[b->len] = '\0';
}

__attribute__((format(printf, 2, 3))) static void sbuf_printf(struct sbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	sbuf_reserve(b, (size_t)n);
	va_start(ap, fmt);
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

static const char *const words[] = {
    "alpha", "bravo",	"charlie", "delta", "echo", "foxtrot",	"golf",	 "hotel",
    "india", "juliett", "kilo",	   "lima",  "mike", "november", "oscar", "papa",
};

#define NWORDS (sizeof(words) / sizeof(words[0]))

static const char *word(uint64_t *rng)
{
	return words[bench_rand(rng) % NWORDS];
}

static void gen_record(struct sbuf *b, uint64_t *rng, size_t id)
{
	unsigned ntags = (unsigned)(bench_rand(rng) % 6);
	unsigned nfriends = (unsigned)(bench_rand(rng) % 4);

	sbuf_printf(b, "{\"id\": %zu, \"name\": \"%s_%s\", \"active\": %s, \"score\": %.3f,\n", id,
		    word(rng), word(rng), bench_rand(rng) & 1 ? "true" : "false",
		    (double)(int64_t)(bench_rand(rng) % 2000001 - 1000000) / 8.0);
	sbuf_printf(b, " \"ratio\": %.6e, \"extra\": null, \"tags\": [", 1.0 / (double)(id + 1));
	for (unsigned i = 0; i < ntags; i++)
		sbuf_printf(b, "%s\"%s\"", i ? ", " : "", word(rng));
	sbuf_printf(b,
		    "],\n \"address\": {\"street\": \"%lu %s street\", \"zip\": \"%05lu\", "
		    "\"geo\": [%.5f, %.5f]},\n",
		    (unsigned long)(bench_rand(rng) % 999 + 1), word(rng),
		    (unsigned long)(bench_rand(rng) % 100000),
		    (double)(bench_rand(rng) % 180000) / 1000.0 - 90.0,
		    (double)(bench_rand(rng) % 360000) / 1000.0 - 180.0);
	sbuf_printf(
	    b, " \"bio\": \"%s said \\\"%s\\\"\\n\\tand left\\\\ caf\\u00e9 \\ud83d\\ude00 %s\",",
	    word(rng), word(rng), word(rng));
	sbuf_printf(b, " \"friends\": [");
	for (unsigned i = 0; i < nfriends; i++)
		sbuf_printf(b, "%s{\"id\": %lu, \"name\": \"%s\"}", i ? ", " : "",
			    (unsigned long)(bench_rand(rng) % 100000), word(rng));
	sbuf_printf(b, "]}");
}

static int pj_setup(const struct bench_opts *opts)
{
	struct sbuf b = {0};
	uint64_t rng = bench_rand_seed(opts, -1);
	size_t target = (size_t)size_kb * 1024;

	sbuf_putc(&b, '[');
	do {
		if (doc_records)
			sbuf_printf(&b, ",\n");
		gen_record(&b, &rng, doc_records);
		doc_id_sum += (double)doc_records;
		doc_records++;
	} while (b.len < target);
	sbuf_printf(&b, "]\n");
	doc = b.data;
	return 0;
}

static void pj_teardown(void)
{
	free(doc);
}

static void *pj_alloc(struct parser *ps, size_t size)
{
	void *p = malloc(size);

	if (!p)
		bench_oom("DOM");
	ps->allocs++;
	return p;
}

static void *pj_grow(struct parser *ps, void *old, size_t len, size_t *cap, size_t elem)
{
	void *p;

	if (len < *cap)
		return old;
	*cap = *cap ? 2 * *cap : 4;
	p = realloc(old, *cap * elem);
	if (!p)
		bench_oom("DOM");
	ps->allocs++;
	return p;
}

__attribute__((noreturn)) static void syntax_error(const struct parser *ps, const char *what)
{
	bench_fail("JSON %s at offset %zu", what, (size_t)(ps->p - doc));
}

static void skip_ws(struct parser *ps)
{
	while (*ps->p == ' ' || *ps->p == '\n' || *ps->p == '\t' || *ps->p == '\r')
		ps->p++;
}

static unsigned parse_hex4(struct parser *ps)
{
	unsigned v = 0;

	for (int i = 0; i < 4; i++) {
		char c = *ps->p++;

		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v |= (unsigned)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v |= (unsigned)(c - 'A' + 10);
		else
			syntax_error(ps, "bad \\u escape");
	}
	return v;
}

static void put_utf8(struct sbuf *b, unsigned cp)
{
	if (cp < 0x80) {
		sbuf_putc(b, (char)cp);
	} else if (cp < 0x800) {
		sbuf_putc(b, (char)(0xc0 | cp >> 6));
		sbuf_putc(b, (char)(0x80 | (cp & 0x3f)));
	} else if (cp < 0x10000) {
		sbuf_putc(b, (char)(0xe0 | cp >> 12));
		sbuf_putc(b, (char)(0x80 | ((cp >> 6) & 0x3f)));
		sbuf_putc(b, (char)(0x80 | (cp & 0x3f)));
	} else {
		sbuf_putc(b, (char)(0xf0 | cp >> 18));
		sbuf_putc(b, (char)(0x80 | ((cp >> 12) & 0x3f)));
		sbuf_putc(b, (char)(0x80 | ((cp >> 6) & 0x3f)));
		sbuf_putc(b, (char)(0x80 | (cp & 0x3f)));
	}
}

static unsigned parse_escape(struct parser *ps)
{
	unsigned cp;

	switch (*ps->p++) {
	case '"':
		return '"';
	case '\\':
		return '\\';
	case '/':
		return '/';
	case 'b':
		return '\b';
	case 'f':
		return '\f';
	case 'n':
		return '\n';
	case 'r':
		return '\r';
	case 't':
		return '\t';
	case 'u':
		cp = parse_hex4(ps);
		if (cp >= 0xd800 && cp < 0xdc00) {
			unsigned lo;

			if (ps->p[0] != '\\' || ps->p[1] != 'u')
				syntax_error(ps, "lone surrogate");
			ps->p += 2;
			lo = parse_hex4(ps);
			if (lo < 0xdc00 || lo >= 0xe000)
				syntax_error(ps, "bad low surrogate");
			cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
		}
		return cp;
	default:
		syntax_error(ps, "bad escape");
	}
}

/* Decodes the string at ps->p (after its opening quote) into a new NUL-terminated block. */
static char *parse_string(struct parser *ps, size_t *len)
{
	char *s;

	ps->scratch.len = 0;
	for (;;) {
		char c = *ps->p++;

		if (c == '"')
			break;
		if (c == '\\')
			put_utf8(&ps->scratch, parse_escape(ps));
		else if ((unsigned char)c < 0x20)
			syntax_error(ps, "unterminated string");
		else
			sbuf_putc(&ps->scratch, c);
	}
	s = pj_alloc(ps, ps->scratch.len + 1);
	memcpy(s, ps->scratch.data ? ps->scratch.data : "", ps->scratch.len + 1);
	*len = ps->scratch.len;
	return s;
}

static struct jvalue *parse_value(struct parser *ps);

static void parse_array(struct parser *ps, struct jvalue *v)
{
	size_t cap = 0;

	v->u.array.items = NULL;
	v->u.array.len = 0;
	skip_ws(ps);
	if (*ps->p == ']') {
		ps->p++;
		return;
	}
	for (;;) {
		v->u.array.items =
		    pj_grow(ps, v->u.array.items, v->u.array.len, &cap, sizeof(*v->u.array.items));
		v->u.array.items[v->u.array.len++] = parse_value(ps);
		skip_ws(ps);
		if (*ps->p == ']') {
			ps->p++;
			return;
		}
		if (*ps->p++ != ',')
			syntax_error(ps, "expected , or ]");
	}
}

static void parse_object(struct parser *ps, struct jvalue *v)
{
	size_t cap = 0;

	v->u.object.members = NULL;
	v->u.object.len = 0;
	skip_ws(ps);
	if (*ps->p == '}') {
		ps->p++;
		return;
	}
	for (;;) {
		struct jmember *m;
		size_t klen;

		v->u.object.members = pj_grow(ps, v->u.object.members, v->u.object.len, &cap,
					      sizeof(*v->u.object.members));
		m = &v->u.object.members[v->u.object.len];
		skip_ws(ps);
		if (*ps->p++ != '"')
			syntax_error(ps, "expected a key");
		m->key = parse_string(ps, &klen);
		skip_ws(ps);
		if (*ps->p++ != ':')
			syntax_error(ps, "expected :");
		m->value = parse_value(ps);
		v->u.object.len++;
		skip_ws(ps);
		if (*ps->p == '}') {
			ps->p++;
			return;
		}
		if (*ps->p++ != ',')
			syntax_error(ps, "expected , or }");
	}
}

static bool take_word(struct parser *ps, const char *w)
{
	size_t n = strlen(w);

	if (strncmp(ps->p, w, n))
		return false;
	ps->p += n;
	return true;
}

static struct jvalue *parse_value(struct parser *ps)
{
	struct jvalue *v = pj_alloc(ps, sizeof(*v));
	char c;

	skip_ws(ps);
	c = *ps->p;
	if (c == '{') {
		ps->p++;
		v->type = J_OBJECT;
		parse_object(ps, v);
	} else if (c == '[') {
		ps->p++;
		v->type = J_ARRAY;
		parse_array(ps, v);
	} else if (c == '"') {
		ps->p++;
		v->type = J_STRING;
		v->u.string.chars = parse_string(ps, &v->u.string.len);
	} else if (c == '-' || (c >= '0' && c <= '9')) {
		char *end;

		v->type = J_NUMBER;
		v->u.number = strtod(ps->p, &end);
		if (end == ps->p)
			syntax_error(ps, "bad number");
		ps->p = end;
	} else if (take_word(ps, "true")) {
		v->type = J_TRUE;
	} else if (take_word(ps, "false")) {
		v->type = J_FALSE;
	} else if (take_word(ps, "null")) {
		v->type = J_NULL;
	} else {
		syntax_error(ps, "unexpected character");
	}
	return v;
}

static void free_value(struct jvalue *v)
{
	switch (v->type) {
	case J_STRING:
		free(v->u.string.chars);
		break;
	case J_ARRAY:
		for (size_t i = 0; i < v->u.array.len; i++)
			free_value(v->u.array.items[i]);
		free(v->u.array.items);
		break;
	case J_OBJECT:
		for (size_t i = 0; i < v->u.object.len; i++) {
			free(v->u.object.members[i].key);
			free_value(v->u.object.members[i].value);
		}
		free(v->u.object.members);
		break;
	default:
		break;
	}
	free(v);
}

static const struct jvalue *member(const struct jvalue *obj, const char *key)
{
	for (size_t i = 0; i < obj->u.object.len; i++)
		if (!strcmp(obj->u.object.members[i].key, key))
			return obj->u.object.members[i].value;
	return NULL;
}

/* The DOM must hold every record with its id, and the escapes must have been decoded. */
static void check_dom(const struct jvalue *root)
{
	static const char bio_tail[] = "\\ caf\xc3\xa9 \xf0\x9f\x98\x80 ";
	double sum = 0;

	if (root->type != J_ARRAY || root->u.array.len != doc_records)
		bench_fail("DOM has the wrong number of records");
	for (size_t i = 0; i < root->u.array.len; i++) {
		const struct jvalue *rec = root->u.array.items[i];
		const struct jvalue *id, *bio;

		if (rec->type != J_OBJECT || !(id = member(rec, "id")) || id->type != J_NUMBER ||
		    !(bio = member(rec, "bio")) || bio->type != J_STRING ||
		    !strstr(bio->u.string.chars, bio_tail))
			bench_fail("record %zu malformed in the DOM", i);
		sum += id->u.number;
	}
	if (sum != doc_id_sum)
		bench_fail("record ids add up to %.0f, not %.0f", sum, doc_id_sum);
}

static void *pj_init(int tid, const struct bench_opts *opts)
{
	struct parser *ps = calloc(1, sizeof(*ps));

	(void)tid;
	(void)opts;
	if (!ps)
		bench_oom("parser");
	return ps;
}

static uint64_t pj_step(void *arg)
{
	struct parser *ps = arg;
	struct jvalue *root;

	ps->p = doc;
	ps->allocs = 0;
	root = parse_value(ps);
	skip_ws(ps);
	if (*ps->p)
		syntax_error(ps, "trailing text");
	check_dom(root);
	free_value(root);
	return ps->allocs;
}

static void pj_fini(void *arg)
{
	struct parser *ps = arg;

	free(ps->scratch.data);
	free(ps);
}

int main(int argc, char **argv)
{
	static const struct bench_def def = {
	    .name = "parse-json",
	    .summary = "A step parses a generated --size-kb JSON document into a heap DOM, "
		       "checks and frees it; an op is one malloc or realloc of the DOM.",
	    .params = params,
	    .setup = pj_setup,
	    .teardown = pj_teardown,
	    .thread_init = pj_init,
	    .step = pj_step,
	    .thread_fini = pj_fini,
	};

	return bench_main(argc, argv, &def);
}
