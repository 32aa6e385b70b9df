# shellcheck shell=bash
# bench-lib.sh - helpers shared by the scripts of bench/ (sourced, not run).
#
# Contract: the sourcing script sets bench_me (its name for messages) and, before calling the
# helpers that run heapprof's commands, bench_attach and bench_view (their paths). bench_spawn starts a
# background process and remembers it; bench_cleanup (installed as the EXIT trap) stops
# every remembered process still alive, newest first, so a profiler detaches before its
# target goes, and removes $bench_tmp. Every wait has a deadline. Numbers are formatted
# with awk, so no helper needs anything beyond coreutils.

set -u
# shellcheck disable=SC2154 # set by the sourcing script, as the contract says
: "${bench_me:?}"

bench_pids=()
bench_tmp=$(mktemp -d "${TMPDIR:-/tmp}/heapprof-$bench_me.XXXXXX") || {
	echo "$bench_me: cannot create a temporary directory" >&2
	exit 1
}

bench_log()
{
	echo "$bench_me: $*" >&2
}

# The waits poll while a measured program runs, on the same CPUs: each fork of a poll
# (sleep, a command substitution) cost about 1 ms of CPU time, two a poll and ten polls a
# second 2 to 3% of a CPU, and only the profiled runs wait that way. So polls use builtins only: reads of
# /proc, and a timed read of a FIFO that nothing ever writes, held open both ways.
if ! mkfifo "$bench_tmp/idle" || ! exec {bench_idle_fd}<>"$bench_tmp/idle"; then
	bench_log "cannot make a FIFO in $bench_tmp"
	exit 1
fi

# bench_sleep SECONDS: sleeps without a process.
bench_sleep()
{
	read -r -t "$1" -u "$bench_idle_fd" _ || true
}

# Alive and not a zombie.
bench_alive()
{
	local stat

	{ read -r stat <"/proc/$1/stat"; } 2>/dev/null || return 1
	stat=${stat##*) }
	[ "${stat%% *}" != Z ]
}

# bench_stop PID: SIGTERM, up to 5 s of grace, then SIGKILL; reaps it.
bench_stop()
{
	local n=0

	if bench_alive "$1"; then
		kill -TERM "$1" 2>/dev/null
		while bench_alive "$1" && ((n++ < 50)); do
			bench_sleep 0.1
		done
		kill -KILL "$1" 2>/dev/null
	fi
	wait "$1" 2>/dev/null
}

bench_cleanup()
{
	local i

	for ((i = ${#bench_pids[@]} - 1; i >= 0; i--)); do
		bench_stop "${bench_pids[i]}"
	done
	rm -rf "$bench_tmp"
}
trap 'status=$?; bench_cleanup; exit $status' EXIT
trap 'exit 1' INT TERM HUP

# bench_spawn OUT ERR CMD... : CMD in the background with stdout in OUT and stderr in ERR,
# stdin from /dev/null; sets bench_pid.
bench_spawn()
{
	local out=$1 err=$2

	shift 2
	"$@" >"$out" 2>"$err" </dev/null &
	bench_pid=$!
	bench_pids+=("$bench_pid")
}

# bench_spawn_fed FIFO OUT ERR CMD... : as bench_spawn, but CMD reads its commands from a
# new FIFO, which this shell holds open read-write (so neither side blocks in open(2)) as
# bench_feed_fd; write to it to command CMD, close it for CMD's end of input.
bench_spawn_fed()
{
	local fifo=$1 out=$2 err=$3

	shift 3
	mkfifo "$fifo" || return 1
	exec {bench_feed_fd}<>"$fifo"
	"$@" <"$fifo" >"$out" 2>"$err" {bench_feed_fd}>&- &
	bench_pid=$!
	bench_pids+=("$bench_pid")
}

# bench_wait_line FILE REGEX SECONDS: until a line of FILE matches the extended REGEX.
bench_wait_line()
{
	local n=0 limit=$(($3 * 100))

	until grep -q -E -- "$2" "$1" 2>/dev/null; do
		((n++ < limit)) || return 1
		bench_sleep 0.01
	done
}

# bench_forget PID: PID is reaped; cleanup must not signal whatever reuses the number.
bench_forget()
{
	local i

	for i in "${!bench_pids[@]}"; do
		[ "${bench_pids[i]}" = "$1" ] && unset "bench_pids[i]"
	done
	bench_pids=("${bench_pids[@]}")
}

# bench_wait_exit PID SECONDS: waits for PID to end and returns its exit status; after
# SECONDS it is stopped (bench_stop) and the status is 124, as timeout(1) says.
bench_wait_exit()
{
	local n=0 limit=$(($2 * 10)) status

	while bench_alive "$1"; do
		if ((n++ >= limit)); then
			bench_log "process $1 still runs after $2 s; stopping it"
			bench_stop "$1"
			bench_forget "$1"
			return 124
		fi
		bench_sleep 0.1
	done
	wait "$1"
	status=$?
	bench_forget "$1"
	return $status
}

# bench_free_port: prints a TCP port from 20000 to 31999 that no socket uses, or fails:
# below Linux's ephemeral ports (from 32768), where a client's connection, even one
# closing, made a server's bind fail. A server fails to start if another process takes
# the port meanwhile, which its caller's ping reports.
bench_free_port()
{
	local p

	for _ in $(seq 20); do
		p=$((20000 + RANDOM % 12000))
		if [ -z "$(ss -Htan "sport = :$p" 2>/dev/null)" ]; then
			echo "$p"
			return 0
		fi
	done
	return 1
}

# bench_redis_up PORT PID SECONDS: until redis-server, process PID, answers a ping on
# PORT; fails when it has died or not answered within SECONDS.
bench_redis_up()
{
	local n=0

	until [ "$(redis-cli -h 127.0.0.1 -p "$1" ping 2>/dev/null)" = PONG ]; do
		((n++ < $3 * 10)) && bench_alive "$2" || return 1
		sleep 0.1
	done
}

# bench_install PKG... : installs missing Debian packages when run as root; nonzero when a
# package is still missing afterwards (not root, no apt-get, or the install failed).
bench_install()
{
	local p missing=

	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
			missing="$missing $p"
	done
	[ -z "$missing" ] && return 0
	if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
		bench_log "missing:$missing (run as root to have it installed)"
		return 1
	fi
	bench_log "installing$missing"
	export DEBIAN_FRONTEND=noninteractive
	# shellcheck disable=SC2086 # one word per package
	apt-get install -y -qq --no-install-recommends $missing >"$bench_tmp/apt.log" 2>&1 || {
		apt-get update -qq >>"$bench_tmp/apt.log" 2>&1 &&
			apt-get install -y -qq --no-install-recommends $missing \
				>>"$bench_tmp/apt.log" 2>&1
	} || {
		bench_log "could not install$missing: $(tail -n 1 "$bench_tmp/apt.log")"
		return 1
	}
}

# bench_ops FILE: the throughput of a benchmark program's final line.
bench_ops()
{
	sed -n 's/^ops_per_s=\([0-9.]*\) .*/\1/p' "$1" | tail -n 1
}

# bench_attached BASE LABEL DEADLINE OPTS PROG ARGS...: runs PROG ARGS (its output in
# BASE.prog) and, once it prints "ready", attaches $bench_attach --batch OPTS to it (the
# profile in BASE.hpf); waits up to DEADLINE seconds for the program, and for the attach,
# which ends with it. 0 when both ended well; else 1, with the reason logged under LABEL.
bench_attached()
{
	local base=$1 label=$2 deadline=$3 opts=$4 tpid apid status
	shift 4

	bench_spawn "$base.prog" "$base.prog.err" "$@"
	tpid=$bench_pid
	if ! bench_wait_line "$base.prog" '^ready pid=' 10; then
		bench_log "$label: the program did not start"
		bench_wait_exit "$tpid" 5
		return 1
	fi
	# shellcheck disable=SC2086,SC2154 # opts is a list of words; bench_attach: the contract
	bench_spawn "$base.att" "$base.att.err" "$bench_attach" --batch $opts \
		--output "$base.hpf" "$tpid"
	apid=$bench_pid
	bench_wait_exit "$tpid" "$deadline"
	status=$?
	if ! bench_wait_exit "$apid" 30; then
		bench_log "$label: heapprof-attach failed: $(tail -n 2 "$base.att.err")"
		return 1
	fi
	if [ "$status" != 0 ]; then
		bench_log "$label: the program exited $status"
		return 1
	fi
}

# bench_cpu_rate FILE: operations per CPU second of the process (its final line's ops_per_s
# times seconds over cpu_s), or nothing.
bench_cpu_rate()
{
	awk '/^ops_per_s=/ { for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] } }
		END { if (v["cpu_s"] > 0) printf "%.1f\n", v["ops_per_s"] * v["seconds"] / v["cpu_s"] }' "$1"
}

# bench_ratio A B: A / B to two decimals with an "x", or "n/a" when either is missing or 0.
bench_ratio()
{
	awk -v a="$1" -v b="$2" 'BEGIN {
		if (a == "" || b == "" || b + 0 == 0) print "n/a"; else printf "%.2fx\n", a / b }'
}

# bench_percent A B: A / B as a percentage, or "n/a".
bench_percent()
{
	awk -v a="$1" -v b="$2" 'BEGIN {
		if (a == "" || b == "" || b + 0 == 0) print "n/a"; else printf "%.1f%%\n", 100 * a / b }'
}

# bench_bytes N: N bytes in B, KB, MB or GB (powers of 1024), or "n/a" when empty.
bench_bytes()
{
	awk -v n="$1" 'BEGIN {
		if (n == "") { print "n/a"; exit }
		split("B KB MB GB", u, " "); i = 1
		while (n >= 1024 && i < 4) { n /= 1024; i++ }
		printf(i == 1 ? "%d %s\n" : "%.1f %s\n", n, u[i]) }'
}

# bench_rate X: an operation rate with k or M.
bench_rate()
{
	awk -v x="$1" 'BEGIN {
		if (x == "") print "n/a"
		else if (x >= 1e6) printf "%.2f M\n", x / 1e6
		else if (x >= 1e3) printf "%.1f k\n", x / 1e3
		else printf "%.1f\n", x }'
}

# bench_median V...: the median of the non-empty numbers given, empty if none.
bench_median()
{
	printf '%s\n' "$@" | grep . | sort -g | awk '{ v[NR] = $1 } END {
		if (NR) print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# bench_geomean X... : the geometric mean of the ratios ("1.23x" or plain numbers) given,
# ignoring "n/a" and failures; "n/a" when none is left.
bench_geomean()
{
	printf '%s\n' "$@" | awk '{ sub(/x$/, "") } $0 ~ /^[0-9.]+$/ && $0 + 0 > 0 {
		s += log($0); n++ } END { if (n) printf "%.2fx (%d programs)\n", exp(s / n), n
		else print "n/a" }'
}

# bench_profile_field FILE KEY: a number from `heapprof-view overview --json FILE`, or
# nothing. Needs $bench_view.
bench_profile_field()
{
	# shellcheck disable=SC2154 # set by the sourcing script
	"$bench_view" overview --json "$1" 2>/dev/null |
		sed -n "s/^ *\"$2\": *\([0-9][0-9]*\).*/\1/p" | head -n 1
}

# bench_attach_supports OPTION: heapprof-attach lists OPTION in its --help. Needs
# $bench_attach.
bench_attach_supports()
{
	# shellcheck disable=SC2154 # set by the sourcing script
	"$bench_attach" --help 2>&1 | grep -q -- "$1"
}
