#!/bin/bash
# heapprof-attach refuses a process that already has a tracer (a tiny one of ours, and
# strace when installed), names the tracer, and leaves the process exactly as it was.
. "$(dirname "$0")/lib.sh"

[ -x "$HP_ATTACH" ] || hp_error "$HP_ATTACH is missing: try 'make check'"
hp_require_ptrace
command -v cc >/dev/null 2>&1 || hp_skip "no C compiler to build the tracer"

# What a refused attach must not change: signal state, tracer, threads, mappings, files.
snapshot()
{
	grep -E '^(State|TracerPid|Threads|SigPnd|ShdPnd|SigBlk|SigIgn|SigCgt):' "/proc/$1/status"
	cat "/proc/$1/maps"
	ls -l "/proc/$1/fd" | awk 'NR > 1 { print $9, $10, $11 }'
}

if [ "$(id -u)" = 0 ]; then
	run_dir=/run/heapprof
elif [ "${XDG_RUNTIME_DIR:-}" != "" ] && [ "${XDG_RUNTIME_DIR#/}" != "$XDG_RUNTIME_DIR" ]; then
	run_dir=$XDG_RUNTIME_DIR/heapprof
else
	run_dir=/tmp/heapprof-$(id -u)
fi

cat >"$hp_tmp/tinytracer.c" <<'C'
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ptrace.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc != 2 || ptrace(PTRACE_SEIZE, atoi(argv[1]), 0, 0) != 0) {
		perror("PTRACE_SEIZE");
		return 1;
	}
	printf("seized\n");
	fflush(stdout);
	for (;;)
		pause();
}
C
cc -o "$hp_tmp/tinytracer" "$hp_tmp/tinytracer.c" || hp_error "cannot build the tracer"

# check_refused TRACER-NAME TRACER-CMD...: starts a target, traces it with TRACER-CMD, and
# checks heapprof-attach's refusal.
check_refused()
{
	local name=$1 target tracer before status want

	shift
	hp_spawn "target-$name" sleep 300
	target=$hp_pid
	hp_wait_asleep "$target"
	hp_spawn "$name" "$@" "$target"
	tracer=$hp_pid
	n=0
	while ! grep -q "^TracerPid:[[:space:]]*$tracer$" "/proc/$target/status" && ((n++ < 100)); do
		sleep 0.1
	done
	grep -q "^TracerPid:[[:space:]]*$tracer$" "/proc/$target/status" ||
		hp_error "$name did not attach to $target"
	sleep 0.2
	before=$(snapshot "$target")

	"$HP_ATTACH" --output "$hp_tmp/never.hpf" "$target" >"$hp_tmp/out" 2>"$hp_tmp/err"
	status=$?
	[ $status -eq 1 ] || hp_fail "heapprof-attach exited $status, not 1: $(cat "$hp_tmp/err")"
	want="heapprof-attach: process $target (sleep) is already traced by process $tracer ($name)"
	grep -q -F -- "$want" "$hp_tmp/err" ||
		hp_fail "heapprof-attach says '$(cat "$hp_tmp/err")', expected '$want...'"
	[ "$(wc -l <"$hp_tmp/err")" -eq 1 ] || hp_fail "more than one line: $(cat "$hp_tmp/err")"
	hp_ok "exit 1: $(cat "$hp_tmp/err")"

	hp_alive "$target" || hp_fail "the target died"
	[ "$(snapshot "$target")" = "$before" ] ||
		hp_fail "the target changed: $(diff <(echo "$before") <(snapshot "$target"))"
	hp_ok "the target is untouched (status, maps and fds as before)"
	[ ! -e "$hp_tmp/never.hpf" ] || hp_fail "a profile file was created"
	[ ! -e "$run_dir/$target.session" ] ||
		hp_fail "the session file $run_dir/$target.session was left behind"
	hp_ok "no profile and no session file left"
	kill "$tracer" "$target"
}

check_refused tinytracer "$hp_tmp/tinytracer"
if command -v strace >/dev/null 2>&1; then
	check_refused strace strace -o /dev/null -p
else
	echo "strace is not installed: only the tiny tracer was used"
fi
exit 0
