#!/bin/bash
# A few attach/detach cycles on the stress target (threads created and exiting constantly, threads blocked in read, epoll_wait,
# futex and nanosleep, a high rate of queued signals, allocations checked byte by byte, and
# a recursion of 2047 call paths, which the payload counts by stack id):
# the target's own checks pass after each (no EINTR, no short sleep, no lost signal, no
# corrupted block). make check-stress runs the long version, with randomly timed SIGKILLs.
. "$(dirname "$0")/lib.sh"
. "$top_srcdir/tests/stress/lib-stress.sh"

hp_require_ptrace
hp_require_binaries "$ST_TARGET"
st_start --trees
for i in 1 2 3; do
	st_cycle "cycle $i" || hp_fail "cycle $i"
done
hp_ok "3 attach/detach cycles"
hp_stop_target
