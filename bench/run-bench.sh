#!/bin/bash
# run-bench.sh - the benchmark suite of issue 3, run by `make bench`.
#
# Usage: run-bench.sh BUILDDIR [RESULTS]
# BUILDDIR is a build tree where `make bench` has built the commands, the payload, the viewer,
# bench/* and bench/stop-probe. The report (Markdown) goes to stdout and, when given, to
# RESULTS; progress goes to stderr. Environment:
#   BENCH_SECONDS        seconds per run (default 5)
#   BENCH_THREADS        thread counts (default "1 2 4")
#   BENCH_PROGRAMS       programs (default: the seven of the brief, microbench and
#                        request-paths; "none")
#   BENCH_PROBE_THREADS  spinning threads of the stop probe (default 2)
#   BENCH_STOP_CYCLES    attach/detach cycles on the stop probe (default 3; 0 skips it)
#   BENCH_REPEAT         runs of each program and P, unprofiled and in every mode in turn
#                        (default 1); a cell is the median of its runs
#   REDIS_REQUESTS       requests per redis-benchmark test (default 2000000; 0 skips redis)
#   REDIS_PASSES         passes of unprofiled, full and sampled redis runs (default 3)
#   BENCH_REFERENCE_RATE unprofiled microbench pairs/s at P=1 in the reference run of
#                        docs/performance.md (default 151800000)
# Each program and P runs unprofiled, then under heapprof-attach in every mode the command
# offers (basic, extended, full, sampled; a mode it does not offer yet is "n/a"), then under
# heaptrack when it is installed (installed here when run as root). A profiled run starts
# the program and attaches as soon as it prints "ready": the few milliseconds before the
# attach completes count, unprofiled, in the program's total. With BENCH_REPEAT=N that
# sequence runs N times (heaptrack once, after them): each ratio is taken against the
# unprofiled run of its own turn, and the cell is the median of the N. The report's ratios are of
# wall-clock throughput, as issue 3 defines them; a line gives heapprof's P=2 means also by
# CPU time of the target (each program prints its cpu_s), which a busy host moves less.
bench_me=run-bench
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/bench-lib.sh
. "$here/bench-lib.sh"

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
	echo "usage: $0 BUILDDIR [RESULTS]" >&2
	exit 2
fi
build=$(cd "$1" && pwd) || exit 2
results=${2:-}
bench_attach=$build/src/heapprof-attach
bench_detach=$build/src/heapprof-detach
bench_view=$build/src/heapprof-view
bindir=$build/bench

seconds=${BENCH_SECONDS:-5}
threads=${BENCH_THREADS:-1 2 4}
seven='threadtest linux-scalability shbench binary-trees hash-table parse-json queue'
programs=${BENCH_PROGRAMS:-$seven microbench request-paths}
[ "$programs" = none ] && programs=''
probe_threads=${BENCH_PROBE_THREADS:-2}
stop_cycles=${BENCH_STOP_CYCLES:-3}
repeat=${BENCH_REPEAT:-1}
if ! [[ $repeat =~ ^[1-9][0-9]*$ ]]; then
	bench_log "BENCH_REPEAT wants a number of runs from 1, not '$repeat'"
	exit 2
fi
sample_rate=524288
# A profiled run may take much longer than asked only if the program ignores --seconds.
deadline=$((${seconds%.*} * 4 + 60))

for f in "$bench_attach" "$bench_detach" "$bench_view" "$bindir/stop-probe"; do
	[ -x "$f" ] || {
		bench_log "$f is missing: run 'make bench', which builds it"
		exit 1
	}
done
for p in $programs; do
	[ -x "$bindir/$p" ] || {
		bench_log "unknown program $p (not in $bindir)"
		exit 1
	}
done
scope=$(cat /proc/sys/kernel/yama/ptrace_scope 2>/dev/null || echo 0)
if [ "$scope" = 3 ] || { [ "$scope" != 0 ] && [ "$(id -u)" != 0 ]; }; then
	bench_log "attaching needs root or kernel.yama.ptrace_scope=0 (it is $scope)"
	exit 1
fi

# The modes heapprof-attach offers: label and options. Until --mode and --sample-rate exist,
# only the default (full) mode runs.
modes=(basic extended full sampled)
declare -A mode_opts=([full]="")
if bench_attach_supports --mode; then
	mode_opts[basic]="--mode basic"
	mode_opts[extended]="--mode extended"
	mode_opts[full]="--mode full"
fi
if bench_attach_supports --sample-rate; then
	mode_opts[sampled]="--sample-rate $sample_rate"
fi

if ! command -v heaptrack >/dev/null; then
	bench_install heaptrack || true
fi
have_heaptrack=
command -v heaptrack >/dev/null && have_heaptrack=1

# run_attached PROG P LABEL OPTS: one run under heapprof-attach; sets r_ops, r_cpu, r_size,
# r_mem (empty when the run failed).
run_attached()
{
	local prog=$1 nthreads=$2 label=$3 opts=$4 base

	r_ops='' r_cpu='' r_size='' r_mem=''
	base=$bench_tmp/$prog-$nthreads-$label
	bench_attached "$base" "$prog P=$nthreads $label" "$deadline" "$opts" "$bindir/$prog" \
		--seconds "$seconds" --threads "$nthreads" || return
	r_ops=$(bench_ops "$base.prog")
	r_cpu=$(bench_cpu_rate "$base.prog")
	r_size=$(stat -c %s "$base.hpf" 2>/dev/null)
	r_mem=$(bench_profile_field "$base.hpf" payload_bytes)
	rm -f "$base.hpf"
}

# run_heaptrack PROG P: one run under heaptrack; sets r_ops and r_size.
run_heaptrack()
{
	local prog=$1 nthreads=$2 base f

	r_ops='' r_size='' r_mem=''
	base=$bench_tmp/$prog-$nthreads-heaptrack
	if ! heaptrack -o "$base.ht" "$bindir/$prog" --seconds "$seconds" --threads "$nthreads" \
		>"$base.out" 2>"$base.err" </dev/null; then
		bench_log "$prog P=$nthreads: heaptrack failed: $(tail -n 2 "$base.err")"
		return
	fi
	r_ops=$(bench_ops "$base.out")
	# heaptrack appends the compressor's extension to the name it is given.
	for f in "$base".ht*; do
		[ -f "$f" ] && r_size=$(stat -c %s "$f") && rm -f "$f"
	done
}

# The geometric means are of the brief's seven programs only.
of_seven()
{
	[[ " $seven " == *" $1 "* ]]
}

# The host's speed moved by half between sessions on the same virtual machine, and with it
# every ratio (memory-bound payload work slows more than the programs' own): a run is
# comparable with the reference only on a host about as fast, which this says first.
reference_rate=${BENCH_REFERENCE_RATE:-151800000}
"$bindir/microbench" --seconds 2 --threads 1 >"$bench_tmp/speed.out" 2>&1 </dev/null
host_rate=$(bench_ops "$bench_tmp/speed.out")
host_slow=$(awk -v h="$host_rate" -v r="$reference_rate" 'BEGIN { print (h == "" || h < 0.8 * r) }')
host_line="- Host speed: microbench unprofiled at P=1 for 2 s before the runs: $(bench_rate "$host_rate")"
host_line+=" pairs/s (the reference run: $(bench_rate "$reference_rate"))."
if [ "$host_slow" = 1 ]; then
	host_line+=" Below 80% of the reference: this run's ratios are not comparable with it."
	bench_log "warning: the host runs at $(bench_rate "$host_rate") pairs/s against" \
		"$(bench_rate "$reference_rate") in the reference run; ratios will not be comparable"
fi

load_start=$(cut -d' ' -f1 /proc/loadavg)
rows=()
full_p2=() sampled_p2=() heaptrack_p2=()
full_p2_cpu=() sampled_p2_cpu=()
micro_full='' micro_p=''
# quotient A B: A / B as a plain number, or nothing when either is missing or 0.
quotient()
{
	awk -v a="$1" -v b="$2" 'BEGIN { if (a != "" && b != "" && b + 0 != 0) print a / b }'
}

# ratio_cell X: a median quotient as a ratio cell, "failed" when no run gave one.
ratio_cell()
{
	if [ -n "$1" ]; then printf '%.2fx\n' "$1"; else echo failed; fi
}

for prog in $programs; do
	for nthreads in $threads; do
		declare -A q=() q_cpu=() size=() mem=()
		bases=()
		for ((turn = 1; turn <= repeat; turn++)); do
			what="$prog P=$nthreads"
			[ "$repeat" -gt 1 ] && what+=" ($turn of $repeat)"
			bench_log "$what: unprofiled"
			"$bindir/$prog" --seconds "$seconds" --threads "$nthreads" \
				>"$bench_tmp/plain.out" 2>&1 </dev/null
			base_ops=$(bench_ops "$bench_tmp/plain.out")
			base_cpu=$(bench_cpu_rate "$bench_tmp/plain.out")
			bases+=("$base_ops")
			for m in "${modes[@]}"; do
				[ -n "${mode_opts[$m]+set}" ] || continue
				bench_log "$what: $m"
				run_attached "$prog" "$nthreads" "$m" "${mode_opts[$m]}"
				q[$m]+=" $(quotient "$base_ops" "$r_ops")"
				q_cpu[$m]+=" $(quotient "$base_cpu" "$r_cpu")"
				size[$m]+=" $r_size" mem[$m]+=" $r_mem"
			done
		done
		base_ops=$(bench_median "${bases[@]}")
		row="| $prog | $nthreads | $(bench_rate "$base_ops")"
		for m in "${modes[@]}"; do
			if [ -z "${mode_opts[$m]+set}" ]; then
				row="$row | n/a | n/a | n/a"
				continue
			fi
			# shellcheck disable=SC2086 # the lists are words
			ratio=$(ratio_cell "$(bench_median ${q[$m]})")
			# shellcheck disable=SC2086
			row="$row | $ratio | $(bench_bytes "$(bench_median ${size[$m]})")"
			# shellcheck disable=SC2086
			row="$row | $(bench_bytes "$(bench_median ${mem[$m]})")"
			if [ "$nthreads" = 2 ] && of_seven "$prog"; then
				# shellcheck disable=SC2086
				cpu=$(ratio_cell "$(bench_median ${q_cpu[$m]})")
				[ "$m" = full ] && full_p2+=("$ratio") && full_p2_cpu+=("$cpu")
				[ "$m" = sampled ] && sampled_p2+=("$ratio") && sampled_p2_cpu+=("$cpu")
			fi
			if [ "$prog" = microbench ] && [ "$m" = full ] && [ -z "$micro_p" ]; then
				micro_full=$ratio micro_p=$nthreads
			fi
		done
		if [ -n "$have_heaptrack" ]; then
			bench_log "$prog P=$nthreads: heaptrack"
			run_heaptrack "$prog" "$nthreads"
			ratio=$(bench_ratio "$base_ops" "$r_ops")
			[ -z "$r_ops" ] && ratio=failed
			row="$row | $ratio | $(bench_bytes "$r_size") |"
			[ "$nthreads" = 2 ] && of_seven "$prog" && heaptrack_p2+=("$ratio")
		else
			row="$row | n/a | n/a |"
		fi
		rows+=("$row")
	done
done

# probe_phase NAME: the stop probe begins phase NAME; waits for its answer.
probe_phase()
{
	echo "phase $1" >&"$probe_fd"
	bench_wait_line "$probe_out" "^phase=$1 begun" 5
}

# probe_max PREFIX FIELD: the largest value (ms) of FIELD (4: gap, 6: stop) over the probe's
# phases named PREFIX and a number ("baseline": that phase alone).
probe_max()
{
	awk -F'[= ]' -v re="^phase=$1[0-9]* max_gap_ms=" -v f="$2" '$0 ~ re &&
		(m == "" || $f > m + 0) { m = $f } END { print m }' "$probe_out"
}

# The stop probe: a baseline with nothing attached, then attach/detach cycles, each phase
# named so the probe attributes every gap it sees.
stop_probe()
{
	local ppid apid i

	probe_out=$bench_tmp/probe.out
	bench_spawn_fed "$bench_tmp/probe.ctl" "$probe_out" "$bench_tmp/probe.err" \
		"$bindir/stop-probe" --threads "$probe_threads" || return 1
	ppid=$bench_pid
	probe_fd=$bench_feed_fd
	bench_wait_line "$probe_out" '^ready pid=' 10 || return 1
	probe_phase baseline || return 1
	sleep 2
	for ((i = 1; i <= stop_cycles; i++)); do
		probe_phase "attach$i" || return 1
		bench_spawn "$bench_tmp/probe-att.out" "$bench_tmp/probe-att.err" "$bench_attach" \
			--batch --output "$bench_tmp/probe.hpf" "$ppid"
		apid=$bench_pid
		bench_wait_line "$bench_tmp/probe-att.err" 'attached to' 30 || {
			bench_log "stop probe: heapprof-attach failed: $(tail -n 2 \
				"$bench_tmp/probe-att.err")"
			bench_wait_exit "$apid" 10
			return 1
		}
		probe_phase "attached$i" || return 1
		sleep 1
		probe_phase "detach$i" || return 1
		"$bench_detach" "$ppid" >/dev/null 2>"$bench_tmp/probe-det.err" || {
			bench_log "stop probe: heapprof-detach failed: $(tail -n 2 \
				"$bench_tmp/probe-det.err")"
			return 1
		}
		bench_wait_exit "$apid" 30 || return 1
		probe_phase "idle$i" || return 1
		sleep 0.5
	done
	echo quit >&"$probe_fd"
	exec {probe_fd}>&-
	bench_wait_exit "$ppid" 10 || return 1
	probe_stops="$(probe_max attach 6) ms, detach $(probe_max detach 6) ms, baseline"
	probe_stops="$probe_stops $(probe_max baseline 6) ms (while attached $(probe_max attached 6)"
	probe_gaps="$(probe_max attach 4) ms, detach $(probe_max detach 4) ms, baseline"
	probe_gaps="$probe_gaps $(probe_max baseline 4) ms (while attached $(probe_max attached 4)"
}

probe_stops='' probe_gaps=''
if [ "$stop_cycles" != 0 ]; then
	bench_log "stop probe: $stop_cycles attach/detach cycles, $probe_threads threads"
	stop_probe || bench_log "stop probe failed"
fi

redis_report=$bench_tmp/redis.md
if [ "${REDIS_REQUESTS-}" != 0 ]; then
	bench_log "redis-server under redis-benchmark"
	bash "$here/redis-bench.sh" "$build" >"$redis_report" ||
		echo "redis: the benchmark failed (see the messages above)" >"$redis_report"
else
	echo "redis: skipped (REDIS_REQUESTS=0)" >"$redis_report"
fi

src=$(cd "$here/.." && pwd)
commit=$(git -C "$src" describe --always --dirty 2>/dev/null || echo unknown)
report()
{
	local r

	echo "Run of $(date -u '+%Y-%m-%d %H:%M UTC'), commit $commit, $(nproc) CPUs," \
		"kernel $(uname -r), load average $load_start at the start and" \
		"$(cut -d' ' -f1 /proc/loadavg) at the end: BENCH_SECONDS=$seconds" \
		"BENCH_THREADS=\"$threads\"$([ "$repeat" -gt 1 ] &&
			echo " BENCH_REPEAT=$repeat (each cell the median of $repeat runs; heaptrack" \
				"one run, against the median unprofiled rate)")."
	echo
	echo "| program | P | unprofiled ops/s | basic | size | payload | extended | size |" \
		"payload | full | size | payload | sampled | size | payload | heaptrack | size |"
	echo "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
	for r in "${rows[@]}"; do
		echo "$r"
	done
	echo
	echo "- Geometric mean of the ratios at P=2, the seven programs (microbench and" \
		"request-paths excluded):" \
		"full $(bench_geomean "${full_p2[@]}"), sampled $(bench_geomean "${sampled_p2[@]}")," \
		"heaptrack $(bench_geomean "${heaptrack_p2[@]}")."
	echo "- The same for heapprof by CPU time (operations per CPU second of the target," \
		"unprofiled / profiled: the host's steal time is left out, and so is the viewer," \
		"a process of its own; docs/performance.md, \"Noise\"): full" \
		"$(bench_geomean "${full_p2_cpu[@]}"), sampled $(bench_geomean "${sampled_p2_cpu[@]}")."
	echo "- free+malloc microbenchmark, full mode, P=${micro_p:-n/a}: ${micro_full:-n/a}."
	echo "$host_line"
	if [ -n "$probe_stops" ]; then
		echo "- Stop probe ($probe_threads spinning threads, $stop_cycles cycles): longest" \
			"stop at attach $probe_stops ms). Largest gaps, time waiting for a CPU" \
			"included: attach $probe_gaps ms)."
	elif [ "$stop_cycles" != 0 ]; then
		echo "- Stop probe: failed (see the messages of the run)."
	fi
	echo
	cat "$redis_report"
}
if [ -n "$results" ]; then
	report | tee "$results"
	bench_log "report written to $results"
else
	report
fi
