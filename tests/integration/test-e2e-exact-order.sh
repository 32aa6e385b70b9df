#!/bin/bash
# test-e2e-exact-order.sh - a request that goes through one allocation wrapper from several
# callers in an order gets each caller's allocations at that caller's stack, exactly, when
# the order changes under the payload's prediction of it.
#
# order-target's requests allocate from req_a, req_b, req_a, req_c and three times from
# req_loop: req_a is followed by another caller each time, so the payload names the next
# stack from the order of the last few (payload/hooks.c, the memos' order) rather than
# from req_a's own. The second pass takes req_a, req_c, req_a, req_b and req_loop twice,
# so every prediction learnt in the first is wrong once; the third pass takes the first
# order again. A stack named wrongly and not caught by its check would move allocations
# from one caller to another.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"

N=2000
target=$HP_TARGETS/order-target

hp_require_ptrace
hp_require_binaries "$target"

hp_start_target "$target" $N
fds=$(hp_fd_count "$TARGET_PID")
hp_attach --batch --interval 100 --output "$hp_tmp/p.hpf" "$TARGET_PID"
for pass in 1 2 3; do
	[ "$pass" = 1 ] || hp_ask flip flipped
	hp_ask go done "pass $pass"
done
hp_detach_session "$fds"
hp_stop_target

"$HP_VIEW" export --format collapsed --output "$hp_tmp/collapsed.txt" "$hp_tmp/p.hpf" \
	2>"$hp_tmp/view.err" || hp_fail "heapprof-view export failed: $(cat "$hp_tmp/view.err")"
grep 'wrap ([^ ]*order-target\.c:[0-9]*) [0-9]*$' "$hp_tmp/collapsed.txt" \
	>"$hp_tmp/wrap.txt" || hp_fail "no stack ends at wrap: $(head -n 3 "$hp_tmp/collapsed.txt")"
n=$(wc -l <"$hp_tmp/wrap.txt")
[ "$n" -eq 4 ] ||
	hp_fail "$n stacks end at wrap, not one for each of its 4 callers: $(cat "$hp_tmp/wrap.txt")"
# Per caller: a twice a request, b and c once, the loop 3 + 2 + 3 times over the passes.
for want in "req_a $((2 * 3 * N))" "req_b $((3 * N))" "req_c $((3 * N))" "req_loop $((8 * N))"; do
	fn=${want% *} count=${want#* }
	got=$(grep "[;]$fn (" "$hp_tmp/wrap.txt" | awk '{ s += $NF } END { print s + 0 }')
	[ "$got" = "$count" ] || hp_fail "$fn's stack has $got allocations, not $count"
done
hp_ok "each of wrap's 4 callers has exactly its own allocations over 3 passes"

hp_view_json overview
got=$(hp_json_field "$hp_tmp/overview.json" allocations) || hp_fail "bad overview JSON"
[ "$got" = $((20 * N)) ] || hp_fail "overview counts $got allocations, not $((20 * N))"
hp_ok "overview: $((20 * N)) allocations"
