# tests/: the target programs and the end-to-end tests (tests/integration/lib.sh says how
# they run). The targets are profiled, not profilers: they never get the sanitizer flags.

# Every test script finds the build and source trees through these; others append with +=.
AM_TESTS_ENVIRONMENT = top_builddir='$(abs_top_builddir)'; top_srcdir='$(abs_top_srcdir)'; \
	export top_builddir top_srcdir;
TEST_EXTENSIONS = .sh
SH_LOG_COMPILER = bash

HP_TARGET_CFLAGS = -std=gnu11 -pthread $(HP_WARN_CFLAGS) -g -O1 -fno-omit-frame-pointer
HP_TARGET_CXXFLAGS = -std=gnu++17 -pthread -Wall -Wextra -Wshadow -g -O1 \
	-fno-omit-frame-pointer

check_PROGRAMS += tests/targets/mt-target tests/targets/mt-target-noplt \
	tests/targets/mt-target-relro tests/targets/cxx-target

# Lazy binding on purpose: malloc's PLT slot is still unresolved when the profiler attaches.
tests_targets_mt_target_SOURCES = tests/targets/mt-target.c
tests_targets_mt_target_CFLAGS = $(HP_TARGET_CFLAGS)
tests_targets_mt_target_LDFLAGS = -Wl,-z,lazy

# Calls through the GOT (R_X86_64_GLOB_DAT), no PLT.
tests_targets_mt_target_noplt_SOURCES = tests/targets/mt-target.c
tests_targets_mt_target_noplt_CFLAGS = $(HP_TARGET_CFLAGS) -fno-plt

# Full RELRO: the GOT is read-only once the program runs.
tests_targets_mt_target_relro_SOURCES = tests/targets/mt-target.c
tests_targets_mt_target_relro_CFLAGS = $(HP_TARGET_CFLAGS)
tests_targets_mt_target_relro_LDFLAGS = -Wl,-z,relro,-z,now

tests_targets_cxx_target_SOURCES = tests/targets/cxx-target.cc
tests_targets_cxx_target_CXXFLAGS = $(HP_TARGET_CXXFLAGS)

HP_E2E_TESTS = \
	tests/integration/test-e2e-exact.sh \
	tests/integration/test-e2e-exact-noplt.sh \
	tests/integration/test-e2e-exact-relro.sh \
	tests/integration/test-e2e-cxx.sh \
	tests/integration/test-e2e-duration.sh \
	tests/integration/test-e2e-sigint.sh \
	tests/integration/test-e2e-target-exit.sh \
	tests/integration/test-e2e-repeat.sh
TESTS += $(HP_E2E_TESTS)
EXTRA_DIST += $(HP_E2E_TESTS) tests/integration/lib.sh

TESTS += tests/integration/test-e2e-modes.sh
EXTRA_DIST += tests/integration/test-e2e-modes.sh
