# shellcheck shell=bash
# lib.sh - helpers for the end-to-end tests (sourced by tests/integration/test-e2e-*.sh).
#
# Contract: needs $top_builddir and $top_srcdir (set by AM_TESTS_ENVIRONMENT; both default
# to the trees around this file's directory). Every process a test starts goes through
# hp_start_target/hp_spawn and is killed by the EXIT trap if it is still alive, so a test never
# leaves a process behind; every wait has a deadline, so a test fails instead of hanging.
# hp_fail exits 1, hp_skip exits 77, hp_error (the test itself is broken) exits 99.
# Each test prints one "ok: ..." line per thing it checked.

set -u

me=${0##*/}
me=${me%.sh}
lib_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
: "${top_srcdir:=$(cd "$lib_dir/../.." && pwd)}"
: "${top_builddir:=$top_srcdir}"

HP_ATTACH=$top_builddir/src/heapprof-attach
HP_DETACH=$top_builddir/src/heapprof-detach
HP_VIEW=$top_builddir/src/heapprof-view
# shellcheck disable=SC2034 # for the test scripts
HP_TARGETS=$top_builddir/tests/targets

hp_pids=()
declare -A hp_groups=() hp_starts=()
hp_tmp=$(mktemp -d "${TMPDIR:-/tmp}/heapprof-$me.XXXXXX") || {
	echo "$me: cannot create a temporary directory" >&2
	exit 99
}

hp_fail()
{
	echo "FAIL: $me: $*" >&2
	hp_dump
	exit 1
}

hp_skip()
{
	echo "SKIP: $me: $*" >&2
	exit 77
}

hp_error()
{
	echo "ERROR: $me: $*" >&2
	exit 99
}

hp_ok()
{
	echo "ok: $*"
}

# The logs of everything started, so a failure shows why in the test's .log file.
hp_dump()
{
	local f

	for f in "$hp_tmp"/*.out "$hp_tmp"/*.err; do
		[ -s "$f" ] || continue
		echo "---- ${f##*/} (last 30 lines)" >&2
		tail -n 30 "$f" >&2
	done
}

# Alive and not a zombie.
hp_alive()
{
	local state

	state=$(sed 's/.*) //; s/ .*//' "/proc/$1/stat" 2>/dev/null) || return 1
	[ "$state" != Z ]
}

# hp_start_time PID: the process's start time (clock ticks after boot), empty if it is gone.
hp_start_time()
{
	sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f20
}

# hp_track PID: a process of the test's, for hp_cleanup, remembered with its start time.
hp_track()
{
	hp_pids+=("$1")
	hp_starts[$1]=$(hp_start_time "$1")
}

# hp_ours PID: the process hp_track saw, still running. Only 32768 pids go round quickly
# while the stress target churns threads: a number may since name another test's process
# or thread (kill on a thread's id signals its whole process), and a process group of
# that number may be another test's.
hp_ours()
{
	local now

	now=$(hp_start_time "$1")
	[ -n "$now" ] && [ "$now" = "${hp_starts[$1]:-}" ] && hp_alive "$1"
}

hp_cleanup()
{
	local pid i n

	# Newest first: a profiler is stopped (and so detaches) before its target is killed.
	for ((i = ${#hp_pids[@]} - 1; i >= 0; i--)); do
		pid=${hp_pids[i]}
		if hp_ours "$pid"; then
			echo "cleanup: process $pid was still running; stopping it" >&2
			kill -TERM "$pid" 2>/dev/null
			n=0
			while hp_alive "$pid" && ((n++ < 30)); do
				sleep 0.1
			done
			kill -KILL "$pid" 2>/dev/null
			wait "$pid" 2>/dev/null
		fi
		# What a spawned command started itself is in its process group; a group of
		# that number is another's only while a process of that number runs.
		if [ -n "${hp_groups[$pid]:-}" ] && [ ! -e "/proc/$pid" ]; then
			kill -KILL -- "-$pid" 2>/dev/null
		fi
	done
	rm -rf "$hp_tmp"
}
trap 'status=$?; hp_cleanup; exit $status' EXIT
trap 'exit 1' INT TERM HUP

hp_require_binaries()
{
	local f

	for f in "$HP_ATTACH" "$HP_DETACH" "$HP_VIEW" "$@"; do
		[ -x "$f" ] || hp_error "$f is missing: try 'make check' (it builds everything first)"
	done
}

hp_require_python()
{
	command -v python3 >/dev/null 2>&1 || hp_skip "python3 is needed to read the JSON output"
}

hp_require_ptrace()
{
	local scope

	scope=$(cat /proc/sys/kernel/yama/ptrace_scope 2>/dev/null || echo 0)
	if [ "$scope" = 3 ]; then
		hp_skip "ptrace is disabled (kernel.yama.ptrace_scope=3)"
	fi
	if [ "$scope" != 0 ] && [ "$(id -u)" != 0 ]; then
		hp_skip "attaching needs root or kernel.yama.ptrace_scope=0 (it is $scope)"
	fi
}

# hp_spawn NAME CMD... : runs CMD in the background, in a process group of its own, with
# stdout in $hp_tmp/NAME.out and stderr in $hp_tmp/NAME.err; sets hp_pid. SIGINT is left at
# its default (a background job of a script would otherwise ignore it). The files of an
# earlier NAME are removed first: the shell opens them only after its fork, and a wait for
# a line in them must not find the earlier process's.
hp_spawn()
{
	local name=$1

	shift
	rm -f "$hp_tmp/$name.out" "$hp_tmp/$name.err"
	if [ -n "${TARGET_FD:-}" ]; then
		setsid env --default-signal=INT "$@" >"$hp_tmp/$name.out" 2>"$hp_tmp/$name.err" \
			</dev/null {TARGET_FD}>&- &
	else
		setsid env --default-signal=INT "$@" >"$hp_tmp/$name.out" 2>"$hp_tmp/$name.err" \
			</dev/null &
	fi
	hp_pid=$!
	hp_track "$hp_pid"
	hp_groups[$hp_pid]=1
}

# hp_wait_in_syscall PID NR...: waits (up to 10 s) until PID is blocked in one of the
# syscalls numbered NR. A program's comm and exe change at exec, before the loader has mapped
# libc and the locale or libc has made its heap, so a snapshot of its maps taken then would
# change under the test.
hp_wait_in_syscall()
{
	local pid=$1 end=$((SECONDS + 10)) nr want

	shift
	while :; do
		read -r nr _ 2>/dev/null <"/proc/$pid/syscall"
		for want; do
			[ "$nr" != "$want" ] || return 0
		done
		((SECONDS < end)) || hp_error "process $pid is not blocked in syscall $* after 10 s"
		sleep 0.1
	done
}

# hp_wait_asleep PID: waits until PID, a sleep(1), is in nanosleep or clock_nanosleep.
hp_wait_asleep()
{
	hp_wait_in_syscall "$1" 35 230
}

# hp_start_target CMD... : starts a target with a FIFO on its stdin and waits for its
# "ready"; sets TARGET_PID, TARGET_OUT, and TARGET_FD (write commands there, see hp_send).
# HP_TARGET_WRAP, an array, is a command that runs CMD... as its only child and exits with
# its status (unshare --fork): TARGET_PID is then that child, TARGET_WAIT the wrapper.
hp_ntargets=0
HP_TARGET_WRAP=()
hp_start_target()
{
	local fifo

	hp_ntargets=$((hp_ntargets + 1))
	fifo=$hp_tmp/target$hp_ntargets.in
	mkfifo "$fifo" || hp_error "cannot create $fifo"
	if [ -n "${TARGET_FD:-}" ]; then
		exec {TARGET_FD}>&-
	fi
	# Read-write, so neither side blocks in open and the target sees no EOF until we
	# close it.
	exec {TARGET_FD}<>"$fifo"
	TARGET_OUT=$hp_tmp/target$hp_ntargets.out
	"${HP_TARGET_WRAP[@]}" "$@" <"$fifo" >"$TARGET_OUT" 2>"$hp_tmp/target$hp_ntargets.err" \
		{TARGET_FD}>&- &
	TARGET_PID=$!
	TARGET_WAIT=$TARGET_PID
	hp_track "$TARGET_PID"
	hp_wait_line "$TARGET_OUT" '^ready$' 10 || hp_fail "the target did not start: $*"
	if [ ${#HP_TARGET_WRAP[@]} -gt 0 ]; then
		TARGET_PID=$(cat /proc/"$TARGET_WAIT"/task/*/children 2>/dev/null)
		TARGET_PID=${TARGET_PID%% *}
		[ -n "$TARGET_PID" ] || hp_fail "no target under ${HP_TARGET_WRAP[*]}"
		hp_track "$TARGET_PID"
	fi
}

hp_send()
{
	echo "$1" >&"$TARGET_FD"
}

# hp_ask CMD ANSWER [WHAT]: sends CMD and waits for the target's next line matching the
# extended regex ANSWER; fails the test when the target answers "failed" (WHAT names the
# circumstances) or not at all.
hp_ask()
{
	local n

	n=$(hp_count_lines "$TARGET_OUT" "^($2|failed)\$")
	hp_send "$1"
	hp_wait_line "$TARGET_OUT" "^($2|failed)\$" 30 $((n + 1)) || hp_fail "no answer to '$1'"
	if grep -q '^failed$' "$TARGET_OUT"; then
		hp_fail "'$1' ${3:+$3 }failed: $(cat "$hp_tmp"/target*.err)"
	fi
}

# hp_count_lines FILE REGEX
hp_count_lines()
{
	local n

	n=$(grep -c -E -- "$2" "$1" 2>/dev/null) || true
	echo "${n:-0}"
}

# hp_wait_line FILE REGEX SECONDS [COUNT]: until FILE has COUNT (default 1) lines matching
# the extended REGEX; nonzero after SECONDS.
hp_wait_line()
{
	local file=$1 re=$2 ticks=$(($3 * 10)) want=${4:-1}

	while [ "$(hp_count_lines "$file" "$re")" -lt "$want" ]; do
		((ticks-- > 0)) || return 1
		sleep 0.1
	done
}

# hp_wait_exit PID SECONDS: waits for a child to end and returns its exit status; 124 if it
# is still running after SECONDS.
hp_wait_exit()
{
	local pid=$1 ticks=$(($2 * 10))

	while hp_ours "$pid"; do
		((ticks-- > 0)) || return 124
		sleep 0.1
	done
	wait "$pid"
}

hp_fd_count()
{
	local fds=(/proc/"$1"/fd/*)

	echo "${#fds[@]}"
}

# The names a mapping of ours can have (inject/maps.c's rule): the payload's memfd or file.
# A plain "heapprof" would match the build tree's own path (make distcheck builds under
# heapprof-VERSION/).
HP_MAP_PATTERN='/memfd:heapprof|heapprof-payload'

# hp_maps_clean PID: the target maps nothing of heapprof.
hp_maps_clean()
{
	! grep -qE "$HP_MAP_PATTERN" "/proc/$1/maps"
}

# hp_source_line FILE MARKER: the line number of the one line of FILE containing MARKER.
hp_source_line()
{
	local lines

	lines=$(grep -n -F -- "$2" "$1" | cut -d: -f1)
	[ "$(echo "$lines" | wc -w)" = 1 ] || hp_error "expected exactly one '$2' in $1"
	echo "$lines"
}

# hp_attach ARGS... : starts heapprof-attach ARGS in the background (output in
# $hp_tmp/attach.out and attach.err), waits until it says it attached; sets ATTACH_PID.
hp_attach()
{
	local pid

	hp_spawn attach "$HP_ATTACH" "$@"
	ATTACH_PID=$hp_pid
	if ! hp_wait_line "$hp_tmp/attach.err" "attached to $TARGET_PID" 20; then
		hp_fail "heapprof-attach $* did not report 'attached to $TARGET_PID' within 20 s"
	fi
	# Its helpers (the viewer) are cleaned up like the rest, and checked for by
	# hp_check_helpers_gone.
	ATTACH_CHILDREN=$(cat /proc/"$ATTACH_PID"/task/*/children 2>/dev/null)
	for pid in $ATTACH_CHILDREN; do
		hp_track "$pid"
	done
}

# After heapprof-attach exited: none of the processes it had started is left.
hp_check_helpers_gone()
{
	local pid ticks=50

	for pid in $ATTACH_CHILDREN; do
		while hp_ours "$pid"; do
			((ticks-- > 0)) || hp_fail "heapprof-attach left process $pid behind: $(tr '\0' ' ' <"/proc/$pid/cmdline")"
			sleep 0.1
		done
	done
	hp_ok "no process of the session is left"
}

# hp_check_site JSON FUNC FILE-SUFFIX LINE ALLOCS FREES ALLOC-BYTES LIVE-BLOCKS LIVE-BYTES:
# the hotspots JSON has exactly one site whose function is FUNC ("~FUNC": contains it) with
# those exact numbers, and its file and line are the given ones.
hp_check_site()
{
	python3 - "$@" <<'EOF'
import json, sys
path, func, suffix, line, allocs, frees, abytes, lblocks, lbytes = sys.argv[1:]
with open(path) as f:
    sites = json.load(f)
if not isinstance(sites, list):
    sys.exit("hotspots --json did not give an array")
if func.startswith("~"):
    match = [s for s in sites if func[1:] in (s.get("function") or "")]
else:
    match = [s for s in sites if s.get("function") == func]
if len(match) != 1:
    sys.exit("expected one site for function %r, found %d among: %s" % (
        func, len(match), ", ".join(str(s.get("function")) for s in sites)))
s = match[0]
errors = []
def expect(key, want):
    if s.get(key) != want:
        errors.append("%s is %r, expected %r" % (key, s.get(key), want))
if not str(s.get("file") or "").endswith(suffix):
    errors.append("file is %r, expected one ending in %r" % (s.get("file"), suffix))
expect("line", int(line))
expect("allocations", int(allocs))
expect("frees", int(frees))
expect("allocated_bytes", int(abytes))
expect("live_blocks", int(lblocks))
expect("live_bytes", int(lbytes))
if not isinstance(s.get("stack"), list) or not s["stack"]:
    errors.append("the site has no stack")
if errors:
    sys.exit("site %r: %s" % (s.get("function"), "; ".join(errors)))
print("site %s at %s:%s: %d allocations, %d frees, %d bytes, %d live blocks, %d live bytes"
      % (s["function"], s["file"], s["line"], s["allocations"], s["frees"],
         s["allocated_bytes"], s["live_blocks"], s["live_bytes"]))
EOF
}

# hp_json_field JSON EXPR: prints a field of the overview object, e.g. "allocations".
hp_json_field()
{
	python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"
}

# hp_detach_session: heapprof-detach ends the session of $ATTACH_PID; both exit 0 and the
# target is back as it was: no heapprof mapping, the same number of open files as $1.
hp_detach_session()
{
	local fds_before=$1 status

	hp_spawn detach "$HP_DETACH" "$TARGET_PID"
	hp_wait_exit "$hp_pid" 30
	status=$?
	[ $status -eq 0 ] || hp_fail "heapprof-detach $TARGET_PID exited $status"
	hp_ok "heapprof-detach exited 0"
	hp_wait_exit "$ATTACH_PID" 15
	status=$?
	[ $status -eq 0 ] || hp_fail "heapprof-attach exited $status after heapprof-detach"
	hp_ok "heapprof-attach exited 0 after heapprof-detach"
	local stops='no thread stopped over [0-9]+\.[0-9] ms;'
	if ! grep -Eq "attached to $TARGET_PID \(.*\), $stops" "$hp_tmp/attach.err" ||
		! grep -Eq "detached from $TARGET_PID, $stops" "$hp_tmp/attach.err"; then
		hp_fail "heapprof-attach did not say how long it stopped a thread: $(cat "$hp_tmp/attach.err")"
	fi
	hp_ok "heapprof-attach reported its longest stop at attach and at detach"
	hp_check_helpers_gone
	hp_check_restored "$fds_before"
}

# hp_check_restored FDS-BEFORE: the target is alive, maps nothing of heapprof, has as many
# open files as before, and still answers.
hp_check_restored()
{
	local fds

	hp_alive "$TARGET_PID" || hp_fail "the target died"
	hp_maps_clean "$TARGET_PID" || hp_fail "the target still maps heapprof: $(grep -E "$HP_MAP_PATTERN" "/proc/$TARGET_PID/maps")"
	hp_ok "no heapprof mapping left in the target"
	fds=$(hp_fd_count "$TARGET_PID")
	[ "$fds" -eq "$1" ] || hp_fail "the target has $fds open files, $1 before attaching: $(ls -l "/proc/$TARGET_PID/fd")"
	hp_ok "the target has $fds open files, as before"
	local pongs

	pongs=$(hp_count_lines "$TARGET_OUT" '^pong$')
	hp_send ping
	hp_wait_line "$TARGET_OUT" '^pong$' 10 $((pongs + 1)) || hp_fail "the target does not answer"
	hp_ok "the target still answers"
}

# hp_stop_target: "exit" makes the target free everything and exit 0.
hp_stop_target()
{
	local status

	hp_send exit
	hp_wait_exit "$TARGET_WAIT" 15
	status=$?
	[ $status -eq 0 ] || hp_fail "the target exited $status (1 means it found corrupted memory)"
	hp_ok "the target exited 0 (memory intact)"
}

# Rounds printed by heapprof-attach --batch (the viewer's stdout).
HP_ROUND_RE='^round=[0-9]+ time=[0-9]+\.[0-9]{3} allocs=[0-9]+ frees=[0-9]+ allocated=[0-9]+ live=[0-9]+ rss=[0-9]+$'

# hp_profile_go TARGET ARG...: starts TARGET ARG..., attaches with --batch, has the target
# do one round of work, waits for two round lines after it (the first may have been collected
# before the last free), ends the session with heapprof-detach and checks the target is
# restored. The profile is $hp_tmp/p.hpf; the target is left running. HP_PROFILE_OPTS, an
# array, holds more options for heapprof-attach.
HP_PROFILE_OPTS=()
hp_profile_go()
{
	local target=$1 fds rounds

	hp_start_target "$target" "${@:2}"
	fds=$(hp_fd_count "$TARGET_PID")
	hp_maps_clean "$TARGET_PID" || hp_error "the target maps heapprof before attaching"
	hp_attach --batch "${HP_PROFILE_OPTS[@]}" --output "$hp_tmp/p.hpf" "$TARGET_PID"
	hp_ok "heapprof-attach attached to ${target##*/} ${*:2} (pid $TARGET_PID)"
	hp_send go
	hp_wait_line "$TARGET_OUT" '^done$' 30 || hp_fail "the target did not finish its work"
	rounds=$(hp_count_lines "$hp_tmp/attach.out" "$HP_ROUND_RE")
	hp_wait_line "$hp_tmp/attach.out" "$HP_ROUND_RE" 15 $((rounds + 2)) ||
		hp_fail "no round lines after the work was done"
	head -n 1 "$hp_tmp/attach.out" | grep -q '^# heapprof:' ||
		hp_fail "the batch output does not start with '# heapprof:'"
	hp_ok "batch output: header and $(hp_count_lines "$hp_tmp/attach.out" "$HP_ROUND_RE") round lines"
	hp_detach_session "$fds"
}

# hp_view_json CMD [OPTION...]: heapprof-view CMD OPTION... --json on the profile, into
# $hp_tmp/CMD.json.
hp_view_json()
{
	"$HP_VIEW" "$@" --json "$hp_tmp/p.hpf" >"$hp_tmp/$1.json" 2>"$hp_tmp/view.err" ||
		hp_fail "heapprof-view $1 --json failed: $(cat "$hp_tmp/view.err")"
}

# hp_check_overview_allocs MIN: the profile's overview counts at least MIN allocations and
# names the target's pid.
hp_check_overview_allocs()
{
	local n

	hp_view_json overview
	n=$(hp_json_field "$hp_tmp/overview.json" allocations) || hp_fail "bad overview JSON"
	[ "$n" -ge "$1" ] || hp_fail "overview counts $n allocations, fewer than $1"
	n=$(hp_json_field "$hp_tmp/overview.json" pid) || hp_fail "bad overview JSON"
	[ "$n" = "$TARGET_PID" ] || hp_fail "overview pid is $n, not $TARGET_PID"
	hp_ok "overview: pid $TARGET_PID, at least $1 allocations"
}

# hp_e2e_exact TARGET [B]: the exact-counts test for one build of mt-target: with T threads
# doing K allocations each of B (default 48) + index bytes and every second block freed by
# another thread, the worker_alloc site must show exactly those numbers.
hp_e2e_exact()
{
	local target=$1 B=${2:-48} T=4 K=1000 line i
	local allocs frees abytes=0 lblocks lbytes=0

	hp_require_python
	hp_require_ptrace
	hp_require_binaries "$target"
	line=$(hp_source_line "$top_srcdir/tests/targets/mt-target.c" '/* HP_SITE */') || exit 99

	hp_profile_go "$target" $T $K "$B"
	allocs=$((T * K))
	frees=$((T * (K / 2)))
	lblocks=$((allocs - frees))
	for ((i = 0; i < T; i++)); do
		abytes=$((abytes + K * (B + i)))
		lbytes=$((lbytes + (K - K / 2) * (B + i)))
	done
	hp_view_json hotspots --top 0
	hp_check_site "$hp_tmp/hotspots.json" worker_alloc mt-target.c "$line" \
		$allocs $frees $abytes $lblocks $lbytes || hp_fail "the worker_alloc site is wrong"
	hp_ok "worker_alloc site exact at mt-target.c:$line"
	hp_check_overview_allocs $allocs
	hp_stop_target
}
