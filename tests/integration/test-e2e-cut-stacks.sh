#!/bin/bash
# test-e2e-cut-stacks.sh - when the stack table is full, stacks are cut short, not lost.
#
# tree-target 17 allocates from 262143 call paths of about 20 frames, more than the stack
# table holds under --max-memory 16M (a quarter of it for frames). The paths past its end
# are cut to their innermost frames (payload/stacks.h): every allocation is still counted
# at its site, none is lost, and the profile says which stacks were cut. overview --json
# gives cut_stacks, the text overview a "Cut stacks:" line, the viewer's report at the end
# how many, hotspots the site with all 262143 allocations, and the call tree a node for
# the dropped frames.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"

D=17
target=$HP_TARGETS/tree-target
cut_text="[outer frames dropped: heapprof's stack table was full]"

hp_require_python
hp_require_ptrace
hp_require_binaries "$target"

HP_PROFILE_OPTS=(--interval 100 --max-memory 16M)
hp_profile_go "$target" $D
hp_stop_target

allocs=$(((1 << (D + 1)) - 1))
hp_view_json overview
for field in allocations:$allocs allocated_bytes:$((allocs * 32)) lost:0 sample_rate:0; do
	got=$(hp_json_field "$hp_tmp/overview.json" "${field%%:*}") || hp_fail "bad overview JSON"
	[ "$got" = "${field#*:}" ] ||
		hp_fail "overview ${field%%:*} is $got, expected ${field#*:}"
done
cut=$(hp_json_field "$hp_tmp/overview.json" cut_stacks) || hp_fail "bad overview JSON"
stacks=$(hp_json_field "$hp_tmp/overview.json" stacks) || hp_fail "bad overview JSON"
[ "$cut" -gt 0 ] || hp_fail "overview cut_stacks is $cut: no stack was cut"
[ "$stacks" -lt "$allocs" ] || hp_fail "$stacks stacks for $allocs paths: none was cut"
hp_ok "overview: $allocs allocations exact, none lost, $stacks stacks of which $cut cut"

"$HP_VIEW" overview "$hp_tmp/p.hpf" >"$hp_tmp/overview.txt" ||
	hp_fail "heapprof-view overview failed"
grep -q "^Cut stacks: *$cut, their outer frames dropped: heapprof's stack table was full" \
	"$hp_tmp/overview.txt" ||
	hp_fail "the text overview does not say stacks were cut: $(cat "$hp_tmp/overview.txt")"
grep -q "^# $cut stacks cut short: heapprof's stack table was full" "$hp_tmp/attach.out" ||
	hp_fail "the viewer's report does not say stacks were cut: $(tail -n 5 "$hp_tmp/attach.out")"
hp_ok "the text overview and the viewer's report say $cut stacks were cut"

"$HP_VIEW" hotspots "$hp_tmp/p.hpf" >"$hp_tmp/hotspots.txt" ||
	hp_fail "heapprof-view hotspots failed"
grep -Eq "^ *$allocs .* node +.*tree-target\.c:[0-9]+$" "$hp_tmp/hotspots.txt" ||
	hp_fail "hotspots does not give node all $allocs allocations: $(cat "$hp_tmp/hotspots.txt")"
"$HP_VIEW" tree "$hp_tmp/p.hpf" >"$hp_tmp/tree.txt" || hp_fail "heapprof-view tree failed"
grep -qF "$cut_text" "$hp_tmp/tree.txt" ||
	hp_fail "the call tree has no node for the dropped frames: $(head -n 5 "$hp_tmp/tree.txt")"
hp_ok "hotspots counts all $allocs at node; the call tree shows the dropped frames"
