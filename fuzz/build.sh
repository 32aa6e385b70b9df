#!/bin/sh
# build.sh - links one fuzz target with clang (fuzz/local.mk's rules call it).
#
# Contract: build.sh CC OUTPUT SRCDIR EXCLUDE "SOURCES" "LIBS" FLAG... compiles and links,
# in one CC invocation with the FLAGs, the .c files of SOURCES (paths relative to the top,
# as in the local.mk variables they come from; headers are skipped) except EXCLUDE, each
# found under SRCDIR, then LIBS. The sources of the program's own static libraries are in
# SOURCES, so LIBS loses its *.a; FLAGs lose -Werror, since clang warns where gcc, which
# the tree is kept clean for, does not. This is a script because filtering lists needs GNU
# make functions, which automake's portability checks refuse.
set -e
cc=$1 out=$2 srcdir=$3 exclude=$4 sources=$5 libs=$6
shift 6
files=
for f in $sources; do
	case $f in
	"$exclude") ;;
	*.c) files="$files $srcdir/$f" ;;
	esac
done
keep=
for l in $libs; do
	case $l in
	*.a) ;;
	*) keep="$keep $l" ;;
	esac
done
for a; do
	shift
	[ "$a" = -Werror ] || set -- "$@" "$a"
done
# shellcheck disable=SC2086 # one word per file or library
exec "$cc" "$@" -o "$out" $files $keep
