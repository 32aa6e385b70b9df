#!/bin/bash
# test-e2e-repeat.sh - five attach/detach cycles on one target: after each, no heapprof
# mapping and no extra fd is left and the target works; at the end it exits 0 with its
# memory intact.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"

hp_require_ptrace
hp_require_binaries "$HP_TARGETS/mt-target"

hp_start_target "$HP_TARGETS/mt-target" 2 200
fds=$(hp_fd_count "$TARGET_PID")
for cycle in 1 2 3 4 5; do
	echo "-- cycle $cycle"
	hp_attach --output "$hp_tmp/p$cycle.hpf" "$TARGET_PID"
	hp_send go
	hp_wait_line "$TARGET_OUT" '^done$' 30 $cycle || hp_fail "the target did not finish round $cycle"
	hp_detach_session "$fds"
	"$HP_VIEW" overview "$hp_tmp/p$cycle.hpf" >"$hp_tmp/view.out" 2>"$hp_tmp/view.err" ||
		hp_fail "heapprof-view overview cannot read profile $cycle: $(cat "$hp_tmp/view.err")"
	hp_ok "cycle $cycle: profile readable"
done
hp_stop_target
