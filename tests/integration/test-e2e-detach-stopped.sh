#!/bin/bash
# test-e2e-detach-stopped.sh - heapprof-detach while the heapprof-attach it asks is stopped
# (Ctrl-Z in its terminal, or SIGSTOP): it says within seconds that heapprof-attach is
# stopped and how to continue it, and waits; once heapprof-attach continues, the session
# ends as usual (both exit 0, the target restored).
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"

hp_require_ptrace
hp_require_binaries "$HP_TARGETS/mt-target"

hp_start_target "$HP_TARGETS/mt-target" 2 100
fds=$(hp_fd_count "$TARGET_PID")
hp_attach --batch --interval 100 --output "$hp_tmp/p.hpf" "$TARGET_PID"
hp_wait_line "$hp_tmp/attach.out" "$HP_ROUND_RE" 20 || hp_fail "no rounds before the stop"
kill -STOP "$ATTACH_PID"
hp_spawn detach "$HP_DETACH" "$TARGET_PID"
detach=$hp_pid
want="^heapprof-detach: heapprof-attach \\(pid $ATTACH_PID\\) is stopped and detaches only "
want+="once it runs again: continue it \\(fg in its shell, or kill -CONT $ATTACH_PID\\); waiting\$"
if ! hp_wait_line "$hp_tmp/detach.err" "$want" 10; then
	kill -CONT "$ATTACH_PID"
	hp_fail "heapprof-detach does not say heapprof-attach is stopped: $(cat "$hp_tmp/detach.err")"
fi
hp_ours "$detach" || hp_fail "heapprof-detach did not wait for the stopped heapprof-attach"
hp_ok "heapprof-detach says heapprof-attach is stopped, and waits"
kill -CONT "$ATTACH_PID"
hp_wait_exit "$detach" 30
status=$?
[ $status -eq 0 ] || hp_fail "heapprof-detach exited $status: $(cat "$hp_tmp/detach.err")"
hp_ok "heapprof-detach exited 0 once heapprof-attach continued"
hp_wait_exit "$ATTACH_PID" 15
status=$?
[ $status -eq 0 ] || hp_fail "heapprof-attach exited $status"
hp_check_helpers_gone
hp_check_restored "$fds"
hp_stop_target
