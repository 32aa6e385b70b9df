#!/bin/bash
# test-e2e-exact.sh - exact per-site counts on a lazily bound multi-threaded target.
#
# mt-target 4 1000 (malloc's PLT slot unresolved at attach): attach --batch, "go", rounds
# printed, heapprof-detach exits 0, so does heapprof-attach, no heapprof mapping and no
# extra fd left; the worker_alloc site has mt-target.c and the HP_SITE line, 4000
# allocations, 2000 frees (cross-thread) and exact byte counts; the target exits 0. Then
# the same with blocks of 1 to 4 bytes, whose size the live map keeps in the block's own
# word, and with blocks of 2000 to 2003 bytes, too large for the word, whose size is in the
# word after it (and whose frees the free hook's common path must leave to the general one).
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"

hp_e2e_exact "$HP_TARGETS/mt-target"
hp_e2e_exact "$HP_TARGETS/mt-target" 1
hp_e2e_exact "$HP_TARGETS/mt-target" 2000
