#!/bin/bash
# ab-cpu.sh - `make bench-ab`: which of two payloads costs one program less, by CPU time.
#
# Usage: ab-cpu.sh BUILDDIR PROGRAM PAYLOAD_A PAYLOAD_B
# On a virtual machine the host's load moves wall-clock ratios by 20 to 40% between runs,
# more than most single changes are worth. This compares operations per CPU second of the
# process instead (the program's cpu_s: user + system time of all its threads while the
# workers ran, the payload's collector included; steal time is not in it). Each round runs
# PROGRAM unprofiled and then attached from its start with PAYLOAD_A, then the same with
# PAYLOAD_B (HEAPPROF_PAYLOAD), and prints both ratios; the last line gives each payload's
# median. Environment: AB_PAIRS rounds (default 3), AB_SECONDS per run (3), AB_THREADS (2),
# AB_OPTS heapprof-attach options ("--mode full").
bench_me=ab-cpu
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/bench-lib.sh
. "$here/bench-lib.sh"

if [ $# -ne 4 ]; then
	echo "usage: $0 BUILDDIR PROGRAM PAYLOAD_A PAYLOAD_B" >&2
	exit 2
fi
build=$(cd "$1" && pwd) || exit 2
prog=$build/bench/$2
bench_attach=$build/src/heapprof-attach
pairs=${AB_PAIRS:-3} seconds=${AB_SECONDS:-3} threads=${AB_THREADS:-2}
opts=${AB_OPTS:---mode full}
for f in "$prog" "$bench_attach" "$3" "$4"; do
	[ -e "$f" ] || {
		bench_log "$f is missing"
		exit 1
	}
done
trap bench_cleanup EXIT

# per_cpu [PAYLOAD]: operations per CPU second of one run, attached with PAYLOAD if given.
per_cpu()
{
	local base=$bench_tmp/ab

	if [ $# -eq 1 ]; then
		HEAPPROF_PAYLOAD=$1 bench_attached "$base" "$1" $((seconds * 4 + 30)) "$opts" \
			"$prog" --seconds "$seconds" --threads "$threads" || return 1
	else
		"$prog" --seconds "$seconds" --threads "$threads" >"$base.prog" 2>&1 </dev/null ||
			return 1
	fi
	bench_cpu_rate "$base.prog"
}

a_ratios=() b_ratios=()
for ((i = 1; i <= pairs; i++)); do
	for side in A B; do
		payload=$3
		[ $side = B ] && payload=$4
		if ! u=$(per_cpu) || ! p=$(per_cpu "$payload"); then
			bench_log "round $i, $side: a run failed"
			exit 1
		fi
		r=$(bench_ratio "$u" "$p")
		echo "round $i $side: $2 $opts P=$threads: $r (ops per CPU second $u unprofiled, $p attached)"
		if [ $side = A ]; then a_ratios+=("${r%x}"); else b_ratios+=("${r%x}"); fi
	done
done
echo "median: A $(bench_median "${a_ratios[@]}")x ($3), B $(bench_median "${b_ratios[@]}")x ($4)"
