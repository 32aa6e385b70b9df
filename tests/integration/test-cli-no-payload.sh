#!/bin/bash
# Without its payload (or its viewer) heapprof-attach says where it looked and how to fix
# it, and the target is not touched.
. "$(dirname "$0")/lib.sh"

[ -x "$HP_ATTACH" ] || hp_error "$HP_ATTACH is missing: try 'make check'"

snapshot()
{
	grep -E '^(State|TracerPid|Threads|SigPnd|ShdPnd|SigBlk|SigIgn|SigCgt):' "/proc/$1/status"
	cat "/proc/$1/maps"
	ls -l "/proc/$1/fd" | awk 'NR > 1 { print $9, $10, $11 }'
}

hp_spawn target sleep 300
target=$hp_pid
hp_wait_asleep "$target"
before=$(snapshot "$target")

# expect_missing WANT ENV...
expect_missing()
{
	local want=$1 status

	shift
	env "$@" "$HP_ATTACH" --output "$hp_tmp/never.hpf" "$target" >"$hp_tmp/out" 2>"$hp_tmp/err"
	status=$?
	[ $status -eq 1 ] ||
		hp_fail "heapprof-attach ($*) exited $status, not 1: $(cat "$hp_tmp/err")"
	[ "$(cat "$hp_tmp/err")" = "$want" ] ||
		hp_fail "heapprof-attach ($*) says '$(cat "$hp_tmp/err")', expected '$want'"
	hp_ok "exit 1: $want"
	hp_alive "$target" || hp_fail "the target died"
	[ "$(snapshot "$target")" = "$before" ] ||
		hp_fail "the target changed: $(diff <(echo "$before") <(snapshot "$target"))"
	[ ! -e "$hp_tmp/never.hpf" ] || hp_fail "a profile file was created"
	hp_ok "the target is untouched"
}

msg="heapprof-attach: payload not found at /nonexistent: reinstall heapprof, or set "
msg+="HEAPPROF_PAYLOAD"
expect_missing "$msg" \
	HEAPPROF_PAYLOAD=/nonexistent
msg="heapprof-attach: viewer not found at /nonexistent/viewer: reinstall heapprof, or set "
msg+="HEAPPROF_VIEWER"
expect_missing "$msg" \
	HEAPPROF_PAYLOAD=/dev/null HEAPPROF_VIEWER=/nonexistent/viewer
exit 0
