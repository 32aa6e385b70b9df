#!/bin/bash
# redis-inproc.sh - `make bench-redis-inproc`: the payload's instructions per request of
# redis-server, counted.
#
# Usage: redis-inproc.sh BUILDDIR [PAYLOAD]
# Runs redis-server under valgrind's callgrind, with PAYLOAD (default: BUILDDIR's payload)
# started inside it in full mode by bench/heapprof-preload.so, serving `redis-benchmark -P
# 16 -t set,get,lpush,lpop` with REDIS_INPROC_REQUESTS requests a test (default 20000) and
# then twice as many, and prints the instructions per request of the second half that the
# payload's own code ran (callgrind's count for its source files), and those of
# redis-server alone in runs without it. redis-server's own count varies from run to run
# with how its event loop met the requests (by 100 a request of some 4500), the payload's
# far less, so that is the figure to compare builds by; REDIS_INPROC_RUNS times (default 3),
# and the medians are printed. The kernel's work for the requests is not counted. A few
# minutes in all. INPROC_RATE: bytes between samples, to count sampled mode.
bench_me=redis-inproc
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/bench-lib.sh
. "$here/bench-lib.sh"

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
	echo "usage: $0 BUILDDIR [PAYLOAD]" >&2
	exit 2
fi
build=$(cd "$1" && pwd) || exit 2
payload=$(realpath "${2:-$build/payload/heapprof-payload.so}") || exit 2
preload=$build/bench/heapprof-preload.so
requests=${REDIS_INPROC_REQUESTS:-20000}
runs=${REDIS_INPROC_RUNS:-3}
tests=set,get,lpush,lpop
bench_install valgrind redis-server redis-tools || {
	bench_log "valgrind, redis-server and redis-tools are needed"
	exit 1
}
for f in "$payload" "$preload"; do
	[ -r "$f" ] || {
		bench_log "$f is missing: run 'make bench-redis-inproc'"
		exit 1
	}
done

# count N [PAYLOAD]: "all payload" instructions redis-server ran from its start to its
# shutdown after N requests of each test: all of them, and those of the payload's code.
count()
{
	local n=$1 port pid cg=$bench_tmp/cg.out

	port=$(bench_free_port) || {
		bench_log "no free port found"
		return 1
	}
	rm -f "$cg"
	bench_spawn "$bench_tmp/vg.out" "$bench_tmp/vg.err" env ${2:+HEAPPROF_PRELOAD_PAYLOAD="$2"} \
		${INPROC_RATE:+HEAPPROF_PRELOAD_RATE="$INPROC_RATE"} LD_PRELOAD="$preload" \
		valgrind --tool=callgrind --callgrind-out-file="$cg" redis-server \
		--bind 127.0.0.1 --port "$port" --save '' --appendonly no --dir "$bench_tmp" \
		--daemonize no --protected-mode yes
	pid=$bench_pid
	bench_redis_up "$port" "$pid" 30 || {
		bench_log "redis-server did not start under valgrind: $(cat "$bench_tmp/vg.out" \
			"$bench_tmp/vg.err" | grep -v '^==' | tail -n 2)"
		return 1
	}
	# The preload starts the payload 2 s after redis-server's start.
	sleep 3
	redis-benchmark -h 127.0.0.1 -p "$port" -P 16 -t "$tests" -n "$n" -q >/dev/null 2>&1 \
		</dev/null
	redis-cli -h 127.0.0.1 -p "$port" shutdown nosave >/dev/null 2>&1
	bench_wait_exit "$pid" 60 >/dev/null
	if [ ! -s "$cg" ] || grep -q "heapprof-preload:" "$bench_tmp/vg.err"; then
		bench_log "redis-server failed under callgrind: $(grep -v '^==' "$bench_tmp/vg.err" |
			tail -n 3)"
		return 1
	fi
	callgrind_annotate --threshold=100 --auto=no "$cg" 2>/dev/null | awk '
		/ PROGRAM TOTALS/ { gsub(",", "", $1); all = $1 }
		/ \(.*\)  (.*\/)?payload\/[^ :]*:/ { gsub(",", "", $1); own += $1 }
		END { if (all) print all, own + 0; else exit 1 }'
}

# per [PAYLOAD]: "all payload" instructions per request between N and 2N requests a test.
per()
{
	local a b

	a=$(count "$requests" "$@") && b=$(count $((requests * 2)) "$@") || return 1
	awk -v a="$a" -v b="$b" -v n="$((requests * 4))" 'BEGIN { split(a, x, " ");
		split(b, y, " "); printf "%.1f %.1f\n", (y[1] - x[1]) / n, (y[2] - x[2]) / n }'
}

echo "payload: $payload${INPROC_RATE:+, sampled every $INPROC_RATE bytes}"
own=() alone=()
for ((r = 1; r <= runs; r++)); do
	w=$(per "$payload") && o=$(per) || exit 1
	read -r _ p <<<"$w"
	read -r a _ <<<"$o"
	own+=("$p") alone+=("$a")
	bench_log "run $r: the payload $p instructions a request; redis-server alone $a"
done
awk -v p="$(bench_median "${own[@]}")" -v a="$(bench_median "${alone[@]}")" \
	-v n="$requests" 'BEGIN { printf "redis-server   %d requests a test: the payload %7.1f" \
	" instructions a request, redis-server alone %7.1f (medians)\n", n, p, a }'
