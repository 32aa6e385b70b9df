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

check_PROGRAMS += tests/targets/tree-target
tests_targets_tree_target_SOURCES = tests/targets/tree-target.c tests/targets/serve.h
tests_targets_tree_target_CFLAGS = $(HP_TARGET_CFLAGS)
check_PROGRAMS += tests/targets/order-target
tests_targets_order_target_SOURCES = tests/targets/order-target.c tests/targets/serve.h
tests_targets_order_target_CFLAGS = $(HP_TARGET_CFLAGS)

tests_targets_cxx_target_SOURCES = tests/targets/cxx-target.cc
tests_targets_cxx_target_CXXFLAGS = $(HP_TARGET_CXXFLAGS)

HP_E2E_TESTS = \
	tests/integration/test-e2e-exact.sh \
	tests/integration/test-e2e-exact-noplt.sh \
	tests/integration/test-e2e-exact-relro.sh \
	tests/integration/test-e2e-cxx.sh \
	tests/integration/test-e2e-duration.sh \
	tests/integration/test-e2e-sigint.sh \
	tests/integration/test-e2e-detach-stopped.sh \
	tests/integration/test-e2e-target-exit.sh \
	tests/integration/test-e2e-repeat.sh
TESTS += $(HP_E2E_TESTS)
EXTRA_DIST += $(HP_E2E_TESTS) tests/integration/lib.sh

TESTS += tests/integration/test-e2e-modes.sh
EXTRA_DIST += tests/integration/test-e2e-modes.sh
TESTS += tests/integration/test-e2e-max-memory.sh tests/integration/test-e2e-cut-stacks.sh \
	tests/integration/test-e2e-exact-paths.sh tests/integration/test-e2e-exact-order.sh
EXTRA_DIST += tests/integration/test-e2e-max-memory.sh tests/integration/test-e2e-cut-stacks.sh \
	tests/integration/test-e2e-exact-paths.sh tests/integration/test-e2e-exact-order.sh

# A target whose static TLS is used up gets the hashed payload (inject.h, hp_inject_load).
check_PROGRAMS += tests/targets/libtls-pad.so
tests_targets_libtls_pad_so_SOURCES = tests/targets/tls-pad.c
tests_targets_libtls_pad_so_CFLAGS = $(HP_TARGET_CFLAGS) -fPIC
tests_targets_libtls_pad_so_LDFLAGS = -shared -Wl,--no-undefined
TESTS += tests/integration/test-e2e-no-static-tls.sh
EXTRA_DIST += tests/integration/test-e2e-no-static-tls.sh

# Process states while attached (issue 5): fork and exec, dlopen and dlclose.
check_PROGRAMS += tests/targets/fork-target tests/targets/dl-target tests/targets/libdltest.so
tests_targets_fork_target_SOURCES = tests/targets/fork-target.c
tests_targets_fork_target_CFLAGS = $(HP_TARGET_CFLAGS)
tests_targets_dl_target_SOURCES = tests/targets/dl-target.c
tests_targets_dl_target_CFLAGS = $(HP_TARGET_CFLAGS)
tests_targets_dl_target_LDADD = -ldl
# Lazy binding, so a load with RTLD_LAZY leaves its malloc slot unresolved.
tests_targets_libdltest_so_SOURCES = tests/targets/dltest.c
tests_targets_libdltest_so_CFLAGS = $(HP_TARGET_CFLAGS) -fPIC
tests_targets_libdltest_so_LDFLAGS = -shared -Wl,--no-undefined -Wl,-z,lazy
# Finds libdltest.so through its own DT_RUNPATH ($ORIGIN/plugins), as a plugin host does.
check_PROGRAMS += tests/targets/libdlrunpath.so
tests_targets_libdlrunpath_so_SOURCES = tests/targets/dlrunpath.c
tests_targets_libdlrunpath_so_CFLAGS = $(HP_TARGET_CFLAGS) -fPIC
tests_targets_libdlrunpath_so_LDFLAGS = -shared -Wl,--no-undefined -Wl,--enable-new-dtags \
	-Wl,-rpath,'$$ORIGIN/plugins'
tests_targets_libdlrunpath_so_LDADD = -ldl

# mt-target with malloc from jemalloc or tcmalloc; their tests skip when it is not built.
# --no-as-needed: the allocator must be linked even where the linker defaults to as-needed.
if HAVE_JEMALLOC
check_PROGRAMS += tests/targets/mt-target-jemalloc
tests_targets_mt_target_jemalloc_SOURCES = tests/targets/mt-target.c
tests_targets_mt_target_jemalloc_CFLAGS = $(HP_TARGET_CFLAGS)
tests_targets_mt_target_jemalloc_LDFLAGS = -Wl,--no-as-needed
tests_targets_mt_target_jemalloc_LDADD = -ljemalloc
endif
if HAVE_TCMALLOC
check_PROGRAMS += tests/targets/mt-target-tcmalloc
tests_targets_mt_target_tcmalloc_SOURCES = tests/targets/mt-target.c
tests_targets_mt_target_tcmalloc_CFLAGS = $(HP_TARGET_CFLAGS)
tests_targets_mt_target_tcmalloc_LDFLAGS = -Wl,--no-as-needed
tests_targets_mt_target_tcmalloc_LDADD = -ltcmalloc
endif

HP_STATE_TESTS = \
	tests/integration/test-e2e-fork.sh \
	tests/integration/test-e2e-fork-storm.sh \
	tests/integration/test-e2e-dlopen.sh \
	tests/integration/test-e2e-dlopen-brief.sh \
	tests/integration/test-e2e-dlopen-runpath.sh \
	tests/integration/test-e2e-dlopen-moved.sh \
	tests/integration/test-e2e-jemalloc.sh \
	tests/integration/test-e2e-tcmalloc.sh
TESTS += $(HP_STATE_TESTS)
EXTRA_DIST += $(HP_STATE_TESTS) tests/integration/lib-dltest.sh

# Seccomp (issue 5): the filter evaluator against real filters, and attaching to a target
# under a filter that allows what heapprof needs, one that kills on it, and a thread in
# strict mode.
check_PROGRAMS += tests/unit/test-seccomp tests/targets/seccomp-target
tests_unit_test_seccomp_SOURCES = tests/unit/test-seccomp.c
tests_unit_test_seccomp_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_seccomp_LDADD = $(HP_INJECT_LIBS) $(CMOCKA_LIBS)
tests_targets_seccomp_target_SOURCES = tests/targets/seccomp-target.c
tests_targets_seccomp_target_CFLAGS = $(HP_TARGET_CFLAGS)
HP_SECCOMP_TESTS = \
	tests/integration/test-state-seccomp-allowed.sh \
	tests/integration/test-state-seccomp-denied.sh \
	tests/integration/test-state-seccomp-membarrier.sh \
	tests/integration/test-state-seccomp-strict.sh \
	tests/integration/test-state-pidns.sh
TESTS += tests/unit/test-seccomp $(HP_SECCOMP_TESTS)
EXTRA_DIST += $(HP_SECCOMP_TESTS)
