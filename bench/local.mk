# bench/: the benchmark programs of the performance suite (issue 3). They are built only
# on demand, by `make bench-programs`, so that `make` and `make check` never build or run
# them. They are the profiled programs: no sanitizer flags, optimized as a user would ship.
BENCH_PROGS = bench/threadtest bench/linux-scalability bench/shbench bench/binary-trees \
	bench/hash-table bench/parse-json bench/queue bench/microbench bench/request-paths
EXTRA_PROGRAMS += $(BENCH_PROGS)
CLEANFILES += $(BENCH_PROGS)

BENCH_CFLAGS = -std=gnu11 -pthread $(HP_WARN_CFLAGS) -g -O2
BENCH_COMMON = bench/common.c bench/common.h bench/inproc-payload.c bench/inproc-payload.h
BENCH_LIBS = -lm

bench_threadtest_SOURCES = bench/threadtest.c $(BENCH_COMMON)
bench_threadtest_CFLAGS = $(BENCH_CFLAGS)
bench_threadtest_LDADD = $(BENCH_LIBS)

bench_linux_scalability_SOURCES = bench/linux-scalability.c $(BENCH_COMMON)
bench_linux_scalability_CFLAGS = $(BENCH_CFLAGS)
bench_linux_scalability_LDADD = $(BENCH_LIBS)

bench_shbench_SOURCES = bench/shbench.c $(BENCH_COMMON)
bench_shbench_CFLAGS = $(BENCH_CFLAGS)
bench_shbench_LDADD = $(BENCH_LIBS)

bench_binary_trees_SOURCES = bench/binary-trees.c $(BENCH_COMMON)
bench_binary_trees_CFLAGS = $(BENCH_CFLAGS)
bench_binary_trees_LDADD = $(BENCH_LIBS)

bench_hash_table_SOURCES = bench/hash-table.c $(BENCH_COMMON)
bench_hash_table_CFLAGS = $(BENCH_CFLAGS)
bench_hash_table_LDADD = $(BENCH_LIBS)

bench_parse_json_SOURCES = bench/parse-json.c $(BENCH_COMMON)
bench_parse_json_CFLAGS = $(BENCH_CFLAGS)
bench_parse_json_LDADD = $(BENCH_LIBS)

bench_queue_SOURCES = bench/queue.c $(BENCH_COMMON)
bench_queue_CFLAGS = $(BENCH_CFLAGS)
bench_queue_LDADD = $(BENCH_LIBS)

bench_microbench_SOURCES = bench/microbench.c $(BENCH_COMMON)
bench_microbench_CFLAGS = $(BENCH_CFLAGS)
bench_microbench_LDADD = $(BENCH_LIBS)

bench_request_paths_SOURCES = bench/request-paths.c $(BENCH_COMMON)
bench_request_paths_CFLAGS = $(BENCH_CFLAGS)
bench_request_paths_LDADD = $(BENCH_LIBS)

.PHONY: bench-programs
bench-programs: $(BENCH_PROGS:=$(EXEEXT))

# The probe of the longest stop at attach and detach, and `make bench`, which runs the whole
# suite (bench/run-bench.sh, bench/redis-bench.sh; docs/performance.md explains the table).
# Not part of `make check`: it takes minutes and wants the machine to itself.
BENCH_TOOLS = bench/stop-probe
EXTRA_PROGRAMS += $(BENCH_TOOLS)
CLEANFILES += $(BENCH_TOOLS) bench-results.md
bench_stop_probe_SOURCES = bench/stop-probe.c
bench_stop_probe_CFLAGS = $(BENCH_CFLAGS)
EXTRA_DIST += bench/run-bench.sh bench/redis-bench.sh bench/bench-lib.sh bench/ab-cpu.sh \
	docs/performance.md docs/performance-history.md

.PHONY: bench
bench: all bench-programs $(BENCH_TOOLS:=$(EXEEXT))
	BENCH_SECONDS="$(BENCH_SECONDS)" BENCH_THREADS="$(BENCH_THREADS)" \
	BENCH_PROGRAMS="$(BENCH_PROGRAMS)" BENCH_PROBE_THREADS="$(BENCH_PROBE_THREADS)" \
	BENCH_STOP_CYCLES="$(BENCH_STOP_CYCLES)" BENCH_REPEAT="$(BENCH_REPEAT)" \
	REDIS_REQUESTS="$(REDIS_REQUESTS)" REDIS_PASSES="$(REDIS_PASSES)" bash $(srcdir)/bench/run-bench.sh $(abs_top_builddir) $(abs_top_builddir)/bench-results.md

# Two payloads against each other on one program, by CPU time rather than wall time
# (bench/ab-cpu.sh; docs/performance.md, "Noise"): for example
#   make bench-ab AB_PROGRAM=threadtest AB_A=/tmp/old/payload/heapprof-payload.so \
#     AB_B=payload/heapprof-payload.so
# AB_PAIRS, AB_SECONDS, AB_THREADS and AB_OPTS pass through the environment.
.PHONY: bench-ab
bench-ab: all bench-programs
	bash $(srcdir)/bench/ab-cpu.sh $(abs_top_builddir) "$(AB_PROGRAM)" "$(AB_A)" "$(AB_B)"

# The payload's instructions per operation of microbench, request-paths, binary-trees and
# parse-json, in one process under valgrind's callgrind (bench/inproc.sh, the programs'
# --payload; docs/performance.md, "Instructions, counted"): exact where the attached ratios
# are noisy. INPROC_PAYLOAD: another build's payload to count instead.
EXTRA_DIST += bench/inproc.sh

.PHONY: bench-inproc
bench-inproc: all bench-programs
	bash $(srcdir)/bench/inproc.sh $(abs_top_builddir) $(INPROC_PAYLOAD)

# How long a detach takes as a target's threads grow (bench/detach-threads.sh; the test
# target mt-target with DETACH_THREADS threads, default "250 1000 3000").
EXTRA_DIST += bench/detach-threads.sh

.PHONY: bench-detach
bench-detach: all tests/targets/mt-target$(EXEEXT)
	DETACH_THREADS="$(DETACH_THREADS)" bash $(srcdir)/bench/detach-threads.sh $(abs_top_builddir)

# The same for redis-server, a real server: the payload's instructions per request, with
# the payload started inside redis-server by a preloaded library (bench/preload.c,
# bench/redis-inproc.sh). INPROC_PAYLOAD as above; REDIS_INPROC_REQUESTS and
# REDIS_INPROC_RUNS pass through the environment.
BENCH_PRELOAD = bench/heapprof-preload.so
EXTRA_PROGRAMS += $(BENCH_PRELOAD)
CLEANFILES += $(BENCH_PRELOAD)
bench_heapprof_preload_so_SOURCES = bench/preload.c bench/inproc-payload.c \
	bench/inproc-payload.h
bench_heapprof_preload_so_CFLAGS = $(BENCH_CFLAGS) -fPIC
bench_heapprof_preload_so_LDFLAGS = -shared -Wl,--no-undefined
bench_heapprof_preload_so_LDADD = -ldl
EXTRA_DIST += bench/redis-inproc.sh

.PHONY: bench-redis-inproc
bench-redis-inproc: all $(BENCH_PRELOAD)
	bash $(srcdir)/bench/redis-inproc.sh $(abs_top_builddir) $(INPROC_PAYLOAD)

# The viewer under the load of an hour on a busy server: bench/viewer-load writes a
# synthetic stream into heapprof-viewer and times heapprof-view on the profile
# (docs/performance.md, "The viewer under load"). VIEWER_LOAD_ARGS: e.g. --rounds 600.
BENCH_VIEWER = bench/viewer-load
EXTRA_PROGRAMS += $(BENCH_VIEWER)
CLEANFILES += $(BENCH_VIEWER) viewer-load.hpf
bench_viewer_load_SOURCES = bench/viewer-load.c
bench_viewer_load_CPPFLAGS = $(AM_CPPFLAGS)
bench_viewer_load_CFLAGS = $(BENCH_CFLAGS)

.PHONY: bench-viewer
bench-programs: $(BENCH_VIEWER)$(EXEEXT)
bench-viewer: all $(BENCH_VIEWER)$(EXEEXT)
	$(BENCH_VIEWER)$(EXEEXT) --viewer $(abs_top_builddir)/viewer/heapprof-viewer \
		--view $(abs_top_builddir)/src/heapprof-view $(VIEWER_LOAD_ARGS)
