#!/bin/bash
# test-view-e2e.sh - every heapprof-view command on a real profile.
#
# mt-target 2 500, one "go" under heapprof-attach --batch, detached: every command's --json
# parses; the call tree and the collapsed stacks sum to the sites' total allocations; leaks
# lists worker_alloc with the 500 blocks still live; the flame graph is well-formed XML;
# ms_print reads the massif export; the pprof export is gzip and, when Go is installed,
# go tool pprof lists worker_alloc in it. With the zstd command: the profile is one whole
# zstd frame, and its raw records (zstd -dc) give the same hotspots.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"

hp_require_python
hp_require_ptrace
hp_require_binaries "$HP_TARGETS/mt-target"

hp_profile_go "$HP_TARGETS/mt-target" 2 500
hp_stop_target
prof=$hp_tmp/p.hpf

for cmd in overview timeline histogram "filter --size 48" tree "tree -r" hotspots leaks \
	growth temporary peak; do
	# shellcheck disable=SC2086 # cmd holds the command and its options
	"$HP_VIEW" $cmd --json "$prof" >"$hp_tmp/cmd.json" 2>"$hp_tmp/view.err" ||
		hp_fail "heapprof-view $cmd --json failed: $(cat "$hp_tmp/view.err")"
	python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$hp_tmp/cmd.json" ||
		hp_fail "heapprof-view $cmd --json is not JSON"
	# shellcheck disable=SC2086
	"$HP_VIEW" $cmd -j -t "$prof" >/dev/null 2>"$hp_tmp/view.err" ||
		hp_fail "heapprof-view $cmd -j -t failed: $(cat "$hp_tmp/view.err")"
done
hp_ok "every command prints JSON that parses, and text"

if command -v zstd >/dev/null 2>&1; then
	zstd -q -t "$prof" || hp_fail "the profile is not a whole zstd frame"
	zstd -q -dc "$prof" >"$hp_tmp/raw.hpf" || hp_fail "zstd -dc cannot decompress the profile"
	[ "$(head -c 8 "$hp_tmp/raw.hpf")" = HEAPPROF ] || hp_fail "zstd -dc does not give records"
	for f in "$prof" "$hp_tmp/raw.hpf"; do
		"$HP_VIEW" hotspots --json "$f" >"$f.json" 2>"$hp_tmp/view.err" ||
			hp_fail "heapprof-view hotspots --json $f failed: $(cat "$hp_tmp/view.err")"
	done
	cmp -s "$prof.json" "$hp_tmp/raw.hpf.json" ||
		hp_fail "the raw records (zstd -dc) read differently from the compressed profile"
	hp_ok "the profile is one zstd frame; its raw records (zstd -dc) read the same"
fi

hp_view_json hotspots --top 0
hp_view_json tree
"$HP_VIEW" export --format collapsed -o "$hp_tmp/c.txt" "$prof" ||
	hp_fail "export --format collapsed failed"
python3 - "$hp_tmp/hotspots.json" "$hp_tmp/tree.json" "$hp_tmp/c.txt" <<'PY' ||
import json, sys
sites = json.load(open(sys.argv[1]))
tree = json.load(open(sys.argv[2]))
total = sum(s["allocations"] for s in sites)
assert tree[0]["allocations"] == total, (tree[0], total)
coll = sum(int(l.rsplit(" ", 1)[1]) for l in open(sys.argv[3]))
assert coll == total, (coll, total)
PY
	hp_fail "the call tree or the collapsed stacks do not sum to the sites' allocations"
hp_ok "tree root and collapsed stacks sum to the sites' allocations"

hp_view_json leaks
python3 - "$hp_tmp/leaks.json" <<'PY' ||
import json, sys
s = [x for x in json.load(open(sys.argv[1])) if x["function"] == "worker_alloc"]
assert len(s) == 1 and s[0]["live_blocks"] == 500, s
assert "oldest_age_s" in s[0] and "mean_age_s" in s[0]
PY
	hp_fail "leaks does not show worker_alloc's 500 live blocks"
hp_ok "leaks: worker_alloc with 500 live blocks"

"$HP_VIEW" flame --type bytes -o "$hp_tmp/f.svg" "$prof" || hp_fail "flame failed"
python3 -c 'import xml.dom.minidom,sys; xml.dom.minidom.parse(sys.argv[1])' "$hp_tmp/f.svg" ||
	hp_fail "the flame graph is not well-formed XML"
grep -q worker_alloc "$hp_tmp/f.svg" || hp_fail "the flame graph does not name worker_alloc"
hp_ok "flame graph: well-formed SVG naming worker_alloc"

"$HP_VIEW" export --format massif -o "$hp_tmp/massif.out" "$prof" || hp_fail "export massif failed"
if command -v ms_print >/dev/null 2>&1; then
	ms_print "$hp_tmp/massif.out" >"$hp_tmp/ms.txt" 2>&1 || hp_fail "ms_print rejects the export"
	hp_ok "ms_print reads the massif export"
fi

"$HP_VIEW" export --format pprof -o "$hp_tmp/p.pb.gz" "$prof" || hp_fail "export pprof failed"
gzip -t "$hp_tmp/p.pb.gz" || hp_fail "the pprof export is not gzip"
if command -v go >/dev/null 2>&1; then
	HOME=$hp_tmp go tool pprof -top -symbolize=none "$hp_tmp/p.pb.gz" >"$hp_tmp/pprof.txt" \
		2>&1 || hp_fail "go tool pprof rejects the export: $(tail -3 "$hp_tmp/pprof.txt")"
	grep -q worker_alloc "$hp_tmp/pprof.txt" || hp_fail "go tool pprof does not list worker_alloc"
	hp_ok "go tool pprof lists worker_alloc"
fi
