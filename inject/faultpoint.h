/* faultpoint.h - where the tests kill the injector (tests/integration/test-fault-*.sh,
 * make check-stress).
 *
 * Contract: hp_fault_point(VAR, NAME) kills this process with SIGKILL when the environment
 * variable VAR equals NAME: HEAPPROF_TEST_KILL_IN=CALL while the thread runs the remote
 * call CALL, HEAPPROF_TEST_KILL_AFTER=CALL once it has returned to the trampoline,
 * HEAPPROF_TEST_KILL_AFTER=restore once a thread's registers are restored but the
 * trampoline is still written. The target must survive every one.
 * hp_stall_point(VAR, NAME, MS) sleeps MS ms instead: HEAPPROF_TEST_STALL_IN=CALL, an
 * injector not scheduled while the thread runs CALL and then waits for it.
 */
#ifndef HEAPPROF_INJECT_FAULTPOINT_H
#define HEAPPROF_INJECT_FAULTPOINT_H

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static inline void hp_fault_point(const char *var, const char *what)
{
	const char *v = getenv(var);
	if (v && !strcmp(v, what))
		kill(getpid(), SIGKILL);
}

static inline void hp_stall_point(const char *var, const char *what, unsigned ms)
{
	const char *v = getenv(var);
	struct timespec d = {ms / 1000, (long)(ms % 1000) * 1000000L};
	if (v && !strcmp(v, what))
		nanosleep(&d, NULL);
}

#endif
