#!/bin/bash
# inproc.sh - `make bench-inproc`: the payload's instructions per allocation, counted.
#
# Usage: inproc.sh BUILDDIR [PAYLOAD]
# Runs bench/inproc on its three shapes (loop, request, tree) under valgrind's callgrind,
# with PAYLOAD (default: BUILDDIR's payload) and with none, each for a count and for twice
# that, and prints for each shape the instructions per allocation (and its free) that the
# second half took, with and without the payload, and their difference: the payload's
# own. Exact and repeatable where the attached benchmarks' ratios are not
# (docs/performance.md, "Instructions, counted"); about 10 s a shape.
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
prog=$build/bench/inproc
bench_install valgrind || exit 1
if [ ! -x "$prog" ] || [ ! -r "$payload" ]; then
	bench_log "$prog or $payload is missing: run 'make bench-inproc'"
	exit 1
fi

# count PAYLOAD SHAPE N: "instructions allocations" of one run.
count()
{
	local out ir allocs
	out=$(valgrind --tool=callgrind --callgrind-out-file=/dev/null "$prog" "$1" "$2" "$3" 2>&1)
	ir=$(sed -n 's/.*Collected : \([0-9]*\).*/\1/p' <<<"$out")
	allocs=$(sed -n 's/.*allocations=\([0-9]*\).*/\1/p' <<<"$out")
	if [ -z "$ir" ] || [ -z "$allocs" ] || [ "$allocs" = 0 ]; then
		bench_log "$2 failed under callgrind:"
		echo "$out" | tail -5 >&2
		return 1
	fi
	echo "$ir $allocs"
}

# per PAYLOAD SHAPE N: instructions per allocation between a run of N and one of 2N, so
# that what starting the payload and the program costs once falls out.
per()
{
	local a b
	a=$(count "$1" "$2" "$3") && b=$(count "$1" "$2" $(($3 * 2))) || return 1
	awk -v a="$a" -v b="$b" 'BEGIN { split(a, x, " "); split(b, y, " ");
		printf "%.1f %d\n", (y[1] - x[1]) / (y[2] - x[2]), y[2] - x[2] }'
}

echo "payload: $payload"
status=0
for spec in "loop 20" "request 2000" "tree 4"; do
	read -r shape n <<<"$spec"
	if ! with=$(per "$payload" "$shape" "$n") || ! without=$(per none "$shape" "$n"); then
		status=1
		continue
	fi
	read -r w allocs <<<"$with"
	read -r o _ <<<"$without"
	awk -v s="$shape" -v a="$allocs" -v w="$w" -v o="$o" 'BEGIN {
		printf "%-8s %7d allocations: %7.1f instructions each with the payload, %6.1f" \
			" without: the payload %7.1f\n", s, a, w, o, w - o }'
done
exit $status
