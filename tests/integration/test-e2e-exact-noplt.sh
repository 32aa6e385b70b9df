#!/bin/bash
# test-e2e-exact-noplt.sh - test-e2e-exact.sh on a -fno-plt build: malloc is called through
# its GOT slot (R_X86_64_GLOB_DAT), with no PLT entry at all.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"

target=$HP_TARGETS/mt-target-noplt
if command -v readelf >/dev/null 2>&1 && [ -x "$target" ]; then
	readelf -rW "$target" | grep -q 'GLOB_DAT.* malloc@' ||
		hp_error "${target##*/} has no GLOB_DAT relocation for malloc"
	! readelf -rW "$target" | grep -q 'JUMP_SLOT.* malloc@' ||
		hp_error "${target##*/} still calls malloc through the PLT"
	hp_ok "${target##*/} calls malloc through the GOT only"
fi
hp_e2e_exact "$target"
