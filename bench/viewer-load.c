/* viewer-load - heapprof-viewer under the load of an hour on a busy server (issue 4).
 *
 * Contract: writes a synthetic but valid stream (hpformat.h) into heapprof-viewer, started
 * as heapprof-attach starts it (--fd 3 --pid PID --output FILE --batch, DEBUGINFOD_URLS
 * unset), in the payload's order: the header and HELLO, then per round MODULE* (first round
 * only) STACK* SITES* ROUND, the final round with its LIVE records before its ROUND, then
 * END. The modules are this program's own (the executable, libc, libm, the loader) with
 * their real load addresses and build-ids, and every frame is an address in their code, so
 * the symbolizer does real work on real files. Stacks share their outer frames the way a
 * server's do (a few entry points, then more and more distinct callers towards the
 * allocation), and each round sends the new stacks' first deltas, a hot set of old stacks
 * and a sliding window over the rest.
 *
 * The viewer's per-round lines are read as they come: every --sample rounds a line gives
 * the round, the stacks sent so far, the elapsed time and the viewer's RSS. At the end it
 * prints key=value lines: rounds per second (wall and per CPU second of the viewer), the
 * viewer's peak RSS, the profile's size, then runs `heapprof-view overview` and
 * `hotspots` on the profile and gives their time and peak RSS. Exits 0 when the viewer and
 * both commands succeeded, 1 otherwise, 2 on a usage error. The profile is removed
 * unless --keep.
 */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "buildid.h"
#include "hpformat.h"

#define MAX_MODULES 16
#define HOT_STACKS 500
#define MAX_DEPTH 64

struct opts {
	long rounds, min_new, max_new, window, pool, sample;
	const char *viewer, *view, *output;
	bool keep;
};

struct code_range {
	uint64_t start, end;
};

static struct {
	struct code_range code[MAX_MODULES * 4];
	size_t ncode;
	uint8_t *modrecs; /* the MODULE records, sent with the first round */
	size_t modrecs_len;
	uint32_t nmodules;
} mods;

static uint64_t *pool; /* distinct frame addresses */
static long npool;

/* What the reader of the viewer's lines needs from the writer. */
static long *stacks_by_round; /* stacks sent up to and including round r */
static pid_t viewer_pid;
static long sample_every;
static double t_start;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return x;
}

static void die(const char *what)
{
	fprintf(stderr, "viewer-load: %s\n", what);
	exit(1);
}

static void *xrealloc(void *p, size_t n)
{
	p = realloc(p, n);
	if (!p)
		die("out of memory");
	return p;
}

/* A growable byte buffer holding one round of the stream. */
struct buf {
	uint8_t *p;
	size_t len, cap;
};

static uint8_t *take(struct buf *b, size_t n)
{
	if (b->len + n > b->cap) {
		b->cap = b->cap ? b->cap : 1 << 20;
		while (b->cap < b->len + n)
			b->cap *= 2;
		b->p = xrealloc(b->p, b->cap);
	}
	uint8_t *r = b->p + b->len;
	b->len += n;
	return r;
}

static void put_rec(struct buf *b, uint32_t type, const void *x, size_t xl, const void *y,
		    size_t yl)
{
	struct hp_rec_hdr h = {.type = type, .len = (uint32_t)(xl + yl)};
	uint8_t *d = take(b, sizeof h + xl + yl);
	memcpy(d, &h, sizeof h);
	memcpy(d + sizeof h, x, xl);
	if (yl)
		memcpy(d + sizeof h + xl, y, yl);
}

static int write_all(int fd, const void *p, size_t n)
{
	const uint8_t *c = p;
	while (n) {
		ssize_t w = write(fd, c, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -1;
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

/* One MODULE record per loaded object that is a file, as the payload's module scan
 * reports them (the executable under its real path). */
static int module_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	(void)arg;
	char exe[4096];
	const char *path = info->dlpi_name;
	if (!path || !path[0]) {
		ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
		exe[n > 0 ? n : 0] = '\0';
		path = exe;
	}
	if (path[0] != '/' || mods.nmodules == MAX_MODULES)
		return 0; /* the vdso is no file */
	uint64_t lo = UINT64_MAX, hi = 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD)
			continue;
		uint64_t s = info->dlpi_addr + ph->p_vaddr, e = s + ph->p_memsz;
		lo = s < lo ? s : lo;
		hi = e > hi ? e : hi;
		if ((ph->p_flags & PF_X) && mods.ncode < sizeof mods.code / sizeof mods.code[0])
			mods.code[mods.ncode++] = (struct code_range){s, e};
	}
	const uint8_t *bid = NULL;
	struct hp_module m = {
	    .id = ++mods.nmodules,
	    .bias = info->dlpi_addr,
	    .start = lo,
	    .end = hi,
	    .path_len = (uint16_t)strlen(path),
	    .build_id_len = (uint16_t)hp_build_id(info, &bid),
	};
	struct buf b = {mods.modrecs, mods.modrecs_len, mods.modrecs_len};
	uint8_t *d = take(&b, sizeof(struct hp_rec_hdr) + sizeof m + m.path_len + m.build_id_len);
	struct hp_rec_hdr h = {HP_REC_MODULE, (uint32_t)(sizeof m + m.path_len + m.build_id_len)};
	memcpy(d, &h, sizeof h);
	memcpy(d + sizeof h, &m, sizeof m);
	memcpy(d + sizeof h + sizeof m, path, m.path_len);
	if (m.build_id_len)
		memcpy(d + sizeof h + sizeof m + m.path_len, bid, m.build_id_len);
	mods.modrecs = b.p;
	mods.modrecs_len = b.len;
	return 0;
}

/* Return addresses spread over the code of every module, weighted by its size. */
static void make_pool(long n)
{
	uint64_t total = 0;
	for (size_t i = 0; i < mods.ncode; i++)
		total += mods.code[i].end - mods.code[i].start;
	if (!total)
		die("no code segment found");
	pool = xrealloc(NULL, (size_t)n * sizeof *pool);
	for (long i = 0; i < n; i++) {
		uint64_t off = mix((uint64_t)i + 0x51ed) % total;
		size_t m = 0;
		while (off >= mods.code[m].end - mods.code[m].start) {
			off -= mods.code[m].end - mods.code[m].start;
			m++;
		}
		pool[i] = mods.code[m].start + off + 1; /* never the segment's first byte */
	}
	npool = n;
}

/* Stack id's frames, innermost first. Outer frame k is shared by every stack whose id
 * agrees above bit 20 - 2k: two entry points, then four times more callers per level, so
 * frames from the twelfth outwards are the stack's own. */
static uint32_t stack_frames(uint32_t id, uint64_t *f)
{
	uint32_t depth = 12 + (uint32_t)(mix(id) % 21);
	for (uint32_t k = 0; k < depth; k++) {
		int shift = 20 - 2 * (int)k;
		uint64_t group = shift > 0 ? id >> shift : id;
		f[depth - 1 - k] = pool[mix(group * 131 + k) % (uint64_t)npool];
	}
	/* The allocation site: one of a few thousand, as in a large program. */
	f[0] = pool[mix(id % 4099 + 7) % (uint64_t)npool];
	return depth;
}

static uint64_t stack_size(uint32_t id)
{
	return 8 + mix(id ^ 0xabc) % 4000;
}

struct totals {
	uint64_t allocs, alloc_bytes, frees, freed_bytes;
};

static void put_delta(struct hp_site_delta *d, uint32_t id, uint32_t round, struct totals *t)
{
	uint64_t size = stack_size(id), n = 1 + mix((uint64_t)id * 7 + round) % 8;
	/* Most stacks free what they allocated; one in eight keeps a block (the growth). */
	uint64_t f = id % 8 == 0 ? n - 1 : n;
	*d = (struct hp_site_delta){
	    .stack_id = id,
	    .size_kind = HP_SIZE_EXACT,
	    .size = size,
	    .allocs = n,
	    .alloc_bytes = n * size,
	    .frees = f,
	    .freed_bytes = f * size,
	    .temp_frees = f / 2,
	};
	t->allocs += n;
	t->alloc_bytes += n * size;
	t->frees += f;
	t->freed_bytes += f * size;
}

static void put_sites(struct buf *b, struct hp_site_delta *d, uint32_t n)
{
	for (uint32_t i = 0; i < n; i += 65536) {
		uint32_t k = n - i < 65536 ? n - i : 65536;
		struct hp_sites h = {.count = k};
		put_rec(b, HP_REC_SITES, &h, sizeof h, d + i, k * sizeof *d);
	}
}

static void put_live(struct buf *b, uint32_t nstacks, uint32_t rounds)
{
	struct hp_live_site *v = xrealloc(NULL, (nstacks / 8 + 1) * sizeof *v);
	uint32_t n = 0;
	for (uint32_t id = 8; id <= nstacks; id += 8)
		v[n++] = (struct hp_live_site){.stack_id = id,
					       .blocks = 1,
					       .bytes = stack_size(id),
					       .oldest_age_ms = (uint64_t)rounds * 1000,
					       .mean_age_ms = (uint64_t)rounds * 500};
	for (uint32_t i = 0; i < n; i += 65536) {
		uint32_t k = n - i < 65536 ? n - i : 65536;
		struct hp_live h = {.count = k};
		put_rec(b, HP_REC_LIVE, &h, sizeof h, v + i, k * sizeof *v);
	}
	free(v);
}

static uint64_t status_kb(pid_t pid, const char *field)
{
	char path[64], line[256];
	snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "r");
	uint64_t v = 0;
	size_t fl = strlen(field);
	while (f && fgets(line, sizeof line, f))
		if (strncmp(line, field, fl) == 0 && line[fl] == ':')
			v = strtoull(line + fl + 1, NULL, 10);
	if (f)
		fclose(f);
	return v;
}

/* Reads the viewer's lines; samples its memory when it has finished a sampled round. */
static void *reader_main(void *arg)
{
	FILE *in = arg;
	char line[4096];
	while (fgets(line, sizeof line, in)) {
		unsigned long r;
		if (sscanf(line, "round=%lu ", &r) != 1 || r % (unsigned long)sample_every)
			continue;
		printf("round=%lu stacks=%ld elapsed=%.1f viewer_rss_kb=%" PRIu64
		       " viewer_hwm_kb=%" PRIu64 "\n",
		       r, stacks_by_round[r], now_s() - t_start, status_kb(viewer_pid, "VmRSS"),
		       status_kb(viewer_pid, "VmHWM"));
		fflush(stdout);
	}
	return NULL;
}

/* stream and lines: the pipes' ends that are ours; the viewer gets the others. */
static pid_t start_viewer(const struct opts *o, const int stream[2], const int lines[2])
{
	char pid[16];
	snprintf(pid, sizeof pid, "%d", (int)getpid());
	pid_t child = fork();
	if (child != 0)
		return child;
	unsetenv("DEBUGINFOD_URLS");
	/* Our write end left open here would keep the viewer from ever seeing the end. */
	close(stream[1]);
	close(lines[0]);
	if (dup2(stream[0], 3) < 0 || dup2(lines[1], 1) < 0)
		_exit(127);
	execl(o->viewer, o->viewer, "--fd", "3", "--pid", pid, "--output", o->output, "--batch",
	      (char *)NULL);
	fprintf(stderr, "viewer-load: cannot run %s: %s\n", o->viewer, strerror(errno));
	_exit(127);
}

/* Runs heapprof-view CMD on the profile, output discarded; false if it failed. */
static bool run_view(const struct opts *o, const char *cmd, const char *arg)
{
	double t0 = now_s();
	pid_t child = fork();
	if (child == 0) {
		int null = open("/dev/null", O_WRONLY);
		if (null < 0 || dup2(null, 1) < 0)
			_exit(127);
		execl(o->view, o->view, cmd, arg, o->output, (char *)NULL);
		_exit(127);
	}
	int st;
	struct rusage ru;
	if (child < 0 || wait4(child, &st, 0, &ru) < 0)
		return false;
	bool ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
	printf("view_%s_s=%.2f view_%s_peak_rss_kb=%ld view_%s_ok=%d\n", cmd, now_s() - t0, cmd,
	       ru.ru_maxrss, cmd, ok);
	return ok;
}

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: viewer-load --viewer PATH --view PATH [options]\n"
	    "  --rounds N        rounds of the session (default 3600: an hour)\n"
	    "  --min-new N       new stacks per round, at least (default 300)\n"
	    "  --max-new N       and at most (default 1000)\n"
	    "  --window N        old stacks with a delta per round, besides the new ones and\n"
	    "                    the %d hot ones (default 2000)\n"
	    "  --pool N          distinct frame addresses (default 20000)\n"
	    "  --sample N        report the viewer's memory every N rounds (default rounds/12)\n"
	    "  --output FILE     the profile (default viewer-load.hpf)\n"
	    "  --keep            keep the profile\n",
	    HOT_STACKS);
}

static long num(const char *s, long min, long max)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max) {
		usage(stderr);
		exit(2);
	}
	return v;
}

static void parse(int argc, char **argv, struct opts *o)
{
	static const struct option lo[] = {
	    {"rounds", required_argument, NULL, 'r'},  {"min-new", required_argument, NULL, 'm'},
	    {"max-new", required_argument, NULL, 'M'}, {"window", required_argument, NULL, 'w'},
	    {"pool", required_argument, NULL, 'p'},    {"sample", required_argument, NULL, 's'},
	    {"viewer", required_argument, NULL, 'v'},  {"view", required_argument, NULL, 'V'},
	    {"output", required_argument, NULL, 'o'},  {"keep", no_argument, NULL, 'k'},
	    {"help", no_argument, NULL, 'h'},	       {0},
	};
	*o = (struct opts){.rounds = 3600,
			   .min_new = 300,
			   .max_new = 1000,
			   .window = 2000,
			   .pool = 20000,
			   .output = "viewer-load.hpf"};
	int c;
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'r':
			o->rounds = num(optarg, 2, 1000000);
			break;
		case 'm':
			o->min_new = num(optarg, 0, 100000);
			break;
		case 'M':
			o->max_new = num(optarg, 0, 100000);
			break;
		case 'w':
			o->window = num(optarg, 0, 1000000);
			break;
		case 'p':
			o->pool = num(optarg, 64, 10000000);
			break;
		case 's':
			o->sample = num(optarg, 1, 1000000);
			break;
		case 'v':
			o->viewer = optarg;
			break;
		case 'V':
			o->view = optarg;
			break;
		case 'o':
			o->output = optarg;
			break;
		case 'k':
			o->keep = true;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			exit(2);
		}
	}
	if (!o->viewer || !o->view || optind != argc || o->min_new > o->max_new) {
		usage(stderr);
		exit(2);
	}
	if (!o->sample)
		o->sample = o->rounds / 12 ? o->rounds / 12 : 1;
}

int main(int argc, char **argv)
{
	struct opts o;
	parse(argc, argv, &o);
	signal(SIGPIPE, SIG_IGN);
	dl_iterate_phdr(module_cb, NULL);
	make_pool(o.pool);

	/* How many stacks each round brings, fixed up front so the reader can name them. */
	stacks_by_round = xrealloc(NULL, (size_t)(o.rounds + 1) * sizeof *stacks_by_round);
	stacks_by_round[0] = 0;
	for (long r = 1; r <= o.rounds; r++)
		stacks_by_round[r] =
		    stacks_by_round[r - 1] + o.min_new +
		    (long)(mix((uint64_t)r * 977) % (uint64_t)(o.max_new - o.min_new + 1));
	if (stacks_by_round[o.rounds] >= UINT32_MAX)
		die("too many stacks");
	sample_every = o.sample;

	int sp[2], lp[2];
	if (pipe(sp) < 0 || pipe(lp) < 0)
		die("cannot make a pipe");
	t_start = now_s();
	viewer_pid = start_viewer(&o, sp, lp);
	if (viewer_pid < 0)
		die("cannot fork");
	close(sp[0]);
	close(lp[1]);
	FILE *lines = fdopen(lp[0], "r");
	pthread_t reader;
	if (!lines || pthread_create(&reader, NULL, reader_main, lines) != 0)
		die("cannot read the viewer's output");

	struct buf b = {0};
	struct hp_file_header fh = {.version = HP_FORMAT_VERSION};
	memcpy(fh.magic, HP_MAGIC, sizeof fh.magic);
	memcpy(take(&b, sizeof fh), &fh, sizeof fh);
	struct hp_hello hello = {.pid = (uint32_t)getpid(),
				 .mode = HP_MODE_FULL,
				 .interval_ms = 1000,
				 .max_depth = MAX_DEPTH,
				 .start_mono_ns = clock_ns(CLOCK_MONOTONIC),
				 .start_real_ns = clock_ns(CLOCK_REALTIME)};
	put_rec(&b, HP_REC_HELLO, &hello, sizeof hello, NULL, 0);

	struct hp_site_delta *deltas = NULL;
	size_t deltas_cap = 0;
	struct totals tot = {0};
	uint64_t stream_bytes = 0, ndeltas = 0;
	bool broken = false;
	for (long r = 1; r <= o.rounds && !broken; r++) {
		bool final = r == o.rounds;
		uint32_t first_new = (uint32_t)stacks_by_round[r - 1] + 1;
		uint32_t last = (uint32_t)stacks_by_round[r];
		if (r == 1)
			memcpy(take(&b, mods.modrecs_len), mods.modrecs, mods.modrecs_len);
		for (uint32_t id = first_new; id <= last; id++) {
			uint64_t f[MAX_DEPTH];
			struct hp_stack s = {.id = id, .depth = stack_frames(id, f)};
			put_rec(&b, HP_REC_STACK, &s, sizeof s, f, s.depth * sizeof f[0]);
		}
		/* The new stacks, the hot ones, and a window sliding over the others: each
		 * stack at most once, as the payload merges a round's entries per key. */
		uint32_t old = first_new - 1, hot = old < HOT_STACKS ? old : HOT_STACKS;
		uint32_t rest = old - hot,
			 win = rest < (uint32_t)o.window ? rest : (uint32_t)o.window;
		size_t n = (size_t)(last - old) + hot + win;
		if (n > deltas_cap) {
			deltas_cap = n * 2;
			deltas = xrealloc(deltas, deltas_cap * sizeof *deltas);
		}
		size_t k = 0;
		for (uint32_t id = first_new; id <= last; id++)
			put_delta(&deltas[k++], id, (uint32_t)r, &tot);
		for (uint32_t id = 1; id <= hot; id++)
			put_delta(&deltas[k++], id, (uint32_t)r, &tot);
		uint32_t start = rest ? (uint32_t)(mix((uint64_t)r) % rest) : 0;
		for (uint32_t i = 0; i < win; i++)
			put_delta(&deltas[k++], hot + 1 + (start + i) % rest, (uint32_t)r, &tot);
		put_sites(&b, deltas, (uint32_t)k);
		ndeltas += k;
		if (final)
			put_live(&b, last, (uint32_t)r);
		struct hp_round round = {
		    .seq = (uint32_t)r,
		    .flags = final ? HP_ROUND_FINAL : 0,
		    .time_ns = (uint64_t)r * 1000000000u,
		    .rss_bytes = (64ull << 20) + (tot.alloc_bytes - tot.freed_bytes),
		    .allocs = tot.allocs,
		    .alloc_bytes = tot.alloc_bytes,
		    .frees = tot.frees,
		    .freed_bytes = tot.freed_bytes,
		    .live_blocks = tot.allocs - tot.frees,
		    .live_bytes = tot.alloc_bytes - tot.freed_bytes,
		};
		put_rec(&b, HP_REC_ROUND, &round, sizeof round, NULL, 0);
		if (final) {
			struct hp_end e = {.reason = HP_END_DETACH};
			put_rec(&b, HP_REC_END, &e, sizeof e, NULL, 0);
		}
		broken = write_all(sp[1], b.p, b.len) != 0;
		stream_bytes += b.len;
		b.len = 0;
	}
	double t_written = now_s() - t_start;
	close(sp[1]);

	int st;
	struct rusage ru;
	if (wait4(viewer_pid, &st, 0, &ru) < 0)
		die("cannot wait for the viewer");
	double t_viewer = now_s() - t_start;
	pthread_join(reader, NULL);
	fclose(lines);
	bool ok = !broken && WIFEXITED(st) && WEXITSTATUS(st) == 0;
	double cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
		     (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
	struct stat fs;
	long long size = stat(o.output, &fs) == 0 ? (long long)fs.st_size : -1;
	long nstacks = stacks_by_round[o.rounds];
	printf("rounds=%ld stacks=%ld site_deltas=%" PRIu64 " frame_addresses=%ld modules=%u\n",
	       o.rounds, nstacks, ndeltas, npool, mods.nmodules);
	printf("stream_bytes=%" PRIu64 " profile_bytes=%lld written_s=%.2f\n", stream_bytes, size,
	       t_written);
	printf("viewer_ok=%d viewer_s=%.2f viewer_cpu_s=%.2f rounds_per_s=%.0f "
	       "rounds_per_cpu_s=%.0f viewer_peak_rss_kb=%ld viewer_bytes_per_stack=%.0f\n",
	       ok, t_viewer, cpu, (double)o.rounds / t_viewer, (double)o.rounds / cpu, ru.ru_maxrss,
	       (double)ru.ru_maxrss * 1024 / (double)(nstacks ? nstacks : 1));
	fflush(stdout);
	if (ok) {
		ok = run_view(&o, "overview", "--json");
		ok = run_view(&o, "hotspots", "--top=20") && ok;
	}
	if (!o.keep)
		unlink(o.output);
	free(deltas);
	free(b.p);
	free(pool);
	free(mods.modrecs);
	free(stacks_by_round);
	return ok ? 0 : 1;
}
