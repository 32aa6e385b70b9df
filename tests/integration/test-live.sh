#!/bin/bash
# test-live.sh - the full-screen live view, on a real terminal (tmux).
#
# heapprof-attach without --batch on mt-target 4 1000 inside a 120x40 tmux pane: the screen
# shows the header (pid, elapsed time, rounds, live bytes, RSS), the worker_alloc site once
# the target has worked, and the key help; 'a' switches the table to the allocation rate;
# 'q' detaches: heapprof-attach exits 0, the summary is left on the restored screen, no
# process of the session is left, the target maps nothing of heapprof, the terminal is
# in its normal mode and the profile counts the work. Then again, ended by SIGTERM to the
# viewer: the terminal is restored all the same. Last, on tree-target 17 under
# --max-memory 16M, whose call paths outnumber the stack table, the header says the stacks
# were cut.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"

command -v tmux >/dev/null 2>&1 || hp_skip "tmux is not installed"
hp_require_python
hp_require_ptrace
hp_require_binaries "$HP_TARGETS/mt-target" "$HP_TARGETS/tree-target"

sock=$hp_tmp/tmux.sock
hp_tmux()
{
	tmux -f /dev/null -S "$sock" "$@"
}
trap 'status=$?; hp_tmux kill-server 2>/dev/null; hp_cleanup; exit $status' EXIT

screen=$hp_tmp/screen.txt
hp_capture()
{
	hp_tmux capture-pane -p -t "$session" >"$screen" 2>/dev/null
}

# hp_wait_screen REGEX SECONDS: until the pane shows a line matching REGEX.
hp_wait_screen()
{
	local ticks=$(($2 * 10))

	while :; do
		hp_capture
		grep -qE -- "$1" "$screen" && return 0
		((ticks-- > 0)) || return 1
		sleep 0.1
	done
}

LIVE_OPTS=()
hp_start_target "$HP_TARGETS/mt-target" 4 1000
fds=$(hp_fd_count "$TARGET_PID")

# live_attach NAME: heapprof-attach (no --batch) on the target in a new 120x40 tmux session
# NAME (which the other helpers then use), with the options in LIVE_OPTS. The
# shell there records its exit status in attach.rc, then the terminal's settings in
# stty.txt; stderr goes to a file so the test can wait for "attached to".
live_attach()
{
	local pid

	session=$1
	rm -f "$hp_tmp/attach.rc" "$hp_tmp/attach.err" "$hp_tmp/stty.txt" "$hp_tmp/shell.pid"
	hp_tmux new-session -d -s "$session" -x 120 -y 40 \
		"echo \$\$ >'$hp_tmp/shell.pid'; LANG=C.UTF-8 '$HP_ATTACH' ${LIVE_OPTS[*]} \
		-o '$hp_tmp/p.hpf' $TARGET_PID 2>'$hp_tmp/attach.err'; echo \$? >'$hp_tmp/attach.rc'; \
		stty -a >'$hp_tmp/stty.txt'; sleep 60" ||
		hp_error "tmux cannot start a session"
	hp_wait_line "$hp_tmp/attach.err" "attached to $TARGET_PID" 20 ||
		hp_fail "heapprof-attach did not attach within 20 s"
	ATTACH_PID=$(cat "/proc/$(cat "$hp_tmp/shell.pid")/task/"*/children | tr -d ' ')
	[ -n "$ATTACH_PID" ] || hp_error "cannot find heapprof-attach in the tmux pane"
	ATTACH_CHILDREN=$(cat /proc/"$ATTACH_PID"/task/*/children 2>/dev/null | tr -d ' ')
	[ -n "$ATTACH_CHILDREN" ] || hp_fail "heapprof-attach runs no viewer"
	for pid in $ATTACH_PID $ATTACH_CHILDREN; do
		hp_track "$pid"
	done
}

# live_wait_exit SECONDS: waits for heapprof-attach to end; sets status to its exit status.
live_wait_exit()
{
	local n=$(($1 * 10))

	while [ ! -s "$hp_tmp/stty.txt" ]; do
		((n-- > 0)) || hp_fail "heapprof-attach did not exit within $1 s"
		sleep 0.1
	done
	status=$(cat "$hp_tmp/attach.rc")
}

live_attach first
hp_ok "heapprof-attach attached to mt-target 4 1000 (pid $TARGET_PID) on a terminal"

hp_send go
hp_wait_line "$TARGET_OUT" '^done$' 30 || hp_fail "the target did not finish its work"
hp_wait_screen 'worker_alloc \(mt-target\.c:[0-9]+\)' 15 ||
	hp_fail "the live view does not show the worker_alloc site: $(cat "$screen")"
hp_ok "the worker_alloc site is on the screen"
head -n 1 "$screen" | grep -qE "^heapprof +pid $TARGET_PID .*mt-target 4 1000 .*elapsed [0-9]+:[0-9]{2} +round [0-9]+" ||
	hp_fail "no header line with pid, command, elapsed time and round: $(head -n 1 "$screen")"
grep -qE '^allocations [0-9]+ ' "$screen" || hp_fail "no allocation totals: $(cat "$screen")"
grep -qE '^live [0-9]+ blocks, .* RSS ' "$screen" || hp_fail "no live and RSS line: $(cat "$screen")"
grep -qE '^live +[▁▂▃▄▅▆▇█]+ ' "$screen" || hp_fail "no live-bytes sparkline: $(cat "$screen")"
grep -q '^Sites by live bytes' "$screen" || hp_fail "the table is not by live bytes: $(cat "$screen")"
tail -n 1 "$screen" | grep -q 'q detach & quit .*a alloc rate .*g growth .*t temporary' ||
	hp_fail "no key help on the last line: $(tail -n 1 "$screen")"
hp_ok "header, sparkline, table and key help are shown"

hp_tmux send-keys -t "$session" a
hp_wait_screen '^Sites by allocation rate' 5 || hp_fail "'a' did not switch the table: $(cat "$screen")"
hp_ok "'a' ranks the sites by allocation rate"
hp_tmux send-keys -t "$session" g
hp_wait_screen '^Sites by growth' 5 || hp_fail "'g' did not switch the table: $(cat "$screen")"
hp_ok "'g' ranks the sites by growth"

hp_tmux send-keys -t "$session" q
live_wait_exit 30
[ "$status" = 0 ] || hp_fail "heapprof-attach exited $status after 'q': $(cat "$hp_tmp/attach.err")"
hp_ok "'q' detached: heapprof-attach exited 0"
hp_wait_screen "^profile written to $hp_tmp/p.hpf" 5 ||
	hp_fail "no summary on the restored screen: $(cat "$screen")"
grep -qE '^# +4000 allocs .* worker_alloc' "$screen" ||
	hp_fail "the summary lacks the worker_alloc site: $(cat "$screen")"
hp_ok "the terminal is back with the summary on it"
hp_check_helpers_gone
hp_check_restored "$fds"
grep -qE '(^| )icanon .*(^| )echo ' "$hp_tmp/stty.txt" ||
	hp_fail "the terminal was left in curses mode: $(cat "$hp_tmp/stty.txt")"
hp_ok "the terminal is back in its normal mode"
hp_check_overview_allocs 4000

# A viewer stopped with SIGTERM gives the terminal back too (heapprof-attach then detaches
# and says the profile may be incomplete).
live_attach second
hp_wait_screen '^heapprof +pid ' 10 || hp_fail "no live view the second time: $(cat "$screen")"
kill -TERM "$ATTACH_CHILDREN"
live_wait_exit 30
[ "$status" = 1 ] || hp_fail "heapprof-attach exited $status after its viewer was killed"
grep -q "the viewer was killed by signal 15" "$hp_tmp/attach.err" ||
	hp_fail "heapprof-attach did not report the killed viewer: $(cat "$hp_tmp/attach.err")"
grep -qE '(^| )icanon .*(^| )echo ' "$hp_tmp/stty.txt" ||
	hp_fail "SIGTERM left the terminal in curses mode: $(cat "$hp_tmp/stty.txt")"
hp_capture
! grep -q '^heapprof +pid ' "$screen" || hp_fail "the live view is still on the screen: $(cat "$screen")"
hp_ok "SIGTERM to the viewer: the terminal is restored, heapprof-attach exits 1"
hp_check_helpers_gone
hp_check_restored "$fds"
hp_stop_target

hp_start_target "$HP_TARGETS/tree-target" 17
fds=$(hp_fd_count "$TARGET_PID")
LIVE_OPTS=(--max-memory 16M)
live_attach third
hp_send go
hp_wait_line "$TARGET_OUT" '^done$' 30 || hp_fail "tree-target did not finish its work"
hp_wait_screen '^mode full, STACKS CUT \(stack table full\) +profile ' 15 ||
	hp_fail "the header does not say stacks were cut: $(cat "$screen")"
hp_ok "tree-target 17 under --max-memory 16M: the header says STACKS CUT"
hp_tmux send-keys -t "$session" q
live_wait_exit 30
[ "$status" = 0 ] || hp_fail "heapprof-attach exited $status after 'q': $(cat "$hp_tmp/attach.err")"
hp_check_helpers_gone
hp_check_restored "$fds"
hp_stop_target
