#!/bin/sh
# run-demo.sh - `make demo`: profile a running heapprof-demo for 5 seconds, then analyse.
#
# Contract: run with top_builddir pointing at the build tree (default: the current
# directory). Writes heapprof-demo.hpf (the profile) and heapprof-demo.log (the demo's own
# output) in the current directory. Exits 0 only if every command succeeded and the demo,
# stopped with SIGTERM afterwards, exited 0. The demo is never left running.
set -u

b=${top_builddir:-.}
demo=$b/demo/heapprof-demo
attach=$b/src/heapprof-attach
view=$b/src/heapprof-view
profile=heapprof-demo.hpf
log=heapprof-demo.log
pid=

fail()
{
	echo "run-demo: $*" >&2
	exit 1
}

# Alive and not a zombie.
alive()
{
	state=$(sed 's/.*) //; s/ .*//' "/proc/$1/stat" 2>/dev/null) || return 1
	[ "$state" != Z ]
}

cleanup()
{
	if [ -n "$pid" ] && alive "$pid"; then
		kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

for f in "$demo" "$attach" "$view"; do
	[ -x "$f" ] || fail "$f is missing: try 'make' first"
done

rm -f "$profile"
"$demo" >"$log" 2>&1 &
pid=$!
n=0
until grep -q ready "$log" 2>/dev/null; do
	alive "$pid" || fail "heapprof-demo exited early: $(cat "$log")"
	n=$((n + 1))
	[ $n -le 100 ] || fail "heapprof-demo did not get ready within 10 s"
	sleep 0.1
done
echo "== heapprof-demo is running as pid $pid; profiling it for 5 seconds"
echo "\$ heapprof-attach --duration 5 --batch --output $profile $pid"
timeout 60 "$attach" --duration 5 --batch --output "$profile" "$pid" ||
	fail "heapprof-attach failed (exit $?)"
alive "$pid" || fail "heapprof-demo did not survive profiling: $(cat "$log")"

echo
echo "\$ heapprof-view overview $profile"
"$view" overview "$profile" || fail "heapprof-view overview failed"
echo
echo "\$ heapprof-view hotspots --top 5 $profile"
"$view" hotspots --top 5 "$profile" || fail "heapprof-view hotspots failed"

echo
echo "== stopping heapprof-demo (its own view of the last seconds):"
kill -TERM "$pid"
n=0
while alive "$pid"; do
	n=$((n + 1))
	[ $n -le 100 ] || fail "heapprof-demo did not stop within 10 s of SIGTERM"
	sleep 0.1
done
wait "$pid"
status=$?
pid=
tail -n 4 "$log"
[ $status -eq 0 ] || fail "heapprof-demo exited with status $status"
echo "== heapprof-demo exited 0; the profile is in $profile"
