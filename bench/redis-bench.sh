#!/bin/bash
# redis-bench.sh - a real server under heapprof: redis-server driven by redis-benchmark -P 16,
# unprofiled, then attached in full mode, then sampled (when heapprof-attach offers
# --sample-rate), REDIS_PASSES times over. Run by run-bench.sh (`make bench`).
#
# Usage: redis-bench.sh BUILDDIR
# Prints a Markdown section on stdout, progress on stderr. REDIS_REQUESTS (default 2000000)
# is the request count of each test, REDIS_PASSES (default 3) how many times the three runs
# are made. A profiled run is compared with the mean of the unprofiled runs just before and
# just after its pass (one more unprofiled run ends the last), so that the machine's drift
# cancels; the share kept is the median of the passes. redis-server listens on 127.0.0.1
# only, on a free high port, saves nothing, and is stopped at the end whatever happens.
# redis-server and redis-tools are installed when missing and run as root; otherwise the
# section says "skipped" and the script exits 0.
bench_me=redis-bench
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/bench-lib.sh
. "$here/bench-lib.sh"

if [ $# != 1 ]; then
	echo "usage: $0 BUILDDIR" >&2
	exit 2
fi
build=$(cd "$1" && pwd) || exit 2
bench_attach=$build/src/heapprof-attach
bench_detach=$build/src/heapprof-detach
bench_view=$build/src/heapprof-view
requests=${REDIS_REQUESTS:-2000000}
passes=${REDIS_PASSES:-3}
tests=set,get,lpush,lpop
sample_rate=524288

echo "### redis-server"
echo
if ! command -v redis-server >/dev/null || ! command -v redis-benchmark >/dev/null; then
	bench_install redis-server redis-tools || {
		echo "skipped: redis-server and redis-tools are not installed."
		exit 0
	}
fi

port=$(bench_free_port) || {
	bench_log "no free port found"
	exit 1
}

bench_spawn "$bench_tmp/redis.out" "$bench_tmp/redis.err" redis-server --bind 127.0.0.1 \
	--port "$port" --save '' --appendonly no --dir "$bench_tmp" --daemonize no \
	--protected-mode yes --logfile "$bench_tmp/redis.log"
redis_pid=$bench_pid
bench_redis_up "$port" "$redis_pid" 10 || {
	bench_log "redis-server did not start: $(tail -n 3 "$bench_tmp/redis.log")"
	exit 1
}

# cpu_ticks: redis-server's user + system time so far, in clock ticks.
cpu_ticks()
{
	awk '{ print $14 + $15 }' "/proc/$redis_pid/stat"
}

# run_benchmark LABEL: one redis-benchmark pass; writes "TEST rps" lines to $bench_tmp/LABEL
# and the CPU ticks redis-server took meanwhile to $bench_tmp/LABEL.cpu.
run_benchmark()
{
	local before

	before=$(cpu_ticks)
	redis-benchmark -h 127.0.0.1 -p "$port" -P 16 -t "$tests" -n "$requests" -q \
		</dev/null 2>"$bench_tmp/$1.err" | tr '\r' '\n' |
		sed -n 's/^\([A-Z_]*\).*: \([0-9.]*\) requests per second.*/\1 \2/p' \
			>"$bench_tmp/$1"
	echo $(($(cpu_ticks) - before)) >"$bench_tmp/$1.cpu"
	[ -s "$bench_tmp/$1" ] || {
		bench_log "redis-benchmark ($1) printed no result: $(tail -n 2 "$bench_tmp/$1.err")"
		return 1
	}
}

# run_attached LABEL OPTS: the benchmark with heapprof attached (OPTS are heapprof-attach's
# mode options); adds the profile's numbers to $bench_tmp/LABEL.profile.
run_attached()
{
	local apid

	# shellcheck disable=SC2086 # opts is a list of words
	bench_spawn "$bench_tmp/$1.att" "$bench_tmp/$1.att.err" "$bench_attach" --batch $2 \
		--output "$bench_tmp/$1.hpf" "$redis_pid"
	apid=$bench_pid
	if ! bench_wait_line "$bench_tmp/$1.att.err" 'attached to' 30; then
		bench_log "heapprof-attach failed: $(tail -n 2 "$bench_tmp/$1.att.err")"
		bench_wait_exit "$apid" 10
		return 1
	fi
	# The first round is a one-off in the viewer, a process of its own: it opens every
	# module's debug info (libc's, compressed, ~50 ms of CPU time), which in a pass of
	# 1.5 s on two busy CPUs took 3% of the server's throughput, all in the test that ran
	# then. The runs measure heapprof attached, so they start once that round is taken.
	if ! bench_wait_line "$bench_tmp/$1.att" '^round=1 ' 10; then
		bench_log "heapprof-attach printed no first round: $(tail -n 2 "$bench_tmp/$1.att.err")"
	fi
	run_benchmark "$1"
	"$bench_detach" "$redis_pid" >/dev/null 2>"$bench_tmp/$1.det.err" ||
		bench_log "heapprof-detach failed: $(tail -n 2 "$bench_tmp/$1.det.err")"
	bench_wait_exit "$apid" 30 || return 1
	{
		echo "size $(stat -c %s "$bench_tmp/$1.hpf")"
		echo "payload $(bench_profile_field "$bench_tmp/$1.hpf" payload_bytes)"
		echo "allocations $(bench_profile_field "$bench_tmp/$1.hpf" allocations)"
	} >"$bench_tmp/$1.profile"
}

# rps LABEL TEST: the requests/s of TEST in run LABEL ("total": requests over the summed
# time of every test); empty when the run failed.
rps()
{
	[ -s "$bench_tmp/$1" ] || return 0
	if [ "$2" = total ]; then
		awk '$2 > 0 { t += 1 / $2; n++ } END { if (n) printf "%.0f\n", n / t }' \
			"$bench_tmp/$1"
	else
		awk -v t="$2" '$1 == t { print $2 }' "$bench_tmp/$1"
	fi
}

# ticks LABEL: the CPU ticks redis-server took in run LABEL, empty if it has none.
ticks()
{
	cat "$bench_tmp/$1.cpu" 2>/dev/null
}

# kept LABEL TEST [cpu]: the median over the passes of run LABEL's share (0 to 1 and above)
# of the unprofiled runs around its pass (their mean): its requests/s over theirs; or, with
# cpu, the CPU time they took for the same requests over its own (TEST unused). Unlike
# requests/s, CPU time leaves out the host's steal time: on a server bound by its CPU, it is
# the throughput the payload's own work leaves.
kept()
{
	local i a b v get=rps shares=()

	[ "${3:-}" = cpu ] && get=ticks
	for ((i = 1; i <= passes; i++)); do
		v=$($get "$1$i" "$2") a=$($get "plain$i" "$2") b=$($get "plain$((i + 1))" "$2")
		if [ -z "$v" ] || [ -z "$a" ] || [ -z "$b" ]; then
			continue
		fi
		[ "$get" = ticks ] && [ "$v" -le 0 ] && continue
		shares+=("$(awk -v v="$v" -v a="$a" -v b="$b" -v cpu="${3:-}" 'BEGIN {
			print cpu ? (a + b) / 2 / v : 2 * v / (a + b) }')")
	done
	bench_median "${shares[@]}"
}

# runs LABEL TEST [N]: the median requests/s of runs LABEL1..LABELN (default: the passes).
runs()
{
	local i vals=()

	for ((i = 1; i <= ${3:-$passes}; i++)); do
		vals+=("$(rps "$1$i" "$2")")
	done
	bench_median "${vals[@]}"
}

profile_field()
{
	[ -s "$bench_tmp/$1.profile" ] || return 0
	awk -v k="$2" '$1 == k { print $2 }' "$bench_tmp/$1.profile"
}

labels=(plain full)
bench_attach_supports --sample-rate && labels+=(sampled)
bench_log "redis-server on 127.0.0.1:$port, $requests requests per test, $passes passes:" \
	"warm-up, then unprofiled, ${labels[*]:1} in each pass"
run_benchmark warmup || exit 1
for ((pass = 1; pass <= passes; pass++)); do
	bench_log "redis: pass $pass of $passes"
	run_benchmark "plain$pass" || exit 1
	run_attached "full$pass" "" || true
	if [ ${#labels[@]} -gt 2 ]; then
		run_attached "sampled$pass" "--sample-rate $sample_rate" || true
	fi
done
run_benchmark "plain$pass" || exit 1

echo "redis-server $(redis-server --version | sed -n 's/.*v=\([^ ]*\).*/\1/p')," \
	"redis-benchmark -P 16 -t $tests -n $requests, $passes passes; the median requests/s of" \
	"the runs, and the median share kept (each profiled run against the mean of the" \
	"unprofiled runs before and after its pass):"
echo
header="| test | unprofiled |"
rule="|---|--:|"
for l in "${labels[@]:1}"; do
	header="$header $l | kept |"
	rule="$rule--:|--:|"
done
echo "$header"
echo "$rule"
for t in $(awk '{ print $1 }' "$bench_tmp/plain1") total; do
	line="| $t | $(bench_rate "$(runs plain "$t" $((passes + 1)))") |"
	for l in "${labels[@]:1}"; do
		k=$(kept "$l" "$t")
		line="$line $(bench_rate "$(runs "$l" "$t")") | $(bench_percent "$k" 1) |"
	done
	echo "$line"
done
echo
line="- By redis-server's CPU time for the same requests (unprofiled over attached, the"
line="$line median of the passes):"
for l in "${labels[@]:1}"; do
	line="$line $l $(bench_percent "$(kept "$l" total cpu)" 1),"
done
echo "${line%,}."
for l in "${labels[@]:1}"; do
	echo "- $l (pass $passes): profile $(bench_bytes "$(profile_field "$l$passes" size)")," \
		"payload memory $(bench_bytes "$(profile_field "$l$passes" payload)")," \
		"$(profile_field "$l$passes" allocations) allocations recorded."
done
