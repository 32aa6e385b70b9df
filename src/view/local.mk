# src/view/: heapprof-view, the profile analyser. One file per command (overview.c,
# hotspots.c), listed in main.c; the loaded-profile model they share is profile.h.
bin_PROGRAMS += src/heapprof-view
noinst_LIBRARIES += src/view/libhpview.a
src_view_libhpview_a_SOURCES = \
	src/view/profile.c src/view/profile.h src/view/sites.c \
	src/view/u64map.c src/view/u64map.h \
	src/view/loc.c src/view/loc.h \
	src/view/text.c src/view/text.h \
	src/view/json.c src/view/json.h
src_heapprof_view_SOURCES = \
	src/view/main.c src/view/view.c src/view/view.h \
	src/view/overview.c src/view/hotspots.c
src_heapprof_view_LDADD = src/view/libhpview.a src/common/libhpcommon.a

check_PROGRAMS += tests/unit/test-hpstream tests/unit/test-view
TESTS += tests/unit/test-hpstream tests/unit/test-view
tests_unit_test_hpstream_SOURCES = tests/unit/test-hpstream.c
tests_unit_test_hpstream_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_hpstream_LDADD = src/common/libhpcommon.a $(CMOCKA_LIBS)
tests_unit_test_view_SOURCES = tests/unit/test-view.c
tests_unit_test_view_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/src/view \
	-DVIEW_PATH='HP_BUILDDIR "/src/heapprof-view"'
tests_unit_test_view_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_view_LDADD = src/view/libhpview.a src/common/libhpcommon.a $(CMOCKA_LIBS)
EXTRA_tests_unit_test_view_DEPENDENCIES = src/heapprof-view
