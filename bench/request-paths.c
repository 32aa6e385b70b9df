/* request-paths.c - a server's request loop, as the allocation paths a profiler sees: each
 * request allocates through one wrapper (like redis's zmalloc) from several callers at
 * different depths, so every path meets the same return address first and differs only
 * further up. Not one of the brief's seven; it measures how the payload's per-thread
 * memory of recent stacks copes with a thread taking turns between more paths than one.
 *
 * A step serves 16 requests, alternating between a "set" (its arguments, an object and
 * its string, a table entry that replaces and frees the entry its slot held) and a "get"
 * (its arguments and a reply, freed at once): five allocation paths in turn. Each thread
 * keeps a table of --keys entries. An op is one request.
 */
#include "common.h"

#include <stdlib.h>
#include <string.h>

#define REQUESTS_PER_STEP 16

struct object {
	char *str;
	size_t len;
};

struct entry {
	struct object *val;
	uint64_t key;
};

struct rp_state {
	struct entry **table;
	uint64_t seed;
	uint64_t served;
};

static long table_keys = 4096;

static const struct bench_param params[] = {
    {"keys", &table_keys, 1, 1 << 24, "entries each thread's table holds"},
    {0},
};

/* noipa throughout: each function keeps its own frame and call, as in a server built
 * from separate files, and the compiler cannot fold the paths into one. */
__attribute__((noipa)) static void *wrap_alloc(size_t n)
{
	void *p = malloc(n);

	if (!p)
		bench_oom("request block");
	return p;
}

__attribute__((noipa)) static void wrap_free(void *p)
{
	free(p);
}

__attribute__((noipa)) static char *new_string(const char *src, size_t len)
{
	char *s = wrap_alloc(len + 1);

	memcpy(s, src, len);
	s[len] = 0;
	return s;
}

__attribute__((noipa)) static struct object *new_object(const char *src, size_t len)
{
	struct object *o = wrap_alloc(sizeof(*o));

	o->str = new_string(src, len);
	o->len = len;
	return o;
}

__attribute__((noipa)) static void free_object(struct object *o)
{
	wrap_free(o->str);
	wrap_free(o);
}

__attribute__((noipa)) static void set_command(struct rp_state *s, uint64_t key, const char *arg,
					       size_t len)
{
	struct entry *e = wrap_alloc(sizeof(*e));
	struct entry **slot = &s->table[key % (uint64_t)table_keys];

	e->val = new_object(arg, len);
	e->key = key;
	if (*slot) {
		free_object((*slot)->val);
		wrap_free(*slot);
	}
	*slot = e;
}

__attribute__((noipa)) static char *reply_buffer(size_t len)
{
	return wrap_alloc(len);
}

__attribute__((noipa)) static char *format_reply(const struct entry *e)
{
	size_t len = e ? e->val->len + 8 : 8;
	char *r = reply_buffer(len);

	memset(r, '$', len);
	return r;
}

__attribute__((noipa)) static void get_command(struct rp_state *s, uint64_t key)
{
	const struct entry *e = s->table[key % (uint64_t)table_keys];
	char *r = format_reply(e);

	if (e && e->key % (uint64_t)table_keys != key % (uint64_t)table_keys)
		bench_fail("entry of key %llu in the wrong slot", (unsigned long long)e->key);
	if (r[0] != '$')
		bench_fail("reply overwritten");
	wrap_free(r);
}

__attribute__((noipa)) static void process_command(struct rp_state *s, uint64_t n)
{
	static const char text[] = "a value of some length for the table";
	uint64_t key = bench_rand(&s->seed);
	size_t len = 4 + (size_t)(key % 24);
	char *args = wrap_alloc(48);

	memcpy(args, text, len);
	if (n & 1)
		set_command(s, key, args, len);
	else
		get_command(s, key);
	wrap_free(args);
}

static void *rp_init(int tid, const struct bench_opts *opts)
{
	struct rp_state *s = calloc(1, sizeof(*s));

	if (!s)
		bench_oom("thread state");
	s->table = calloc((size_t)table_keys, sizeof(*s->table));
	if (!s->table)
		bench_oom("table");
	s->seed = opts->seed + (uint64_t)tid * 0x9e3779b97f4a7c15ULL + 1;
	return s;
}

static uint64_t rp_step(void *arg)
{
	struct rp_state *s = arg;

	for (int i = 0; i < REQUESTS_PER_STEP; i++)
		process_command(s, s->served++);
	return REQUESTS_PER_STEP;
}

static void rp_fini(void *arg)
{
	struct rp_state *s = arg;

	for (long i = 0; i < table_keys; i++)
		if (s->table[i]) {
			free_object(s->table[i]->val);
			wrap_free(s->table[i]);
		}
	free(s->table);
	free(s);
}

int main(int argc, char **argv)
{
	static const struct bench_def def = {
	    .name = "request-paths",
	    .summary = "A step serves 16 requests, set and get in turn, each allocating through "
		       "one wrapper from callers at several depths; an op is one request.",
	    .params = params,
	    .thread_init = rp_init,
	    .step = rp_step,
	    .thread_fini = rp_fini,
	};

	return bench_main(argc, argv, &def);
}
