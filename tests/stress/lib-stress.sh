# shellcheck shell=bash
# lib-stress.sh - attach/detach cycles and faults on tests/stress/stress-target (sourced after
# tests/integration/lib.sh by the test-fault-*/test-state-* tests and by run-stress.sh).
#
# Contract: st_start [--trees] starts the target (with its tree thread) and records what "clean" means for it (its open
# files, its anonymous executable mappings). Every st_* cycle returns 0 when the target came
# back clean and still passes its own checks, else prints "FAIL: <cycle>: <why>" on stderr
# and returns 1; none exits, so a stress run can count failures and go on.

ST_TARGET=$top_builddir/tests/stress/stress-target
# Seconds a session may take to end on its own: a sanitizer build under make -j2 took up
# to 12.5 s from heapprof-detach to heapprof-attach's exit, and heapprof-attach waits up
# to 18 s for a last round; a hang still fails, later.
ST_END_WAIT=60

# Anonymous r-x mappings: a heapprof trampoline would be one of them.
st_anon_exec()
{
	awk '$2 == "r-xp" && $5 == 0 && NF == 5 { print $1 }' "/proc/$1/maps"
}

st_start()
{
	hp_start_target "$ST_TARGET" "$@"
	sleep 0.2
	ST_FDS=$(hp_fd_count "$TARGET_PID")
	ST_EXEC=$(st_anon_exec "$TARGET_PID")
	ST_CHECKS=0
}

st_failed()
{
	echo "FAIL: $1: $2" >&2
	return 1
}

# st_clean WHAT: the target is alive, maps nothing of heapprof, has its files and only its
# own anonymous executable mappings, and its self-check says ok.
st_clean()
{
	local what=$1 fds line n=0

	hp_alive "$TARGET_PID" || { st_failed "$what" "the target died"; return 1; }
	hp_maps_clean "$TARGET_PID" || { st_failed "$what" "heapprof still mapped"; return 1; }
	[ "$(st_anon_exec "$TARGET_PID")" = "$ST_EXEC" ] ||
		{ st_failed "$what" "a trampoline is left: $(st_anon_exec "$TARGET_PID")"; return 1; }
	fds=$(hp_fd_count "$TARGET_PID")
	[ "$fds" -eq "$ST_FDS" ] ||
		{ st_failed "$what" "$fds open files, $ST_FDS before: $(ls -l "/proc/$TARGET_PID/fd/")"; return 1; }
	[ "${ST_SELFCHECK:-1}" = 1 ] || return 0
	ST_CHECKS=$((ST_CHECKS + 1))
	hp_send check
	while ! line=$(grep -E '^(ok|FAIL) ' "$TARGET_OUT" | sed -n "${ST_CHECKS}p") || [ -z "$line" ]; do
		((n++ < 100)) || { st_failed "$what" "the target does not answer 'check'"; return 1; }
		sleep 0.05
	done
	case $line in
	ok*) return 0 ;;
	*) st_failed "$what" "the target's self-check: $line; $(tail -n 3 "$hp_tmp"/target*.err)"; return 1 ;;
	esac
}

# st_wait_gone PID SECONDS
st_wait_gone()
{
	local n=$(($2 * 20))

	while hp_ours "$1"; do
		((n-- > 0)) || return 1
		sleep 0.05
	done
	wait "$1" 2>/dev/null
	return 0
}

# st_take: the target keeps malloc's and free's addresses as its code sees them now (while
# attached: heapprof's stubs); its later self-checks call them.
st_take()
{
	local n=0 before

	before=$(grep -c '^taken' "$TARGET_OUT")
	hp_send take
	while [ "$(grep -c '^taken' "$TARGET_OUT")" -le "$before" ]; do
		((n++ < 100)) || return 1
		sleep 0.05
	done
}

# st_spawn_attach [VAR=VALUE]: heapprof-attach on the target, a round every 50 ms, its output
# in a.out and a.err (hp_spawn: the last step's files are removed first); sets a.
st_spawn_attach()
{
	hp_spawn a env "$@" "$HP_ATTACH" --interval 50 --output "$hp_tmp/p.hpf" "$TARGET_PID"
	a=$hp_pid
}

# st_cycle: a normal attach (a round or two), addresses taken while attached, and
# heapprof-detach.
st_cycle()
{
	local what=${1:-cycle} a

	st_spawn_attach
	hp_wait_line "$hp_tmp/a.err" "attached to $TARGET_PID" 20 ||
		{ kill -KILL $a; st_failed "$what" "no attach: $(cat "$hp_tmp/a.err")"; return 1; }
	st_take || { kill -KILL $a; st_failed "$what" "the target does not answer 'take'"; return 1; }
	"$HP_DETACH" "$TARGET_PID" >"$hp_tmp/d.out" 2>"$hp_tmp/d.err" ||
		{ st_failed "$what" "heapprof-detach: $(cat "$hp_tmp/d.err")"; return 1; }
	st_wait_gone $a $ST_END_WAIT || { kill -KILL $a; st_failed "$what" "heapprof-attach did not end"; return 1; }
	st_clean "$what"
}

# st_recover WHAT: heapprof-detach after a killed heapprof-attach; it either unloads (0) or
# finds nothing to do (1, "not being profiled"); anything else is a failure.
st_recover()
{
	local what=$1 status

	"$HP_DETACH" "$TARGET_PID" >"$hp_tmp/d.out" 2>"$hp_tmp/d.err"
	status=$?
	if [ $status -ne 0 ] && ! grep -q 'is not being profiled' "$hp_tmp/d.err"; then
		st_failed "$what" "heapprof-detach exited $status: $(cat "$hp_tmp/d.err")"
		return 1
	fi
	st_clean "$what"
}

# st_kill_at VAR CALL: heapprof-attach killed by itself (SIGKILL) in or after CALL, through
# the injector's fault points (inject/remote.c); CALL may be one of the detach's calls, in
# which case the session is ended with heapprof-detach. Then heapprof-detach cleans up.
st_kill_at()
{
	local var=$1 call=$2 what="kill ${1#HEAPPROF_TEST_KILL_} $2" a

	st_spawn_attach "$var=$call"
	# Give the injection time to reach the call (or to attach when the call is a detach's).
	local n=0
	while hp_ours $a && ! grep -q "attached to" "$hp_tmp/a.err" && ((n++ < 200)); do
		sleep 0.05
	done
	if hp_ours $a; then
		"$HP_DETACH" "$TARGET_PID" >"$hp_tmp/d0.out" 2>"$hp_tmp/d0.err"
	fi
	st_wait_gone $a $ST_END_WAIT || { st_failed "$what" "heapprof-attach still runs"; kill -KILL -- -$a; return 1; }
	kill -KILL -- -$a 2>/dev/null
	st_recover "$what" || return 1
	# A fault point never reached lets heapprof-attach finish normally: nothing was tested.
	! grep -q "detached from" "$hp_tmp/a.err" ||
		st_failed "$what" "heapprof-attach was never killed: it made no $call call"
}

# st_kill_random MS: heapprof-attach killed with SIGKILL MS milliseconds after its start
# (anywhere: checks, injection, rounds), then heapprof-detach.
st_kill_random()
{
	local ms=$1 a

	st_spawn_attach
	sleep "$(printf '0.%03d' "$ms")"
	kill -KILL -- -$a 2>/dev/null
	st_wait_gone $a 10
	st_recover "kill after $ms ms"
}

# st_kill_viewer: the viewer is killed; the payload goes quiet, heapprof-attach notices and
# detaches (or heapprof-detach does), and the target comes back clean.
st_kill_viewer()
{
	local a v n=0

	st_spawn_attach
	hp_wait_line "$hp_tmp/a.err" "attached to $TARGET_PID" 20 ||
		{ kill -KILL $a; st_failed "kill viewer" "no attach"; return 1; }
	v=$(cat /proc/$a/task/*/children 2>/dev/null)
	[ -n "$v" ] || { st_failed "kill viewer" "no viewer process"; return 1; }
	kill -KILL $v
	st_wait_gone $a $ST_END_WAIT || { kill -KILL $a; st_failed "kill viewer" "heapprof-attach did not end"; return 1; }
	st_recover "kill viewer"
}
