#!/bin/bash
# test-state-seccomp-denied.sh - a target whose seccomp filter kills on a syscall the
# injection needs (memfd_create) is refused before anything is done to it.
#
# seccomp-target kill-memfd (tests/targets/seccomp-target.c) has two filters: one kills the
# process on memfd_create, the other fails uname. heapprof-attach must exit 1 with one line
# naming the process, memfd_create and the action (as root; otherwise one saying it needs
# CAP_SYS_ADMIN to read the filter), and leave the target alive, with no heapprof mapping,
# no profile written, its fd count from before; the target still answers, works, and exits
# 0 with its memory intact.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"

target=$HP_TARGETS/seccomp-target
hp_require_ptrace
hp_require_binaries "$target"

hp_start_target "$target" kill-memfd
grep -q '^Seccomp_filters:[[:space:]]*2' "/proc/$TARGET_PID/status" ||
	grep -q '^Seccomp:[[:space:]]*2' "/proc/$TARGET_PID/status" ||
	hp_error "the target is not under a seccomp filter"
fds=$(hp_fd_count "$TARGET_PID")
"$HP_ATTACH" --output "$hp_tmp/p.hpf" "$TARGET_PID" >"$hp_tmp/out" 2>"$hp_tmp/err"
status=$?
[ $status -eq 1 ] || hp_fail "heapprof-attach exited $status, not 1: $(cat "$hp_tmp/err")"
[ "$(wc -l <"$hp_tmp/err")" -eq 1 ] || hp_fail "the refusal is not one line: $(cat "$hp_tmp/err")"
if [ "$(id -u)" = 0 ]; then
	grep -qF "heapprof-attach: process $TARGET_PID (seccomp-target) has a seccomp filter that denies memfd_create (kill-process)" \
		"$hp_tmp/err" || hp_fail "unclear refusal: $(cat "$hp_tmp/err")"
else
	grep -qF "CAP_SYS_ADMIN" "$hp_tmp/err" || hp_fail "unclear refusal: $(cat "$hp_tmp/err")"
fi
hp_ok "refused: $(cat "$hp_tmp/err")"
[ ! -e "$hp_tmp/p.hpf" ] || hp_fail "a profile was created"
hp_check_restored "$fds"
hp_send go
hp_wait_line "$TARGET_OUT" '^done [0-9]+$' 30 || hp_fail "the target does not work after the refusal"
hp_ok "the target still allocates"
hp_stop_target
