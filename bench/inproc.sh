#!/bin/bash
# inproc.sh - `make bench-inproc`: the payload's instructions per operation, counted.
#
# Usage: inproc.sh BUILDDIR [PAYLOAD]
# Runs benchmark programs of bench/ with one thread for a fixed number of steps under
# valgrind's callgrind, with PAYLOAD (default: BUILDDIR's payload) loaded into the process
# and recording in full mode (the programs' --payload) and with none, each for a count of
# steps and for twice that, and prints for each program the instructions per operation
# (the program's own op: microbench a free+malloc pair, request-paths a request,
# binary-trees a node, parse-json an allocation of its DOM) that the second half took,
# with and without the payload, and their difference: the payload's own. Exact and
# repeatable where the attached benchmarks' ratios are not (docs/performance.md,
# "Instructions, counted"); a few seconds a program, a minute for parse-json.
# INPROC_PROGRAMS: "program:steps ..." to run instead of the four below; INPROC_RATE: bytes
# between samples, to count sampled mode instead of full mode; INPROC_MODE: basic or
# extended, to count that mode.
bench_me=inproc
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/bench-lib.sh
. "$here/bench-lib.sh"

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
	echo "usage: $0 BUILDDIR [PAYLOAD]" >&2
	exit 2
fi
build=$1
payload=${2:-$build/payload/heapprof-payload.so}
programs=${INPROC_PROGRAMS:-microbench:300 request-paths:3000 binary-trees:4 parse-json:3}
bench_install valgrind || exit 1
if [ ! -r "$payload" ]; then
	bench_log "$payload is missing: run 'make bench-inproc'"
	exit 1
fi

# count PROGRAM STEPS [--payload PATH]: "instructions operations" of one run.
count()
{
	local prog=$build/bench/$1 steps=$2 out ir ops
	shift 2
	out=$(valgrind --tool=callgrind --callgrind-out-file=/dev/null "$prog" --threads 1 \
		--iterations "$steps" "$@" 2>&1 </dev/null)
	ir=$(sed -n 's/.*Collected : \([0-9]*\).*/\1/p' <<<"$out")
	ops=$(sed -n 's/^ops_per_s=.* ops=\([0-9]*\)$/\1/p' <<<"$out")
	if [ -z "$ir" ] || [ -z "$ops" ] || [ "$ops" = 0 ]; then
		bench_log "$prog failed under callgrind:"
		echo "$out" | tail -5 >&2
		return 1
	fi
	echo "$ir $ops"
}

# per PROGRAM STEPS [--payload PATH]: instructions per operation between a run of STEPS
# steps and one of twice as many, so that what starting the program (and the payload)
# costs once falls out.
per()
{
	local prog=$1 steps=$2 a b
	shift 2
	a=$(count "$prog" "$steps" "$@") && b=$(count "$prog" $((steps * 2)) "$@") || return 1
	awk -v a="$a" -v b="$b" 'BEGIN { split(a, x, " "); split(b, y, " ");
		printf "%.1f %d\n", (y[1] - x[1]) / (y[2] - x[2]), y[2] - x[2] }'
}

echo "payload: $payload${INPROC_RATE:+, sampled every $INPROC_RATE bytes}${INPROC_MODE:+, $INPROC_MODE mode}"
status=0
for spec in $programs; do
	prog=${spec%%:*} steps=${spec#*:}
	if [ ! -x "$build/bench/$prog" ]; then
		bench_log "$build/bench/$prog is missing: run 'make bench-inproc'"
		status=1
		continue
	fi
	if ! with=$(per "$prog" "$steps" --payload "$payload" ${INPROC_RATE:+--payload-rate "$INPROC_RATE"} \
		${INPROC_MODE:+--payload-mode "$INPROC_MODE"}) ||
		! without=$(per "$prog" "$steps"); then
		status=1
		continue
	fi
	read -r w ops <<<"$with"
	read -r o _ <<<"$without"
	awk -v p="$prog" -v n="$ops" -v w="$w" -v o="$o" 'BEGIN {
		printf "%-14s %7d ops: %7.1f instructions each with the payload, %6.1f without:" \
			" the payload %7.1f\n", p, n, w, o, w - o }'
done
exit $status
