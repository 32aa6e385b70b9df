#!/bin/bash
# test-e2e-dlopen-runpath.sh - a library that dlopens a plugin through its own DT_RUNPATH
# and $ORIGIN keeps finding it while attached.
#
# glibc resolves a bare name and $ORIGIN relative to dlopen's caller, which the dlopen hook
# must not turn into the payload. lib/libdlrunpath.so (tests/targets/dlrunpath.c, DT_RUNPATH
# $ORIGIN/plugins) dlopens "libdltest.so", which only lib/plugins/ holds, and
# "$ORIGIN/plugins/libdltest.so"; dl-target loads and unloads it. Checks: the cycles work
# before attaching (the layout is right); attached, 4 cycles work, and the plugin's
# dltest_alloc site has its exact counts (the plugin was patched when loaded); the detach
# is clean and the target exits 0.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=tests/integration/lib-dltest.sh
. "$(dirname "$0")/lib-dltest.sh"

K=200 N=4
dl_start_runpath $K
fds=$(hp_fd_count "$TARGET_PID")
hp_attach --batch --interval 50 --output "$hp_tmp/p.hpf" "$TARGET_PID"
dl_go $N 100 "attached"
rounds=$(hp_count_lines "$hp_tmp/attach.out" "$HP_ROUND_RE")
hp_wait_line "$hp_tmp/attach.out" "$HP_ROUND_RE" 15 $((rounds + 2)) ||
	hp_fail "no round lines after the cycles"
hp_detach_session "$fds"

# The first "go" ran unprofiled; its kept blocks are freed in the first profiled one.
hp_view_json hotspots --top 0
dl_check_alloc_site $N $K "$line"
hp_stop_target
