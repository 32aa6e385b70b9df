#!/bin/bash
# test-man.sh - the man pages document what the commands accept.
#
# Every option that heapprof-attach --help, heapprof-detach --help, heapprof-view --help
# and each heapprof-view COMMAND --help lists appears in the command's man page, and so
# does every heapprof-view command; with groff installed, each page renders without a
# warning, also with its installed paths under a prefix wider than the page. The bash completion script parses and defines a function for each command.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"

hp_require_binaries
man_dir=$top_builddir/docs/man

# The options a --help text lists: the "-x" and "--xyz" words of its indented lines.
help_options()
{
	grep -E '^ +-' | grep -oE -- '(^|[ ,])--?[A-Za-z][A-Za-z0-9-]*' | tr -d ' ,' | sort -u
}

# The man page as plain words: "\-" is "-", font changes go.
man_text()
{
	sed -e 's/\\-/-/g' -e 's/\\f[BIRP]//g' -e 's/\\%//g' "$1"
}

# check_page PAGE HELP-TEXT: every option of HELP-TEXT is in PAGE.
check_page()
{
	local page=$1 opt missing=""

	for opt in $(help_options <<<"$2"); do
		man_text "$page" | grep -qE -- "(^|[^A-Za-z0-9-])$opt([^A-Za-z0-9-]|\$)" ||
			missing="$missing $opt"
	done
	[ -z "$missing" ] || hp_fail "${page##*/} lacks options its command's --help lists:$missing"
}

for cmd in attach detach view; do
	page=$man_dir/heapprof-$cmd.1
	[ -s "$page" ] || hp_error "$page is missing: 'make' builds it"
	bin=$top_builddir/src/heapprof-$cmd
	help=$("$bin" --help) || hp_fail "heapprof-$cmd --help failed"
	check_page "$page" "$help"
	hp_ok "heapprof-$cmd.1 has every option of heapprof-$cmd --help"
done

commands=$("$HP_VIEW" --help | sed -n '/^Commands:/,/^$/p' | awk 'NR > 1 && NF { print $1 }' | tr '\n' ' ')
[ -n "$commands" ] || hp_fail "heapprof-view --help lists no commands"
for c in $commands; do
	man_text "$man_dir/heapprof-view.1" | grep -qE "^\.B $c\$" ||
		hp_fail "heapprof-view.1 does not describe the command $c"
	help=$("$HP_VIEW" "$c" --help) || hp_fail "heapprof-view $c --help failed"
	check_page "$man_dir/heapprof-view.1" "$help"
done
hp_ok "heapprof-view.1 describes every command and its options: $commands"

if command -v groff >/dev/null 2>&1; then
	for cmd in attach detach view; do
		warnings=$(groff -man -Tutf8 -ww -z "$man_dir/heapprof-$cmd.1" 2>&1)
		[ -z "$warnings" ] || hp_fail "heapprof-$cmd.1 renders with warnings: $warnings"
		# Installed under a prefix wider than the page, as make distcheck does.
		warnings=$(sed 's|^\.I /|&\\:a/\\:prefix/\\:deeper/\\:than/\\:any/\\:line/\\:of/\\:the/\\:page/\\:can/\\:hold/\\:at/\\:seventy/\\:eight/\\:columns/|' \
			"$man_dir/heapprof-$cmd.1" | groff -man -Tutf8 -ww -z 2>&1)
		[ -z "$warnings" ] || hp_fail "heapprof-$cmd.1 renders with warnings under a long prefix: $warnings"
	done
	hp_ok "the man pages render without warnings, also under a long prefix"
fi

# shellcheck disable=SC1091 # the script under test
(. "$top_srcdir/completion/heapprof" &&
	for f in _heapprof_attach _heapprof_detach _heapprof_view; do
		declare -F "$f" >/dev/null || exit 1
	done) || hp_fail "completion/heapprof does not define its completion functions"
hp_ok "the bash completion script loads"
