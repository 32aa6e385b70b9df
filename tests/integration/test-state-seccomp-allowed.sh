#!/bin/bash
# test-state-seccomp-allowed.sh - a target under a seccomp filter that denies only what
# heapprof does not need (uname, with EPERM) is profiled end to end.
#
# seccomp-target deny-uname (tests/targets/seccomp-target.c) runs with its filter on every
# thread; heapprof-attach reads it (PTRACE_SECCOMP_GET_FILTER, root only), attaches, and
# the payload's collector thread, created under the filter, sends rounds. Checks: rounds
# arrive while the target allocates; heapprof-detach and heapprof-attach exit 0; the target
# has no heapprof mapping and its fd count from before, still answers and exits 0 with its
# memory intact.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"

target=$HP_TARGETS/seccomp-target
hp_require_ptrace
hp_require_binaries "$target"
[ "$(id -u)" = 0 ] || hp_skip "reading a seccomp filter needs root (CAP_SYS_ADMIN)"

hp_start_target "$target" deny-uname
grep -q '^Seccomp:[[:space:]]*2' "/proc/$TARGET_PID/status" ||
	hp_error "the target is not under a seccomp filter"
fds=$(hp_fd_count "$TARGET_PID")
hp_maps_clean "$TARGET_PID" || hp_error "the target maps heapprof before attaching"
hp_attach --batch --interval 100 --output "$hp_tmp/p.hpf" "$TARGET_PID"
hp_ok "attached to seccomp-target deny-uname (pid $TARGET_PID)"
hp_send go
hp_wait_line "$TARGET_OUT" '^done [0-9]+$' 30 || hp_fail "the target did not finish its work"
rounds=$(hp_count_lines "$hp_tmp/attach.out" "$HP_ROUND_RE")
hp_wait_line "$hp_tmp/attach.out" "$HP_ROUND_RE" 15 $((rounds + 2)) ||
	hp_fail "no round lines while attached under the filter"
hp_ok "rounds arrive from the collector thread under the filter"
hp_detach_session "$fds"
before=$(sed -n 's/^done //p' "$TARGET_OUT" | tail -n 1)
hp_send go
hp_wait_line "$TARGET_OUT" '^done [0-9]+$' 30 2 || hp_fail "the target did not work after the detach"
after=$(sed -n 's/^done //p' "$TARGET_OUT" | tail -n 1)
[ "$after" -gt "$before" ] || hp_fail "the churn thread stopped allocating ($before, then $after rounds)"
hp_ok "the target keeps allocating after the detach ($before, then $after churn rounds)"
hp_check_overview_allocs 1000
hp_stop_target
