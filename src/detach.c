/* heapprof-detach - end the profiling of a process and leave it as it was.
 *
 * A live heapprof-attach is asked to detach (SIGTERM), so it also finishes the profile
 * file; only when none is running (it was killed) does this command unload the payload
 * itself, together with whatever else a killed heapprof-attach left (a trampoline, the
 * payload's memfd: hp_inject_leftovers). Success means /proc/PID/maps shows no heapprof
 * mapping.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "hperror.h"
#include "inject/inject.h"
#include "session.h"
#include "target.h"

#define PROG "heapprof-detach"
/* heapprof-attach bounds every step of its detach itself (the last round, the wait for
 * threads to leave the payload, a minute for its viewer to name the frames left and write
 * the file, then a SIGKILL), under three minutes in all; this limit only ends the wait on
 * one that is stopped or hung. */
#define ATTACH_WAIT_MS 180000
/* From this long on, and this often, the wait looks whether heapprof-attach is stopped
 * and whether the target is out already (reads of /proc: stat, maps and fd), to say what
 * it waits for; a detach that ends sooner says nothing more. */
#define QUIET_MS 1000

static void usage(FILE *f)
{
	fprintf(f, "Usage: " PROG " PID\n"
		   "Stop profiling process PID: ask the heapprof-attach that profiles it to\n"
		   "detach (it writes the profile and exits), or, when that one is no longer\n"
		   "running, unload heapprof from the process directly.\n"
		   "\n"
		   "  -h, --help          show this help and exit\n"
		   "  -V, --version       show the version and exit\n"
		   "\n"
		   "Exit status: 0 the process no longer has heapprof loaded; 1 it was not being\n"
		   "profiled, or detaching failed (the message says why); 2 the command line is\n"
		   "wrong.\n");
}

static int parse_options(int argc, char **argv, pid_t *pid, int *status)
{
	static const struct option longopts[] = {
	    {"help", no_argument, NULL, 'h'},
	    {"version", no_argument, NULL, 'V'},
	    {NULL, 0, NULL, 0},
	};
	int c;

	opterr = 0;
	while ((c = getopt_long(argc, argv, "hV", longopts, NULL)) != -1) {
		switch (c) {
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
	return hp_cli_pid_operand(PROG, argc, argv, pid, status);
}

/* 1 if pid holds anything of heapprof: the payload mapped, or only what a heapprof-attach
 * killed mid-way left (a trampoline, the memfd: hp_inject_leftovers); 0 if nothing; -1 if
 * /proc/PID/maps cannot be read. */
static int heapprof_left(pid_t pid)
{
	int mapped = hp_payload_mapped(pid);
	return mapped == 0 && hp_inject_leftovers(pid) > 0 ? 1 : mapped;
}

/* SIGINT, SIGTERM or SIGHUP taken within ms, else 0. */
static int interrupted(const sigset_t *set, int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	int sig = sigtimedwait(set, NULL, &ts);
	return sig > 0 ? sig : 0;
}

/* Asks the live heapprof-attach to detach and waits until its session ends. Once the
 * target is out, what is left is the viewer's work on the file, which the user is told:
 * on a server with much debug info it can take longer than the unload. */
static int stop_attach(pid_t pid, const char *comm, const struct hp_session_info *info,
		       const sigset_t *sigs)
{
	struct hp_error err = {0};
	struct hp_session_info now;
	int told = 0, told_stopped = 0;

	fprintf(stderr, PROG ": asking heapprof-attach (pid %d) to detach from %d\n",
		(int)info->attach_pid, (int)pid);
	if (kill(info->attach_pid, SIGTERM) < 0 && errno != ESRCH) {
		fprintf(stderr, PROG ": cannot signal heapprof-attach (pid %d): %s\n",
			(int)info->attach_pid, strerror(errno));
		return -1;
	}
	for (int waited = 0;; waited += 50) {
		int r = hp_session_live(pid, &now, &err);
		if (r == 0)
			return 0;
		if (r < 0) {
			fprintf(stderr, PROG ": %s\n", err.msg);
			return -1;
		}
		if (waited >= ATTACH_WAIT_MS) {
			fprintf(stderr,
				PROG
				": heapprof-attach (pid %d) has not finished detaching after "
				"%d s: it may be stopped or hung; check it (ps -o stat= -p %d), "
				"then run " PROG " %d again\n",
				(int)info->attach_pid, ATTACH_WAIT_MS / 1000, (int)info->attach_pid,
				(int)pid);
			return -1;
		}
		int look = waited >= QUIET_MS && waited % QUIET_MS == 0;
		/* A heapprof-attach stopped in its terminal (Ctrl-Z) takes the SIGTERM only
		 * once it runs again: without a word this would wait out the limit. */
		if (look && !told_stopped && hp_target_stopped(info->attach_pid)) {
			fprintf(stderr,
				PROG
				": heapprof-attach (pid %d) is stopped and detaches only once "
				"it runs again: continue it (fg in its shell, or kill -CONT %d); "
				"waiting\n",
				(int)info->attach_pid, (int)info->attach_pid);
			told_stopped = 1;
		}
		if (look && !told && heapprof_left(pid) == 0) {
			fprintf(stderr,
				PROG ": %d (%s) is detached; waiting for heapprof-attach's viewer "
				     "to finish %s\n",
				(int)pid, comm, info->output);
			told = 1;
		}
		int sig = interrupted(sigs, 50);
		if (sig) {
			fprintf(stderr,
				PROG ": interrupted (%s); heapprof-attach (pid %d) goes on "
				     "detaching from %d by itself\n",
				strsignal(sig), (int)info->attach_pid, (int)pid);
			return -1;
		}
	}
}

/* No heapprof-attach runs: unload the payload here, holding a session of our own so no
 * attach or detach starts meanwhile. */
static int unload_here(pid_t pid, const char *comm)
{
	struct hp_error err = {0};
	struct hp_session_lock s = HP_SESSION_INIT;
	unsigned long long start;

	if (hp_target_check_traceable(pid, &err) < 0 || hp_target_start_time(pid, &start) < 0 ||
	    hp_session_create(&s, pid, start, "", &err) < 0) {
		fprintf(stderr, PROG ": %s\n", err.msg);
		return HP_EXIT_FAIL;
	}
	int r = hp_inject_unload(pid, NULL, &err);
	hp_session_remove(&s);
	if (r < 0) {
		fprintf(stderr, PROG ": %s\n", err.msg);
		return HP_EXIT_FAIL;
	}
	if (hp_payload_mapped(pid) != 0) {
		fprintf(stderr,
			PROG ": heapprof is still mapped in %d (%s) after unloading: run " PROG
			     " %d again\n",
			(int)pid, comm, (int)pid);
		return HP_EXIT_FAIL;
	}
	fprintf(stderr,
		PROG ": unloaded heapprof from %d (%s), no thread stopped over %.1f ms; no "
		     "heapprof-attach was running, so no profile was finished\n",
		(int)pid, comm, (double)hp_inject_longest_stop_ns() / 1e6);
	return HP_EXIT_OK;
}

int main(int argc, char **argv)
{
	struct hp_error err = {0};
	struct hp_session_info info;
	sigset_t sigs;
	char comm[32];
	pid_t pid;
	int status;

	if (parse_options(argc, argv, &pid, &status) < 0)
		return status;

	/* Taken synchronously: a Ctrl-C while the payload is being unloaded must not leave
	 * the target half done. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGHUP);
	sigprocmask(SIG_BLOCK, &sigs, NULL);

	unsigned long long start;
	if (hp_target_start_time(pid, &start) < 0) {
		fprintf(stderr, PROG ": no process with pid %d: check the pid (ps -p %d)\n",
			(int)pid, (int)pid);
		return HP_EXIT_FAIL;
	}
	hp_target_comm(pid, comm, sizeof comm);

	int live = hp_session_live(pid, &info, &err);
	if (live < 0) {
		fprintf(stderr, PROG ": %s\n", err.msg);
		return HP_EXIT_FAIL;
	}
	if (live) {
		if (stop_attach(pid, comm, &info, &sigs) < 0)
			return HP_EXIT_FAIL;
		int mapped = heapprof_left(pid);
		if (mapped == 0 || !hp_target_alive(pid, start)) {
			fprintf(stderr,
				PROG ": %d (%s) is detached; heapprof-attach wrote the profile to "
				     "%s\n",
				(int)pid, comm, info.output);
			return HP_EXIT_OK;
		}
		if (mapped < 0) {
			hp_target_check_traceable(pid, &err);
			hp_error_set(&err, "cannot read /proc/%d/maps", (int)pid);
			fprintf(stderr, PROG ": %s\n", err.msg);
			return HP_EXIT_FAIL;
		}
		fprintf(stderr, PROG ": heapprof-attach left heapprof loaded in %d; unloading it\n",
			(int)pid);
		return unload_here(pid, comm);
	}
	int mapped = heapprof_left(pid);
	if (mapped < 0) {
		hp_target_check_traceable(pid, &err);
		hp_error_set(&err, "cannot read /proc/%d/maps", (int)pid);
		fprintf(stderr, PROG ": %s\n", err.msg);
		return HP_EXIT_FAIL;
	}
	if (mapped == 0) {
		fprintf(stderr, PROG ": process %d is not being profiled\n", (int)pid);
		return HP_EXIT_FAIL;
	}
	return unload_here(pid, comm);
}
