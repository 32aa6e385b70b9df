#!/bin/bash
# test-e2e-exact-relro.sh - test-e2e-exact.sh on a full-RELRO build (-z relro -z now): the
# GOT is read-only while the target runs, and must be read-only again after detaching.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"

target=$HP_TARGETS/mt-target-relro
if command -v readelf >/dev/null 2>&1 && [ -x "$target" ]; then
	readelf -dW "$target" | grep -q 'BIND_NOW' || hp_error "${target##*/} is not linked -z now"
	readelf -lW "$target" | grep -q 'GNU_RELRO' || hp_error "${target##*/} has no RELRO segment"
	hp_ok "${target##*/} has full RELRO"
fi
hp_e2e_exact "$target"
