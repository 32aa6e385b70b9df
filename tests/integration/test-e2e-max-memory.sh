#!/bin/bash
# test-e2e-max-memory.sh - --max-memory is a cap the payload keeps, and the profile says
# when it was reached.
#
# mt-target 4 100000 keeps 200000 blocks live, so tracking them all would take the payload
# past 8M (its fixed tables take about 4M, the live map some 32 bytes a block). Attached
# with --max-memory 8M, the least it takes: the allocations and bytes stay exact, the
# payload holds at most 8M in every round, the session switches to sampling, and no event
# is lost: the sampled blocks that the live map's pages no longer take go to its table
# (livemap.h), and the allocation site stays in hotspots. The profile says so:
# overview --json gives the round sampling began with and the rate (512K), the text
# overview and hotspots say the per-site numbers are estimates, and so do the viewer's
# report at the end and the pprof export (its period and a comment). heapprof-detach exits
# 0 and the target is left as found. A --max-memory below 8M is then refused in one line
# with exit 2, before anything is loaded into the target.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"

T=4
K=100000
target=$HP_TARGETS/mt-target

hp_require_python
hp_require_ptrace
hp_require_binaries "$target"

HP_PROFILE_OPTS=(--interval 100 --max-memory 8M)
hp_profile_go "$target" $T $K

"$HP_ATTACH" --batch --max-memory 1M "$TARGET_PID" >"$hp_tmp/small.out" 2>"$hp_tmp/small.err"
status=$?
[ $status -eq 2 ] || hp_fail "--max-memory 1M: heapprof-attach exited $status, not 2"
if [ "$(wc -l <"$hp_tmp/small.err")" -gt 2 ] ||
	! grep -q "^heapprof-attach: --max-memory 1M is too small: .* give 8M or more$" \
		"$hp_tmp/small.err"; then
	hp_fail "--max-memory 1M: unexpected message: $(cat "$hp_tmp/small.err")"
fi
hp_maps_clean "$TARGET_PID" || hp_fail "--max-memory 1M: the target was touched"
hp_ok "--max-memory 1M is refused before attaching: $(head -n 1 "$hp_tmp/small.err")"

allocs=$((T * K))
abytes=0
for ((i = 0; i < T; i++)); do
	abytes=$((abytes + K * (48 + i)))
done
cap=$((8 << 20))

hp_view_json overview
for field in allocations:$allocs allocated_bytes:$abytes sample_rate:524288 lost:0; do
	got=$(hp_json_field "$hp_tmp/overview.json" "${field%%:*}") || hp_fail "bad overview JSON"
	[ "$got" = "${field#*:}" ] ||
		hp_fail "overview ${field%%:*} is $got, expected ${field#*:}"
done
from=$(hp_json_field "$hp_tmp/overview.json" sampled_from_round)
if ! [[ "$from" =~ ^[1-9][0-9]*$ ]]; then
	hp_fail "overview sampled_from_round is '$from': the switch to sampling is not recorded"
fi
hp_ok "overview: $allocs allocations and $abytes bytes exact, none lost; sampled from round $from at 512K"

# Every round's payload_bytes, from the timeline.
hp_view_json timeline
python3 - "$hp_tmp/timeline.json" "$cap" <<'EOF' || hp_fail "the payload went past --max-memory"
import json, sys
rounds = json.load(open(sys.argv[1]))
most = max(r["payload_bytes"] for r in rounds)
print(f"ok: the payload held at most {most} bytes in {len(rounds)} rounds, cap {sys.argv[2]}")
sys.exit(0 if most <= int(sys.argv[2]) else 1)
EOF

"$HP_VIEW" overview "$hp_tmp/p.hpf" >"$hp_tmp/overview.txt" ||
	hp_fail "heapprof-view overview failed"
grep -q "^Sampling: .* from round $from on (--max-memory was reached)$" "$hp_tmp/overview.txt" ||
	hp_fail "the text overview does not say sampling began: $(cat "$hp_tmp/overview.txt")"
"$HP_VIEW" hotspots "$hp_tmp/p.hpf" >"$hp_tmp/hotspots.txt" ||
	hp_fail "heapprof-view hotspots failed"
grep -q " worker_alloc " "$hp_tmp/hotspots.txt" ||
	hp_fail "hotspots lost the allocation site: $(cat "$hp_tmp/hotspots.txt")"
grep -q "^Per-site numbers from round $from on are estimates: --max-memory" \
	"$hp_tmp/hotspots.txt" ||
	hp_fail "hotspots does not say its numbers are estimates: $(cat "$hp_tmp/hotspots.txt")"
grep -q "^# per-site numbers are estimates from sampling (--max-memory was reached)" \
	"$hp_tmp/attach.out" ||
	hp_fail "the viewer's report does not say the numbers are estimates"
hp_ok "overview, hotspots and the viewer's report say the per-site numbers are estimates"

# The pprof export: the rate as its period, and a comment naming the round.
"$HP_VIEW" export --format pprof -o "$hp_tmp/p.pb.gz" "$hp_tmp/p.hpf" ||
	hp_fail "heapprof-view export --format pprof failed"
python3 - "$hp_tmp/p.pb.gz" "$from" <<'EOF' || hp_fail "the pprof export does not say it"
import gzip, sys
b = gzip.decompress(open(sys.argv[1], "rb").read())
def varint(i):
    v = s = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << s
        s += 7
        if c < 0x80:
            return v, i
i, strings, period, comments = 0, [], None, []
while i < len(b):
    k, i = varint(i)
    if k & 7 == 0:
        v, i = varint(i)
        if k >> 3 == 12:
            period = v
        elif k >> 3 == 13:
            comments.append(v)
    else:
        n, i = varint(i)
        if k >> 3 == 6:
            strings.append(b[i : i + n].decode())
        i += n
want = f"heapprof: per-site numbers from round {sys.argv[2]} on are estimates"
notes = [strings[c] for c in comments]
print(f"ok: pprof period {period}, comments {notes}")
sys.exit(0 if period == 524288 and any(n.startswith(want) for n in notes) else 1)
EOF

hp_stop_target
