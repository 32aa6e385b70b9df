#!/bin/bash
# test-e2e-dlopen-brief.sh - a library loaded and unloaded between two rounds keeps its
# sites' names.
#
# dl-target libdltest.so 100, attached with --interval 1000: right after a round, 3
# dlopen/call/dlclose cycles that take a few milliseconds in all, so the library is gone
# before the next round. Checks: dltest_alloc and dltest_cache_alloc are named, with
# dltest.c and their lines, and have their exact counts: the dlopen hook announced the
# library, and its unload went out after the stacks captured in it.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=tests/integration/lib-dltest.sh
. "$(dirname "$0")/lib-dltest.sh"

K=100 N=3
dl_require

hp_start_target "$DL_TARGET" "$DL_LIB" $K
fds=$(hp_fd_count "$TARGET_PID")
hp_attach --batch --interval 1000 --output "$hp_tmp/p.hpf" "$TARGET_PID"
hp_wait_line "$hp_tmp/attach.out" "$HP_ROUND_RE" 15 || hp_fail "no round line"
hp_send "go $N 0"
hp_wait_line "$TARGET_OUT" '^(done|failed)$' 10 && grep -q '^done$' "$TARGET_OUT" ||
	hp_fail "the dlopen/dlclose cycles failed: $(cat "$hp_tmp"/target*.err)"
hp_ok "$N dlopen/dlclose cycles within one round"
hp_wait_line "$hp_tmp/attach.out" "$HP_ROUND_RE" 15 3 || hp_fail "no round line after the cycles"
hp_detach_session "$fds"

hp_view_json hotspots --top 0
dl_check_alloc_site $N $K "$line"
hp_check_site "$hp_tmp/hotspots.json" dltest_cache_alloc dltest.c "$line_cache" \
	$N $N $((N * 200)) 0 0 || hp_fail "the dltest_cache_alloc site is wrong"
hp_ok "dltest_cache_alloc site named and exact"
hp_stop_target
