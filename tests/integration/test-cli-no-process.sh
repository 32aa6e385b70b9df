#!/bin/bash
# heapprof-attach and heapprof-detach refuse a pid that names no process, or a zombie.
. "$(dirname "$0")/lib.sh"

for cmd in "$HP_ATTACH" "$HP_DETACH"; do
	[ -x "$cmd" ] || hp_error "$cmd is missing: try 'make check'"
done

# expect_refusal STATUS MESSAGE CMD ARGS...
expect_refusal()
{
	local want_status=$1 want=$2 status

	shift 2
	"$@" >"$hp_tmp/out" 2>"$hp_tmp/err"
	status=$?
	[ $status -eq "$want_status" ] ||
		hp_fail "'${*##*/}' exited $status, not $want_status: $(cat "$hp_tmp/err")"
	grep -q -F -- "$want" "$hp_tmp/err" ||
		hp_fail "'${*##*/}' says '$(cat "$hp_tmp/err")', expected '$want'"
	[ "$(wc -l <"$hp_tmp/err")" -eq 1 ] ||
		hp_fail "'${*##*/}' printed more than one line: $(cat "$hp_tmp/err")"
	hp_ok "exit $want_status: $(cat "$hp_tmp/err")"
}

# A pid that was just used and is free again.
true &
gone=$!
wait $gone
[ ! -e "/proc/$gone" ] || hp_skip "pid $gone was reused at once"
expect_refusal 1 "heapprof-attach: no process with pid $gone: check the pid" "$HP_ATTACH" $gone
expect_refusal 1 "heapprof-detach: no process with pid $gone: check the pid" "$HP_DETACH" $gone

# A zombie: the child of a process (sleep) that never waits for it. The child ends only
# once bash ($$ in the subshell) has turned into sleep: a child that ended before that
# exec would be reaped by bash (seen on a fast machine: "no zombie to test with").
hp_spawn zombie-parent bash -c \
	'(until [ "$(cat /proc/$$/comm)" = sleep ]; do sleep 0.05; done; exec /bin/true) &
	echo $!; exec sleep 60'
n=0
while [ ! -s "$hp_tmp/zombie-parent.out" ] && ((n++ < 50)); do
	sleep 0.1
done
zombie=$(cat "$hp_tmp/zombie-parent.out")
n=0
while [ "$(sed 's/.*) //; s/ .*//' "/proc/$zombie/stat" 2>/dev/null)" != Z ] && ((n++ < 50)); do
	sleep 0.1
done
[ "$(sed 's/.*) //; s/ .*//' "/proc/$zombie/stat")" = Z ] || hp_error "no zombie to test with"
msg="heapprof-attach: process $zombie (true) has exited and waits for its parent (a zombie)"
expect_refusal 1 "$msg" \
	"$HP_ATTACH" "$zombie"

if [ "$(cat /proc/2/comm 2>/dev/null)" = kthreadd ]; then
	expect_refusal 1 "heapprof-attach: process 2 (kthreadd) is a kernel thread" "$HP_ATTACH" 2
fi
exit 0
