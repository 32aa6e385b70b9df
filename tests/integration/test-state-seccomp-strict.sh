#!/bin/bash
# test-state-seccomp-strict.sh - a target with a thread in seccomp strict mode (which may
# make no syscall but read, write, exit and sigreturn) is refused without being touched.
#
# seccomp-target strict (tests/targets/seccomp-target.c): one thread blocks in read() in
# strict mode, the others have no filter. heapprof-attach must exit 1 with one line naming
# the process and strict mode; the target is left alive, with no heapprof mapping, its fd
# count from before, still answers, and exits 0.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"

target=$HP_TARGETS/seccomp-target
hp_require_ptrace
hp_require_binaries "$target"

hp_start_target "$target" strict
grep -q '^Seccomp:[[:space:]]*1' /proc/"$TARGET_PID"/task/*/status ||
	hp_error "no thread of the target is in strict mode"
fds=$(hp_fd_count "$TARGET_PID")
"$HP_ATTACH" --output "$hp_tmp/p.hpf" "$TARGET_PID" >"$hp_tmp/out" 2>"$hp_tmp/err"
status=$?
[ $status -eq 1 ] || hp_fail "heapprof-attach exited $status, not 1: $(cat "$hp_tmp/err")"
[ "$(wc -l <"$hp_tmp/err")" -eq 1 ] || hp_fail "the refusal is not one line: $(cat "$hp_tmp/err")"
if ! grep -qF "heapprof-attach: process $TARGET_PID (seccomp-target) has a thread" "$hp_tmp/err" ||
	! grep -qF "in seccomp strict mode" "$hp_tmp/err"; then
	hp_fail "unclear refusal: $(cat "$hp_tmp/err")"
fi
hp_ok "refused: $(cat "$hp_tmp/err")"
[ ! -e "$hp_tmp/p.hpf" ] || hp_fail "a profile was created"
hp_check_restored "$fds"
hp_stop_target
