#!/bin/bash
# test-e2e-tcmalloc.sh - exact counts and a clean detach on a target whose malloc is tcmalloc's.
#
# mt-target-tcmalloc is mt-target linked against libtcmalloc (built when configure finds it:
# Debian package libgoogle-perftools-dev); the test skips when it was not built. Before attaching it checks
# that the target's malloc really binds to tcmalloc; then the checks of test-e2e-exact.sh.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"

target=$HP_TARGETS/mt-target-tcmalloc
[ -x "$target" ] || hp_skip "mt-target-tcmalloc was not built: install libgoogle-perftools-dev and rerun configure"
LD_DEBUG=bindings "$target" 1 1 </dev/null >"$hp_tmp/bindings" 2>&1 ||
	hp_fail "mt-target-tcmalloc does not run: $(tail -n 5 "$hp_tmp/bindings")"
grep -E "to .*libtcmalloc[^ ]* .*symbol \`malloc'" "$hp_tmp/bindings" >/dev/null ||
	hp_fail "mt-target-tcmalloc's malloc does not come from libtcmalloc"
hp_ok "mt-target-tcmalloc's malloc binds to libtcmalloc"
hp_e2e_exact "$target"
# Blocks of 1 to 4 bytes: the 8-byte size class puts every other one at an address that is
# not 16-byte aligned, which the live map keeps in its table rather than its direct map.
hp_e2e_exact "$target" 1
