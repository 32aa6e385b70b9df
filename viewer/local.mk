# viewer/: see the header of each file for its contract.
pkglibexec_PROGRAMS += viewer/heapprof-viewer
viewer_heapprof_viewer_SOURCES = viewer/main.c \
	viewer/records.c viewer/records.h \
	viewer/symbolize.c viewer/symbolize.h \
	viewer/profile-writer.c viewer/profile-writer.h \
	viewer/report.c viewer/report.h \
	viewer/sites.c viewer/sites.h \
	viewer/live.c viewer/live.h \
	viewer/livefmt.c viewer/livefmt.h \
	viewer/keymap.c viewer/keymap.h
viewer_heapprof_viewer_CFLAGS = $(AM_CFLAGS) $(LIBDW_CFLAGS) $(NCURSES_CFLAGS) $(ZSTD_CFLAGS)
viewer_heapprof_viewer_LDADD = src/common/libhpcommon.a $(LIBDW_LIBS) $(NCURSES_LIBS) \
	$(ZSTD_LIBS) -lm -lstdc++

# Tests. libsymtest.so is code with calls at marked lines, built -g -O2 the way a
# target's library would be, for the symbolizer to resolve.
check_PROGRAMS += tests/unit/libsymtest.so tests/unit/test-symbolize tests/unit/test-viewer \
	tests/unit/test-viewer-sites
TESTS += tests/unit/test-symbolize tests/unit/test-viewer tests/unit/test-viewer-sites

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
tests_unit_test_viewer_LDADD = src/common/libhpcommon.a $(CMOCKA_LIBS) $(ZSTD_LIBS) -ldl
EXTRA_tests_unit_test_viewer_DEPENDENCIES = viewer/heapprof-viewer

# The live view's pure parts: site rates and growth, number and sparkline formatting.
tests_unit_test_viewer_sites_SOURCES = tests/unit/test-viewer-sites.c \
	viewer/sites.c viewer/sites.h viewer/livefmt.c viewer/livefmt.h
tests_unit_test_viewer_sites_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_viewer_sites_LDADD = $(CMOCKA_LIBS) -lm

# The live view on a real terminal (tmux) and the man pages against --help.
HP_VIEWER_TESTS = tests/integration/test-live.sh tests/integration/test-man.sh
TESTS += $(HP_VIEWER_TESTS)
EXTRA_DIST += $(HP_VIEWER_TESTS)

# Man pages: the installed paths and the version are filled in at build time; a path
# may break after any slash (\:), since a long prefix is wider than the page.
HP_MAN_PAGES = docs/man/heapprof-attach.1 docs/man/heapprof-detach.1 docs/man/heapprof-view.1
man1_MANS += $(HP_MAN_PAGES)
CLEANFILES += $(HP_MAN_PAGES)
EXTRA_DIST += docs/man/heapprof-attach.1.in docs/man/heapprof-detach.1.in \
	docs/man/heapprof-view.1.in
hp_man_edit = $(AM_V_GEN)$(MKDIR_P) docs/man && \
	sed -e 's|@pkglibdir[@]|$(pkglibdir)|g' -e 's|@pkglibexecdir[@]|$(pkglibexecdir)|g' \
	    -e 's|@VERSION[@]|$(VERSION)|g' -e '/^\.I \//s|/|/\\:|g' $(srcdir)/$@.in >$@.tmp && \
	mv $@.tmp $@
docs/man/heapprof-attach.1: docs/man/heapprof-attach.1.in Makefile
	$(hp_man_edit)
docs/man/heapprof-detach.1: docs/man/heapprof-detach.1.in Makefile
	$(hp_man_edit)
docs/man/heapprof-view.1: docs/man/heapprof-view.1.in Makefile
	$(hp_man_edit)

# Bash completion: one file, linked under each command's name for on-demand loading.
bashcompletiondir = $(datadir)/bash-completion/completions
dist_bashcompletion_DATA = completion/heapprof
HP_COMPLETED = heapprof-attach heapprof-detach heapprof-view
install-data-hook:
	cd $(DESTDIR)$(bashcompletiondir) && for c in $(HP_COMPLETED); do \
		rm -f $$c && ln -s heapprof $$c || exit 1; done
uninstall-hook:
	cd $(DESTDIR)$(bashcompletiondir) && rm -f $(HP_COMPLETED)
