#!/bin/bash
# test-e2e-modes.sh - exact totals in basic and extended modes, estimated frees with sampling.
#
# mt-target 4 1000 attached three times, with --mode basic, --mode extended and
# --sample-rate 512 (full mode, sampled): each time the last round line printed by
# --batch and heapprof-view overview --json count exactly the 4000 allocations of
# 48 + index bytes, and the 2000 cross-thread frees exactly in basic and extended mode;
# under sampling a free of an unsampled block is not seen, so the frees are estimated, as
# the allocations (counted exactly) less the live blocks' estimate (about 190 sampled
# blocks live, weight about 11: within 35%, five standard deviations), the same in the
# round line and the profile; overview --json gives the rate
# and round 1 as where sampling began (0 and null for the exact sessions), and the viewer's
# report says the numbers are estimates. heapprof-detach exits 0, the target is left as
# found and exits 0.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"

T=4
K=1000
target=$HP_TARGETS/mt-target

hp_require_python
hp_require_ptrace
hp_require_binaries "$target"

allocs=$((T * K))
frees=$((T * (K / 2)))
abytes=0
for ((i = 0; i < T; i++)); do
	abytes=$((abytes + K * (48 + i)))
done

# check_session FREES ARGS...: one session of heapprof-attach ARGS on a fresh mt-target;
# FREES is exact or estimated.
check_session()
{
	local how=$1 fds rounds last n field want got
	shift

	hp_start_target "$target" $T $K
	fds=$(hp_fd_count "$TARGET_PID")
	hp_attach --batch "$@" --output "$hp_tmp/p.hpf" "$TARGET_PID"
	hp_send go
	hp_wait_line "$TARGET_OUT" '^done$' 30 || hp_fail "$*: the target did not finish its work"
	rounds=$(hp_count_lines "$hp_tmp/attach.out" "$HP_ROUND_RE")
	hp_wait_line "$hp_tmp/attach.out" "$HP_ROUND_RE" 15 $((rounds + 2)) ||
		hp_fail "$*: no round lines after the work was done"
	hp_detach_session "$fds"
	last=$(grep -E "$HP_ROUND_RE" "$hp_tmp/attach.out" | tail -n 1)
	got=$(echo "$last" | sed -E 's/.* frees=([0-9]+) .*/\1/')
	if [ "$how" = estimated ]; then
		if [ "$got" -lt $((frees * 65 / 100)) ] || [ "$got" -gt $((frees * 135 / 100)) ]; then
			hp_fail "$*: $got frees estimated, expected $frees within 35%"
		fi
	else
		[ "$got" = "$frees" ] || hp_fail "$*: $got frees, expected $frees"
	fi
	echo "$last" | grep -q " allocs=$allocs frees=$got allocated=$abytes " ||
		hp_fail "$*: the last round line is '$last', expected allocs=$allocs allocated=$abytes"
	hp_ok "$*: last round line: $last ($how frees)"
	hp_view_json overview
	for field in allocations:$allocs frees:$got allocated_bytes:$abytes \
		live_blocks:$((allocs - got)) pid:$TARGET_PID; do
		want=${field#*:}
		n=$(hp_json_field "$hp_tmp/overview.json" "${field%%:*}") ||
			hp_fail "$*: bad overview JSON"
		[ "$n" = "$want" ] || hp_fail "$*: overview ${field%%:*} is $n, expected $want"
	done
	hp_ok "$*: overview: $allocs allocations, $got frees, $abytes bytes"
	n=$(hp_json_field "$hp_tmp/overview.json" sample_rate)
	from=$(hp_json_field "$hp_tmp/overview.json" sampled_from_round)
	if [ "$how" = estimated ]; then
		[ "$n/$from" = 512/1 ] ||
			hp_fail "$*: overview sample_rate/sampled_from_round is $n/$from, not 512/1"
		grep -q "^# per-site numbers are estimates from sampling (--sample-rate 512)$" \
			"$hp_tmp/attach.out" || hp_fail "$*: the viewer's report does not say so"
	else
		[ "$n/$from" = 0/None ] ||
			hp_fail "$*: overview sample_rate/sampled_from_round is $n/$from, not 0/null"
	fi
	hp_ok "$*: overview: sample_rate $n, sampled_from_round $from"
	hp_stop_target
	rm -f "$hp_tmp/p.hpf" "$hp_tmp/attach.out" "$hp_tmp/attach.err"
}

check_session exact --mode basic
check_session exact --mode extended
check_session estimated --sample-rate 512
