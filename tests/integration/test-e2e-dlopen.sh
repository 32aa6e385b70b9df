#!/bin/bash
# test-e2e-dlopen.sh - a library dlopen'ed and dlclose'd while attached is counted exactly.
#
# dl-target libdltest.so 1000 (tests/targets/dl-target.c, dltest.c), attached with
# --interval 50: 10 dlopen/call/dlclose cycles that keep the library loaded for 150 ms
# (so that the profiler sees it loaded; test-e2e-dlopen-brief.sh has loads shorter than a
# round), alternating RTLD_NOW and RTLD_LAZY (the library is bound lazily). Each call
# allocates 1000 blocks of 56 + k % 8 bytes at dltest_alloc, through the library's own PLT,
# and frees the odd ones; the program frees the rest after the next dlclose, and the
# library's destructor frees one 200-byte block from dltest_cache_alloc inside dlclose.
# Checks: every dlclose really unloads the library; both sites have their exact counts
# and file and line; detach is clean; the target exits 0 with its blocks intact.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=tests/integration/lib-dltest.sh
. "$(dirname "$0")/lib-dltest.sh"

K=1000 N=10
dl_require

hp_start_target "$DL_TARGET" "$DL_LIB" $K
fds=$(hp_fd_count "$TARGET_PID")
hp_maps_clean "$TARGET_PID" || hp_error "the target maps heapprof before attaching"
hp_attach --batch --interval 50 --output "$hp_tmp/p.hpf" "$TARGET_PID"
hp_ok "attached to dl-target (pid $TARGET_PID)"
dl_go $N 150
rounds=$(hp_count_lines "$hp_tmp/attach.out" "$HP_ROUND_RE")
hp_wait_line "$hp_tmp/attach.out" "$HP_ROUND_RE" 15 $((rounds + 2)) ||
	hp_fail "no round lines after the cycles"
grep -q "libdltest" "/proc/$TARGET_PID/maps" && hp_fail "libdltest.so is still mapped"
hp_detach_session "$fds"

hp_view_json hotspots --top 0
dl_check_alloc_site $N $K "$line"
hp_check_site "$hp_tmp/hotspots.json" dltest_cache_alloc dltest.c "$line_cache" \
	$N $N $((N * 200)) 0 0 || hp_fail "the dltest_cache_alloc site is wrong"
hp_ok "dltest_cache_alloc site exact: the destructor's frees in dlclose counted"
hp_stop_target
