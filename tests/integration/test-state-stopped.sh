#!/bin/bash
# A stopped process (kill -STOP, state T) is refused with a clear message and left stopped;
# once continued it can be profiled. A process stopped while attached is left stopped by
# the detach.
. "$(dirname "$0")/lib.sh"
. "$top_srcdir/tests/stress/lib-stress.sh"

hp_require_ptrace
hp_require_binaries "$ST_TARGET"
st_start
kill -STOP "$TARGET_PID"
# Every thread takes the group stop on its own way back to user space: wait until all
# show T, or the attach could come first and find the process running.
n=0
while grep -qv '^T$' < <(sed 's/.*) //; s/ .*//' "/proc/$TARGET_PID"/task/*/stat) && ((n++ < 100)); do
	sleep 0.1
done
"$HP_ATTACH" --output "$hp_tmp/p.hpf" "$TARGET_PID" >"$hp_tmp/out" 2>"$hp_tmp/err"
status=$?
[ $status -eq 1 ] || hp_fail "heapprof-attach on a stopped process exited $status"
grep -q "is stopped" "$hp_tmp/err" || hp_fail "unclear refusal: $(cat "$hp_tmp/err")"
hp_ok "refused: $(cat "$hp_tmp/err")"
state=$(sed 's/.*) //; s/ .*//' "/proc/$TARGET_PID/stat")
[ "$state" = T ] || hp_fail "the target is in state $state, not T, after the refusal"
hp_ok "the target is still stopped"
[ ! -e "$hp_tmp/p.hpf" ] || hp_fail "a profile was created"
kill -CONT "$TARGET_PID"
# SIGSTOP + SIGCONT themselves make epoll_wait fail with EINTR (signal(7)): the target's
# self-check would blame us for the kernel's rule.
ST_SELFCHECK=0
st_cycle "after SIGCONT" || hp_fail "profiling after SIGCONT failed"
hp_ok "after SIGCONT: attach and detach work, target clean"
hp_send exit
hp_wait_exit "$TARGET_PID" 15
hp_ok "the target exited"
