#!/bin/bash
# heapprof-detach on a process that is not being profiled says so, exits 1 and does
# nothing to it.
. "$(dirname "$0")/lib.sh"

[ -x "$HP_DETACH" ] || hp_error "$HP_DETACH is missing: try 'make check'"

hp_spawn target sleep 300
target=$hp_pid
hp_wait_asleep "$target"
maps_before=$(cat "/proc/$target/maps")

"$HP_DETACH" "$target" >"$hp_tmp/out" 2>"$hp_tmp/err"
status=$?
[ $status -eq 1 ] || hp_fail "heapprof-detach exited $status, not 1: $(cat "$hp_tmp/err")"
want="heapprof-detach: process $target is not being profiled"
[ "$(cat "$hp_tmp/err")" = "$want" ] ||
	hp_fail "heapprof-detach says '$(cat "$hp_tmp/err")', expected '$want'"
hp_ok "exit 1: $want"
hp_alive "$target" || hp_fail "the target died"
[ "$(cat "/proc/$target/maps")" = "$maps_before" ] || hp_fail "the target's mappings changed"
grep -q '^TracerPid:[[:space:]]*0$' "/proc/$target/status" || hp_fail "the target is left traced"
hp_ok "the target is untouched"
exit 0
