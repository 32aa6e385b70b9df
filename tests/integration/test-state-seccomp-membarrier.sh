#!/bin/bash
# test-state-seccomp-membarrier.sh - exact counts where membarrier is refused.
#
# seccomp-target deny-membarrier (tests/targets/seccomp-target.c) fails membarrier with
# EPERM on every thread, so the payload adds to each thread's counters under the record's
# lock and its hooks' inline insert, remove and add are off (threads.h, directmap.h:
# hp_dm_near). Attached in full mode while its churn thread allocates without pause, two
# "go"s: the go_block site has its 2000 allocations and frees and their bytes exactly, the
# churn's site (alloc_filled, 4000 sizes: its first round's site records overflow the
# collector's buffer) is named too, and the session ends with the target as it was and
# its memory intact.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"

target=$HP_TARGETS/seccomp-target
hp_require_python
hp_require_ptrace
hp_require_binaries "$target"
[ "$(id -u)" = 0 ] || hp_skip "reading a seccomp filter needs root (CAP_SYS_ADMIN)"
line=$(hp_source_line "$top_srcdir/tests/targets/seccomp-target.c" '/* HP_SITE */') || exit 99

hp_start_target "$target" deny-membarrier
fds=$(hp_fd_count "$TARGET_PID")
hp_attach --batch --interval 100 --output "$hp_tmp/p.hpf" "$TARGET_PID"
hp_ok "attached to seccomp-target deny-membarrier (pid $TARGET_PID)"
hp_send go
hp_wait_line "$TARGET_OUT" '^done [0-9]+$' 30 || hp_fail "the target did not finish its work"
hp_send go
hp_wait_line "$TARGET_OUT" '^done [0-9]+$' 30 2 || hp_fail "the target did not finish its work"
rounds=$(hp_count_lines "$hp_tmp/attach.out" "$HP_ROUND_RE")
hp_wait_line "$hp_tmp/attach.out" "$HP_ROUND_RE" 15 $((rounds + 2)) ||
	hp_fail "no round lines after the work was done"
hp_detach_session "$fds"
# 2 x (1000 blocks of 32 + k bytes, k = 0..999).
hp_view_json hotspots --top 0
hp_check_site "$hp_tmp/hotspots.json" go_block seccomp-target.c "$line" \
	2000 2000 $((2 * (32000 + 999 * 1000 / 2))) 0 0 || hp_fail "the go_block site is wrong"
hp_ok "go_block site exact at seccomp-target.c:$line with membarrier refused"
python3 - "$hp_tmp/hotspots.json" <<'EOF' || hp_fail "a stack of the first round went out before its module"
import json, sys
names = sorted(str(s.get("function")) for s in json.load(open(sys.argv[1])))
if "alloc_filled" not in names:
    sys.exit("no site named alloc_filled among: " + ", ".join(names))
EOF
hp_ok "the churn's site, first seen in the first round, is named"
hp_stop_target
