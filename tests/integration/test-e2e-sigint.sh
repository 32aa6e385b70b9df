#!/bin/bash
# test-e2e-sigint.sh - SIGINT (Ctrl-C) to heapprof-attach detaches cleanly: it exits 0, the
# target is restored, and the profile holds what was recorded.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"

T=2 K=200
hp_require_python
hp_require_ptrace
hp_require_binaries "$HP_TARGETS/mt-target"

hp_start_target "$HP_TARGETS/mt-target" $T $K
fds=$(hp_fd_count "$TARGET_PID")
hp_attach --batch --output "$hp_tmp/p.hpf" "$TARGET_PID"
hp_send go
hp_wait_line "$TARGET_OUT" '^done$' 30 || hp_fail "the target did not finish its work"
rounds=$(hp_count_lines "$hp_tmp/attach.out" "$HP_ROUND_RE")
hp_wait_line "$hp_tmp/attach.out" "$HP_ROUND_RE" 15 $((rounds + 2)) ||
	hp_fail "no round lines after the work was done"
kill -INT "$ATTACH_PID"
hp_wait_exit "$ATTACH_PID" 20
status=$?
[ $status -eq 0 ] || hp_fail "heapprof-attach exited $status after SIGINT"
hp_ok "heapprof-attach exited 0 after SIGINT"
hp_check_helpers_gone
hp_check_restored "$fds"
hp_check_overview_allocs $((T * K))
hp_stop_target
