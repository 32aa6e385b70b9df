#!/bin/bash
# test-e2e-duration.sh - --duration ends the session by itself: heapprof-attach exits 0
# after about that long, the target keeps running, restored, and the profile is readable.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"

hp_require_ptrace
hp_require_binaries "$HP_TARGETS/mt-target"

hp_start_target "$HP_TARGETS/mt-target" 2 100
fds=$(hp_fd_count "$TARGET_PID")
start=$SECONDS
hp_attach --duration 2 --output "$hp_tmp/p.hpf" "$TARGET_PID"
hp_ok "attached with --duration 2"
hp_send go
hp_wait_line "$TARGET_OUT" '^done$' 30 || hp_fail "the target did not finish its work"
hp_wait_exit "$ATTACH_PID" 20
status=$?
[ $status -ne 124 ] || hp_fail "heapprof-attach --duration 2 still runs after 20 s"
[ $status -eq 0 ] || hp_fail "heapprof-attach --duration 2 exited $status"
elapsed=$((SECONDS - start))
[ $elapsed -ge 1 ] || hp_fail "heapprof-attach --duration 2 ended after $elapsed s"
hp_ok "heapprof-attach ended by itself after about $elapsed s and exited 0"
hp_check_helpers_gone
hp_check_restored "$fds"
"$HP_VIEW" overview "$hp_tmp/p.hpf" >"$hp_tmp/view.out" 2>"$hp_tmp/view.err" ||
	hp_fail "heapprof-view overview cannot read the profile"
hp_ok "heapprof-view overview reads the profile"
hp_stop_target
