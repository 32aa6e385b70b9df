#!/bin/bash
# test-fault-viewer-stall.sh - a viewer that stops reading (stopped, or busy on a loaded
# machine) when the session ends costs at most the last round, never the profile.
#
# The stress target allocates at a high rate in many sizes (a round's SITES record is a few
# hundred KB), so with the viewer SIGSTOPped for 2 s, after its third round, the pipe fills.
# Session 1: heapprof-detach, and 1 s later the viewer continues: the payload, still within
# its stall limit (3 s without a byte taken, counted from its stop), writes the last round,
# and the profile ends "detach". The second of the limit left is for the viewer to take a
# byte after SIGCONT on a machine busy with other tests: with 2 s here, one run in
# `make -j2 check` saw the payload give up. Session 2: the viewer stays stopped until the
# payload is gone from the target, which it can only be once the payload has given the
# stream up (a fixed wait raced with a detach that a loaded machine started late); when
# the viewer continues it says in one line that the stream ended inside a record, writes
# the whole rounds and ends the profile "cut-short"; meanwhile heapprof-detach says the
# target is out and it waits for the viewer. Both times heapprof-attach and
# heapprof-detach exit 0, the target is left clean and its self-check passes.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=tests/stress/lib-stress.sh
. "$top_srcdir/tests/stress/lib-stress.sh"

hp_require_ptrace
hp_require_python
hp_require_binaries "$ST_TARGET"

# stalled_session NAME RESUME: one session whose viewer is stopped from 2 s before
# heapprof-detach until RESUME seconds after it, or with RESUME "released" until the
# target maps nothing of heapprof (within 30 s) and heapprof-detach, still waiting, has
# said that only the viewer is left.
stalled_session()
{
	local name=$1 resume=$2 viewer detach status i waiting

	hp_attach --batch --interval 50 --output "$hp_tmp/$name.hpf" "$TARGET_PID"
	viewer=$ATTACH_CHILDREN
	[ -n "$viewer" ] || hp_fail "$name: no viewer process"
	hp_wait_line "$hp_tmp/attach.out" "$HP_ROUND_RE" 20 3 || hp_fail "$name: no rounds before the stall"
	kill -STOP "$viewer"
	sleep 2
	"$HP_DETACH" "$TARGET_PID" >"$hp_tmp/$name.detach" 2>&1 &
	detach=$!
	if [ "$resume" = released ]; then
		for ((i = 0; i < 300; i++)); do
			hp_maps_clean "$TARGET_PID" && break
			sleep 0.1
		done
		waiting="^heapprof-detach: $TARGET_PID \\(stress-target\\) is detached; "
		waiting+="waiting for heapprof-attach's viewer to finish $hp_tmp/$name.hpf\$"
		hp_wait_line "$hp_tmp/$name.detach" "$waiting" 10 ||
			hp_fail "$name: heapprof-detach does not say it waits for the viewer: $(cat "$hp_tmp/$name.detach")"
	else
		sleep "$resume"
	fi
	kill -CONT "$viewer"
	wait "$detach"
	status=$?
	[ $status -eq 0 ] || hp_fail "$name: heapprof-detach exited $status: $(cat "$hp_tmp/$name.detach")"
	hp_wait_exit "$ATTACH_PID" 30
	status=$?
	[ $status -eq 0 ] || hp_fail "$name: heapprof-attach exited $status"
	hp_check_helpers_gone
	st_clean "$name" || hp_fail "$name: the target is not clean"
	hp_ok "$name: heapprof-detach and heapprof-attach exited 0, the target is clean"
	cp "$hp_tmp/attach.err" "$hp_tmp/$name.err"
	"$HP_VIEW" overview --json "$hp_tmp/$name.hpf" >"$hp_tmp/$name.json" ||
		hp_fail "$name: heapprof-view cannot read the profile"
}

st_start

stalled_session short 1
end=$(hp_json_field "$hp_tmp/short.json" end_reason)
[ "$end" = detach ] || hp_fail "short stall: the profile ends '$end', not 'detach': $(cat "$hp_tmp/short.err")"
hp_ok "a viewer stalled 3 s in all loses nothing: the profile ends 'detach'"

stalled_session long released
end=$(hp_json_field "$hp_tmp/long.json" end_reason)
[ "$end" = cut-short ] || hp_fail "long stall: the profile ends '$end', not 'cut-short'"
grep -q '^heapprof-viewer: the stream ended inside a record' "$hp_tmp/long.err" ||
	hp_fail "long stall: the viewer does not say the stream was cut: $(cat "$hp_tmp/long.err")"
rounds=$(hp_json_field "$hp_tmp/long.json" rounds)
[ "$rounds" -ge 3 ] || hp_fail "long stall: only $rounds rounds kept"
hp_ok "a viewer stalled past the detach: the payload gave up, the profile keeps $rounds whole rounds, ends 'cut-short'"

hp_stop_target
