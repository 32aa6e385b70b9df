#!/bin/bash
# The viewer is killed: the payload goes quiet, the session ends, and the target is clean;
# a second attach while one runs is refused naming the first; attaching afterwards works.
. "$(dirname "$0")/lib.sh"
. "$top_srcdir/tests/stress/lib-stress.sh"

hp_require_ptrace
hp_require_binaries "$ST_TARGET"
st_start
st_kill_viewer || hp_fail "killing the viewer left the target unclean"
hp_ok "viewer killed: target clean"

hp_attach --interval 50 --output "$hp_tmp/p.hpf" "$TARGET_PID"
"$HP_ATTACH" --output "$hp_tmp/second.hpf" "$TARGET_PID" >"$hp_tmp/out" 2>"$hp_tmp/err"
status=$?
[ $status -eq 1 ] || hp_fail "a second heapprof-attach exited $status"
grep -q "already being profiled by heapprof-attach (pid $ATTACH_PID)" "$hp_tmp/err" ||
	hp_fail "the second attach says: $(cat "$hp_tmp/err")"
hp_ok "second attach refused: $(cat "$hp_tmp/err")"
hp_detach_session "$ST_FDS"
st_clean "after the session" || hp_fail "the target is not clean"
hp_ok "the target passes its self-check"
hp_stop_target
