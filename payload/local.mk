# payload/: the library injected into the target (see docs/design.md, "Payload").
# Built without libtool and never with the sanitizer flags: its CFLAGS replace AM_CFLAGS.
payload_PROGRAMS += payload/heapprof-payload.so
payload_heapprof_payload_so_SOURCES = \
	payload/payload.h payload/start.c payload/mem.c \
	payload/got.c payload/got.h \
	payload/hooks.c payload/hooks.h \
	payload/dlcaller.c payload/dlcaller.h \
	payload/threads.c payload/threads.h \
	payload/stacks.c payload/stacks.h \
	payload/unwind.c payload/unwind.h \
	payload/livemap.c payload/livemap.h payload/directmap.h \
	payload/collector.c payload/collector.h \
	src/common/hpstream.c src/common/hpstream.h
# -fomit-frame-pointer: a stack capture starts at the hook's frame (hooks.c, HOOK_FRAME), and
# GCC keeps the frame pointer of every function that asks __builtin_frame_address(0) for it;
# the rest need none, and the free hooks and the guess then save a register fewer (3
# instructions of a free+malloc pair, docs/performance.md).
# -fno-tree-slp-vectorize: GCC would add an event's site counters, which the hook has just
# stored one 8-byte field at a time, with 16-byte loads, which the store buffer cannot
# forward: a stall on every event (docs/performance.md).
payload_heapprof_payload_so_CFLAGS = -std=gnu11 -D_GNU_SOURCE $(HP_WARN_CFLAGS) -O2 -g -fPIC \
	-fno-tree-slp-vectorize \
	-fvisibility=hidden -fexceptions -fomit-frame-pointer
# -nostartfiles: without crtbeginS.o a dlclose never calls __cxa_finalize, whose exit-handler
# lock a fork in another thread can copy into the child held, hanging the child's exit().
payload_heapprof_payload_so_LDFLAGS = -shared -nostartfiles -static-libgcc \
	-Wl,--exclude-libs,ALL -Wl,-soname,libheapprof-payload.so.1 -Wl,-z,now -Wl,--no-undefined
# libgcc's unwinder (stack capture and -fexceptions cleanups) is linked in privately, so
# it is unloaded with the payload and nothing of ours outlives a detach.
payload_heapprof_payload_so_LDADD = -lgcc_eh -lpthread

# The same payload without TLS, loaded where a target has no static TLS left for the
# first one's record pointer (payload/threads.h, HP_THREAD_TLS).
payload_PROGRAMS += payload/heapprof-payload-hashed.so
payload_heapprof_payload_hashed_so_SOURCES = $(payload_heapprof_payload_so_SOURCES)
payload_heapprof_payload_hashed_so_CFLAGS = $(payload_heapprof_payload_so_CFLAGS) -DHP_THREAD_TLS=0
payload_heapprof_payload_hashed_so_LDFLAGS = $(payload_heapprof_payload_so_LDFLAGS)
payload_heapprof_payload_hashed_so_LDADD = $(payload_heapprof_payload_so_LDADD)

# Tests of the payload (tests/unit/test-got*.c, test-payload*.c, gotlib*.c). They are
# built without sanitizers: an instrumented allocator would sit between hooks and counts.
HP_PAYLOAD_TEST_CFLAGS = -std=gnu11 -D_GNU_SOURCE $(HP_WARN_CFLAGS) -g -O1 $(CMOCKA_CFLAGS)
HP_GOTLIB_LINK = -shared -Wl,--no-undefined
check_PROGRAMS += tests/unit/gotlib-lazy.so tests/unit/gotlib-noplt.so \
	tests/unit/gotlib-now.so tests/unit/gotaddr-take.so tests/unit/gotaddr-noplt.so \
	tests/unit/test-got tests/unit/test-payload
TESTS += tests/unit/test-got tests/unit/test-payload

tests_unit_gotlib_lazy_so_SOURCES = tests/unit/gotlib.c
tests_unit_gotlib_lazy_so_CFLAGS = -std=gnu11 $(HP_WARN_CFLAGS) -O1 -fPIC
tests_unit_gotlib_lazy_so_LDFLAGS = $(HP_GOTLIB_LINK) -Wl,-z,lazy
tests_unit_gotlib_noplt_so_SOURCES = tests/unit/gotlib.c
tests_unit_gotlib_noplt_so_CFLAGS = -std=gnu11 $(HP_WARN_CFLAGS) -O1 -fPIC -fno-plt
tests_unit_gotlib_noplt_so_LDFLAGS = $(HP_GOTLIB_LINK)
tests_unit_gotlib_now_so_SOURCES = tests/unit/gotlib.c
tests_unit_gotlib_now_so_CFLAGS = -std=gnu11 $(HP_WARN_CFLAGS) -O1 -fPIC
tests_unit_gotlib_now_so_LDFLAGS = $(HP_GOTLIB_LINK) -Wl,-z,now -Wl,-z,relro

tests_unit_gotaddr_take_so_SOURCES = tests/unit/gotaddr.c
tests_unit_gotaddr_take_so_CFLAGS = -std=gnu11 $(HP_WARN_CFLAGS) -O1 -fPIC
tests_unit_gotaddr_take_so_LDFLAGS = $(HP_GOTLIB_LINK)
tests_unit_gotaddr_noplt_so_SOURCES = tests/unit/gotaddr.c
tests_unit_gotaddr_noplt_so_CFLAGS = -std=gnu11 $(HP_WARN_CFLAGS) -O1 -fPIC -fno-plt -DGOTADDR_CALL
tests_unit_gotaddr_noplt_so_LDFLAGS = $(HP_GOTLIB_LINK)

tests_unit_test_got_SOURCES = tests/unit/test-got.c payload/got.c payload/got.h
tests_unit_test_got_CFLAGS = $(HP_PAYLOAD_TEST_CFLAGS)
tests_unit_test_got_LDADD = $(CMOCKA_LIBS) -ldl

tests_unit_test_payload_SOURCES = tests/unit/test-payload.c payload/got.c payload/got.h \
	src/common/hpstream.c
tests_unit_test_payload_CFLAGS = $(HP_PAYLOAD_TEST_CFLAGS) \
	-DPAYLOAD_PATH='"$(abs_top_builddir)/payload/heapprof-payload.so"' \
	-DUNLOADED_PATH='"$(abs_top_builddir)/tests/unit/unwind-fp.so"'
tests_unit_test_payload_LDFLAGS = -rdynamic
tests_unit_test_payload_LDADD = $(CMOCKA_LIBS) -lpthread -ldl

# The unwinder against libgcc's (tests/unit/test-unwind.c) on unwind-shapes.c built with
# and without frame pointers.
check_PROGRAMS += tests/unit/unwind-fp.so tests/unit/unwind-nofp.so tests/unit/test-unwind
TESTS += tests/unit/test-unwind
tests_unit_unwind_fp_so_SOURCES = tests/unit/unwind-shapes.c
tests_unit_unwind_fp_so_CFLAGS = -std=gnu11 $(HP_WARN_CFLAGS) -O2 -fPIC -fno-omit-frame-pointer \
	-DSHAPE_PREFIX=fp_
tests_unit_unwind_fp_so_LDFLAGS = $(HP_GOTLIB_LINK)
tests_unit_unwind_nofp_so_SOURCES = tests/unit/unwind-shapes.c
tests_unit_unwind_nofp_so_CFLAGS = -std=gnu11 $(HP_WARN_CFLAGS) -O2 -fPIC -fomit-frame-pointer \
	-DSHAPE_PREFIX=nofp_ -DSHAPE_RBP_FREE=1
tests_unit_unwind_nofp_so_LDFLAGS = $(HP_GOTLIB_LINK)
tests_unit_test_unwind_SOURCES = tests/unit/test-unwind.c payload/unwind.c payload/unwind.h \
	payload/mem.c payload/stacks.c payload/stacks.h
tests_unit_test_unwind_CFLAGS = $(HP_PAYLOAD_TEST_CFLAGS) -fno-omit-frame-pointer \
	-DUNWIND_FP_PATH='"$(abs_top_builddir)/tests/unit/unwind-fp.so"' \
	-DUNWIND_NOFP_PATH='"$(abs_top_builddir)/tests/unit/unwind-nofp.so"'
tests_unit_test_unwind_LDADD = $(CMOCKA_LIBS) -lpthread -ldl

# Stack interning (tests/unit/test-stacks.c): stacks.c with what it calls.
check_PROGRAMS += tests/unit/test-stacks
TESTS += tests/unit/test-stacks
tests_unit_test_stacks_SOURCES = tests/unit/test-stacks.c payload/stacks.c payload/stacks.h \
	payload/unwind.c payload/unwind.h payload/mem.c
tests_unit_test_stacks_CFLAGS = $(HP_PAYLOAD_TEST_CFLAGS)
tests_unit_test_stacks_LDADD = $(CMOCKA_LIBS) -lpthread -ldl

# The site counters (tests/unit/test-threads.c): threads.c with the payload's memory
# helpers (mem.c) and what its teardown frees (stacks.c, unwind.c).
check_PROGRAMS += tests/unit/test-threads
TESTS += tests/unit/test-threads
tests_unit_test_threads_SOURCES = tests/unit/test-threads.c payload/threads.c payload/threads.h \
	payload/mem.c payload/stacks.c payload/stacks.h payload/unwind.c payload/unwind.h
tests_unit_test_threads_CFLAGS = $(HP_PAYLOAD_TEST_CFLAGS)
tests_unit_test_threads_LDADD = $(CMOCKA_LIBS) -lpthread -ldl

# The per-capture cost of every way of walking the stack (bench/unwind-bench.c), built by
# `make bench-programs`; `make bench-unwind` runs it on a shallow and a deep stack
# (docs/performance.md, "Stack capture").
EXTRA_PROGRAMS += bench/unwind-bench
CLEANFILES += bench/unwind-bench
bench_unwind_bench_SOURCES = bench/unwind-bench.c payload/unwind.c payload/unwind.h \
	payload/mem.c payload/stacks.c payload/stacks.h
bench_unwind_bench_CFLAGS = -std=gnu11 -D_GNU_SOURCE $(HP_WARN_CFLAGS) -g -O2 \
	-fno-omit-frame-pointer $(LIBUNWIND_CFLAGS)
# libgcc_eh first: libunwind also defines _Unwind_Backtrace, and libgcc's is the reference.
bench_unwind_bench_LDADD = -lgcc_eh $(LIBUNWIND_LIBS) -lpthread
bench-programs: bench/unwind-bench$(EXEEXT)
.PHONY: bench-unwind
bench-unwind: bench/unwind-bench$(EXEEXT)
	bench/unwind-bench$(EXEEXT) --depth 6
	bench/unwind-bench$(EXEEXT) --depth 30
