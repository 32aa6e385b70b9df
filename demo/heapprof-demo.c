/* heapprof-demo.c - a small server-like program to point heapprof at.
 *
 * Contract: `heapprof-demo [--workers N] [--seconds S]` prints "heapprof-demo: pid P ready",
 * then one stats line per second, until SIGTERM/SIGINT or S seconds; then it frees
 * everything and exits 0. A listener thread queues generated requests; N worker threads
 * (default 4) parse each into heap structures, build a response and cache it. The cache
 * evicts entries for popular items but keeps every per-session entry forever: memory grows
 * slowly, the leak heapprof should point at (cache_session in this file).
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CACHE_BUCKETS 4096
#define QUEUE_LIMIT 256
#define MAX_WORKERS 64

struct header {
	char *name;
	char *value;
};

struct request {
	char *method;
	char *path;
	unsigned long item;
	unsigned long session;
	struct header *headers;
	size_t nheaders;
};

struct response {
	char *buf;
	size_t len;
	size_t cap;
};

struct cache_entry {
	struct cache_entry *next;
	char *key;
	char *body;
	size_t body_len;
	unsigned hits;
};

struct queued {
	struct queued *next;
	char *text;
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t nonempty;
	pthread_cond_t nonfull;
	struct queued *head, *tail;
	unsigned len;
} queue = {.lock = PTHREAD_MUTEX_INITIALIZER,
	   .nonempty = PTHREAD_COND_INITIALIZER,
	   .nonfull = PTHREAD_COND_INITIALIZER};

static struct {
	pthread_mutex_t lock;
	struct cache_entry *buckets[CACHE_BUCKETS];
	size_t entries;
	size_t bytes;
} cache = {.lock = PTHREAD_MUTEX_INITIALIZER};

static atomic_int stopping;
static atomic_ulong handled;
static atomic_ulong generated;

static void on_signal(int sig)
{
	(void)sig;
	atomic_store(&stopping, 1);
}

/* Inlined, so each allocation is attributed to the function that needs the memory. */
static inline __attribute__((always_inline)) void *xmalloc(size_t n)
{
	void *p = malloc(n);

	if (!p) {
		fputs("heapprof-demo: out of memory\n", stderr);
		exit(1);
	}
	return p;
}

static inline __attribute__((always_inline)) char *xstrdup(const char *s)
{
	char *p = strdup(s);

	if (!p) {
		fputs("heapprof-demo: out of memory\n", stderr);
		exit(1);
	}
	return p;
}

static void queue_push(char *text)
{
	struct queued *q = xmalloc(sizeof(*q));

	q->text = text;
	q->next = NULL;
	pthread_mutex_lock(&queue.lock);
	while (queue.len >= QUEUE_LIMIT && !atomic_load(&stopping))
		pthread_cond_wait(&queue.nonfull, &queue.lock);
	if (queue.tail)
		queue.tail->next = q;
	else
		queue.head = q;
	queue.tail = q;
	queue.len++;
	pthread_cond_signal(&queue.nonempty);
	pthread_mutex_unlock(&queue.lock);
}

/* NULL once stopping and the queue is drained. */
static char *queue_pop(void)
{
	struct queued *q;
	char *text;

	pthread_mutex_lock(&queue.lock);
	while (!queue.head && !atomic_load(&stopping))
		pthread_cond_wait(&queue.nonempty, &queue.lock);
	q = queue.head;
	if (q) {
		queue.head = q->next;
		if (!queue.head)
			queue.tail = NULL;
		queue.len--;
		pthread_cond_signal(&queue.nonfull);
	}
	pthread_mutex_unlock(&queue.lock);
	if (!q)
		return NULL;
	text = q->text;
	free(q);
	return text;
}

static unsigned long next_random(unsigned long *state)
{
	*state = *state * 6364136223846793005UL + 1442695040888963407UL;
	return *state >> 33;
}

static char *generate_request(unsigned long *rng, unsigned long seq)
{
	static const char *const agents[] = {"curl/7.88", "Mozilla/5.0 (X11; Linux x86_64)",
					     "heapprof-bench/0.1"};
	unsigned long item = next_random(rng) % 500;
	/* One request in 40 opens a new session, which the cache never forgets. */
	unsigned long session = next_random(rng) % 40 ? next_random(rng) % 64 : 1000 + seq;
	size_t cap = 256;
	char *text = xmalloc(cap);

	snprintf(text, cap,
		 "GET /item/%lu HTTP/1.1\nHost: demo.local\nUser-Agent: %s\nX-Session: %lu\n"
		 "Accept: */*\n",
		 item, agents[seq % 3], session);
	return text;
}

static void *listener_main(void *arg)
{
	unsigned long rng = 12345, seq = 0;
	const struct timespec pause = {0, 500 * 1000};

	(void)arg;
	while (!atomic_load(&stopping)) {
		queue_push(generate_request(&rng, seq++));
		atomic_fetch_add(&generated, 1);
		nanosleep(&pause, NULL);
	}
	pthread_mutex_lock(&queue.lock);
	pthread_cond_broadcast(&queue.nonempty);
	pthread_mutex_unlock(&queue.lock);
	return NULL;
}

static void add_header(struct request *r, const char *name, const char *value)
{
	struct header *h = realloc(r->headers, (r->nheaders + 1) * sizeof(*h));

	if (!h) {
		fputs("heapprof-demo: out of memory\n", stderr);
		exit(1);
	}
	r->headers = h;
	h[r->nheaders].name = xstrdup(name);
	h[r->nheaders].value = xstrdup(value);
	r->nheaders++;
}

static struct request *parse_request(const char *text)
{
	struct request *r = calloc(1, sizeof(*r));
	char *copy = xstrdup(text);
	char *save = NULL;

	if (!r) {
		fputs("heapprof-demo: out of memory\n", stderr);
		exit(1);
	}
	for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *colon = strchr(line, ':');

		if (!r->method) {
			char *sp = strchr(line, ' ');

			if (!sp)
				break;
			*sp = '\0';
			r->method = xstrdup(line);
			char *path = sp + 1;
			char *end = strchr(path, ' ');

			if (end)
				*end = '\0';
			r->path = xstrdup(path);
			if (!strncmp(path, "/item/", 6))
				r->item = strtoul(path + 6, NULL, 10);
		} else if (colon) {
			*colon = '\0';
			add_header(r, line, colon + 2);
			if (!strcmp(line, "X-Session"))
				r->session = strtoul(colon + 2, NULL, 10);
		}
	}
	free(copy);
	return r;
}

static void free_request(struct request *r)
{
	for (size_t i = 0; i < r->nheaders; i++) {
		free(r->headers[i].name);
		free(r->headers[i].value);
	}
	free(r->headers);
	free(r->method);
	free(r->path);
	free(r);
}

static void respond(struct response *out, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void respond(struct response *out, const char *fmt, ...)
{
	for (;;) {
		va_list ap;

		va_start(ap, fmt);
		int n = vsnprintf(out->buf + out->len, out->cap - out->len, fmt, ap);
		va_end(ap);
		if (n < 0)
			return;
		if ((size_t)n < out->cap - out->len) {
			out->len += (size_t)n;
			return;
		}
		char *grown = realloc(out->buf, out->cap * 2);

		if (!grown) {
			fputs("heapprof-demo: out of memory\n", stderr);
			exit(1);
		}
		out->buf = grown;
		out->cap *= 2;
	}
}

static unsigned hash_key(const char *key)
{
	unsigned h = 2166136261u;

	for (; *key; key++)
		h = (h ^ (unsigned char)*key) * 16777619u;
	return h % CACHE_BUCKETS;
}

static void cache_free_entry(struct cache_entry *e)
{
	cache.entries--;
	cache.bytes -= e->body_len;
	free(e->key);
	free(e->body);
	free(e);
}

/* Replaces an item's entry (bounded: 500 items) or adds a session entry (unbounded). */
static void cache_store(const char *key, const struct response *body, int evictable)
{
	unsigned b = hash_key(key);
	struct cache_entry **pp;
	struct cache_entry *e = xmalloc(sizeof(*e));

	e->key = xstrdup(key);
	e->body = xmalloc(body->len + 1);
	memcpy(e->body, body->buf, body->len + 1);
	e->body_len = body->len;
	e->hits = 0;
	pthread_mutex_lock(&cache.lock);
	for (pp = &cache.buckets[b]; *pp; pp = &(*pp)->next) {
		if (!strcmp((*pp)->key, key)) {
			struct cache_entry *old = *pp;

			if (!evictable) {
				old->hits++;
				pthread_mutex_unlock(&cache.lock);
				free(e->key);
				free(e->body);
				free(e);
				return;
			}
			e->next = old->next;
			*pp = e;
			cache_free_entry(old);
			cache.entries++;
			cache.bytes += e->body_len;
			pthread_mutex_unlock(&cache.lock);
			return;
		}
	}
	e->next = cache.buckets[b];
	cache.buckets[b] = e;
	cache.entries++;
	cache.bytes += e->body_len;
	pthread_mutex_unlock(&cache.lock);
}

static void cache_session(const struct request *r, const struct response *resp)
{
	char key[64];

	snprintf(key, sizeof(key), "session:%lu", r->session);
	cache_store(key, resp, 0);
}

static void handle(const char *text)
{
	struct request *r = parse_request(text);
	struct response resp = {xmalloc(64), 0, 64};
	char key[64];

	respond(&resp, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n");
	respond(&resp, "{\"item\": %lu, \"path\": \"%s\", \"headers\": [", r->item,
		r->path ? r->path : "");
	for (size_t i = 0; i < r->nheaders; i++)
		respond(&resp, "%s{\"%s\": \"%s\"}", i ? ", " : "", r->headers[i].name,
			r->headers[i].value);
	respond(&resp, "]}\n");
	snprintf(key, sizeof(key), "item:%lu", r->item);
	cache_store(key, &resp, 1);
	cache_session(r, &resp);
	free(resp.buf);
	free_request(r);
	atomic_fetch_add(&handled, 1);
}

static void *worker_main(void *arg)
{
	char *text;

	(void)arg;
	while ((text = queue_pop())) {
		handle(text);
		free(text);
	}
	return NULL;
}

static void cache_clear(void)
{
	for (unsigned b = 0; b < CACHE_BUCKETS; b++) {
		while (cache.buckets[b]) {
			struct cache_entry *e = cache.buckets[b];

			cache.buckets[b] = e->next;
			cache_free_entry(e);
		}
	}
}

static unsigned long parse_number(const char *s, const char *opt, unsigned long max)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s ? s : "", &end, 10);
	if (!s || *s == '\0' || *end != '\0' || errno || v == 0 || v > max) {
		fprintf(stderr, "heapprof-demo: %s needs a number from 1 to %lu\n", opt, max);
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	unsigned long nworkers = 4, seconds = 0;
	pthread_t listener, workers[MAX_WORKERS];
	struct sigaction sa;
	sigset_t block, old;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--workers")) {
			nworkers = parse_number(argv[++i], "--workers", MAX_WORKERS);
		} else if (!strcmp(argv[i], "--seconds")) {
			seconds = parse_number(argv[++i], "--seconds", 86400);
		} else {
			fputs("usage: heapprof-demo [--workers N] [--seconds S]\n", stderr);
			return 2;
		}
	}

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	/* Only the main thread takes the stop signals, so they interrupt its sleep. */
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	if (pthread_create(&listener, NULL, listener_main, NULL)) {
		fputs("heapprof-demo: cannot start the listener thread\n", stderr);
		return 1;
	}
	for (unsigned long i = 0; i < nworkers; i++) {
		if (pthread_create(&workers[i], NULL, worker_main, NULL)) {
			fputs("heapprof-demo: cannot start a worker thread\n", stderr);
			return 1;
		}
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);

	printf("heapprof-demo: pid %ld ready (%lu workers)\n", (long)getpid(), nworkers);
	fflush(stdout);
	for (unsigned long t = 1; !atomic_load(&stopping); t++) {
		struct timespec left = {1, 0};

		while (nanosleep(&left, &left) && errno == EINTR && !atomic_load(&stopping))
			;
		if (atomic_load(&stopping))
			break;
		pthread_mutex_lock(&cache.lock);
		size_t entries = cache.entries, bytes = cache.bytes;
		pthread_mutex_unlock(&cache.lock);
		printf("heapprof-demo: t=%lus requests=%lu cache_entries=%zu cache_bytes=%zu\n", t,
		       atomic_load(&handled), entries, bytes);
		fflush(stdout);
		if (seconds && t >= seconds)
			atomic_store(&stopping, 1);
	}

	pthread_mutex_lock(&queue.lock);
	pthread_cond_broadcast(&queue.nonempty);
	pthread_cond_broadcast(&queue.nonfull);
	pthread_mutex_unlock(&queue.lock);
	pthread_join(listener, NULL);
	for (unsigned long i = 0; i < nworkers; i++)
		pthread_join(workers[i], NULL);
	/* A request queued after the last worker saw the queue empty. */
	for (char *text; (text = queue_pop());)
		free(text);
	cache_clear();
	printf("heapprof-demo: stopped after %lu requests\n", atomic_load(&handled));
	return 0;
}
