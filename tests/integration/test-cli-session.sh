#!/bin/bash
# The session registry: a live session (its file locked) makes heapprof-attach refuse and
# heapprof-detach ask its owner to end it (SIGTERM) and wait; a stale file (no lock) is
# removed; an unsafe run directory is refused.
. "$(dirname "$0")/lib.sh"

for cmd in "$HP_ATTACH" "$HP_DETACH"; do
	[ -x "$cmd" ] || hp_error "$cmd is missing: try 'make check'"
done

if [ "$(id -u)" = 0 ]; then
	run_dir=/run/heapprof
elif [ "${XDG_RUNTIME_DIR:-}" != "" ] && [ "${XDG_RUNTIME_DIR#/}" != "$XDG_RUNTIME_DIR" ]; then
	run_dir=$XDG_RUNTIME_DIR/heapprof
else
	run_dir=/tmp/heapprof-$(id -u)
fi

hp_spawn target sleep 300
target=$hp_pid
hp_wait_asleep "$target"
session=$run_dir/$target.session

# heapprof-detach creates the run directory if needed.
"$HP_DETACH" "$target" >/dev/null 2>&1
[ "$(stat -c '%a %u' "$run_dir")" = "700 $(id -u)" ] ||
	hp_fail "$run_dir is $(stat -c '%a %u' "$run_dir"), not mode 700 and ours"
hp_ok "run directory $run_dir: mode 700, ours"

# A stale session: the file exists but nobody holds its lock.
printf 'attach_pid %10d\nstart_time %20d\nviewer_pid %10d\noutput %s\n' 1 0 0 /x >"$session"
"$HP_DETACH" "$target" >"$hp_tmp/out" 2>"$hp_tmp/err"
status=$?
[ $status -eq 1 ] ||
	hp_fail "heapprof-detach with a stale session exited $status: $(cat "$hp_tmp/err")"
grep -q "process $target is not being profiled" "$hp_tmp/err" ||
	hp_fail "heapprof-detach with a stale session says: $(cat "$hp_tmp/err")"
[ ! -e "$session" ] || hp_fail "the stale session file was not removed"
hp_ok "a stale session file is removed; $(cat "$hp_tmp/err")"

# A live session: a stand-in owner holds the lock (flock -o: its child does not).
if command -v flock >/dev/null 2>&1; then
	: >"$session"
	chmod 600 "$session"
	hp_spawn owner flock -o "$session" sleep 300
	owner=$hp_pid
	n=0
	while ! grep -q "FLOCK.*:$(stat -c %i "$session") " /proc/locks && ((n++ < 50)); do
		sleep 0.1
	done
	owner_child=$(cat "/proc/$owner/task/$owner/children")
	printf 'attach_pid %10d\nstart_time %20d\nviewer_pid %10d\noutput %s\n' "$owner" 0 0 \
		"$hp_tmp/owner.hpf" >"$session"

	"$HP_ATTACH" --output "$hp_tmp/never.hpf" "$target" >"$hp_tmp/out" 2>"$hp_tmp/err"
	status=$?
	[ $status -eq 1 ] ||
		hp_fail "heapprof-attach on a live session exited $status: $(cat "$hp_tmp/err")"
	msg="heapprof-attach: process $target (sleep) is already being profiled by "
	msg+="heapprof-attach (pid $owner)"
	want="$msg"
	grep -q -F -- "$want" "$hp_tmp/err" ||
		hp_fail "heapprof-attach says '$(cat "$hp_tmp/err")', expected '$want...'"
	[ -e "$session" ] || hp_fail "heapprof-attach removed a live session file"
	hp_ok "exit 1: $(cat "$hp_tmp/err")"

	"$HP_DETACH" "$target" >"$hp_tmp/out" 2>"$hp_tmp/err"
	status=$?
	[ $status -eq 0 ] ||
		hp_fail "heapprof-detach on a live session exited $status: $(cat "$hp_tmp/err")"
	grep -q -F "asking heapprof-attach (pid $owner) to detach from $target" "$hp_tmp/err" ||
		hp_fail "heapprof-detach says: $(cat "$hp_tmp/err")"
	grep -q -F "heapprof-attach wrote the profile to $hp_tmp/owner.hpf" "$hp_tmp/err" ||
		hp_fail "heapprof-detach does not name the profile: $(cat "$hp_tmp/err")"
	hp_ours "$owner" && hp_fail "the session's owner was not stopped"
	[ ! -e "$session" ] || hp_fail "the session file is left behind"
	hp_ok "exit 0: $(tr '\n' ' ' <"$hp_tmp/err")"
	[ -n "$owner_child" ] && kill "$owner_child" 2>/dev/null
else
	echo "flock(1) is not installed: live sessions not tested"
fi

# An unsafe run directory, seen by an unprivileged user (XDG_RUNTIME_DIR/heapprof).
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null 2>&1 && id nobody >/dev/null 2>&1; then
	as_nobody=(setpriv --reuid=nobody --regid=nogroup --clear-groups --inh-caps=-all)
	if "${as_nobody[@]}" test -x "$HP_DETACH" 2>/dev/null; then
		xdg=$(mktemp -d /tmp/heapprof-xdg.XXXXXX)
		chmod 755 "$xdg"
		chown nobody "$xdg"
		mkdir -m 755 "$xdg/heapprof"
		chown nobody "$xdg/heapprof"
		hp_spawn nobody-target "${as_nobody[@]}" sleep 300
		ntarget=$hp_pid
		hp_wait_asleep "$ntarget"
		"${as_nobody[@]}" env XDG_RUNTIME_DIR="$xdg" "$HP_DETACH" "$ntarget" \
			>"$hp_tmp/out" 2>"$hp_tmp/err"
		status=$?
		msg="heapprof-detach: session directory $xdg/heapprof is not private (owner uid "
		msg+="$(id -u nobody), mode 0755; it must be yours with mode 0700): remove it and "
		msg+="try again"
		want="$msg"
		[ $status -eq 1 ] && [ "$(cat "$hp_tmp/err")" = "$want" ] ||
			{
				rm -rf "$xdg"
				hp_fail "with a 0755 run directory, exit $status: $(cat "$hp_tmp/err")"
			}
		hp_ok "exit 1: $want"
		rmdir "$xdg/heapprof"
		ln -s /tmp "$xdg/heapprof"
		"${as_nobody[@]}" env XDG_RUNTIME_DIR="$xdg" HEAPPROF_PAYLOAD=/dev/null \
			HEAPPROF_VIEWER=/bin/true "$HP_ATTACH" --output "$xdg/never.hpf" "$ntarget" \
			>"$hp_tmp/out" 2>"$hp_tmp/err"
		status=$?
		msg="heapprof-attach: session directory $xdg/heapprof is a symlink, which could "
		msg+="lead anywhere: remove it and try again"
		want="$msg"
		[ $status -eq 1 ] && [ "$(cat "$hp_tmp/err")" = "$want" ] ||
			{
				rm -rf "$xdg"
				hp_fail "with a symlinked run directory, exit $status: $(cat "$hp_tmp/err")"
			}
		hp_ok "exit 1: $want"
		grep -q '^TracerPid:[[:space:]]*0$' "/proc/$ntarget/status" ||
			hp_fail "the target was traced"
		rm -f "$xdg/heapprof"
		rmdir "$xdg"
	else
		echo "the build tree is not readable by nobody: unsafe run directories not tested"
	fi
fi
exit 0
