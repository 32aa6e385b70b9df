/* faultpoint.h - where the tests kill the injector (tests/integration/test-fault-*.sh,
 * make check-stress).
 *
 * Contract: hp_fault_point(VAR, NAME) kills this process with SIGKILL when the environment
 * variable VAR equals NAME: HEAPPROF_TEST_KILL_IN=CALL while the thread runs the remote
 * call CALL, HEAPPROF_TEST_KILL_AFTER=CALL once it has returned to the trampoline,
 * HEAPPROF_TEST_KILL_AFTER=restore once a thread's registers are restored but the
 * trampoline is still written. The target must survive every one.
 */
#ifndef HEAPPROF_INJECT_FAULTPOINT_H
#define HEAPPROF_INJECT_FAULTPOINT_H

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static inline void hp_fault_point(const char *var, const char *what)
{
	const char *v = getenv(var);
	if (v && !strcmp(v, what))
		kill(getpid(), SIGKILL);
}

#endif
