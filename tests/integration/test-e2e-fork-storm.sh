#!/bin/bash
# test-e2e-fork-storm.sh - children forked at every moment of attach and detach exit.
#
# fork-target (tests/targets/fork-target.c) forks children back to back ("storm"), each
# of which allocates, frees and exits 0 (running the payload's destructor when it has a
# copy of the payload), while heapprof attaches and detaches 5 times. A child forked while
# the injector's thread held a lock of the payload must not wait for it at exit. Checks:
# every cycle detaches cleanly (no heapprof mapping, fd count as before); every child
# exited 0 within 5 s; the target exits 0.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"

hp_require_ptrace
hp_require_binaries "$HP_TARGETS/fork-target"

hp_start_target "$HP_TARGETS/fork-target" 1
fds=$(hp_fd_count "$TARGET_PID")
hp_send storm
hp_wait_line "$TARGET_OUT" '^(storming|failed)$' 10 && grep -q '^storming$' "$TARGET_OUT" ||
	hp_fail "the storm did not start"
hp_ok "the target forks children back to back"
for cycle in 1 2 3 4 5; do
	hp_attach --interval 50 --output "$hp_tmp/p$cycle.hpf" "$TARGET_PID"
	sleep 0.2
	hp_detach_session "$fds"
	hp_ok "cycle $cycle done while forking"
done
hp_send calm
hp_wait_line "$TARGET_OUT" '^(calm [0-9]+|failed)$' 20 ||
	hp_fail "the storm did not end: a child is stuck"
grep -q '^failed$' "$TARGET_OUT" && hp_fail "a forked child did not exit 0: $(cat "$hp_tmp"/target*.err)"
hp_ok "all $(grep -o '^calm [0-9]*' "$TARGET_OUT" | cut -d' ' -f2) forked children exited 0"
hp_stop_target
