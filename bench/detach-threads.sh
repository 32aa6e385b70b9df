#!/bin/bash
# detach-threads.sh - `make bench-detach`: how long a detach takes as a target's threads grow.
#
# Usage: detach-threads.sh BUILDDIR
# For each T in DETACH_THREADS (default "250 1000 3000"): starts the test target mt-target
# with T threads, attaches heapprof-attach --batch, has every thread allocate 40 blocks
# ("go"), then runs heapprof-detach and times it until heapprof-attach has exited; checks
# that no heapprof mapping is left and that the target exits 0 (its blocks intact). Prints
# one line a T: threads, seconds, the longest any thread was stopped by the detach and by
# the attach before it (heapprof-attach's reports), heapprof-detach's exit status, and
# whether the session switched to sampling (--max-memory reached). A detach is timed
# rather than tested in `make check`, where a bound on it would only flake
# (docs/reliability.md, "What broke").
bench_me="detach-threads"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/bench-lib.sh
. "$here/bench-lib.sh"

if [ $# -ne 1 ]; then
	echo "usage: $0 BUILDDIR" >&2
	exit 2
fi
build=$1
target=$build/tests/targets/mt-target
bench_attach=$build/src/heapprof-attach
detach=$build/src/heapprof-detach
for f in "$target" "$bench_attach" "$detach"; do
	if [ ! -x "$f" ]; then
		bench_log "$f is missing: run 'make bench-detach'"
		exit 1
	fi
done

now()
{
	awk '{ print $1 }' /proc/uptime
}

# one T: prints its line (above); fails on a leftover.
one()
{
	local t=$1 base=$bench_tmp/t$1 fd tpid apid start end rc sampled stop_ms attach_ms

	bench_spawn_fed "$base.in" "$base.out" "$base.err" "$target" "$t" 40 || return 1
	tpid=$bench_pid
	fd=$bench_feed_fd
	bench_wait_line "$base.out" '^ready$' 60 || {
		bench_log "mt-target $t did not start"
		return 1
	}
	bench_spawn "$base.att" "$base.att.err" "$bench_attach" --batch --output "$base.hpf" \
		"$tpid"
	apid=$bench_pid
	bench_wait_line "$base.att" '^round=1 ' 60 || {
		bench_log "no round from heapprof-attach: $(cat "$base.att.err")"
		return 1
	}
	echo go >&"$fd"
	bench_wait_line "$base.out" '^done$' 60 || {
		bench_log "mt-target $t did not finish its allocations"
		return 1
	}
	start=$(now)
	"$detach" "$tpid" >"$base.det" 2>&1
	rc=$?
	bench_wait_exit "$apid" 120
	end=$(now)
	if grep -q heapprof "/proc/$tpid/maps"; then
		bench_log "mt-target $t still maps heapprof after the detach"
		return 1
	fi
	stop_ms=$(sed -n 's/.*detached from [0-9]*, no thread stopped over \([0-9.]*\) ms.*/\1/p' \
		"$base.att.err")
	attach_ms=$(sed -n 's/.*attached to [0-9]* (.*), no thread stopped over \([0-9.]*\) ms.*/\1/p' \
		"$base.att.err")
	sampled=no
	grep -q 'sampling (--max-memory was reached)' "$base.att" && sampled=yes
	echo exit >&"$fd"
	exec {fd}>&-
	if ! bench_wait_exit "$tpid" 60; then
		bench_log "mt-target $t exited with a failure: $(cat "$base.err")"
		return 1
	fi
	awk -v t="$t" -v s="$start" -v e="$end" -v rc="$rc" -v sm="$sampled" -v st="${stop_ms:-?}" \
		-v at="${attach_ms:-?}" \
		'BEGIN { printf "threads=%d detach_s=%.2f longest_stop_ms=%s attach_stop_ms=%s " \
			"detach_rc=%d sampled=%s\n", t, e - s, st, at, rc, sm }'
}

status=0
for t in ${DETACH_THREADS:-250 1000 3000}; do
	one "$t" || status=1
done
exit $status
