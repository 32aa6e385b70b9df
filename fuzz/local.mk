# fuzz/: libFuzzer targets for the two parsers of untrusted input, the round stream
# (heapprof-viewer) and the profile file (heapprof-view); see the header of each target.
# They are built with clang whatever CC configure chose, from the same source lists as
# the programs (viewer/local.mk, src/view/local.mk), so they follow those programs.
#   make fuzz        builds both and fuzzes each for FUZZ_SECONDS (new inputs: fuzz/work/)
#   make fuzz-smoke  builds both and runs each over its seed corpus once (for CI)
# Crashes, leaks, hangs and oversized allocations are saved under fuzz/found/ in the build
# directory; reproduce one with `fuzz/fuzz-stream FILE` (or fuzz/fuzz-profile). Inputs of
# bugs found so far are in the corpus as regress-*, and in fuzz/regress/ when too large.
FUZZ_CC = clang
FUZZ_SECONDS = 60
FUZZ_CFLAGS = -std=gnu11 -g -O1 -fno-omit-frame-pointer \
	-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
	-Wall -Wextra -Wshadow -Wformat=2 -Wmissing-prototypes -Wstrict-prototypes
FUZZ_OPTS = -rss_limit_mb=512 -malloc_limit_mb=512 -timeout=5 -close_fd_mask=2 \
	-artifact_prefix=fuzz/found/
FUZZ_BUILD = $(SHELL) $(srcdir)/fuzz/build.sh $(FUZZ_CC)
FUZZ_FILES = fuzz/fuzz-input.h fuzz/view-main.h fuzz/fuzz-stream.c fuzz/fuzz-profile.c
FUZZERS = fuzz/fuzz-stream fuzz/fuzz-profile

EXTRA_DIST += $(FUZZ_FILES) fuzz/build.sh fuzz/seeds.py fuzz/corpus fuzz/regress \
	fuzz/README.md fuzz/.gitignore
CLEANFILES += $(FUZZERS)

fuzz/fuzz-stream: $(FUZZ_FILES) fuzz/build.sh $(viewer_heapprof_viewer_SOURCES) \
		$(src_common_libhpcommon_a_SOURCES) config.h
	@$(MKDIR_P) fuzz
	$(AM_V_CCLD)$(FUZZ_BUILD) $@ $(srcdir) viewer/main.c \
		"fuzz/fuzz-stream.c $(viewer_heapprof_viewer_SOURCES) \
		$(src_common_libhpcommon_a_SOURCES)" "$(viewer_heapprof_viewer_LDADD)" \
		$(AM_CPPFLAGS) -I$(top_srcdir)/viewer -I$(top_srcdir)/fuzz \
		$(viewer_heapprof_viewer_CFLAGS) $(FUZZ_CFLAGS)

# heapprof-view's main() is renamed hp_view_main, for the target to run every command.
fuzz/fuzz-profile: $(FUZZ_FILES) fuzz/build.sh $(src_heapprof_view_SOURCES) \
		$(src_view_libhpview_a_SOURCES) $(src_common_libhpcommon_a_SOURCES) config.h
	@$(MKDIR_P) fuzz
	$(AM_V_CCLD)$(FUZZ_BUILD) $@ $(srcdir) - \
		"fuzz/fuzz-profile.c $(src_heapprof_view_SOURCES) \
		$(src_view_libhpview_a_SOURCES) $(src_common_libhpcommon_a_SOURCES)" \
		"$(src_heapprof_view_LDADD)" \
		$(src_heapprof_view_CPPFLAGS) -I$(top_srcdir)/src/view -I$(top_srcdir)/fuzz -Dmain=hp_view_main \
		-include $(top_srcdir)/fuzz/view-main.h $(src_heapprof_view_CFLAGS) $(FUZZ_CFLAGS)

fuzz-build:
	@command -v $(FUZZ_CC) >/dev/null || { \
		echo "fuzz: $(FUZZ_CC) not found: apt-get install clang, or make FUZZ_CC=..."; \
		exit 1; }
	@$(MAKE) $(AM_MAKEFLAGS) $(FUZZERS)

fuzz-smoke: fuzz-build
	@$(MKDIR_P) fuzz/found
	@for f in stream profile; do \
		echo "fuzz-smoke: fuzz-$$f over $(srcdir)/fuzz/corpus/$$f"; \
		fuzz/fuzz-$$f $(FUZZ_OPTS) -runs=0 $(srcdir)/fuzz/corpus/$$f || exit 1; \
	done
	@for g in $(srcdir)/fuzz/regress/profile-*.gz; do \
		echo "fuzz-smoke: fuzz-profile on $$g"; \
		gzip -dc $$g >fuzz/found/regress.hpf && \
		fuzz/fuzz-profile $(FUZZ_OPTS) fuzz/found/regress.hpf || exit 1; \
	done

fuzz: fuzz-build
	@$(MKDIR_P) fuzz/found fuzz/work/stream fuzz/work/profile
	@for f in stream profile; do \
		echo "fuzz: fuzz-$$f for $(FUZZ_SECONDS) s"; \
		fuzz/fuzz-$$f $(FUZZ_OPTS) -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
			fuzz/work/$$f $(srcdir)/fuzz/corpus/$$f || exit 1; \
	done

.PHONY: fuzz fuzz-smoke fuzz-build
