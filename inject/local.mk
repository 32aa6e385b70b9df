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
