#!/bin/bash
# test-e2e-cxx.sh - C++ operator new/delete and new[]/delete[] are counted exactly and
# attributed to the C++ member functions that call them (demangled names).
#
# cxx-target 4 500: hp::Worker::make_node does `new Node` (64 bytes), make_buffer does
# `new unsigned char[100 + index]`, each 500 times per thread; every second object is
# deleted by another thread. Then the same in basic mode, whose new, new[] and delete[]
# have hooks of their own: the totals exact, none counted twice (a real delete calls free).
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"

T=4 K=500
src=$top_srcdir/tests/targets/cxx-target.cc
hp_require_python
hp_require_ptrace
hp_require_binaries "$HP_TARGETS/cxx-target"
line_new=$(hp_source_line "$src" '/* HP_SITE_NEW */') || exit 99
line_array=$(hp_source_line "$src" '/* HP_SITE_NEW_ARRAY */') || exit 99

hp_profile_go "$HP_TARGETS/cxx-target" $T $K
hp_view_json hotspots --top 0
allocs=$((T * K))
frees=$((T * (K / 2)))
live=$((allocs - frees))
hp_check_site "$hp_tmp/hotspots.json" "~Worker::make_node" cxx-target.cc "$line_new" \
	$allocs $frees $((allocs * 64)) $live $((live * 64)) ||
	hp_fail "the operator new site is wrong"
hp_ok "new Node site exact in hp::Worker::make_node at cxx-target.cc:$line_new"
abytes=0 lbytes=0
for ((i = 0; i < T; i++)); do
	abytes=$((abytes + K * (100 + i)))
	lbytes=$((lbytes + (K - K / 2) * (100 + i)))
done
hp_check_site "$hp_tmp/hotspots.json" "~Worker::make_buffer" cxx-target.cc "$line_array" \
	$allocs $frees $abytes $live $lbytes || hp_fail "the operator new[] site is wrong"
hp_ok "new[] site exact in hp::Worker::make_buffer at cxx-target.cc:$line_array"
hp_check_overview_allocs $((2 * allocs))
hp_stop_target
rm -f "$hp_tmp/p.hpf" "$hp_tmp/attach.out" "$hp_tmp/attach.err"

HP_PROFILE_OPTS=(--mode basic)
hp_profile_go "$HP_TARGETS/cxx-target" $T $K
abytes=$((abytes + allocs * 64))
last=$(grep -E "$HP_ROUND_RE" "$hp_tmp/attach.out" | tail -n 1)
echo "$last" | grep -q " allocs=$((2 * allocs)) frees=$((2 * frees)) allocated=$abytes " ||
	hp_fail "basic mode: the last round line is '$last', expected allocs=$((2 * allocs))" \
		"frees=$((2 * frees)) allocated=$abytes"
hp_view_json overview
for field in allocations:$((2 * allocs)) frees:$((2 * frees)) allocated_bytes:$abytes \
	live_blocks:$((2 * live)); do
	n=$(hp_json_field "$hp_tmp/overview.json" "${field%%:*}") || hp_fail "bad overview JSON"
	[ "$n" = "${field#*:}" ] ||
		hp_fail "basic mode: overview ${field%%:*} is $n, expected ${field#*:}"
done
hp_ok "basic mode: $((2 * allocs)) allocations, $((2 * frees)) frees, $abytes bytes, exact"
hp_stop_target
