/* test-payload.c - the payload end to end in one process, without the injector.
 *
 * The test dlopens the built payload, starts it, runs a known workload in 4 threads and
 * checks the stream (read with hpstream.h) against it, then checks that stop, the
 * collector's unmapping and dlclose leave no mapping and no fd behind, and that a reader closing
 * the pipe makes the payload go quiet without a SIGPIPE. Then, in sessions of their own: size keys
 * and temporary frees, LIVE records with ages, basic and extended modes, sampling estimates and the
 * max_memory switch. While the payload records, nothing here allocates but the workload:
 * threads, buffers and the reader's record buffer are all made beforehand.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <link.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <malloc.h>
#include <unistd.h>

#include <cmocka.h>

#include "hpabi.h"
#include "hpformat.h"
#include "hpstream.h"
#include "payload/got.h"

#define NTHREADS 4
#define NALLOC 1000
#define ASIZE 48
#define NCALLOC 10
#define MAX_STACKS 8192
#define MAX_MODS 256
#define MAX_KEYED 16384
#define STACK_KEEP 12

static hp_start_fn start_fn;
static hp_stop_fn stop_fn;
static void *handle;

static void load(void)
{
	handle = dlopen(PAYLOAD_PATH, RTLD_NOW | RTLD_LOCAL);
	assert_non_null(handle);
	start_fn = (hp_start_fn)dlsym(handle, HP_START_SYMBOL);
	stop_fn = (hp_stop_fn)dlsym(handle, HP_STOP_SYMBOL);
	assert_non_null(start_fn);
	assert_non_null(stop_fn);
}

static const struct hp_start_args args = {
    .abi_version = HP_ABI_VERSION,
    .mode = HP_MODE_FULL,
    .interval_ms = 50,
    .max_depth = 32,
};

/* The known allocation sites; noinline and no tail call, so frames[0] lies in them. */
__attribute__((noinline)) void *site_malloc(size_t n);
__attribute__((noinline)) void *site_calloc(size_t a, size_t b);
__attribute__((noinline)) void *site_malloc(size_t n)
{
	void *p = malloc(n);
	__asm__ volatile("" ::"r"(p) : "memory");
	return p;
}

__attribute__((noinline)) void *site_calloc(size_t a, size_t b)
{
	void *p = calloc(a, b);
	__asm__ volatile("" ::"r"(p) : "memory");
	return p;
}

static pthread_barrier_t go, done, leave;
static void *blocks[NTHREADS][NALLOC];
static void *keep[NTHREADS][NCALLOC + 1];

static void *worker(void *arg)
{
	int k = (int)(intptr_t)arg;
	pthread_barrier_wait(&go);
	for (int i = 0; i < NALLOC; i++)
		blocks[k][i] = site_malloc(ASIZE);
	for (int i = 0; i < NALLOC / 2; i++)
		free(blocks[k][i]);
	for (int i = 0; i < NCALLOC; i++)
		keep[k][i] = site_calloc(4, 16);
	void *p = malloc(10), *m = NULL;
	keep[k][NCALLOC] = realloc(p, 20);
	if (posix_memalign(&m, 64, 128) == 0)
		free(m);
	pthread_barrier_wait(&done);
	pthread_barrier_wait(&leave);
	for (int i = NALLOC / 2; i < NALLOC; i++)
		free(blocks[k][i]);
	for (int i = 0; i <= NCALLOC; i++)
		free(keep[k][i]);
	return NULL;
}

/* What the reader thread saw; static, so reading allocates nothing. */
static struct {
	struct hp_reader r;
	int fd;
	int hello, ends, end_reason, order_ok, err;
	atomic_int rounds; /* also read by the workers (wait_next_round) */
	struct hp_round last;
	uint64_t frame0[MAX_STACKS], depth[MAX_STACKS];
	uint64_t frames[MAX_STACKS][STACK_KEEP]; /* the first STACK_KEEP of each */
	int have[MAX_STACKS];
	struct hp_site_delta sum[MAX_STACKS];
	char mods[MAX_MODS][256];
	int nmods;
	/* every SITES entry summed by (stack, size key) */
	struct hp_site_delta keyed[MAX_KEYED];
	int nkeyed, keyed_overflow;
	struct hp_live_site live[MAX_STACKS];
	int live_recs, stacks, round_flags, live_before_round;
	/* of every STACK and SITES record, whatever its id */
	uint64_t all_stacks, cut_stacks, stacked_allocs, stack_bytes;
} rd;

static void keyed_add(const struct hp_site_delta *d)
{
	for (int i = 0; i < rd.nkeyed; i++) {
		struct hp_site_delta *k = &rd.keyed[i];
		if (k->stack_id == d->stack_id && k->size_kind == d->size_kind &&
		    k->size == d->size) {
			k->allocs += d->allocs;
			k->alloc_bytes += d->alloc_bytes;
			k->frees += d->frees;
			k->freed_bytes += d->freed_bytes;
			k->temp_frees += d->temp_frees;
			return;
		}
	}
	if (rd.nkeyed == MAX_KEYED) {
		rd.keyed_overflow = 1;
		return;
	}
	rd.keyed[rd.nkeyed++] = *d;
}

static void on_record(uint32_t type, const uint8_t *b, uint32_t len)
{
	const uint8_t *end = b + len;
	if (type == HP_REC_HELLO) {
		rd.hello++;
	} else if (type == HP_REC_MODULE) {
		struct hp_module m;
		if (hp_take(&b, end, &m, sizeof m) && rd.nmods < MAX_MODS) {
			size_t n = m.path_len < 255 ? m.path_len : 255;
			memcpy(rd.mods[rd.nmods], b, n);
			rd.mods[rd.nmods++][n] = 0;
		}
	} else if (type == HP_REC_STACK) {
		struct hp_stack s;
		uint64_t f[HP_MAX_DEPTH] = {0};
		if (!hp_take(&b, end, &s, sizeof s) || s.depth > HP_MAX_DEPTH ||
		    !hp_take(&b, end, f, s.depth * sizeof *f))
			return;
		rd.cut_stacks += s.depth && f[s.depth - 1] == HP_FRAME_CUT;
		rd.all_stacks++;
		rd.stack_bytes += sizeof(struct hp_rec_hdr) + len;
		if (s.id >= MAX_STACKS)
			return;
		memcpy(rd.frames[s.id], f, sizeof rd.frames[s.id]);
		rd.have[s.id] = 1;
		rd.stacks++;
		rd.frame0[s.id] = f[0];
		rd.depth[s.id] = s.depth;
	} else if (type == HP_REC_SITES) {
		struct hp_sites h;
		struct hp_site_delta d;
		if (!hp_take(&b, end, &h, sizeof h))
			return;
		for (uint32_t i = 0; i < h.count && hp_take(&b, end, &d, sizeof d); i++) {
			if (d.stack_id)
				rd.stacked_allocs += d.allocs;
			if (d.stack_id >= MAX_STACKS)
				continue;
			if (d.stack_id && !rd.have[d.stack_id])
				rd.order_ok = 0;
			keyed_add(&d);
			rd.sum[d.stack_id].allocs += d.allocs;
			rd.sum[d.stack_id].alloc_bytes += d.alloc_bytes;
			rd.sum[d.stack_id].frees += d.frees;
			rd.sum[d.stack_id].freed_bytes += d.freed_bytes;
			rd.sum[d.stack_id].temp_frees += d.temp_frees;
		}
	} else if (type == HP_REC_LIVE) {
		struct hp_live h;
		struct hp_live_site l;
		if (!hp_take(&b, end, &h, sizeof h))
			return;
		rd.live_recs++;
		rd.live_before_round = 1;
		for (uint32_t i = 0; i < h.count && hp_take(&b, end, &l, sizeof l); i++) {
			if (l.stack_id >= MAX_STACKS)
				continue;
			/* Stack 0 (the table was full) has no STACK record: none either. */
			if (!rd.have[l.stack_id])
				rd.order_ok = 0;
			rd.live[l.stack_id] = l;
		}
	} else if (type == HP_REC_ROUND) {
		hp_take(&b, end, &rd.last, sizeof rd.last);
		rd.rounds++;
		rd.round_flags |= (int)rd.last.flags;
		if (rd.live_before_round && !(rd.last.flags & HP_ROUND_FINAL))
			rd.order_ok = 0;
	} else if (type == HP_REC_END) {
		struct hp_end e;
		if (hp_take(&b, end, &e, sizeof e))
			rd.end_reason = (int)e.reason;
		rd.ends++;
	}
}

static void *reader(void *arg)
{
	uint8_t *buf = arg;
	pthread_barrier_wait(&go);
	if (hp_reader_open(&rd.r, rd.fd) < 0) {
		rd.err = 1;
		return NULL;
	}
	rd.r.buf = buf;
	rd.r.cap = 1u << 20;
	uint32_t type, len;
	const uint8_t *body;
	int rc;
	while ((rc = hp_read_record(&rd.r, &type, &body, &len)) == 1)
		on_record(type, body, len);
	if (rc < 0)
		rd.err = 1;
	return NULL;
}

static int count_fds(void)
{
	int n = 0;
	struct dirent *e;
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

static int payload_mapped(void)
{
	char line[512];
	int found = 0;
	FILE *f = fopen("/proc/self/maps", "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof line, f))
		if (strstr(line, "heapprof-payload"))
			found = 1;
	fclose(f);
	return found;
}

static uint64_t vm_pages(void)
{
	unsigned long long pages = 0;
	FILE *f = fopen("/proc/self/statm", "r");
	if (f) {
		if (fscanf(f, "%llu", &pages) != 1)
			pages = 0;
		fclose(f);
	}
	return pages;
}

/* After a stop, a detach's order (hpabi.h): the collector parks once its last round is
 * written; told to, it unmaps the payload's memory in its own thread and ends, all before
 * the dlclose. */
static void free_as_detach_does(void)
{
	struct hp_collector_state *col = dlsym(handle, HP_COLLECTOR_SYMBOL);
	int (*free_fn)(void) = (int (*)(void))dlsym(handle, HP_FREE_SYMBOL);
	assert_non_null(col);
	assert_non_null(free_fn);
	for (int i = 0;
	     i < 10000 && __atomic_load_n(&col->phase, __ATOMIC_SEQ_CST) == HP_COLLECTOR_RUNNING;
	     i++)
		usleep(1000);
	assert_int_equal(__atomic_load_n(&col->phase, __ATOMIC_SEQ_CST), HP_COLLECTOR_PARKED);
	char task[64], comm[32] = "";
	snprintf(task, sizeof task, "/proc/self/task/%d/comm", (int)col->tid);
	FILE *f = fopen(task, "r");
	assert_non_null(f);
	assert_non_null(fgets(comm, sizeof comm, f));
	fclose(f);
	assert_string_equal(comm, "heapprof\n");
	uint64_t before = vm_pages();
	assert_int_equal(free_fn(), 0);
	snprintf(task, sizeof task, "/proc/self/task/%d", (int)col->tid);
	for (int i = 0; i < 10000 && access(task, F_OK) == 0; i++)
		usleep(1000);
	assert_int_not_equal(access(task, F_OK), 0);
	assert_int_equal(__atomic_load_n(&col->phase, __ATOMIC_SEQ_CST), HP_COLLECTOR_FREEING);
	/* The fixed tables alone are about 4 MiB (hpabi.h, HP_MIN_MAX_MEMORY). */
	assert_true(before - vm_pages() >= (4u << 20) / (uint64_t)sysconf(_SC_PAGESIZE));
	assert_int_equal(payload_mapped(), 1);
}

static int in_function(uint64_t addr, void *fn)
{
	Dl_info info;
	return dladdr((void *)(uintptr_t)addr, &info) && info.dli_saddr == fn;
}

static void test_end_to_end(void **state)
{
	(void)state;
	int fds0 = count_fds();
	load();
	void *pre = malloc(100);
	__asm__ volatile("" ::"r"(pre) : "memory"); /* keep the compiler from pairing it away */
	uint8_t *rbuf = malloc(1u << 20);
	assert_non_null(rbuf);
	memset(&rd, 0, sizeof rd);
	rd.order_ok = 1;
	pthread_barrier_init(&go, NULL, NTHREADS + 2);
	pthread_barrier_init(&done, NULL, NTHREADS + 1);
	pthread_barrier_init(&leave, NULL, NTHREADS + 1);
	pthread_t th[NTHREADS], rt;
	for (int i = 0; i < NTHREADS; i++)
		assert_int_equal(pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i), 0);
	assert_int_equal(pthread_create(&rt, NULL, reader, rbuf), 0);

	rd.fd = start_fn(&args);
	assert_true(rd.fd >= 0);
	pthread_barrier_wait(&go);
	pthread_barrier_wait(&done);
	free(pre);
	assert_int_equal(stop_fn(), 0);
	pthread_barrier_wait(&leave);
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	pthread_join(rt, NULL);
	hp_reader_close(&rd.r);
	close(rd.fd);

	assert_int_equal(rd.err, 0);
	assert_int_equal(rd.hello, 1);
	assert_int_equal(rd.ends, 1);
	assert_int_equal(rd.end_reason, HP_END_DETACH);
	assert_true(rd.last.flags & HP_ROUND_FINAL);
	assert_int_equal(rd.rounds, rd.last.seq);
	assert_true(rd.order_ok);

	const uint64_t allocs = NTHREADS * (NALLOC + NCALLOC + 3);
	const uint64_t bytes = NTHREADS * (NALLOC * ASIZE + NCALLOC * 64 + 10 + 20 + 128);
	const uint64_t frees = NTHREADS * (NALLOC / 2 + 2);
	const uint64_t fbytes = NTHREADS * (NALLOC / 2 * ASIZE + 10 + 128);
	assert_int_equal(rd.last.allocs, allocs);
	assert_int_equal(rd.last.alloc_bytes, bytes);
	assert_int_equal(rd.last.frees, frees);
	assert_int_equal(rd.last.freed_bytes, fbytes);
	assert_int_equal(rd.last.untracked_frees, 1);
	assert_int_equal(rd.last.live_blocks, allocs - frees);
	assert_int_equal(rd.last.live_bytes, bytes - fbytes);
	assert_int_equal(rd.last.lost, 0);
	assert_true(rd.last.payload_bytes > 0);

	struct hp_site_delta m = {0}, c = {0};
	int mstacks = 0;
	for (int id = 1; id < MAX_STACKS; id++) {
		if (!rd.have[id])
			continue;
		struct hp_site_delta *d = NULL;
		if (in_function(rd.frame0[id], (void *)site_malloc)) {
			d = &m;
			mstacks++;
		} else if (in_function(rd.frame0[id], (void *)site_calloc)) {
			d = &c;
		}
		if (!d)
			continue;
		d->allocs += rd.sum[id].allocs;
		d->alloc_bytes += rd.sum[id].alloc_bytes;
		d->frees += rd.sum[id].frees;
		d->freed_bytes += rd.sum[id].freed_bytes;
	}
	assert_true(mstacks >= 1);
	assert_int_equal(m.allocs, NTHREADS * NALLOC);
	assert_int_equal(m.alloc_bytes, NTHREADS * NALLOC * ASIZE);
	assert_int_equal(m.frees, NTHREADS * NALLOC / 2);
	assert_int_equal(m.freed_bytes, NTHREADS * NALLOC / 2 * ASIZE);
	assert_int_equal(c.allocs, NTHREADS * NCALLOC);
	assert_int_equal(c.alloc_bytes, NTHREADS * NCALLOC * 64);
	assert_int_equal(c.frees, 0);

	char exe[256] = "";
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	assert_true(n > 0);
	exe[n] = 0;
	int seen = 0;
	for (int i = 0; i < rd.nmods; i++)
		seen |= strcmp(rd.mods[i], exe) == 0;
	assert_true(seen);

	assert_int_equal(stop_fn(), 0);
	assert_int_equal(start_fn(&args), -EBUSY);
	free_as_detach_does();
	assert_int_equal(dlclose(handle), 0);
	assert_int_equal(payload_mapped(), 0);
	assert_int_equal(count_fds(), fds0);
}

/* The test binary's own GOT slot for malloc, whatever relocation it uses. */
static void *const *exe_malloc_slot;

static void find_slot(const struct got_slot *s, void *arg)
{
	(void)arg;
	if (strcmp(s->name, "malloc") == 0)
		exe_malloc_slot = (void *const *)s->slot;
}

static int exe_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	(void)arg;
	got_walk(info, find_slot, NULL);
	return 1; /* the first module is the program */
}

static volatile sig_atomic_t sigpipes;

static void on_sigpipe(int sig)
{
	(void)sig;
	sigpipes++;
}

static void test_reader_gone(void **state)
{
	(void)state;
	signal(SIGPIPE, on_sigpipe);
	dl_iterate_phdr(exe_cb, NULL);
	assert_non_null(exe_malloc_slot);
	void *real = dlsym(RTLD_DEFAULT, "malloc");
	load();
	int fd = start_fn(&args);
	assert_true(fd >= 0);
	assert_ptr_not_equal(*exe_malloc_slot, real);
	free(site_malloc(16));
	close(fd);
	int quiet = 0;
	for (int i = 0; i < 200 && !quiet; i++) {
		usleep(10000);
		quiet = *exe_malloc_slot == real;
	}
	assert_true(quiet);
	assert_int_equal(sigpipes, 0);
	assert_int_equal(stop_fn(), 0);
	assert_int_equal(dlclose(handle), 0);
	assert_int_equal(payload_mapped(), 0);
	signal(SIGPIPE, SIG_DFL);
}

static void test_bad_args(void **state)
{
	(void)state;
	load();
	struct hp_start_args a = args;
	a.mode = 0;
	assert_int_equal(start_fn(&a), -EINVAL);
	a.mode = HP_MODE_FULL + 1;
	assert_int_equal(start_fn(&a), -EINVAL);
	a = args;
	a.max_depth = HP_MAX_DEPTH + 1;
	assert_int_equal(start_fn(&a), -EINVAL);
	a = args;
	a.interval_ms = 5;
	assert_int_equal(start_fn(&a), -EINVAL);
	a = args;
	a.abi_version = 99;
	assert_int_equal(start_fn(&a), -EINVAL);
	a = args;
	a.max_memory = HP_MIN_MAX_MEMORY - 1;
	assert_int_equal(start_fn(&a), -EINVAL);
	assert_int_equal(stop_fn(), 0);
	assert_int_equal(dlclose(handle), 0);
}

/* Sessions of the tests below: NW workers, made before the start, each run work(k) while
 * the payload records; a reader thread takes the stream into rd. */
#define NW 2
static pthread_barrier_t s_ready, s_go, s_done;
static void (*s_work)(int k);
/* What each worker does before the payload starts (session_before), or nothing. */
static void (*s_before)(int k);

static void *s_worker(void *arg)
{
	if (s_before)
		s_before((int)(intptr_t)arg);
	pthread_barrier_wait(&s_ready);
	pthread_barrier_wait(&s_go);
	s_work((int)(intptr_t)arg);
	pthread_barrier_wait(&s_done);
	return NULL;
}

static void *s_reader(void *arg)
{
	pthread_barrier_wait(&s_go);
	if (hp_reader_open(&rd.r, rd.fd) < 0) {
		rd.err = 1;
		return NULL;
	}
	rd.r.buf = arg;
	rd.r.cap = 1u << 20;
	uint32_t type, len;
	const uint8_t *body;
	int rc;
	while ((rc = hp_read_record(&rd.r, &type, &body, &len)) == 1)
		on_record(type, body, len);
	if (rc < 0)
		rd.err = 1;
	return NULL;
}

/* A session of the payload started with a, in which each of NW threads runs work(k), each
 * having run before(k) (if not NULL) before the payload starts. */
static void session_before(const struct hp_start_args *a, void (*before)(int k),
			   void (*work)(int k))
{
	load();
	uint8_t *rbuf = malloc(1u << 20);
	assert_non_null(rbuf);
	memset(&rd, 0, sizeof rd);
	rd.order_ok = 1;
	s_work = work;
	s_before = before;
	pthread_barrier_init(&s_ready, NULL, NW + 1);
	pthread_barrier_init(&s_go, NULL, NW + 2);
	pthread_barrier_init(&s_done, NULL, NW + 1);
	pthread_t th[NW], rt;
	for (int i = 0; i < NW; i++)
		assert_int_equal(pthread_create(&th[i], NULL, s_worker, (void *)(intptr_t)i), 0);
	assert_int_equal(pthread_create(&rt, NULL, s_reader, rbuf), 0);
	pthread_barrier_wait(&s_ready);
	rd.fd = start_fn(a);
	assert_true(rd.fd >= 0);
	pthread_barrier_wait(&s_go);
	pthread_barrier_wait(&s_done);
	assert_int_equal(stop_fn(), 0);
	for (int i = 0; i < NW; i++)
		pthread_join(th[i], NULL);
	pthread_join(rt, NULL);
	hp_reader_close(&rd.r);
	close(rd.fd);
	pthread_barrier_destroy(&s_ready);
	pthread_barrier_destroy(&s_go);
	pthread_barrier_destroy(&s_done);
	assert_int_equal(dlclose(handle), 0);
	assert_int_equal(rd.err, 0);
	assert_int_equal(rd.ends, 1);
	assert_true(rd.last.flags & HP_ROUND_FINAL);
	assert_true(rd.order_ok);
	assert_false(rd.keyed_overflow);
}

static void session(const struct hp_start_args *a, void (*work)(int k))
{
	session_before(a, NULL, work);
}

/* The sum of the entries with this size key whose stack is in fn (any stack if NULL). */
static struct hp_site_delta keyed_sum(void *fn, uint32_t kind, uint64_t size)
{
	struct hp_site_delta r = {0};
	for (int i = 0; i < rd.nkeyed; i++) {
		const struct hp_site_delta *k = &rd.keyed[i];
		if (k->size_kind != kind || k->size != size)
			continue;
		if (fn && (!k->stack_id || !in_function(rd.frame0[k->stack_id], fn)))
			continue;
		r.allocs += k->allocs;
		r.alloc_bytes += k->alloc_bytes;
		r.frees += k->frees;
		r.freed_bytes += k->freed_bytes;
		r.temp_frees += k->temp_frees;
	}
	return r;
}

#define NTEMP 300
#define NKEEP 100
#define NLIVE 50
#define BIG 5000
static void *held[NW][NKEEP + NLIVE];

static void work_sizes(int k)
{
	for (int i = 0; i < NTEMP; i++)
		free(site_malloc(100));
	/* The largest size a block's word of the direct map holds, and the smallest it keeps
	 * in the word after (directmap.h). */
	free(site_malloc(1022));
	free(site_malloc(1023));
	for (int i = 0; i < NKEEP; i++)
		held[k][i] = site_malloc(BIG);
	for (int i = 0; i < NLIVE; i++)
		held[k][NKEEP + i] = site_malloc(200);
	usleep(80 * 1000);
	for (int i = 0; i < NKEEP; i++)
		free(held[k][i]);
}

/* What test_sizes_and_live and test_address_limit check of a work_sizes session. */
static void check_sizes_and_live(void)
{
	struct hp_site_delta t = keyed_sum((void *)site_malloc, HP_SIZE_EXACT, 100);
	assert_int_equal(t.allocs, NW * NTEMP);
	assert_int_equal(t.alloc_bytes, NW * NTEMP * 100);
	assert_int_equal(t.frees, NW * NTEMP);
	assert_int_equal(t.freed_bytes, NW * NTEMP * 100);
	/* Freed before the thread's next allocation: temporary. The big blocks are not, since
	 * others were allocated after each of them. */
	assert_int_equal(t.temp_frees, NW * NTEMP);
	for (uint64_t n = 1022; n <= 1023; n++) {
		struct hp_site_delta e = keyed_sum((void *)site_malloc, HP_SIZE_EXACT, n);
		assert_int_equal(e.allocs, NW);
		assert_int_equal(e.frees, NW);
		assert_int_equal(e.freed_bytes, NW * n);
	}
	struct hp_site_delta b = keyed_sum((void *)site_malloc, HP_SIZE_POW2, 4096);
	assert_int_equal(b.allocs, NW * NKEEP);
	assert_int_equal(b.alloc_bytes, NW * NKEEP * BIG);
	assert_int_equal(b.frees, NW * NKEEP);
	assert_int_equal(b.freed_bytes, NW * NKEEP * BIG);
	assert_int_equal(b.temp_frees, 0);
	struct hp_site_delta l = keyed_sum((void *)site_malloc, HP_SIZE_EXACT, 200);
	assert_int_equal(l.allocs, NW * NLIVE);
	assert_int_equal(l.frees, 0);

	assert_int_equal(rd.live_recs, 1);
	uint64_t nblocks = 0, bytes = 0, oldest = 0;
	for (int id = 1; id < MAX_STACKS; id++) {
		const struct hp_live_site *s = &rd.live[id];
		if (!s->blocks || !in_function(rd.frame0[id], (void *)site_malloc))
			continue;
		nblocks += s->blocks;
		bytes += s->bytes;
		assert_true(s->mean_age_ms <= s->oldest_age_ms);
		assert_true(s->mean_age_ms >= 50);
		if (s->oldest_age_ms > oldest)
			oldest = s->oldest_age_ms;
	}
	assert_int_equal(nblocks, NW * NLIVE);
	assert_int_equal(bytes, NW * NLIVE * 200);
	assert_true(oldest >= 70 && oldest < 10000);
	for (int k = 0; k < NW; k++)
		for (int i = NKEEP; i < NKEEP + NLIVE; i++)
			free(held[k][i]);
}

static void test_sizes_and_live(void **state)
{
	(void)state;
	session(&args, work_sizes);
	check_sizes_and_live();
}

/* VmSize of this process in KiB, read without allocating (the payload is recording). */
static long vm_size_kb(void)
{
	static char buf[4096];
	int fd = open("/proc/self/status", O_RDONLY);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof buf - 1);
	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	const char *v = strstr(buf, "VmSize:");
	return v ? strtol(v + 7, NULL, 10) : -1;
}

static long vm_during_kb;

static void work_sizes_vm(int k)
{
	work_sizes(k);
	if (k == 0)
		vm_during_kb = vm_size_kb();
}

/* Under an address-space limit the live map reserves no direct map, whose address space
 * would come out of the target's allowance, and keeps every block in its table: the counts
 * are the same, and the address space grows by far less than a direct map chunk. */
static void test_address_limit(void **state)
{
	(void)state;
	struct rlimit old, lim;
	assert_int_equal(getrlimit(RLIMIT_AS, &old), 0);
	long before = vm_size_kb();
	assert_true(before > 0);
	lim = old;
	lim.rlim_cur = ((rlim_t)before << 10) + (1ull << 30);
	assert_int_equal(setrlimit(RLIMIT_AS, &lim), 0);
	session(&args, work_sizes_vm);
	assert_int_equal(setrlimit(RLIMIT_AS, &old), 0);
	check_sizes_and_live();
	print_message("address space grew by %ld KiB under RLIMIT_AS\n", vm_during_kb - before);
	assert_true(vm_during_kb > 0 && vm_during_kb - before < (256l << 10));
}

#define NB 2000
static void *bb[NW][NB];
static uint64_t usable_freed[NW];

/* Every third block of 1048 bytes by calloc: basic and extended mode's malloc, calloc and
 * free have hooks of their own (hooks.c, HOOK_COUNTED). */
static void work_basic(int k)
{
	for (int i = 0; i < NB; i++)
		bb[k][i] = i % 3 == 1 ? calloc(8, 131) : site_malloc(48 + (size_t)(i % 3) * 1000);
	for (int i = 0; i < NB / 2; i++) {
		usable_freed[k] += malloc_usable_size(bb[k][i]);
		free(bb[k][i]);
	}
}

static void check_basic_totals(void)
{
	uint64_t bytes = 0;
	for (int i = 0; i < NB; i++)
		bytes += 48 + (uint64_t)(i % 3) * 1000;
	assert_int_equal(rd.last.allocs, NW * NB);
	assert_int_equal(rd.last.alloc_bytes, NW * bytes);
	assert_int_equal(rd.last.frees, NW * NB / 2);
	assert_int_equal(rd.last.freed_bytes, usable_freed[0] + usable_freed[1]);
	assert_int_equal(rd.last.live_blocks, NW * NB / 2);
	assert_int_equal(rd.last.lost, 0);
	assert_int_equal(rd.stacks, 0);
	assert_int_equal(rd.live_recs, 0);
	for (int k = 0; k < NW; k++)
		for (int i = NB / 2; i < NB; i++)
			free(bb[k][i]);
}

/* Call paths that share their outer frames and differ below them (path_a, the deeper
 * path_b, path_c), the same inner frames under two outer functions, taken in turn, so that
 * each stack is captured right after another it shares frames with: the thread's stack
 * cache (stacks.h) is used for nearly every one. The paths are called from one call site,
 * every other time round in the reverse order, so that which stack follows path_b's
 * changes, as the stack table's guess of the next stack must notice. Each (outer, path)
 * allocates a size of its own, so a stack id given to the wrong frames shows as a size
 * under a stack that lacks its functions. */
#define NPATHS 3
#define NPATHREP 300
__attribute__((noinline)) void *path_leaf(size_t n);
__attribute__((noinline)) void *path_a(size_t n);
__attribute__((noinline)) void *path_b(size_t n);
__attribute__((noinline)) void *path_c(size_t n);
__attribute__((noinline)) void paths_round(int outer, int reverse, void **out);
__attribute__((noinline)) void paths_outer_one(int reverse, void **out);
__attribute__((noinline)) void paths_outer_two(int reverse, void **out);

static size_t path_size(int outer, int path)
{
	return 16 + 8 * (size_t)(outer * NPATHS + path);
}

__attribute__((noinline)) void *path_leaf(size_t n)
{
	void *p = malloc(n);
	__asm__ volatile("" ::"r"(p) : "memory");
	return p;
}

__attribute__((noinline)) void *path_a(size_t n)
{
	void *p = path_leaf(n);
	__asm__ volatile("" ::"r"(p) : "memory");
	return p;
}

__attribute__((noinline)) void *path_b(size_t n)
{
	void *p = path_a(n);
	__asm__ volatile("" ::"r"(p) : "memory");
	return p;
}

__attribute__((noinline)) void *path_c(size_t n)
{
	void *p = path_leaf(n);
	__asm__ volatile("" ::"r"(p) : "memory");
	return p;
}

__attribute__((noinline)) void paths_round(int outer, int reverse, void **out)
{
	void *(*const path[NPATHS])(size_t) = {path_a, path_b, path_c};
#pragma GCC unroll 1
	for (int i = 0; i < NPATHS; i++) {
		int p = reverse ? NPATHS - 1 - i : i;
		out[p] = path[p](path_size(outer, p));
	}
	__asm__ volatile("" ::"r"(out) : "memory");
}

__attribute__((noinline)) void paths_outer_one(int reverse, void **out)
{
	paths_round(0, reverse, out);
	__asm__ volatile("" ::"r"(out) : "memory");
}

__attribute__((noinline)) void paths_outer_two(int reverse, void **out)
{
	paths_round(1, reverse, out);
	__asm__ volatile("" ::"r"(out) : "memory");
}

static void work_paths(int k)
{
	(void)k;
	void *v[NPATHS];
	for (int i = 0; i < NPATHREP; i++) {
		paths_outer_one(i & 1, v);
		for (int j = 0; j < NPATHS; j++)
			free(v[j]);
		paths_outer_two(i & 1, v);
		for (int j = 0; j < NPATHS; j++)
			free(v[j]);
	}
}

static int stack_has(uint32_t id, void *fn)
{
	for (uint64_t i = 0; i < rd.depth[id] && i < STACK_KEEP; i++)
		if (in_function(rd.frames[id][i], fn))
			return 1;
	return 0;
}

static void test_paths(void **state)
{
	(void)state;
	void *const outers[] = {(void *)paths_outer_one, (void *)paths_outer_two};
	void *const paths[] = {(void *)path_a, (void *)path_b, (void *)path_c};
	session(&args, work_paths);
	assert_int_equal(rd.last.lost, 0);
	uint64_t found[2][NPATHS] = {{0}};
	for (int i = 0; i < rd.nkeyed; i++) {
		const struct hp_site_delta *d = &rd.keyed[i];
		if (d->size_kind != HP_SIZE_EXACT || !d->stack_id ||
		    !stack_has(d->stack_id, path_leaf))
			continue;
		int o = (int)((d->size - 16) / 8) / NPATHS, p = (int)((d->size - 16) / 8) % NPATHS;
		assert_true(d->size >= 16 && o < 2);
		assert_true(stack_has(d->stack_id, outers[o]));
		assert_false(stack_has(d->stack_id, outers[!o]));
		assert_true(stack_has(d->stack_id, paths[p]));
		assert_int_equal(stack_has(d->stack_id, path_b), p == 1);
		assert_int_equal(stack_has(d->stack_id, path_c), p == 2);
		found[o][p] += d->allocs;
	}
	for (int o = 0; o < 2; o++)
		for (int p = 0; p < NPATHS; p++)
			assert_int_equal(found[o][p], (uint64_t)NW * NPATHREP);
}

static void test_basic(void **state)
{
	(void)state;
	struct hp_start_args a = args;
	a.mode = HP_MODE_BASIC;
	memset(usable_freed, 0, sizeof usable_freed);
	session(&a, work_basic);
	/* One (0, NONE) entry, whose sums are the totals. */
	assert_int_equal(rd.nkeyed, 1);
	struct hp_site_delta n = keyed_sum(NULL, HP_SIZE_NONE, 0);
	assert_int_equal(rd.keyed[0].stack_id, 0);
	assert_int_equal(n.allocs, rd.last.allocs);
	assert_int_equal(n.alloc_bytes, rd.last.alloc_bytes);
	assert_int_equal(n.frees, rd.last.frees);
	assert_int_equal(n.freed_bytes, rd.last.freed_bytes);
	check_basic_totals();
}

static void test_extended(void **state)
{
	(void)state;
	struct hp_start_args a = args;
	a.mode = HP_MODE_EXTENDED;
	memset(usable_freed, 0, sizeof usable_freed);
	session(&a, work_basic);
	const uint64_t per = NW * (NB / 3 + 1);
	for (int i = 0; i < rd.nkeyed; i++)
		assert_int_equal(rd.keyed[i].stack_id, 0);
	struct hp_site_delta s48 = keyed_sum(NULL, HP_SIZE_EXACT, 48);
	struct hp_site_delta s1048 = keyed_sum(NULL, HP_SIZE_EXACT, 1048);
	struct hp_site_delta s2048 = keyed_sum(NULL, HP_SIZE_POW2, 2048);
	struct hp_site_delta none = keyed_sum(NULL, HP_SIZE_NONE, 0);
	assert_int_equal(s48.allocs, per);
	assert_int_equal(s48.alloc_bytes, per * 48);
	assert_int_equal(s1048.allocs, per);
	assert_int_equal(s2048.allocs, 0);
	assert_int_equal(keyed_sum(NULL, HP_SIZE_EXACT, 2048).allocs, NW * (NB / 3));
	assert_int_equal(none.allocs, 0);
	assert_int_equal(none.frees, NW * NB / 2);
	check_basic_totals();
}

static double dist(double a, double b)
{
	return a > b ? a - b : b - a;
}

#define NS 100000
#define RATE 4096

/* The requests refused here take the hooks' general path (the passed-over one counts
 * before the call), which counts nothing: calloc's product wraps to 0. */
static void work_sampled(int k)
{
	(void)k;
	for (int i = 0; i < NS; i++)
		free(site_malloc(64));
	volatile size_t huge = SIZE_MAX / 2, a = (size_t)1 << 33, b = (size_t)1 << 31;
	assert_null(malloc(huge));
	assert_null(calloc(a, b));
}

static void test_sampling(void **state)
{
	(void)state;
	struct hp_start_args a = args;
	a.sample_rate = RATE;
	session(&a, work_sampled);
	assert_int_equal(rd.last.allocs, NW * NS);
	assert_int_equal(rd.last.alloc_bytes, NW * NS * 64);
	assert_int_equal(rd.last.lost, 0);
	assert_false(rd.last.flags & HP_ROUND_SAMPLED);
	struct hp_site_delta s = keyed_sum((void *)site_malloc, HP_SIZE_EXACT, 64);
	double truth = NW * NS;
	print_message("sampled estimate: %" PRIu64 " allocations, %" PRIu64
		      " frees, of %.0f; frees in all %" PRIu64 ", live %" PRIu64 "\n",
		      s.allocs, s.frees, truth, rd.last.frees, rd.last.live_blocks);
	assert_true(dist((double)s.allocs, truth) < truth * 0.1);
	assert_true(dist((double)s.frees, truth) < truth * 0.1);
	assert_true(dist((double)s.alloc_bytes, truth * 64) < truth * 64 * 0.1);
	/* Unsampled frees are not counted: the round's frees are what the allocations,
	 * counted exactly, leave of the live blocks' estimate from the sites (here none: every
	 * sampled block was freed with its allocation's weight), and no free is taken for one
	 * of a block from before attach. Bytes the same way. */
	assert_int_equal(rd.last.live_blocks, 0);
	assert_int_equal(rd.last.live_bytes, 0);
	assert_int_equal(rd.last.frees, NW * NS);
	assert_int_equal(rd.last.freed_bytes, NW * NS * 64);
	assert_int_equal(rd.last.untracked_frees, 0);
}

/* Pairs whose first block is freed after the second is allocated: sampled or not, the
 * first is never temporary, the second always is. A passed-over allocation is not
 * recorded, yet must still end its thread's "last allocation". */
static void work_sampled_pairs(int k)
{
	(void)k;
	for (int i = 0; i < NS; i++) {
		void *p = site_malloc(96), *q = site_malloc(112);
		free(p);
		free(q);
	}
}

static void test_sampling_temporary(void **state)
{
	(void)state;
	struct hp_start_args a = args;
	a.sample_rate = RATE;
	session(&a, work_sampled_pairs);
	assert_int_equal(rd.last.allocs, 2 * NW * NS);
	struct hp_site_delta p = keyed_sum((void *)site_malloc, HP_SIZE_EXACT, 96);
	struct hp_site_delta q = keyed_sum((void *)site_malloc, HP_SIZE_EXACT, 112);
	print_message("sampled pairs: first %" PRIu64 " frees, %" PRIu64
		      " temporary; second %" PRIu64 " frees, %" PRIu64 " temporary\n",
		      p.frees, p.temp_frees, q.frees, q.temp_frees);
	assert_true(p.frees > 0 && q.frees > 0);
	assert_int_equal(p.temp_frees, 0);
	assert_int_equal(q.temp_frees, q.frees);
}

#define NM 100000
static void *mm[NW][NM];

static void work_max_memory(int k)
{
	for (int i = 0; i < NM; i++)
		mm[k][i] = site_malloc(32);
}

static void test_max_memory(void **state)
{
	(void)state;
	struct hp_start_args a = args;
	a.max_memory = HP_MIN_MAX_MEMORY;
	session(&a, work_max_memory);
	assert_true(rd.last.flags & HP_ROUND_SAMPLED);
	assert_int_equal(rd.last.allocs, NW * NM);
	assert_int_equal(rd.last.alloc_bytes, NW * NM * 32);
	print_message("payload_bytes %" PRIu64 " with max_memory %llu MiB\n", rd.last.payload_bytes,
		      (unsigned long long)(HP_MIN_MAX_MEMORY >> 20));
	/* The fixed structures take about 4 MiB; a full live map of these blocks would add
	 * about 10 MiB. */
	assert_true(rd.last.payload_bytes <= HP_MIN_MAX_MEMORY);
	for (int k = 0; k < NW; k++)
		for (int i = 0; i < NM; i++)
			free(mm[k][i]);
}

/* Under the least max_memory, the same blocks kept, then pairs of an allocation and its
 * free, then the kept blocks freed: after the switch to sampling most frees are of blocks
 * the live map never held (not sampled), which the free hooks count without the general
 * path once the table's filter says they are not there either. Every free is still
 * counted once, every allocation too (the passed-over ones included), and the sampled
 * blocks that went to the table leave it. */
#define NP 200000
static void work_max_memory_frees(int k)
{
	work_max_memory(k);
	for (int i = 0; i < NP; i++) {
		void *p = site_malloc(48);
		__asm__ volatile("" ::"r"(p) : "memory");
		free(p);
	}
	for (int i = 0; i < NM; i++)
		free(mm[k][i]);
}

static void test_max_memory_frees(void **state)
{
	(void)state;
	struct hp_start_args a = args;
	a.max_memory = HP_MIN_MAX_MEMORY;
	session(&a, work_max_memory_frees);
	print_message("frees %" PRIu64 ", untracked %" PRIu64 ", lost %" PRIu64 "\n", rd.last.frees,
		      rd.last.untracked_frees, rd.last.lost);
	assert_true(rd.last.flags & HP_ROUND_SAMPLED);
	assert_int_equal(rd.last.lost, 0);
	assert_int_equal(rd.last.allocs, NW * (NM + NP));
	assert_int_equal(rd.last.alloc_bytes, NW * (NM * 32 + NP * 48));
	assert_int_equal(rd.last.frees, NW * (NM + NP));
	/* Every block was freed, the sampled ones in the live map's table too. */
	uint64_t live = 0;
	for (int id = 0; id < MAX_STACKS; id++)
		live += rd.live[id].blocks;
	assert_int_equal(live, 0);
}

/* Blocks allocated by each thread before the payload starts, freed in the session after a
 * block of the session's own (which makes the direct map's chunk of their addresses): each
 * such free finds no block in the map, is counted once as untracked and in no site, and
 * the free hooks count it without the general path. */
#define NU 50000
static void *pre[NW][NU];

static void before_untracked(int k)
{
	for (int i = 0; i < NU; i++)
		pre[k][i] = malloc(32);
}

static void work_untracked(int k)
{
	void *own = site_malloc(32);
	for (int i = 0; i < NU; i++)
		free(pre[k][i]);
	free(own);
}

static void test_untracked(void **state)
{
	(void)state;
	session_before(&args, before_untracked, work_untracked);
	assert_false(rd.last.flags & HP_ROUND_SAMPLED);
	assert_int_equal(rd.last.allocs, NW);
	assert_int_equal(rd.last.frees, NW);
	assert_int_equal(rd.last.untracked_frees, NW * NU);
	assert_int_equal(rd.last.lost, 0);
}

/* The totals of a session switched to sampling: blocks kept from before the switch (each
 * thread's first, made before any thread can reach the cap), then blocks enough to reach
 * it, pairs and blocks from before attach, all freed. Every free after the switch is
 * counted, those of the blocks from before attach too, which allocs - frees would take
 * from the live blocks (0 left of NW * NK); the sites count only what they were given,
 * each sampled block with the weight of its allocation at its free, so the round says
 * exactly what lives, bytes too, and which frees were of blocks from before attach. */
#define NK 1000
static void *kept[NW][NK];
static pthread_barrier_t kept_made;

static void work_max_memory_live(int k)
{
	for (int i = 0; i < NK; i++)
		kept[k][i] = site_malloc(200);
	pthread_barrier_wait(&kept_made);
	work_max_memory_frees(k);
	for (int i = 0; i < NU; i++)
		free(pre[k][i]);
}

static void test_max_memory_live(void **state)
{
	(void)state;
	struct hp_start_args a = args;
	a.max_memory = HP_MIN_MAX_MEMORY;
	pthread_barrier_init(&kept_made, NULL, NW);
	session_before(&a, before_untracked, work_max_memory_live);
	pthread_barrier_destroy(&kept_made);
	print_message("live %" PRIu64 " blocks, %" PRIu64 " bytes; frees %" PRIu64
		      ", untracked %" PRIu64 "\n",
		      rd.last.live_blocks, rd.last.live_bytes, rd.last.frees,
		      rd.last.untracked_frees);
	assert_true(rd.last.flags & HP_ROUND_SAMPLED);
	assert_int_equal(rd.last.lost, 0);
	assert_int_equal(rd.last.allocs, NW * (NK + NM + NP));
	assert_int_equal(rd.last.live_blocks, NW * NK);
	assert_int_equal(rd.last.live_bytes, NW * NK * 200);
	/* What the allocations account for are the session's frees; the rest of those
	 * counted were of blocks from before attach. */
	assert_int_equal(rd.last.frees, NW * (NM + NP));
	assert_int_equal(rd.last.freed_bytes, NW * (NM * 32 + NP * 48));
	assert_int_equal(rd.last.untracked_frees, NW * NU);
	uint64_t live = 0;
	for (int id = 0; id < MAX_STACKS; id++)
		live += rd.live[id].blocks;
	assert_int_equal(live, NW * NK);
	for (int k = 0; k < NW; k++)
		for (int i = 0; i < NK; i++)
			free(kept[k][i]);
}

/* Under the least max_memory, a recursion of DEEP_NODES call paths, each allocating one
 * block kept to the end: the round that sends the stacks holds more than a buffer's first
 * 64 KiB, which go out as they fill (collector.c, sb_take), each stack still before the
 * SITES and LIVE entries that name it (order_ok). The payload stays within the cap and
 * the allocations are counted exactly. The session runs close to the cap: when the
 * collector is slow to drain the threads' tables (a loaded machine) it reaches it and
 * switches to sampling, and then only the sampled paths have stacks; otherwise every path
 * has its stack, with one allocation from each thread. */
#define DEEP_DEPTH 12
#define DEEP_NODES ((1 << (DEEP_DEPTH + 1)) - 1)
static void *deep_blocks[NW][DEEP_NODES];

__attribute__((noinline)) void deep_build(int d, void **out, int *n);
__attribute__((noinline)) void deep_build(int d, void **out, int *n)
{
	out[(*n)++] = malloc(40);
	if (d > 0) {
		deep_build(d - 1, out, n);
		deep_build(d - 1, out, n);
	}
	__asm__ volatile("" ::"r"(out) : "memory");
}

static void work_deep(int k)
{
	int n = 0;
	deep_build(DEEP_DEPTH, deep_blocks[k], &n);
}

static void test_max_memory_stacks(void **state)
{
	(void)state;
	struct hp_start_args a = args;
	a.max_memory = HP_MIN_MAX_MEMORY;
	session(&a, work_deep);
	int sampled = (rd.round_flags & HP_ROUND_SAMPLED) != 0;
	print_message("%" PRIu64 " stacks sent (%" PRIu64 " bytes), %" PRIu64
		      " lost, payload_bytes %" PRIu64 "%s\n",
		      rd.all_stacks, rd.stack_bytes, rd.last.lost, rd.last.payload_bytes,
		      sampled ? ", switched to sampling" : "");
	assert_int_equal(rd.last.allocs, NW * DEEP_NODES);
	assert_int_equal(rd.last.alloc_bytes, NW * DEEP_NODES * 40);
	assert_true(rd.stack_bytes > 65536);
	assert_true(rd.live_recs > 0);
	assert_true(rd.last.payload_bytes <= HP_MIN_MAX_MEMORY);
	if (!sampled) {
		int paths = 0;
		for (int id = 1; id < MAX_STACKS; id++) {
			if (!rd.have[id] || !in_function(rd.frame0[id], (void *)deep_build))
				continue;
			assert_int_equal(rd.sum[id].allocs, NW);
			paths++;
		}
		assert_int_equal(paths, DEEP_NODES);
	}
	for (int k = 0; k < NW; k++)
		for (int i = 0; i < DEEP_NODES; i++)
			free(deep_blocks[k][i]);
}

/* Under twice the least max_memory (at the least, the threads' site tables switch it to
 * sampling), a recursion of more call paths than the stack table holds, each allocation
 * freed before the next: the paths past the table's end are cut to their innermost frames
 * (stacks.h), so no allocation is lost and every one is counted at a stack. Before cut
 * stacks, 72812 of its 131068 allocations were lost. */
#define CUT_DEPTH 15
#define CUT_NODES ((1 << (CUT_DEPTH + 1)) - 1)

__attribute__((noinline)) void cut_build(int d);
__attribute__((noinline)) void cut_build(int d)
{
	void *p = malloc(24);
	__asm__ volatile("" ::"r"(p) : "memory");
	free(p);
	if (d > 0) {
		cut_build(d - 1);
		cut_build(d - 1);
	}
	__asm__ volatile("" ::: "memory");
}

static void work_cut(int k)
{
	(void)k;
	cut_build(CUT_DEPTH);
}

static void test_max_memory_cut(void **state)
{
	(void)state;
	struct hp_start_args a = args;
	a.max_memory = 2 * HP_MIN_MAX_MEMORY;
	session(&a, work_cut);
	print_message("%" PRIu64 " stacks sent, %" PRIu64 " cut, %" PRIu64
		      " lost, payload_bytes %" PRIu64 "\n",
		      rd.all_stacks, rd.cut_stacks, rd.last.lost, rd.last.payload_bytes);
	assert_false(rd.round_flags & HP_ROUND_SAMPLED);
	assert_int_equal(rd.last.allocs, NW * CUT_NODES);
	assert_int_equal(rd.last.lost, 0);
	assert_int_equal(rd.stacked_allocs, NW * CUT_NODES);
	assert_true(rd.cut_stacks > 0);
	assert_true(rd.all_stacks < CUT_NODES);
}

/* A recursion whose every node is a call path of its own (a left and a right call site),
 * as in binary-trees: TREE_NODES stacks, each allocating two sizes from one call site, so
 * a thread has more sites than it keeps in its hash table alone (HP_DENSE_AFTER): the
 * first size of a stack is counted by stack id, the second in the hash table. Every
 * TREE_REPS_A_ROUND trees a worker waits for the next round, so counters are drained and
 * met again however busy the machine (a fixed sleep saw two rounds in all under make -j2
 * check of the sanitizer build). */
#define TREE_DEPTH 9
#define TREE_NODES ((1 << (TREE_DEPTH + 1)) - 1)
#define TREE_REPS 40
#define TREE_REPS_A_ROUND 10
static void *tree_blocks[NW][2 * TREE_NODES];

__attribute__((noinline)) void tree_build(int d, void **out, int *n);
__attribute__((noinline)) void tree_build(int d, void **out, int *n)
{
#pragma GCC unroll 1
	for (size_t i = 0; i < 2; i++)
		out[(*n)++] = malloc(16 + 8 * i);
	if (d > 0) {
		tree_build(d - 1, out, n);
		tree_build(d - 1, out, n);
	}
	__asm__ volatile("" ::"r"(out) : "memory");
}

static void wait_next_round(void)
{
	int seen = atomic_load(&rd.rounds);
	for (int i = 0; i < 1000 && atomic_load(&rd.rounds) == seen; i++)
		usleep(10 * 1000);
}

static void work_tree(int k)
{
	for (int r = 0; r < TREE_REPS; r++) {
		int n = 0;
		tree_build(TREE_DEPTH, tree_blocks[k], &n);
		for (int i = 0; i < n; i++)
			free(tree_blocks[k][i]);
		if (r % TREE_REPS_A_ROUND == TREE_REPS_A_ROUND - 1)
			wait_next_round();
	}
}

static void test_many_sites(void **state)
{
	(void)state;
	session(&args, work_tree);
	assert_int_equal(rd.last.lost, 0);
	assert_false(rd.last.flags & HP_ROUND_SAMPLED);
	assert_true(rd.rounds > 2);
	int stacks[2] = {0};
	uint64_t temp = 0;
	for (int i = 0; i < rd.nkeyed; i++) {
		const struct hp_site_delta *d = &rd.keyed[i];
		if (!d->stack_id || !in_function(rd.frame0[d->stack_id], (void *)tree_build))
			continue;
		assert_int_equal(d->size_kind, HP_SIZE_EXACT);
		assert_true(d->size == 16 || d->size == 24);
		assert_int_equal(d->allocs, NW * TREE_REPS);
		assert_int_equal(d->alloc_bytes, NW * TREE_REPS * d->size);
		assert_int_equal(d->frees, NW * TREE_REPS);
		assert_int_equal(d->freed_bytes, NW * TREE_REPS * d->size);
		temp += d->temp_frees;
		stacks[d->size == 24]++;
	}
	/* Each tree's last block is freed before the thread allocates again, and only it. */
	assert_int_equal(temp, NW * TREE_REPS);
	assert_int_equal(stacks[0], TREE_NODES);
	assert_int_equal(stacks[1], TREE_NODES);
}

/* A recursion of a call path a node (a left and a right call site) under one of two outer
 * functions in turn: a node's stack is mostly checked as the words it adds to the last
 * node's (stacks.c, the guess's deltas), and the first node of a tree right after the last
 * node of the other's, whose outer words differ. The size says which outer function
 * allocated, so a stack given to the wrong tree shows as a size under the other one's
 * frames. OUTER_DEPTH keeps every stack within the frames the reader keeps. */
#define OUTER_DEPTH 5
#define OUTER_NODES ((1 << (OUTER_DEPTH + 1)) - 1)
#define OUTER_REPS 50
static void *outer_blocks[NW][OUTER_NODES];

__attribute__((noinline)) void outer_build(int d, size_t size, void **out, int *n);
__attribute__((noinline)) void outer_build(int d, size_t size, void **out, int *n)
{
	out[(*n)++] = malloc(size);
	if (d > 0) {
		outer_build(d - 1, size, out, n);
		outer_build(d - 1, size, out, n);
	}
	__asm__ volatile("" ::"r"(out) : "memory");
}

__attribute__((noinline)) void outer_tree_one(void **out, int *n);
__attribute__((noinline)) void outer_tree_one(void **out, int *n)
{
	outer_build(OUTER_DEPTH, 16, out, n);
	__asm__ volatile("" ::"r"(out) : "memory");
}

__attribute__((noinline)) void outer_tree_two(void **out, int *n);
__attribute__((noinline)) void outer_tree_two(void **out, int *n)
{
	outer_build(OUTER_DEPTH, 24, out, n);
	__asm__ volatile("" ::"r"(out) : "memory");
}

/* reps trees of each outer function in turn, midway (if not NULL) called halfway. */
static void outer_trees(int k, int reps, void (*midway)(int k))
{
	for (int r = 0; r < 2 * reps; r++) {
		if (r == reps && midway)
			midway(k);
		int n = 0;
		(r & 1 ? outer_tree_two : outer_tree_one)(outer_blocks[k], &n);
		for (int i = 0; i < n; i++)
			free(outer_blocks[k][i]);
	}
}

static void work_outer_trees(int k)
{
	outer_trees(k, OUTER_REPS, NULL);
}

/* After a session of work: every node's stack counted reps times a thread, once for each
 * node of each outer function, and under that function only. */
static void check_outer_trees(void (*work)(int k), uint64_t reps)
{
	void *const outers[] = {(void *)outer_tree_one, (void *)outer_tree_two};
	session(&args, work);
	assert_int_equal(rd.last.lost, 0);
	uint64_t found[2] = {0};
	int stacks[2] = {0};
	for (int i = 0; i < rd.nkeyed; i++) {
		const struct hp_site_delta *d = &rd.keyed[i];
		if (!d->stack_id || !in_function(rd.frame0[d->stack_id], (void *)outer_build))
			continue;
		assert_int_equal(d->size_kind, HP_SIZE_EXACT);
		assert_true(d->size == 16 || d->size == 24);
		int o = d->size == 24;
		assert_true(stack_has(d->stack_id, outers[o]));
		assert_false(stack_has(d->stack_id, outers[!o]));
		assert_int_equal(d->allocs, NW * reps);
		found[o] += d->allocs;
		stacks[o]++;
	}
	for (int o = 0; o < 2; o++) {
		assert_int_equal(found[o], NW * reps * OUTER_NODES);
		assert_int_equal(stacks[o], OUTER_NODES);
	}
}

static void test_outer_trees(void **state)
{
	(void)state;
	check_outer_trees(work_outer_trees, OUTER_REPS);
}

/* A library loaded and unloaded while a round passes: the collector then has the unwinder
 * forget its rules, and every check and delta made so far is stale. */
static void unload_one(int k)
{
	if (k == 0) {
		void *h = dlopen(UNLOADED_PATH, RTLD_NOW | RTLD_LOCAL);
		assert_non_null(h);
		assert_int_equal(dlclose(h), 0);
		assert_null(dlopen(UNLOADED_PATH, RTLD_NOW | RTLD_NOLOAD));
	}
	wait_next_round();
	wait_next_round();
}

/* The trees with a dlclose halfway, from the same call site before and after it: the
 * recursion's deltas are made anew (stacks.c), and each node still gets its own stack,
 * every allocation counted at it. */
static void work_outer_dlclose(int k)
{
	outer_trees(k, 2 * OUTER_REPS, unload_one);
}

static void test_outer_trees_dlclose(void **state)
{
	(void)state;
	check_outer_trees(work_outer_dlclose, 2 * OUTER_REPS);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_bad_args),
	    cmocka_unit_test(test_end_to_end),
	    cmocka_unit_test(test_reader_gone),
	    cmocka_unit_test(test_sizes_and_live),
	    cmocka_unit_test(test_basic),
	    cmocka_unit_test(test_extended),
	    cmocka_unit_test(test_sampling),
	    cmocka_unit_test(test_sampling_temporary),
	    cmocka_unit_test(test_max_memory),
	    cmocka_unit_test(test_max_memory_frees),
	    cmocka_unit_test(test_untracked),
	    cmocka_unit_test(test_max_memory_live),
	    cmocka_unit_test(test_max_memory_stacks),
	    cmocka_unit_test(test_max_memory_cut),
	    cmocka_unit_test(test_paths),
	    cmocka_unit_test(test_address_limit),
	    cmocka_unit_test(test_many_sites),
	    cmocka_unit_test(test_outer_trees),
	    cmocka_unit_test(test_outer_trees_dlclose),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
