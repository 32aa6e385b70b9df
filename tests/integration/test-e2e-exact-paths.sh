#!/bin/bash
# test-e2e-exact-paths.sh - a recursion whose every call is a call path of its own gets each
# path's allocations at that path's own stack, exactly, in every pass over it.
#
# tree-target 10 allocates once in each of its 2047 calls, every call a distinct path of
# left and right turns, as binary-trees' nodes are. Four passes: the first walks each
# path's stack; the later ones may take each stack without a walk, from what the path
# before it led to last time (payload/stacks.h, hp_stack_guess). The second and third
# take the turns in the other order, so the path that followed last time is mostly not the
# one that follows now, and the fourth in the first order again: a stack taken for the
# wrong path would show as one path counted twice and another not at all. The collapsed
# export must list 2047 distinct stacks ending at node's allocation, each with one
# allocation a pass, and no other.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"

D=10
PASSES=4
target=$HP_TARGETS/tree-target

hp_require_ptrace
hp_require_binaries "$target"

hp_start_target "$target" $D
fds=$(hp_fd_count "$TARGET_PID")
hp_attach --batch --interval 100 --output "$hp_tmp/p.hpf" "$TARGET_PID"
for pass in $(seq $PASSES); do
	if [ "$pass" = 2 ] || [ "$pass" = 4 ]; then
		hp_ask flip flipped
	fi
	hp_ask go done "pass $pass"
done
hp_detach_session "$fds"
hp_stop_target

paths=$(((1 << (D + 1)) - 1))
"$HP_VIEW" export --format collapsed --output "$hp_tmp/collapsed.txt" "$hp_tmp/p.hpf" \
	2>"$hp_tmp/view.err" || hp_fail "heapprof-view export failed: $(cat "$hp_tmp/view.err")"
grep 'node ([^ ]*tree-target\.c:[0-9]*) [0-9]*$' "$hp_tmp/collapsed.txt" \
	>"$hp_tmp/node.txt" || hp_fail "no stack ends at node: $(head -n 3 "$hp_tmp/collapsed.txt")"
n=$(wc -l <"$hp_tmp/node.txt")
[ "$n" -eq "$paths" ] || hp_fail "$n stacks end at node, not one for each of the $paths paths"
# Each path is the turns above its call: the same line twice would be one path counted twice.
n=$(sed 's/ [0-9]*$//' "$hp_tmp/node.txt" | sort -u | wc -l)
[ "$n" -eq "$paths" ] || hp_fail "only $n of the $paths stacks at node differ"
bad=$(awk -v p=$PASSES '$NF != p' "$hp_tmp/node.txt" | head -n 3)
[ -z "$bad" ] || hp_fail "stacks whose allocations are not one a pass ($PASSES): $bad"
hp_ok "$paths distinct stacks end at node, each with exactly $PASSES allocations"

hp_view_json overview
got=$(hp_json_field "$hp_tmp/overview.json" allocations) || hp_fail "bad overview JSON"
[ "$got" = $((paths * PASSES)) ] ||
	hp_fail "overview counts $got allocations, not $((paths * PASSES))"
hp_ok "overview: $((paths * PASSES)) allocations"
