#!/bin/bash
# test-state-pidns.sh - a target in a PID namespace of its own (a container's), whose
# threads know themselves by other numbers than /proc and ptrace give them here.
#
# mt-target 4 1000 as PID 1 of a new PID namespace (unshare --pid --fork --mount-proc):
# attach --batch, "go", rounds, then heapprof-detach must tell the payload's collector
# thread, which reports its id as the namespace numbers it, from the target's own threads
# (before that it waited 4 s for the collector to leave the payload and gave up, the
# payload left loaded). Then the exact-counts checks of test-e2e-exact: heapprof-detach
# and heapprof-attach exit 0, no heapprof mapping, the same open files, the worker_alloc
# site exact, the overview's pid the one given, and the target exits 0.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"

[ "$(id -u)" = 0 ] || hp_skip "making a PID namespace needs root"
command -v unshare >/dev/null || hp_skip "no unshare (util-linux)"
unshare --pid --fork --mount-proc true 2>/dev/null || hp_skip "no PID namespace can be made here"
# The target starts only as its namespace's PID 1.
HP_TARGET_WRAP=(unshare --pid --fork --mount-proc --kill-child sh -c '[ $$ = 1 ] && exec "$@"' sh)
hp_e2e_exact "$HP_TARGETS/mt-target"
