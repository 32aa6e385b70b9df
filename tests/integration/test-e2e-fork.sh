#!/bin/bash
# test-e2e-fork.sh - fork and exec while attached: the children go quiet.
#
# fork-target 2000 (tests/targets/fork-target.c), attached with --interval 50: two "go"s,
# each forking 8 children (2 from the main thread, 6 from a helper thread while the main
# thread allocates); every child allocates at parent_alloc and child_alloc and frees its
# copies of the parent's kept blocks, then half exec /bin/true and half keep allocating
# across several rounds. Checks: every child exits 0; parent_alloc has exactly the
# parent's 4000 allocations, 3000 frees and 40-byte blocks (a child counted as the parent
# would add to them); no child_alloc site exists; with a forked child still alive (it
# holds a copy of the payload and, unless the payload closed it, the pipe's write end),
# heapprof-detach and heapprof-attach exit 0 and the parent has no heapprof mapping and
# its fd count from before; the held child then exits 0. A child made by a raw clone
# (daemon() forks inside libc, past any hook) has only the parent's fds from before the
# attach once it has allocated.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"

K=2000
target=$HP_TARGETS/fork-target
src=$top_srcdir/tests/targets/fork-target.c
hp_require_python
hp_require_ptrace
hp_require_binaries "$target"
[ -x /bin/true ] || hp_skip "/bin/true is needed"
line=$(hp_source_line "$src" '/* HP_SITE_PARENT */') || exit 99

# hp_command CMD ANSWER: hp_ask, and says so.
hp_command()
{
	hp_ask "$1" "$2"
	hp_ok "$1: $2"
}

hp_start_target "$target" $K
fds=$(hp_fd_count "$TARGET_PID")
hp_maps_clean "$TARGET_PID" || hp_error "the target maps heapprof before attaching"
hp_attach --batch --interval 50 --output "$hp_tmp/p.hpf" "$TARGET_PID"
hp_ok "attached to fork-target $K (pid $TARGET_PID)"

hp_command go done
hp_command go done
hp_ok "16 children forked, 8 of them from a non-main thread; all exited 0"
hp_ask hold-raw 'held-raw [0-9]+'
child=$(grep '^held-raw ' "$TARGET_OUT" | tail -n 1 | cut -d' ' -f2)
for _ in $(seq 100); do
	[ "$(hp_fd_count "$child")" -eq "$fds" ] && break
	sleep 0.05
done
[ "$(hp_fd_count "$child")" -eq "$fds" ] ||
	hp_fail "a child made by a raw clone keeps heapprof's pipe: $(ls -l "/proc/$child/fd")"
hp_ok "a child made by a raw clone (as daemon() forks) closed its copy of the pipe"
hp_command release released
hp_command hold held
rounds=$(hp_count_lines "$hp_tmp/attach.out" "$HP_ROUND_RE")
hp_wait_line "$hp_tmp/attach.out" "$HP_ROUND_RE" 15 $((rounds + 2)) ||
	hp_fail "no round lines after the children were forked"
hp_ok "two more rounds with a forked child alive"
hp_detach_session "$fds"
hp_command release released

hp_view_json hotspots --top 0
hp_check_site "$hp_tmp/hotspots.json" parent_alloc fork-target.c "$line" \
	$((2 * K)) $((3 * K / 2)) $((2 * K * 40)) $((K / 2)) $((K / 2 * 40)) ||
	hp_fail "the parent_alloc site is wrong"
hp_ok "parent_alloc site exact: the children's calls were not counted"
python3 - "$hp_tmp/hotspots.json" <<'PY' || hp_fail "a child's allocations are in the profile"
import json, sys
sites = [s for s in json.load(open(sys.argv[1])) if "child_alloc" in str(s.get("function"))]
if sites:
    sys.exit("child_alloc sites: %r" % sites)
PY
hp_ok "no child_alloc site"
hp_stop_target
