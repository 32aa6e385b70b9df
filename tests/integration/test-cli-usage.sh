#!/bin/bash
# heapprof-attach and heapprof-detach: --help, --version, and usage errors (exit 2, nothing
# done).
. "$(dirname "$0")/lib.sh"

for cmd in "$HP_ATTACH" "$HP_DETACH"; do
	[ -x "$cmd" ] || hp_error "$cmd is missing: try 'make check'"
done
version=$(sed -n 's/^#define PACKAGE_VERSION "\(.*\)"$/\1/p' "$top_builddir/config.h")

for cmd in "$HP_ATTACH" "$HP_DETACH"; do
	name=${cmd##*/}
	out=$("$cmd" --version) || hp_fail "$name --version exited $?"
	[ "$out" = "$name $version" ] || hp_fail "$name --version says '$out', not '$name $version'"
	hp_ok "$name --version: $out"
	"$cmd" --help >"$hp_tmp/help" 2>"$hp_tmp/help.err" || hp_fail "$name --help exited $?"
	[ ! -s "$hp_tmp/help.err" ] || hp_fail "$name --help wrote to stderr"
	grep -q "^Usage: $name " "$hp_tmp/help" || hp_fail "$name --help has no Usage line"
	grep -q "^Exit status: 0 " "$hp_tmp/help" ||
		hp_fail "$name --help does not list the exit statuses"
	for opt in --help --version; do
		grep -q -- "$opt" "$hp_tmp/help" || hp_fail "$name --help does not list $opt"
	done
	hp_ok "$name --help"
done
for opt in --duration --interval --output --batch 'default: 1000' 'heapprof.COMM.PID.hpf' \
	'10..600000'; do
	"$HP_ATTACH" --help | grep -q -- "$opt" ||
		hp_fail "heapprof-attach --help does not mention $opt"
done
hp_ok "heapprof-attach --help lists every option and the defaults"

# usage_error EXPECTED-MESSAGE CMD ARGS...
usage_error()
{
	local want=$1 status

	shift
	"$@" >"$hp_tmp/out" 2>"$hp_tmp/err"
	status=$?
	[ $status -eq 2 ] || hp_fail "'${*##*/}' exited $status, not 2: $(cat "$hp_tmp/err")"
	grep -q -F -- "$want" "$hp_tmp/err" ||
		hp_fail "'${*##*/}' says '$(head -n 1 "$hp_tmp/err")', expected '$want'"
	grep -q -- "--help' for more information" "$hp_tmp/err" ||
		hp_fail "'${*##*/}' does not point to --help"
	[ ! -s "$hp_tmp/out" ] || hp_fail "'${*##*/}' wrote to stdout"
	hp_ok "exit 2: $(head -n 1 "$hp_tmp/err")"
}

usage_error "missing PID" "$HP_ATTACH"
usage_error "too many arguments" "$HP_ATTACH" 1 2
usage_error "invalid PID 'abc'" "$HP_ATTACH" abc
usage_error "invalid PID '0'" "$HP_ATTACH" 0
usage_error "invalid PID '-5'" "$HP_ATTACH" -- -5
usage_error "unknown option '--bogus'" "$HP_ATTACH" --bogus 1
usage_error "unknown option '-z'" "$HP_ATTACH" -z 1
usage_error "option '--output' needs a value" "$HP_ATTACH" 1 --output
usage_error "invalid --interval '9'" "$HP_ATTACH" --interval 9 1
usage_error "invalid --interval '600001'" "$HP_ATTACH" --interval 600001 1
usage_error "invalid --interval '1e3'" "$HP_ATTACH" --interval 1e3 1
usage_error "invalid --duration '0'" "$HP_ATTACH" --duration 0 1
usage_error "invalid --duration '-3'" "$HP_ATTACH" --duration=-3 1
usage_error "invalid --duration 'soon'" "$HP_ATTACH" --duration soon 1
usage_error "missing PID" "$HP_DETACH"
usage_error "too many arguments" "$HP_DETACH" 1 2
usage_error "invalid PID 'x1'" "$HP_DETACH" x1
usage_error "unknown option '--duration'" "$HP_DETACH" --duration 3 1
exit 0
