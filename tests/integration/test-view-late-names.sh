#!/bin/bash
# test-view-late-names.sh - heapprof-view names the frames a killed viewer left unnamed.
#
# The viewer names a stack's frames up to its site at once and the outer ones when the
# session ends. mt-target 2 1000 is attached, does its work, and the viewer is killed
# after two more rounds: the session ends, the target is restored, and the profile's outer
# frames (worker_main, and run_round inlined into it) have no names in it. heapprof-view
# names them from mt-target's file, whose build-id is the profile's, and says so.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"

hp_require_ptrace
hp_require_binaries "$HP_TARGETS/mt-target"

hp_start_target "$HP_TARGETS/mt-target" 2 1000
fds=$(hp_fd_count "$TARGET_PID")
hp_attach --batch --interval 100 --output "$hp_tmp/p.hpf" "$TARGET_PID"
hp_send go
hp_wait_line "$TARGET_OUT" '^done$' 30 || hp_fail "the target did not finish its work"
rounds=$(hp_count_lines "$hp_tmp/attach.out" "$HP_ROUND_RE")
hp_wait_line "$hp_tmp/attach.out" "$HP_ROUND_RE" 15 $((rounds + 2)) ||
	hp_fail "no round lines after the work was done"
[ -n "$ATTACH_CHILDREN" ] || hp_fail "heapprof-attach started no viewer"
# shellcheck disable=SC2086 # the viewer's pid
kill -KILL $ATTACH_CHILDREN
hp_wait_exit "$ATTACH_PID" 30
[ $? -ne 124 ] || hp_fail "heapprof-attach did not end after its viewer was killed"
grep -q "the viewer was killed by signal 9" "$hp_tmp/attach.err" ||
	hp_fail "heapprof-attach did not say its viewer was killed: $(cat "$hp_tmp/attach.err")"
hp_ok "viewer killed; heapprof-attach ended: $(tail -n 1 "$hp_tmp/attach.err")"
hp_check_restored "$fds"

"$HP_VIEW" export --format collapsed "$hp_tmp/p.hpf" >"$hp_tmp/collapsed" 2>"$hp_tmp/view.err" ||
	hp_fail "heapprof-view export failed: $(cat "$hp_tmp/view.err")"
grep -Eq "note: named [0-9]+ frames that .*p.hpf left as module\+offset" "$hp_tmp/view.err" ||
	hp_fail "heapprof-view did not say it named frames: $(cat "$hp_tmp/view.err")"
# The file as the build named it: tests/targets/mt-target.c, or ../tests/... in a build
# directory of its own.
frame='[^;]*mt-target\.c:[0-9]+\)'
grep -Eq "worker_main \($frame;run_round \($frame;worker_alloc \($frame " "$hp_tmp/collapsed" ||
	hp_fail "the outer frames are not named: $(cat "$hp_tmp/collapsed")"
hp_ok "heapprof-view named the outer frames: $(grep -o 'worker_main[^;]*' "$hp_tmp/collapsed" | head -n 1)"
hp_stop_target
