#!/bin/bash
# heapprof-attach refuses a statically linked program ("not supported yet") and leaves it
# as it was.
. "$(dirname "$0")/lib.sh"

[ -x "$HP_ATTACH" ] || hp_error "$HP_ATTACH is missing: try 'make check'"
command -v cc >/dev/null 2>&1 || hp_skip "no C compiler to build a static program"

cat >"$hp_tmp/static-target.c" <<'C'
#include <unistd.h>

int main(void)
{
	for (;;)
		pause();
}
C
cc -static -o "$hp_tmp/static-target" "$hp_tmp/static-target.c" 2>"$hp_tmp/cc.err" ||
	hp_skip "cannot link statically (is libc6-dev's libc.a installed?): $(head -n 1 "$hp_tmp/cc.err")"

hp_spawn static-target "$hp_tmp/static-target"
target=$hp_pid
# 34: pause(2).
hp_wait_in_syscall "$target" 34
maps_before=$(cat "/proc/$target/maps")

"$HP_ATTACH" --output "$hp_tmp/never.hpf" "$target" >"$hp_tmp/out" 2>"$hp_tmp/err"
status=$?
[ $status -eq 1 ] || hp_fail "heapprof-attach exited $status, not 1: $(cat "$hp_tmp/err")"
msg="heapprof-attach: process $target (static-target) is statically linked (no libc.so.6 is "
msg+="mapped): not supported yet"
want="$msg"
grep -q -F -- "$want" "$hp_tmp/err" ||
	hp_fail "heapprof-attach says '$(cat "$hp_tmp/err")', expected '$want...'"
hp_ok "exit 1: $(cat "$hp_tmp/err")"
hp_alive "$target" || hp_fail "the target died"
[ "$(cat "/proc/$target/maps")" = "$maps_before" ] || hp_fail "the target's mappings changed"
grep -q '^TracerPid:[[:space:]]*0$' "/proc/$target/status" || hp_fail "the target is left traced"
[ ! -e "$hp_tmp/never.hpf" ] || hp_fail "a profile file was created"
hp_ok "the target is untouched"
exit 0
