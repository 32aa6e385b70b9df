#!/bin/bash
# heapprof-attach, run by an unprivileged user, says why it may not trace a process: it
# belongs to another user, or it is not dumpable. Needs root (to become nobody).
. "$(dirname "$0")/lib.sh"

[ -x "$HP_ATTACH" ] || hp_error "$HP_ATTACH is missing: try 'make check'"
[ "$(id -u)" = 0 ] || hp_skip "needs root to run commands as nobody"
command -v setpriv >/dev/null 2>&1 || hp_skip "needs setpriv (util-linux)"
id nobody >/dev/null 2>&1 || hp_skip "needs the user nobody"
command -v cc >/dev/null 2>&1 || hp_skip "no C compiler to build a non-dumpable program"
as_nobody=(setpriv --reuid=nobody --regid=nogroup --clear-groups --inh-caps=-all)
"${as_nobody[@]}" test -x "$HP_ATTACH" 2>/dev/null ||
	hp_skip "the build tree is not readable by nobody"

work=$(mktemp -d /tmp/heapprof-perm.XXXXXX) || hp_error "cannot create a directory"
trap 'status=$?; hp_cleanup; rm -rf "$work"; exit $status' EXIT
chmod 755 "$work"
mkdir -m 700 "$work/xdg"
chown nobody "$work/xdg"
cat >"$work/undumpable.c" <<'C'
#include <sys/prctl.h>
#include <unistd.h>

int main(void)
{
	prctl(PR_SET_DUMPABLE, 0);
	for (;;)
		pause();
}
C
cc -o "$work/undumpable" "$work/undumpable.c" || hp_error "cannot build the test program"

# refused TARGET-PID WANT
refused()
{
	local status

	"${as_nobody[@]}" env XDG_RUNTIME_DIR="$work/xdg" "$HP_ATTACH" --output "$work/xdg/p.hpf" \
		"$1" >"$hp_tmp/out" 2>"$hp_tmp/err"
	status=$?
	[ $status -eq 1 ] || hp_fail "heapprof-attach exited $status, not 1: $(cat "$hp_tmp/err")"
	[ "$(cat "$hp_tmp/err")" = "$2" ] ||
		hp_fail "heapprof-attach says '$(cat "$hp_tmp/err")', expected '$2'"
	hp_alive "$1" || hp_fail "the target died"
	grep -q '^TracerPid:[[:space:]]*0$' "/proc/$1/status" || hp_fail "the target is traced"
	hp_ok "exit 1: $2"
}

hp_spawn root-target sleep 300
target=$hp_pid
hp_wait_asleep "$target"
msg="heapprof-attach: not permitted to profile process $target (sleep): it belongs to uid 0 and "
msg+="you are uid $(id -u nobody) without CAP_SYS_PTRACE: run heapprof-attach as that user or as "
msg+="root"
refused "$target" "$msg"

hp_spawn undumpable "${as_nobody[@]}" "$work/undumpable"
target=$hp_pid
# 34: pause(2), after its prctl.
hp_wait_in_syscall "$target" 34
msg="heapprof-attach: not permitted to profile process $target (undumpable): it is not dumpable "
msg+="(a setuid/setgid program, or it called prctl(PR_SET_DUMPABLE, 0)): only root can profile it"
refused "$target" "$msg"
exit 0
