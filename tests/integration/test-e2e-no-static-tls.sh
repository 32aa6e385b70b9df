#!/bin/bash
# test-e2e-no-static-tls.sh - a target with no static TLS left. The payload keeps each
# thread's record address in initial-exec TLS, which a dlopen can only place in glibc's
# static TLS surplus; mt-target with MT_TARGET_TLS_PAD first uses that up (copies of a
# library with an initial-exec TLS word, dlopened until none fits), as a process whose own
# plugins took it would. heapprof-attach then loads heapprof-payload-hashed.so in the same
# hold, says so in one line, and the counts are exact (hp_e2e_exact: attach, rounds, detach
# exits 0 with nothing left behind, the site's counts). The same target without the pad
# gets the TLS payload, without that line.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"

hp_require_binaries "$HP_TARGETS/libtls-pad.so"
note="has no static TLS left for the payload; loaded heapprof-payload-hashed.so"

hp_e2e_exact "$HP_TARGETS/mt-target"
grep -q "$note" "$hp_tmp/attach.err" &&
	hp_fail "heapprof-attach fell back with static TLS to spare: $(cat "$hp_tmp/attach.err")"
hp_ok "with static TLS to spare, the TLS payload"

export MT_TARGET_TLS_PAD=$HP_TARGETS/libtls-pad.so
hp_e2e_exact "$HP_TARGETS/mt-target"
grep -q "static TLS full after" "$hp_tmp/target$hp_ntargets.err" ||
	hp_fail "mt-target did not use up its static TLS: $(cat "$hp_tmp/target$hp_ntargets.err")"
grep -q "^heapprof-attach: process $TARGET_PID $note, which finds" "$hp_tmp/attach.err" ||
	hp_fail "heapprof-attach does not say it loaded the fallback: $(cat "$hp_tmp/attach.err")"
hp_ok "without static TLS, the hashed payload, said in one line, counts exact"
