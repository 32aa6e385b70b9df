# inject/: see the header of each file for its contract.
noinst_LIBRARIES += inject/libinject.a
inject_libinject_a_CFLAGS = $(AM_CFLAGS) $(LIBUNWIND_PTRACE_CFLAGS) $(LIBELF_CFLAGS) \
	$(CAPSTONE_CFLAGS)
inject_libinject_a_SOURCES = \
	inject/inject.h \
	inject/maps.c inject/maps.h \
	inject/elfsym.c inject/elfsym.h \
	inject/ptrace.c inject/ptrace.h \
	inject/remote.c inject/remote.h \
	inject/unwind.c inject/unwind.h \
	inject/safepoint.c inject/safepoint.h \
	inject/libcfn.c inject/libcfn.h \
	inject/tramp.c inject/tramp.h inject/faultpoint.h \
	inject/slack.c inject/slack.h \
	inject/stubs.c inject/stubs.h \
	inject/seccomp.c inject/seccomp.h \
	inject/load.c inject/unload.c

# What a program linking libinject.a adds to its LDADD.
HP_INJECT_LIBS = inject/libinject.a src/common/libhpcommon.a $(LIBUNWIND_PTRACE_LIBS) \
	$(LIBELF_LIBS) $(CAPSTONE_LIBS)

# A stand-in payload and a target for the injector's tests; neither is built with
# sanitizers: they run inside / as an ordinary production-like process.
check_PROGRAMS += tests/unit/inject-target tests/unit/inject-testlib.so tests/unit/test-inject
tests_unit_inject_target_SOURCES = tests/unit/inject-target.c
tests_unit_inject_target_CFLAGS = -std=gnu11 $(HP_WARN_CFLAGS) -O2 -pthread
tests_unit_inject_target_LDFLAGS = -pthread
tests_unit_inject_testlib_so_SOURCES = tests/unit/inject-testlib.c
tests_unit_inject_testlib_so_CFLAGS = -std=gnu11 $(HP_WARN_CFLAGS) -fPIC
tests_unit_inject_testlib_so_LDFLAGS = -shared -Wl,-soname,libheapprof-payload.so.1
tests_unit_test_inject_SOURCES = tests/unit/test-inject.c
tests_unit_test_inject_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_inject_LDADD = $(HP_INJECT_LIBS) $(CMOCKA_LIBS)
TESTS += tests/unit/test-inject

# The stress target and the fault/state tests (make check), and make check-stress (not part
# of make check: hundreds of attach/detach cycles with faults, see docs/reliability.md).
check_PROGRAMS += tests/stress/stress-target
tests_stress_stress_target_SOURCES = tests/stress/stress-target.c
tests_stress_stress_target_CFLAGS = $(HP_TARGET_CFLAGS)
HP_FAULT_TESTS = \
	tests/integration/test-fault-kill.sh \
	tests/integration/test-fault-viewer.sh \
	tests/integration/test-fault-viewer-stall.sh \
	tests/integration/test-state-stopped.sh \
	tests/integration/test-state-stress.sh
TESTS += $(HP_FAULT_TESTS)
EXTRA_DIST += $(HP_FAULT_TESTS) tests/stress/run-stress.sh tests/stress/lib-stress.sh \
	docs/reliability.md

HP_STRESS_CYCLES = 100
check-stress: all $(check_PROGRAMS)
	top_builddir='$(abs_top_builddir)' top_srcdir='$(abs_top_srcdir)' \
	  bash $(top_srcdir)/tests/stress/run-stress.sh $(HP_STRESS_CYCLES)
.PHONY: check-stress
