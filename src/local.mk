# src/: the three commands and the code they share (src/common). hpzsource.o needs libzstd:
# only the programs that read profile files call it and link $(ZSTD_LIBS); the archive
# leaves it out of the others.
noinst_LIBRARIES += src/common/libhpcommon.a
src_common_libhpcommon_a_SOURCES = \
	src/common/hpformat.h src/common/hpabi.h src/common/buildid.h \
	src/common/hpstream.c src/common/hpstream.h \
	src/common/hpzsource.c src/common/hpzsource.h \
	src/common/hppaths.c src/common/hppaths.h \
	src/common/hperror.c src/common/hperror.h \
	src/common/hpalloc.c src/common/hpalloc.h \
	src/common/target.c src/common/target.h \
	src/common/session.c src/common/session.h \
	src/common/cli.c src/common/cli.h
src_common_libhpcommon_a_CFLAGS = $(AM_CFLAGS) $(ZSTD_CFLAGS)

# The commands that attach to and detach from a running process (they ptrace it through
# inject/libinject.a; HP_INJECT_LIBS is defined in inject/local.mk).
HP_INJECT_LDADD = $(HP_INJECT_LIBS) -lpthread

bin_PROGRAMS += src/heapprof-attach src/heapprof-detach
src_heapprof_attach_SOURCES = src/attach.c
src_heapprof_attach_LDADD = $(HP_INJECT_LDADD)
src_heapprof_detach_SOURCES = src/detach.c
src_heapprof_detach_LDADD = $(HP_INJECT_LDADD)

# Error paths of the commands that need no working payload; tests/local.mk sets up
# AM_TESTS_ENVIRONMENT and the .sh log compiler.
HP_CLI_TESTS = \
	tests/integration/test-cli-usage.sh \
	tests/integration/test-cli-no-process.sh \
	tests/integration/test-cli-traced.sh \
	tests/integration/test-cli-static.sh \
	tests/integration/test-cli-no-payload.sh \
	tests/integration/test-cli-detach-unprofiled.sh \
	tests/integration/test-cli-session.sh \
	tests/integration/test-cli-permission.sh
TESTS += $(HP_CLI_TESTS)
EXTRA_DIST += $(HP_CLI_TESTS)
