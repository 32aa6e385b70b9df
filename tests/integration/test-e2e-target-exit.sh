#!/bin/bash
# test-e2e-target-exit.sh - the target exits while profiled: heapprof-attach notices, exits
# 0, leaves no helper process, and the profile is complete enough to analyse.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"

T=2 K=200
hp_require_python
hp_require_ptrace
hp_require_binaries "$HP_TARGETS/mt-target"

hp_start_target "$HP_TARGETS/mt-target" $T $K
hp_attach --batch --output "$hp_tmp/p.hpf" "$TARGET_PID"
hp_send go
hp_wait_line "$TARGET_OUT" '^done$' 30 || hp_fail "the target did not finish its work"
rounds=$(hp_count_lines "$hp_tmp/attach.out" "$HP_ROUND_RE")
hp_wait_line "$hp_tmp/attach.out" "$HP_ROUND_RE" 15 $((rounds + 2)) ||
	hp_fail "no round lines after the work was done"
hp_stop_target
hp_wait_exit "$ATTACH_PID" 20
status=$?
[ $status -ne 124 ] || hp_fail "heapprof-attach still runs 20 s after its target exited"
[ $status -eq 0 ] || hp_fail "heapprof-attach exited $status after its target exited"
hp_ok "heapprof-attach exited 0 after its target exited"
hp_check_helpers_gone
"$HP_VIEW" overview "$hp_tmp/p.hpf" >"$hp_tmp/view.out" 2>"$hp_tmp/view.err" ||
	hp_fail "heapprof-view overview cannot read the profile: $(cat "$hp_tmp/view.err")"
hp_ok "heapprof-view overview reads the profile"
hp_check_overview_allocs $((T * K))
