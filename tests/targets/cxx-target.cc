/* cxx-target.cc - the C++ allocation workload: operator new/delete and new[]/delete[].
 *
 * Contract: the same command protocol as mt-target.c (`cxx-target T K`; "ready", then
 * go/ping/exit on stdin, "done"/"pong" on stdout). On "go" every worker calls
 * hp::Worker::make_node() K times (one `new Node`, sizeof(Node) == 64, at the line marked
 * HP_SITE_NEW) and hp::Worker::make_buffer() K times (one `new unsigned char[100 + index]`
 * at the line marked HP_SITE_NEW_ARRAY); then worker (i + 1) % T deletes every odd-indexed
 * node and buffer of worker i. On "exit" everything is deleted and the process exits 0, or
 * 1 if a fill pattern was found damaged.
 */
#include <pthread.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace hp
{

struct Node {
	unsigned char bytes[56];
	unsigned owner;
	unsigned seq;
};
static_assert(sizeof(Node) == 64, "the test expects 64-byte nodes");

static unsigned nthreads;
static unsigned nallocs;
static pthread_barrier_t allocated;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static pthread_cond_t progress = PTHREAD_COND_INITIALIZER;
static unsigned generation;
static unsigned finished;
static bool quitting;
static std::atomic<bool> corrupted;

class Worker
{
      public:
	unsigned index = 0;
	pthread_t thread{};
	Node **nodes = nullptr;
	unsigned char **buffers = nullptr;

	Node *make_node(unsigned seq);
	unsigned char *make_buffer(unsigned seq);
	void run_round();
	void free_kept();
	void free_odd_of(Worker &victim);

      private:
	size_t buffer_size() const
	{
		return 100 + index;
	}
	unsigned char fill(unsigned seq) const
	{
		return (unsigned char)(index * 151 + seq * 11 + 3);
	}
	void check(const unsigned char *p, size_t n, unsigned char want, const char *what,
		   unsigned seq) const;
	void drop_node(unsigned seq);
	void drop_buffer(unsigned seq);
};

static Worker *workers;

/* Out of line and not tail calls (the object is written after new returns), so each
 * allocation is attributed to its own member function. */
__attribute__((noinline, noclone)) Node *Worker::make_node(unsigned seq)
{
	Node *n = new Node; /* HP_SITE_NEW */

	memset(n->bytes, fill(seq), sizeof(n->bytes));
	n->owner = index;
	n->seq = seq;
	return n;
}

__attribute__((noinline, noclone)) unsigned char *Worker::make_buffer(unsigned seq)
{
	unsigned char *b = new unsigned char[buffer_size()]; /* HP_SITE_NEW_ARRAY */

	memset(b, fill(seq), buffer_size());
	return b;
}

void Worker::check(const unsigned char *p, size_t n, unsigned char want, const char *what,
		   unsigned seq) const
{
	for (size_t i = 0; i < n; i++) {
		if (p[i] != want) {
			fprintf(stderr, "cxx-target: corrupt %s %u of worker %u\n", what, seq,
				index);
			corrupted = true;
			return;
		}
	}
}

void Worker::drop_node(unsigned seq)
{
	Node *n = nodes[seq];

	check(n->bytes, sizeof(n->bytes), fill(seq), "node", seq);
	if (n->owner != index || n->seq != seq)
		corrupted = true;
	delete n;
	nodes[seq] = nullptr;
}

void Worker::drop_buffer(unsigned seq)
{
	check(buffers[seq], buffer_size(), fill(seq), "buffer", seq);
	delete[] buffers[seq];
	buffers[seq] = nullptr;
}

void Worker::free_kept()
{
	for (unsigned k = 0; k < nallocs; k++) {
		if (nodes[k])
			drop_node(k);
		if (buffers[k])
			drop_buffer(k);
	}
}

void Worker::free_odd_of(Worker &victim)
{
	for (unsigned k = 1; k < nallocs; k += 2) {
		victim.drop_node(k);
		victim.drop_buffer(k);
	}
}

void Worker::run_round()
{
	free_kept();
	for (unsigned k = 0; k < nallocs; k++) {
		nodes[k] = make_node(k);
		buffers[k] = make_buffer(k);
	}
	pthread_barrier_wait(&allocated);
	free_odd_of(workers[(index + nthreads - 1) % nthreads]);
}

static void *worker_main(void *arg)
{
	Worker *w = static_cast<Worker *>(arg);
	unsigned seen = 0;

	for (;;) {
		pthread_mutex_lock(&lock);
		while (generation == seen && !quitting)
			pthread_cond_wait(&wake, &lock);
		seen = generation;
		bool quit = quitting;
		pthread_mutex_unlock(&lock);
		if (quit)
			break;
		w->run_round();
		pthread_mutex_lock(&lock);
		finished++;
		pthread_cond_signal(&progress);
		pthread_mutex_unlock(&lock);
	}
	w->free_kept();
	return nullptr;
}

static void say(const char *line)
{
	puts(line);
	fflush(stdout);
}

static void go()
{
	pthread_mutex_lock(&lock);
	finished = 0;
	generation++;
	pthread_cond_broadcast(&wake);
	while (finished < nthreads)
		pthread_cond_wait(&progress, &lock);
	pthread_mutex_unlock(&lock);
	say("done");
}

static unsigned parse_count(const char *s)
{
	char *end;
	unsigned long v = strtoul(s, &end, 10);

	if (*s == '\0' || *end != '\0' || v == 0 || v > 1000000) {
		fprintf(stderr, "cxx-target: bad count '%s': try a number from 1 to 1000000\n", s);
		exit(2);
	}
	return (unsigned)v;
}

} // namespace hp

int main(int argc, char **argv)
{
	using namespace hp;
	char line[64];

	if (argc != 3) {
		fputs("usage: cxx-target THREADS ALLOCS-PER-THREAD\n", stderr);
		return 2;
	}
	nthreads = parse_count(argv[1]);
	nallocs = parse_count(argv[2]);
	workers = new Worker[nthreads];
	if (pthread_barrier_init(&allocated, nullptr, nthreads)) {
		fputs("cxx-target: cannot set up the workers\n", stderr);
		return 1;
	}
	for (unsigned i = 0; i < nthreads; i++) {
		Worker *w = &workers[i];

		w->index = i;
		w->nodes = static_cast<Node **>(calloc(nallocs, sizeof(Node *)));
		w->buffers =
		    static_cast<unsigned char **>(calloc(nallocs, sizeof(unsigned char *)));
		if (!w->nodes || !w->buffers ||
		    pthread_create(&w->thread, nullptr, worker_main, w)) {
			fputs("cxx-target: cannot start the workers\n", stderr);
			return 1;
		}
	}
	say("ready");

	while (fgets(line, sizeof(line), stdin)) {
		line[strcspn(line, "\n")] = '\0';
		if (!strcmp(line, "go"))
			go();
		else if (!strcmp(line, "ping"))
			say("pong");
		else if (!strcmp(line, "exit"))
			break;
		else
			fprintf(stderr, "cxx-target: unknown command '%s'\n", line);
	}

	pthread_mutex_lock(&lock);
	quitting = true;
	pthread_cond_broadcast(&wake);
	pthread_mutex_unlock(&lock);
	for (unsigned i = 0; i < nthreads; i++) {
		pthread_join(workers[i].thread, nullptr);
		free(workers[i].nodes);
		free(workers[i].buffers);
	}
	pthread_barrier_destroy(&allocated);
	delete[] workers;
	if (corrupted) {
		fputs("cxx-target: memory was corrupted\n", stderr);
		return 1;
	}
	return 0;
}
