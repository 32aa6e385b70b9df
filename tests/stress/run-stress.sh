#!/bin/bash
# run-stress.sh [CYCLES] - make check-stress: CYCLES (default 100) attach/detach cycles on
# the stress target (with its tree thread, so the payload's counters by stack id are made,
# drained and unmapped at every cycle), and as many faults: heapprof-attach killed with
# SIGKILL at a random moment and at every remote call (in it and after it), the viewer
# killed; plus a second attach and an attach under strace, both refused. Prints the cycles
# survived and every failure; exits 1 if there was any.
. "$(dirname "$0")/../integration/lib.sh"
. "$(dirname "$0")/lib-stress.sh"

cycles=${1:-100}
hp_require_ptrace
hp_require_binaries "$ST_TARGET"
st_start --trees
ok=0 failed=0 faults=0
count()
{
	if "$@"; then ok=$((ok + 1)); else failed=$((failed + 1)); fi
}
points=(memfd_create dlopen close heapprof_start heapprof_release_pipe heapprof_stop heapprof_free_memory
	dlclose)
after_points=("${points[@]}" restore)
for ((i = 1; i <= cycles; i++)); do
	count st_cycle "cycle $i"
	case $((i % 4)) in
	0) count st_kill_random $((RANDOM % 600)) ;;
	1) count st_kill_at HEAPPROF_TEST_KILL_IN "${points[RANDOM % ${#points[@]}]}" ;;
	2) count st_kill_at HEAPPROF_TEST_KILL_AFTER "${after_points[RANDOM % ${#after_points[@]}]}" ;;
	3) count st_kill_viewer ;;
	esac
	faults=$((faults + 1))
	hp_alive "$TARGET_PID" || { echo "FAIL: the target died at cycle $i" >&2; failed=$((failed + 1)); break; }
	((i % 10)) || echo "$i cycles, $faults faults, $failed failures"
done
if command -v strace >/dev/null; then
	strace -o /dev/null -p "$TARGET_PID" &
	s=$!
	sleep 0.5
	if "$HP_ATTACH" --output "$hp_tmp/x.hpf" "$TARGET_PID" 2>"$hp_tmp/x.err" ||
		! grep -q "(strace)" "$hp_tmp/x.err"; then
		echo "FAIL: attach under strace: $(cat "$hp_tmp/x.err")" >&2
		failed=$((failed + 1))
	fi
	kill $s
	wait $s 2>/dev/null
	sleep 0.2
fi
count st_clean "final"
hp_send exit
hp_wait_exit "$TARGET_PID" 15
status=$?
[ $status -eq 0 ] || { echo "FAIL: the target exited $status: $(cat "$TARGET_OUT" | tail -n 1)" >&2; failed=$((failed + 1)); }
echo "check-stress: $cycles cycles, $faults faults injected, $ok checks passed, $failed failures"
echo "check-stress: target's last report: $(tail -n 1 "$TARGET_OUT")"
[ $failed -eq 0 ]
