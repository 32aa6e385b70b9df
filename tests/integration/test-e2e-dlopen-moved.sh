#!/bin/bash
# test-e2e-dlopen-moved.sh - a library unloaded and loaded again at other addresses within
# one round, into the range it left, keeps its sites' names.
#
# dl-target lib/libdlrunpath.so 200 (test-e2e-dlopen-runpath.sh's layout: it dlopens
# libdltest.so), told to "shift": after each dlclose it maps a page where the library was,
# so each load puts the two libraries at new addresses that overlap the last load's.
# Attached with --interval 1000, 4 cycles that take a few milliseconds in all: every load
# and unload falls within one round. The stacks captured in one load must reach the viewer
# before the MODULE record of the load that takes its addresses, or the viewer finds no
# module for them. Checks: dltest_alloc is named, at its line, with its exact counts.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=tests/integration/lib-dltest.sh
. "$(dirname "$0")/lib-dltest.sh"

K=200 N=4
dl_start_runpath $K
hp_ask shift shifted "(a page mapped where the library was, after each dlclose)"
fds=$(hp_fd_count "$TARGET_PID")
hp_attach --batch --interval 1000 --output "$hp_tmp/p.hpf" "$TARGET_PID"
hp_wait_line "$hp_tmp/attach.out" "$HP_ROUND_RE" 15 || hp_fail "no round line"
dl_go $N 0 "within one round, each load at new addresses"
hp_wait_line "$hp_tmp/attach.out" "$HP_ROUND_RE" 15 3 || hp_fail "no round line after the cycles"
hp_detach_session "$fds"

hp_view_json hotspots --top 0
dl_check_alloc_site $N $K "$line"
hp_stop_target
