#!/bin/bash
# heapprof-attach killed with SIGKILL at each stage (while the target's thread runs one of
# our remote calls, and right after one returned, during injection and during detach):
# the target survives every time, and heapprof-detach brings it back clean (no heapprof
# mapping, no trampoline, no extra fd, its own self-checks pass, its code pages are
# what its files hold).
. "$(dirname "$0")/lib.sh"
. "$top_srcdir/tests/stress/lib-stress.sh"

hp_require_ptrace
hp_require_binaries "$ST_TARGET"
st_start
fails=0
for point in memfd_create dlopen close heapprof_start heapprof_release_pipe heapprof_stop \
	heapprof_free_memory dlclose; do
	for var in HEAPPROF_TEST_KILL_IN HEAPPROF_TEST_KILL_AFTER; do
		if st_kill_at $var $point; then
			hp_ok "killed ${var#HEAPPROF_TEST_KILL_} $point: target clean after heapprof-detach"
		else
			fails=$((fails + 1))
		fi
	done
done
# Between restoring the borrowed thread and erasing the trampoline from the code pages.
if st_kill_at HEAPPROF_TEST_KILL_AFTER restore; then
	hp_ok "killed AFTER restore: target clean after heapprof-detach"
else
	fails=$((fails + 1))
fi
st_cycle "a normal cycle afterwards" || fails=$((fails + 1))
[ $fails -eq 0 ] || hp_fail "$fails fault(s) left the target unclean"
hp_stop_target
