# viewer/: see the header of each file for its contract.
pkglibexec_PROGRAMS += viewer/heapprof-viewer
viewer_heapprof_viewer_SOURCES = viewer/main.c \
	viewer/records.c viewer/records.h \
	viewer/symbolize.c viewer/symbolize.h \
	viewer/profile-writer.c viewer/profile-writer.h \
	viewer/report.c viewer/report.h \
	viewer/keymap.c viewer/keymap.h
viewer_heapprof_viewer_CFLAGS = $(AM_CFLAGS) $(LIBDW_CFLAGS)
viewer_heapprof_viewer_LDADD = src/common/libhpcommon.a $(LIBDW_LIBS) -lstdc++

# Tests. libsymtest.so is code with calls at marked lines, built -g -O2 the way a
# target's library would be, for the symbolizer to resolve.
check_PROGRAMS += tests/unit/libsymtest.so tests/unit/test-symbolize tests/unit/test-viewer
TESTS += tests/unit/test-symbolize tests/unit/test-viewer

tests_unit_libsymtest_so_SOURCES = tests/unit/symtest.c tests/unit/symtest.h \
	tests/unit/symtest-cxx.cc
tests_unit_libsymtest_so_CFLAGS = -std=gnu11 $(HP_WARN_CFLAGS) -g -O2 -fPIC
tests_unit_libsymtest_so_CXXFLAGS = -Wall -Wextra -g -O2 -fPIC
tests_unit_libsymtest_so_LDFLAGS = -shared

tests_unit_test_symbolize_SOURCES = tests/unit/test-symbolize.c \
	tests/unit/symtest-phdr.c tests/unit/symtest-phdr.h \
	viewer/symbolize.c viewer/symbolize.h
tests_unit_test_symbolize_CPPFLAGS = $(AM_CPPFLAGS) -DSRCDIR='"$(abs_top_srcdir)/tests/unit"' \
	-DSYMTEST_LIB='"$(abs_top_builddir)/tests/unit/libsymtest.so"'
tests_unit_test_symbolize_CFLAGS = $(AM_CFLAGS) $(LIBDW_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_symbolize_LDADD = $(LIBDW_LIBS) $(CMOCKA_LIBS) -ldl -lstdc++
EXTRA_tests_unit_test_symbolize_DEPENDENCIES = tests/unit/libsymtest.so

tests_unit_test_viewer_SOURCES = tests/unit/test-viewer.c \
	tests/unit/symtest-phdr.c tests/unit/symtest-phdr.h
tests_unit_test_viewer_CPPFLAGS = $(AM_CPPFLAGS) \
	-DVIEWER_PATH='"$(abs_top_builddir)/viewer/heapprof-viewer"'
tests_unit_test_viewer_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS) -g
tests_unit_test_viewer_LDADD = src/common/libhpcommon.a $(CMOCKA_LIBS) -ldl
EXTRA_tests_unit_test_viewer_DEPENDENCIES = viewer/heapprof-viewer
