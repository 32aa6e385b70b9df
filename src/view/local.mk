# src/view/: heapprof-view, the profile analyser. One file per command, listed in main.c;
# the loaded-profile model they share is profile.h, the analyses more than one command uses
# (call tree, growth fit) are in the library so the unit tests can call them.
bin_PROGRAMS += src/heapprof-view
noinst_LIBRARIES += src/view/libhpview.a
src_view_libhpview_a_SOURCES = \
	src/view/profile.c src/view/profile.h src/view/sites.c src/view/style.c \
	src/view/u64map.c src/view/u64map.h \
	src/view/loc.c src/view/loc.h \
	src/view/text.c src/view/text.h \
	src/view/json.c src/view/json.h \
	src/view/calltree.c src/view/calltree.h \
	src/view/growth-fit.c src/view/growth-fit.h
src_heapprof_view_SOURCES = \
	src/view/main.c src/view/view.c src/view/view.h \
	src/view/report.c src/view/report.h \
	src/view/overview.c src/view/timeline.c src/view/histogram.c src/view/filter.c \
	src/view/tree.c src/view/hotspots.c src/view/leaks.c src/view/growth.c \
	src/view/temporary.c src/view/peak.c \
	src/view/flame.c src/view/flame.h \
	src/view/export.c src/view/export.h src/view/export-collapsed.c \
	src/view/export-pprof.c src/view/export-massif.c \
	src/view/late-symbols.c src/view/late-symbols.h viewer/symbolize.c viewer/symbolize.h
# The viewer's symbolizer names what a profile left unnamed (late-symbols.h).
src_heapprof_view_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/viewer
src_heapprof_view_CFLAGS = $(AM_CFLAGS) $(ZLIB_CFLAGS) $(ZSTD_CFLAGS) $(LIBDW_CFLAGS)
src_heapprof_view_LDADD = src/view/libhpview.a src/common/libhpcommon.a $(ZLIB_LIBS) \
	$(ZSTD_LIBS) $(LIBDW_LIBS) -lm -lstdc++

check_PROGRAMS += tests/unit/test-hpstream tests/unit/test-view tests/unit/test-view-v2
TESTS += tests/unit/test-hpstream tests/unit/test-view tests/unit/test-view-v2 \
	tests/integration/test-view-e2e.sh tests/integration/test-view-late-names.sh
EXTRA_DIST += tests/integration/test-view-e2e.sh tests/integration/test-view-late-names.sh
tests_unit_test_hpstream_SOURCES = tests/unit/test-hpstream.c
tests_unit_test_hpstream_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS) $(ZSTD_CFLAGS)
tests_unit_test_hpstream_LDADD = src/common/libhpcommon.a $(CMOCKA_LIBS) $(ZSTD_LIBS)
# test-view compresses its profile with the viewer's own writer.
tests_unit_test_view_SOURCES = tests/unit/test-view.c tests/unit/view-run.c \
	tests/unit/view-run.h viewer/profile-writer.c viewer/profile-writer.h
tests_unit_test_view_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/src/view -I$(top_srcdir)/viewer \
	-DVIEW_PATH='HP_BUILDDIR "/src/heapprof-view"'
tests_unit_test_view_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS) $(ZSTD_CFLAGS)
tests_unit_test_view_LDADD = src/view/libhpview.a src/common/libhpcommon.a $(CMOCKA_LIBS) \
	$(ZSTD_LIBS)
EXTRA_tests_unit_test_view_DEPENDENCIES = src/heapprof-view
tests_unit_test_view_v2_SOURCES = tests/unit/test-view-v2.c tests/unit/view-run.c \
	tests/unit/view-run.h
tests_unit_test_view_v2_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/src/view \
	-DVIEW_PATH='HP_BUILDDIR "/src/heapprof-view"'
tests_unit_test_view_v2_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_view_v2_LDADD = src/view/libhpview.a src/common/libhpcommon.a $(CMOCKA_LIBS) \
	$(ZSTD_LIBS) -lm
EXTRA_tests_unit_test_view_v2_DEPENDENCIES = src/heapprof-view
