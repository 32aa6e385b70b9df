# demo/: heapprof-demo, a server-like program with a slow leak, and `make demo`, which
# profiles it for a few seconds with the built commands (demo/run-demo.sh says how).
noinst_PROGRAMS += demo/heapprof-demo
# It is the profiled program, so it never gets the sanitizer flags of AM_CFLAGS.
demo_heapprof_demo_SOURCES = demo/heapprof-demo.c
demo_heapprof_demo_CFLAGS = -std=gnu11 -pthread $(HP_WARN_CFLAGS) -g -O2
EXTRA_DIST += demo/run-demo.sh
CLEANFILES += heapprof-demo.hpf heapprof-demo.log

.PHONY: demo
demo: all
	top_builddir='$(abs_top_builddir)' $(SHELL) $(srcdir)/demo/run-demo.sh
