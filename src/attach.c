/* heapprof-attach - profile the heap of a running process until told to stop.
 *
 * Every signal that ends the session (SIGINT, SIGTERM, SIGHUP, SIGCHLD of the viewer) is
 * blocked for the whole run and taken synchronously, so a Ctrl-C during an injection is
 * acted on only once the target is consistent, and a second one cannot cut a detach short.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "hpabi.h"
#include "hperror.h"
#include "hpformat.h"
#include "hppaths.h"
#include "inject/inject.h"
#include "session.h"
#include "target.h"

#define PROG "heapprof-attach"
#define DEFAULT_INTERVAL_MS 1000
#define MIN_INTERVAL_MS 10
#define MAX_INTERVAL_MS 600000
#define DEFAULT_DEPTH 64
/* How long the viewer may take to symbolize and write the file once the stream ended. */
#define VIEWER_GRACE_MS 60000
/* How long a target that closed its pipe may take to become a zombie. */
#define EXIT_GRACE_MS 2000

struct options {
	uint64_t duration_ms; /* 0: until stopped */
	uint32_t interval_ms;
	const char *output; /* NULL: the default name */
	int batch;
	pid_t pid;
	uint32_t mode;	      /* enum hp_mode */
	uint32_t max_depth;   /* frames per stack */
	uint64_t sample_rate; /* bytes; 0 = every allocation */
	uint64_t max_memory;  /* bytes; 0 = the payload's default */
};

enum { OPT_MODE = 256, OPT_SAMPLE_RATE, OPT_MAX_MEMORY, OPT_MAX_DEPTH };

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: " PROG " [OPTION]... PID\n"
		"Profile the heap of the running process PID (a 64-bit program using glibc)\n"
		"without restarting it, until Ctrl-C, 'heapprof-detach PID', the end of\n"
		"--duration or the process's exit; the profile is then read with heapprof-view.\n"
		"\n"
		"  -d, --duration S    stop after S seconds (default: run until stopped)\n"
		"  -i, --interval MS   send a round of counts every MS milliseconds,\n"
		"                      %d..%d (default: %d)\n"
		"  -o, --output FILE   write the profile to FILE\n"
		"                      (default: heapprof.COMM.PID.hpf in this directory)\n"
		"  -b, --batch         print one plain line per round on stdout\n"
		"      --mode MODE     what to record: 'basic' (counts and bytes per round),\n"
		"                      'extended' (plus a histogram of sizes) or 'full' (plus\n"
		"                      a call stack per allocation and every live block;\n"
		"                      the default)\n"
		"      --sample-rate BYTES  in full mode, give a stack and live tracking to one\n"
		"                      allocation per BYTES allocated on average (random,\n"
		"                      per-site numbers and frees scaled back; allocations\n"
		"                      counted exactly);\n"
		"                      0 records every allocation (the default)\n"
		"      --max-memory BYTES  memory the profiler may take in the process, 8M or\n"
		"                      more; when reached it switches to sampling (default:\n"
		"                      256M or 5%% of the process's resident memory, the\n"
		"                      larger)\n"
		"      --max-depth N   frames per call stack, 1..%d (default: %d)\n"
		"                      BYTES take a K, M or G suffix (powers of 1024)\n"
		"  -h, --help          show this help and exit\n"
		"  -V, --version       show the version and exit\n"
		"\n"
		"Environment: HEAPPROF_PAYLOAD and HEAPPROF_VIEWER override where the payload\n"
		"library and the viewer are looked for; HEAPPROF_DEBUGINFO_PATH where the\n"
		"viewer looks for separate debug files (default :.debug:/usr/lib/debug).\n"
		"\n"
		"Exit status: 0 the profile was written and the process was left as found\n"
		"(or it exited); 1 attaching, profiling or detaching failed (the message says\n"
		"why); 2 the command line is wrong.\n",
		MIN_INTERVAL_MS, MAX_INTERVAL_MS, DEFAULT_INTERVAL_MS, HP_MAX_DEPTH, DEFAULT_DEPTH);
}

/* 0 and *v for a decimal byte count with an optional K, M or G suffix, else -1. */
static int parse_bytes(const char *s, uint64_t *v)
{
	char num[32];
	size_t n = strlen(s);
	unsigned shift = 0;
	if (n == 0 || n >= sizeof num)
		return -1;
	memcpy(num, s, n + 1);
	switch (num[n - 1]) {
	case 'K':
	case 'k':
		shift = 10;
		break;
	case 'M':
	case 'm':
		shift = 20;
		break;
	case 'G':
	case 'g':
		shift = 30;
		break;
	}
	if (shift)
		num[--n] = '\0';
	if (hp_cli_uint(num, 0, UINT64_MAX >> shift, v) < 0)
		return -1;
	*v <<= shift;
	return 0;
}

/* -1: exit with *status now (help, version or a usage error). */
static int parse_options(int argc, char **argv, struct options *o, int *status)
{
	static const struct option longopts[] = {
	    {"duration", required_argument, NULL, 'd'},
	    {"interval", required_argument, NULL, 'i'},
	    {"output", required_argument, NULL, 'o'},
	    {"batch", no_argument, NULL, 'b'},
	    {"mode", required_argument, NULL, OPT_MODE},
	    {"sample-rate", required_argument, NULL, OPT_SAMPLE_RATE},
	    {"max-memory", required_argument, NULL, OPT_MAX_MEMORY},
	    {"max-depth", required_argument, NULL, OPT_MAX_DEPTH},
	    {"help", no_argument, NULL, 'h'},
	    {"version", no_argument, NULL, 'V'},
	    {NULL, 0, NULL, 0},
	};
	uint64_t v;
	int c;

	o->interval_ms = DEFAULT_INTERVAL_MS;
	o->mode = HP_MODE_FULL;
	o->max_depth = DEFAULT_DEPTH;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":d:i:o:bhV", longopts, NULL)) != -1) {
		switch (c) {
		case 'd':
			if (hp_cli_seconds(optarg, &o->duration_ms) < 0) {
				*status =
				    hp_cli_usage_error(PROG,
						       "invalid --duration '%s': give a positive "
						       "number of seconds",
						       optarg);
				return -1;
			}
			break;
		case 'i':
			if (hp_cli_uint(optarg, MIN_INTERVAL_MS, MAX_INTERVAL_MS, &v) < 0) {
				*status =
				    hp_cli_usage_error(PROG,
						       "invalid --interval '%s': give milliseconds "
						       "from 10 to 600000",
						       optarg);
				return -1;
			}
			o->interval_ms = (uint32_t)v;
			break;
		case 'o':
			if (!*optarg) {
				*status = hp_cli_usage_error(PROG, "empty --output");
				return -1;
			}
			o->output = optarg;
			break;
		case 'b':
			o->batch = 1;
			break;
		case OPT_MODE:
			if (!(o->mode = hp_mode_from_name(optarg))) {
				*status = hp_cli_usage_error(
				    PROG, "invalid --mode '%s': give basic, extended or full",
				    optarg);
				return -1;
			}
			break;
		case OPT_SAMPLE_RATE:
			if (parse_bytes(optarg, &o->sample_rate) < 0) {
				*status = hp_cli_usage_error(
				    PROG,
				    "invalid --sample-rate '%s': give bytes (K, M, G allowed), 0 "
				    "for none",
				    optarg);
				return -1;
			}
			break;
		case OPT_MAX_MEMORY:
			if (parse_bytes(optarg, &o->max_memory) < 0 || o->max_memory == 0) {
				*status = hp_cli_usage_error(
				    PROG, "invalid --max-memory '%s': give bytes (K, M, G allowed)",
				    optarg);
				return -1;
			}
			if (o->max_memory < HP_MIN_MAX_MEMORY) {
				*status = hp_cli_usage_error(
				    PROG,
				    "--max-memory %s is too small: heapprof's fixed tables take "
				    "about 4M, give %lluM or more",
				    optarg, (unsigned long long)(HP_MIN_MAX_MEMORY >> 20));
				return -1;
			}
			break;
		case OPT_MAX_DEPTH:
			if (hp_cli_uint(optarg, 1, HP_MAX_DEPTH, &v) < 0) {
				*status = hp_cli_usage_error(
				    PROG, "invalid --max-depth '%s': give frames from 1 to %d",
				    optarg, HP_MAX_DEPTH);
				return -1;
			}
			o->max_depth = (uint32_t)v;
			break;
		case 'h':
			usage(stdout);
			*status = HP_EXIT_OK;
			return -1;
		case 'V':
			printf(PROG " " PACKAGE_VERSION "\n");
			*status = HP_EXIT_OK;
			return -1;
		default:
			*status = hp_cli_bad_option(PROG, c, argv);
			return -1;
		}
	}
	return hp_cli_pid_operand(PROG, argc, argv, &o->pid, status);
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* The next of our blocked signals, 0 after timeout_ms (< 0: no timeout). */
static int next_signal(const sigset_t *set, int64_t timeout_ms)
{
	for (;;) {
		int sig;
		if (timeout_ms < 0) {
			sig = sigwaitinfo(set, NULL);
		} else {
			struct timespec ts = {timeout_ms / 1000,
					      (long)(timeout_ms % 1000) * 1000000L};
			sig = sigtimedwait(set, NULL, &ts);
		}
		if (sig > 0)
			return sig;
		if (errno == EAGAIN)
			return 0;
	}
}

/* "heapprof.COMM.PID.hpf", with anything but [A-Za-z0-9._-] in COMM made '_'. */
static void default_output(char *buf, size_t len, const char *comm, pid_t pid)
{
	char safe[32];
	size_t i;
	for (i = 0; i < sizeof safe - 1 && comm[i]; i++) {
		char ch = comm[i];
		int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
			 (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-';
		safe[i] = ok ? ch : '_';
	}
	safe[i] = '\0';
	snprintf(buf, len, "heapprof.%s.%d.hpf", safe, (int)pid);
}

/* The absolute path of output, and a check that its directory takes a new file, so a bad
 * --output is refused before the target is touched. */
static int resolve_output(const char *output, char *abs, size_t len, struct hp_error *err)
{
	char cwd[PATH_MAX], dir[PATH_MAX];
	struct stat st;

	if (output[0] == '/') {
		snprintf(abs, len, "%s", output);
	} else {
		if (!getcwd(cwd, sizeof cwd)) {
			hp_error_set(err, "cannot find the current directory: %s", strerror(errno));
			return -1;
		}
		if ((size_t)snprintf(abs, len, "%s/%s", cwd, output) >= len) {
			hp_error_set(err, "the output path %s/%s is too long: choose a shorter one",
				     cwd, output);
			return -1;
		}
	}
	if (stat(abs, &st) == 0 && S_ISDIR(st.st_mode)) {
		hp_error_set(err, "the output %s is a directory: give a file name with --output",
			     output);
		return -1;
	}
	snprintf(dir, sizeof dir, "%s", abs);
	*strrchr(dir, '/') = '\0';
	if (!dir[0])
		snprintf(dir, sizeof dir, "/");
	if (access(dir, W_OK | X_OK) < 0) {
		hp_error_set(err,
			     "cannot write the profile %s: directory %s: %s: choose another place "
			     "with --output",
			     output, dir, strerror(errno));
		return -1;
	}
	return 0;
}

static pid_t start_viewer(const char *viewer, int fd, pid_t pid, const char *output, int batch)
{
	char pidstr[16];
	snprintf(pidstr, sizeof pidstr, "%d", (int)pid);
	char *argv[] = {
	    (char *)viewer,	      "--fd", "3", "--pid", pidstr, "--output", (char *)output,
	    batch ? "--batch" : NULL, NULL};

	pid_t child = fork();
	if (child != 0)
		return child;
	/* The viewer ends when the stream does, not on the terminal's Ctrl-C: that one is
	 * ours, and the detach it starts makes the payload finish the stream. */
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGINT, SIG_IGN);
	/* libdw would fetch missing debug info over the network for every module, stalling
	 * the rounds; symbols come from what is installed on this machine. */
	unsetenv("DEBUGINFOD_URLS");
	if (fd == 3) {
		if (fcntl(3, F_SETFD, 0) < 0)
			_exit(127);
	} else if (dup2(fd, 3) < 0) {
		_exit(127);
	}
	execv(viewer, argv);
	fprintf(stderr, PROG ": cannot run the viewer %s: %s\n", viewer, strerror(errno));
	_exit(127);
}

/* 1 and *status once the viewer has been reaped, 0 while it runs. */
static int reap_viewer(pid_t viewer, int *status)
{
	pid_t r;
	while ((r = waitpid(viewer, status, WNOHANG)) < 0 && errno == EINTR)
		;
	return r == viewer;
}

/* Waits for the viewer up to timeout_ms (taking SIGCHLD and ignoring the stop signals,
 * which must not cut a detach short); 1 and *status when reaped, 0 on timeout. */
static int wait_viewer(const sigset_t *set, pid_t viewer, int *status, int64_t timeout_ms)
{
	uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
	for (;;) {
		if (reap_viewer(viewer, status))
			return 1;
		uint64_t now = now_ms();
		if (now >= deadline)
			return 0;
		next_signal(set, (int64_t)(deadline - now));
	}
}

static int viewer_ok(int status)
{
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static void describe_status(int status, char *buf, size_t len)
{
	if (WIFEXITED(status))
		snprintf(buf, len, "exited with status %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(buf, len, "was killed by signal %d (%s)", WTERMSIG(status),
			 strsignal(WTERMSIG(status)));
	else
		snprintf(buf, len, "ended with wait status %#x", status);
}

/* The target is gone, or its pipe closed while it was exiting: give it a moment to die. */
static int target_gone(pid_t pid, unsigned long long start, int grace_ms)
{
	for (int waited = 0; hp_target_alive(pid, start); waited += 20) {
		if (waited >= grace_ms)
			return 0;
		sleep_ms(20);
	}
	return 1;
}

struct run {
	struct options o;
	const char *output; /* as shown to the user */
	char comm[32];
	unsigned long long start;
	sigset_t sigs;
	pid_t viewer;
	struct hp_session_lock session;
	struct hp_payload_fns payload; /* where the load put it, for the detach */
};

static int end_after_target_exit(struct run *r, int vstatus)
{
	char how[64];

	if (!viewer_ok(vstatus)) {
		describe_status(vstatus, how, sizeof how);
		fprintf(stderr, PROG ": %d exited; the viewer %s: %s may be incomplete\n",
			(int)r->o.pid, how, r->output);
		return HP_EXIT_FAIL;
	}
	fprintf(stderr, PROG ": %d exited; profile written to %s\n", (int)r->o.pid, r->output);
	return HP_EXIT_OK;
}

/* Unloads the payload and waits for the viewer to finish the file. vstatus: the viewer's
 * status when it has already ended (it crashed), else NULL. */
static int detach(struct run *r, const int *vstatus)
{
	struct hp_error err = {0};
	char how[64];
	int status = vstatus ? *vstatus : 0;
	int reaped = vstatus != NULL;

	int unloaded = hp_inject_unload(r->o.pid, &r->payload, &err) == 0;
	if (!unloaded && target_gone(r->o.pid, r->start, EXIT_GRACE_MS)) {
		if (!reaped && !wait_viewer(&r->sigs, r->viewer, &status, VIEWER_GRACE_MS)) {
			kill(r->viewer, SIGKILL);
			wait_viewer(&r->sigs, r->viewer, &status, VIEWER_GRACE_MS);
		}
		return end_after_target_exit(r, status);
	}
	if (!unloaded && !reaped) {
		/* Cut the payload's pipe so it goes quiet; its hooks stay until a detach. */
		kill(r->viewer, SIGTERM);
	}
	if (!reaped && !wait_viewer(&r->sigs, r->viewer, &status, VIEWER_GRACE_MS)) {
		fprintf(stderr, PROG ": the viewer did not finish within %d s; stopping it\n",
			VIEWER_GRACE_MS / 1000);
		kill(r->viewer, SIGKILL);
		wait_viewer(&r->sigs, r->viewer, &status, VIEWER_GRACE_MS);
	}
	if (!unloaded) {
		fprintf(stderr, PROG ": %s\n", err.msg);
		fprintf(stderr,
			PROG ": heapprof is still loaded in %d (%s) but quiet: run "
			     "heapprof-detach %d to retry\n",
			(int)r->o.pid, r->comm, (int)r->o.pid);
		return HP_EXIT_FAIL;
	}
	if (!viewer_ok(status)) {
		describe_status(status, how, sizeof how);
		fprintf(stderr, PROG ": detached from %d; the viewer %s: %s may be incomplete\n",
			(int)r->o.pid, how, r->output);
		return HP_EXIT_FAIL;
	}
	fprintf(stderr,
		PROG ": detached from %d, no thread stopped over %.1f ms; profile written to %s\n",
		(int)r->o.pid, (double)hp_inject_longest_stop_ns() / 1e6, r->output);
	return HP_EXIT_OK;
}

/* Attached and the viewer runs: wait for the end of the session and bring it about. */
static int profile(struct run *r)
{
	uint64_t deadline = r->o.duration_ms ? now_ms() + r->o.duration_ms : 0;
	int vstatus;

	for (;;) {
		/* Wake every second to notice a target that died while something else (a child
		 * of it) still holds its pipe open. */
		int64_t timeout = 1000;
		if (deadline) {
			uint64_t now = now_ms();
			if (now >= deadline)
				break;
			if (deadline - now < (uint64_t)timeout)
				timeout = (int64_t)(deadline - now);
		}
		int sig = next_signal(&r->sigs, timeout);
		if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP)
			break;
		if (reap_viewer(r->viewer, &vstatus)) {
			if (target_gone(r->o.pid, r->start, EXIT_GRACE_MS))
				return end_after_target_exit(r, vstatus);
			if (!viewer_ok(vstatus)) {
				char how[64];
				describe_status(vstatus, how, sizeof how);
				fprintf(stderr, PROG ": the viewer %s; detaching from %d\n", how,
					(int)r->o.pid);
			}
			return detach(r, &vstatus);
		}
		if (!hp_target_alive(r->o.pid, r->start)) {
			if (!wait_viewer(&r->sigs, r->viewer, &vstatus, VIEWER_GRACE_MS)) {
				kill(r->viewer, SIGTERM);
				wait_viewer(&r->sigs, r->viewer, &vstatus, VIEWER_GRACE_MS);
			}
			return end_after_target_exit(r, vstatus);
		}
	}
	return detach(r, NULL);
}

static int run(struct run *r)
{
	struct hp_error err = {0};
	char payload[PATH_MAX], fallback[PATH_MAX], viewer[PATH_MAX], defout[64],
	    abs_output[PATH_MAX];

	if (hp_target_check(r->o.pid, &err) < 0 || hp_target_start_time(r->o.pid, &r->start) < 0) {
		hp_error_set(&err, "process %d exited: nothing to profile", (int)r->o.pid);
		fprintf(stderr, PROG ": %s\n", err.msg);
		return HP_EXIT_FAIL;
	}
	hp_target_comm(r->o.pid, r->comm, sizeof r->comm);
	if (hp_payload_path(payload, sizeof payload) < 0) {
		fprintf(stderr,
			PROG ": payload not found at %s: reinstall heapprof, or set "
			     "HEAPPROF_PAYLOAD\n",
			payload);
		return HP_EXIT_FAIL;
	}
	if (hp_viewer_path(viewer, sizeof viewer) < 0 || access(viewer, X_OK) < 0) {
		fprintf(stderr,
			PROG ": viewer not found at %s: reinstall heapprof, or set "
			     "HEAPPROF_VIEWER\n",
			viewer);
		return HP_EXIT_FAIL;
	}
	default_output(defout, sizeof defout, r->comm, r->o.pid);
	r->output = r->o.output ? r->o.output : defout;
	if (resolve_output(r->output, abs_output, sizeof abs_output, &err) < 0 ||
	    hp_session_create(&r->session, r->o.pid, r->start, abs_output, &err) < 0) {
		fprintf(stderr, PROG ": %s\n", err.msg);
		return HP_EXIT_FAIL;
	}

	int sig = next_signal(&r->sigs, 0);
	if (sig && sig != SIGCHLD) {
		fprintf(stderr, PROG ": interrupted (%s) before attaching; %d was not touched\n",
			strsignal(sig), (int)r->o.pid);
		return HP_EXIT_FAIL;
	}

	struct hp_start_args args = {
	    .abi_version = HP_ABI_VERSION,
	    .mode = r->o.mode,
	    .interval_ms = r->o.interval_ms,
	    .max_depth = r->o.max_depth,
	    .sample_rate = r->o.sample_rate,
	    .max_memory = r->o.max_memory,
	};
	int fd;
	const char *fb =
	    hp_payload_fallback_path(payload, fallback, sizeof fallback) == 0 ? fallback : NULL;
	if (hp_inject_load(r->o.pid, payload, fb, &args, &fd, &r->payload, &err) < 0) {
		fprintf(stderr, PROG ": %s\n", err.msg);
		return HP_EXIT_FAIL;
	}
	if (r->payload.fallback)
		fprintf(stderr,
			PROG ": process %d has no static TLS left for the payload; loaded %s, "
			     "which finds each thread's record by a hash (a little slower)\n",
			(int)r->o.pid, HP_PAYLOAD_FALLBACK_FILE);
	double attach_stop_ms = (double)hp_inject_longest_stop_ns() / 1e6;
	r->viewer = start_viewer(viewer, fd, r->o.pid, r->output, r->o.batch);
	/* The viewer must be the pipe's only reader: if it dies, the payload sees EPIPE. */
	close(fd);
	if (r->viewer < 0) {
		fprintf(stderr, PROG ": cannot start the viewer: %s; detaching from %d\n",
			strerror(errno), (int)r->o.pid);
		int status = 0x7f00;
		detach(r, &status);
		return HP_EXIT_FAIL;
	}
	hp_session_set_viewer(&r->session, r->viewer);
	fprintf(stderr,
		PROG ": attached to %d (%s), no thread stopped over %.1f ms; a round every %u ms; "
		     "stop with Ctrl-C or heapprof-detach %d\n",
		(int)r->o.pid, r->comm, attach_stop_ms, r->o.interval_ms, (int)r->o.pid);
	return profile(r);
}

int main(int argc, char **argv)
{
	struct run r = {.session = HP_SESSION_INIT};
	int status;

	if (parse_options(argc, argv, &r.o, &status) < 0)
		return status;

	sigemptyset(&r.sigs);
	sigaddset(&r.sigs, SIGINT);
	sigaddset(&r.sigs, SIGTERM);
	sigaddset(&r.sigs, SIGHUP);
	sigaddset(&r.sigs, SIGCHLD);
	sigprocmask(SIG_BLOCK, &r.sigs, NULL);

	status = run(&r);
	hp_session_remove(&r.session);
	return status;
}
