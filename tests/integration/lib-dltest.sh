# lib-dltest.sh - what the dlopen tests share: dl-target's "go" command and the exact
# numbers of libdltest.so's dltest_alloc site (tests/targets/dl-target.c, dltest.c).
# Sourced after lib.sh.

DL_TARGET=$HP_TARGETS/dl-target
DL_LIB=$HP_TARGETS/libdltest.so

# dl_require [BINARY...]: skips the test unless python3, ptrace, dl-target, libdltest.so
# and each BINARY are there; sets line and line_cache, the lines of dltest.c's two sites.
dl_require()
{
	local src=$top_srcdir/tests/targets/dltest.c

	hp_require_python
	hp_require_ptrace
	hp_require_binaries "$DL_TARGET" "$DL_LIB" "$@"
	line=$(hp_source_line "$src" '/* HP_SITE_DLTEST */') || exit 99
	line_cache=$(hp_source_line "$src" '/* HP_SITE_DLCACHE */') || exit 99
}

# dl_start_runpath K: dl-target on lib/libdlrunpath.so (tests/targets/dlrunpath.c), which
# finds libdltest.so in lib/plugins through its DT_RUNPATH, making K allocations a call;
# one cycle before attaching shows the layout works.
dl_start_runpath()
{
	dl_require "$HP_TARGETS/libdlrunpath.so"
	mkdir -p "$hp_tmp/lib/plugins"
	cp "$HP_TARGETS/libdlrunpath.so" "$hp_tmp/lib/"
	cp "$DL_LIB" "$hp_tmp/lib/plugins/"
	hp_start_target "$DL_TARGET" "$hp_tmp/lib/libdlrunpath.so" "$1"
	dl_go 1 10 "before attaching"
}

# dl_go N MS [WHAT]: N dlopen/call/dlclose cycles holding the library MS ms; fails the test
# unless dl-target answers "done".
dl_go()
{
	hp_ask "go $1 $2" done "${3:-}"
	hp_ok "$1 dlopen/dlclose cycles ${3:-holding the library $2 ms}: each worked"
}

# dl_check_alloc_site N K LINE: after N profiled calls of dltest_run(K), each freeing its
# odd blocks and the even ones of the call before, the hotspots JSON has one dltest_alloc
# site at dltest.c:LINE with exactly those numbers (the last call's even blocks live).
dl_check_alloc_site()
{
	local n=$1 k=$2 line=$3 i abytes=0 lbytes=0

	for ((i = 0; i < k; i++)); do
		abytes=$((abytes + n * (56 + i % 8)))
		((i % 2)) || lbytes=$((lbytes + 56 + i % 8))
	done
	hp_check_site "$hp_tmp/hotspots.json" dltest_alloc dltest.c "$line" $((n * k)) \
		$((n * k / 2 + (n - 1) * k / 2)) $abytes $((k / 2)) $lbytes ||
		hp_fail "the dltest_alloc site is wrong"
	hp_ok "dltest_alloc site named and exact over $n loads"
}
