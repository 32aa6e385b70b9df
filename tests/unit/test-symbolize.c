/* test-symbolize.c - viewer/symbolize.c against libsymtest.so, a real -g -O2 library:
 * plain call, inlined call chain, demangled C++ name, unknown address, wrong build-id,
 * unloaded and replaced modules; and copies of it split with objcopy into a stripped
 * library and a separate debug file, found by .gnu_debuglink or by build-id under
 * HEAPPROF_DEBUGINFO_PATH, or not found at all. */
#define _GNU_SOURCE /* nftw */
#include <dlfcn.h>
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "symtest-phdr.h"
#include "viewer/symbolize.h"

/* A loaded copy of libsymtest.so. */
struct lib {
	void *handle;
	void *(*plain)(void);
	void *(*outer)(void);
	void *(*cxx)(int);
	struct symtest_module mod;
};

struct fixture {
	struct lib orig;
	char dir[PATH_MAX]; /* holds the split copies; removed at teardown */
};

/* The line of the marker comment in SRCDIR/file. */
static unsigned marker_line(const char *file, const char *marker)
{
	char path[PATH_MAX], buf[512];
	snprintf(path, sizeof path, "%s/%s", SRCDIR, file);
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	unsigned line = 0, found = 0;
	while (fgets(buf, sizeof buf, f)) {
		line++;
		if (strstr(buf, marker)) {
			found = line;
			break;
		}
	}
	fclose(f);
	assert_int_not_equal(found, 0);
	return found;
}

static const char *base(const char *path)
{
	assert_non_null(path);
	const char *b = strrchr(path, '/');
	return b ? b + 1 : path;
}

static int load_lib(const char *path, struct lib *l)
{
	l->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!l->handle) {
		fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
		return -1;
	}
	*(void **)&l->plain = dlsym(l->handle, "symtest_plain");
	*(void **)&l->outer = dlsym(l->handle, "symtest_outer");
	*(void **)&l->cxx = dlsym(l->handle, "symtest_cxx");
	if (!l->plain || !l->outer || !l->cxx)
		return -1;
	return symtest_find_module((void *)l->plain, &l->mod);
}

static int setup(void **state)
{
	/* Where debug files are searched is the subject of some tests: not the caller's
	 * choice, and never the network. */
	unsetenv("HEAPPROF_DEBUGINFO_PATH");
	unsetenv("DEBUGINFOD_URLS");
	struct fixture *fx = calloc(1, sizeof *fx);
	if (!fx || load_lib(SYMTEST_LIB, &fx->orig) != 0)
		return -1;
	const char *tmp = getenv("TMPDIR");
	if (!tmp || tmp[0] != '/')
		tmp = "/tmp";
	int n = snprintf(fx->dir, sizeof fx->dir, "%s/test-symbolize.XXXXXX", tmp);
	if (n < 0 || (size_t)n >= sizeof fx->dir || !mkdtemp(fx->dir)) {
		perror("mkdtemp");
		return -1;
	}
	*state = fx;
	return 0;
}

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st;
	(void)type;
	(void)ftw;
	if (remove(path) == 0)
		return 0;
	perror(path);
	return -1;
}

static int teardown(void **state)
{
	struct fixture *fx = *state;
	dlclose(fx->orig.handle);
	int rc = nftw(fx->dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
	free(fx);
	return rc;
}

static struct hp_symbolizer *new_sym(const struct lib *l, uint32_t id)
{
	struct hp_symbolizer *s = hp_sym_new(0);
	assert_non_null(s);
	assert_int_equal(l->mod.build_id_len > 0, 1);
	assert_int_equal(hp_sym_add_module(s, id, l->mod.path, l->mod.bias, l->mod.start,
					   l->mod.end, l->mod.build_id, l->mod.build_id_len),
			 0);
	return s;
}

static void test_plain_call(void **state)
{
	struct fixture *fx = *state;
	struct hp_symbolizer *s = new_sym(&fx->orig, 7);
	uint64_t addr = (uintptr_t)fx->orig.plain();
	struct hp_sym_result r;
	assert_int_equal(hp_sym_resolve(s, addr, &r), 1);
	assert_int_equal(r.module_id, 7);
	assert_string_equal(r.frames[0].function, "symtest_plain");
	assert_string_equal(base(r.frames[0].file), "symtest.c");
	assert_int_equal(r.frames[0].line, marker_line("symtest.c", "/* SYMTEST_CALL */"));
	assert_true(r.frames[0].column > 0);
	hp_sym_result_clear(&r);
	hp_sym_free(s);
}

static void test_inlined_call(void **state)
{
	struct fixture *fx = *state;
	struct hp_symbolizer *s = new_sym(&fx->orig, 1);
	uint64_t addr = (uintptr_t)fx->orig.outer();
	struct hp_sym_result r;
	assert_int_equal(hp_sym_resolve(s, addr, &r), 2);
	assert_string_equal(r.frames[0].function, "symtest_inner");
	assert_string_equal(base(r.frames[0].file), "symtest.c");
	assert_int_equal(r.frames[0].line, marker_line("symtest.c", "/* SYMTEST_INLINE_CALL */"));
	assert_string_equal(r.frames[1].function, "symtest_outer");
	assert_string_equal(base(r.frames[1].file), "symtest.c");
	assert_int_equal(r.frames[1].line, marker_line("symtest.c", "/* SYMTEST_OUTER_CALL */"));
	hp_sym_result_clear(&r);
	hp_sym_free(s);
}

static void test_cxx_demangled(void **state)
{
	struct fixture *fx = *state;
	struct hp_symbolizer *s = new_sym(&fx->orig, 1);
	uint64_t addr = (uintptr_t)fx->orig.cxx(3);
	struct hp_sym_result r;
	assert_int_equal(hp_sym_resolve(s, addr, &r), 1);
	assert_string_equal(r.frames[0].function, "ns::f(int)");
	assert_string_equal(base(r.frames[0].file), "symtest-cxx.cc");
	assert_int_equal(r.frames[0].line, marker_line("symtest-cxx.cc", "/* SYMTEST_CXX_CALL */"));
	hp_sym_result_clear(&r);
	hp_sym_free(s);
}

static void test_no_module(void **state)
{
	struct fixture *fx = *state;
	struct hp_symbolizer *s = new_sym(&fx->orig, 1);
	struct hp_sym_result r;
	assert_int_equal(hp_sym_resolve(s, 0x1000, &r), 0);
	assert_int_equal(r.module_id, 0);
	assert_int_equal(hp_sym_resolve(s, fx->orig.mod.end + 0x1000, &r), 0);
	assert_int_equal(hp_sym_module_at(s, fx->orig.mod.end), 0);
	hp_sym_free(s);
}

static void test_wrong_build_id(void **state)
{
	struct fixture *fx = *state;
	struct hp_symbolizer *s = hp_sym_new(0);
	uint8_t bad[20] = {1, 2, 3};
	assert_int_equal(hp_sym_add_module(s, 4, fx->orig.mod.path, fx->orig.mod.bias,
					   fx->orig.mod.start, fx->orig.mod.end, bad, sizeof bad),
			 -1);
	struct hp_sym_result r;
	assert_int_equal(hp_sym_resolve(s, (uintptr_t)fx->orig.plain(), &r), 0);
	assert_int_equal(r.module_id, 4);
	hp_sym_free(s);
}

static void test_unloaded_then_replaced(void **state)
{
	struct fixture *fx = *state;
	struct hp_symbolizer *s = new_sym(&fx->orig, 1);
	uint64_t addr = (uintptr_t)fx->orig.plain();
	struct hp_sym_result r;
	hp_sym_remove_module(s, 1);
	assert_int_equal(hp_sym_resolve(s, addr, &r), 1);
	assert_int_equal(r.module_id, 1);
	assert_string_equal(r.frames[0].function, "symtest_plain");
	hp_sym_result_clear(&r);

	/* Something else mapped at the same range takes the addresses over. */
	assert_int_equal(hp_sym_add_module(s, 2, "/nonexistent/libother.so", fx->orig.mod.bias,
					   fx->orig.mod.start, fx->orig.mod.end, NULL, 0),
			 -1);
	assert_int_equal(hp_sym_module_at(s, addr), 2);
	assert_int_equal(hp_sym_resolve(s, addr, &r), 0);
	assert_int_equal(r.module_id, 2);
	hp_sym_free(s);
}

static void test_proc_root(void **state)
{
	struct fixture *fx = *state;
	struct hp_symbolizer *s = hp_sym_new(getpid());
	assert_int_equal(hp_sym_add_module(s, 9, fx->orig.mod.path, fx->orig.mod.bias,
					   fx->orig.mod.start, fx->orig.mod.end,
					   fx->orig.mod.build_id, fx->orig.mod.build_id_len),
			 0);
	struct hp_sym_result r;
	assert_int_equal(hp_sym_resolve(s, (uintptr_t)fx->orig.plain(), &r), 1);
	assert_string_equal(r.frames[0].function, "symtest_plain");
	hp_sym_result_clear(&r);
	hp_sym_free(s);
}

/* Separate debug files: copies of libsymtest.so split the way distributions ship them
 * (stripped library, debug file elsewhere) must resolve exactly like the original. */

/* dir/name, which must fit. */
static void join(char *out, const char *dir, const char *name)
{
	int n = snprintf(out, PATH_MAX, "%s/%s", dir, name);
	assert_true(n > 0 && n < PATH_MAX);
}

/* dir/name, created. */
static void make_dir(char *out, const char *dir, const char *name)
{
	join(out, dir, name);
	assert_int_equal(mkdir(out, 0700), 0);
}

/* Runs a binutils command, which must succeed. */
static void run(char *const argv[])
{
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		execvp(argv[0], argv);
		fprintf(stderr, "%s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fail_msg("%s failed (status %#x)", argv[0], (unsigned)status);
}

static void keep_only_debug(const char *debug_file)
{
	run((char *[]){"objcopy", "--only-keep-debug", SYMTEST_LIB, (char *)debug_file, NULL});
}

/* lib as the original stripped how ("--strip-all" or "--strip-debug"), with a debuglink
 * to debuglink unless NULL. */
static void strip(const char *lib, const char *how, const char *debuglink)
{
	char link[PATH_MAX + 32];
	if (!debuglink) {
		run((char *[]){"objcopy", (char *)how, SYMTEST_LIB, (char *)lib, NULL});
		return;
	}
	int n = snprintf(link, sizeof link, "--add-gnu-debuglink=%s", debuglink);
	assert_true(n > 0 && (size_t)n < sizeof link);
	run((char *[]){"objcopy", (char *)how, link, SYMTEST_LIB, (char *)lib, NULL});
}

/* What ships: no .symtab, no DWARF, only .dynsym. */
static void strip_all(const char *lib, const char *debuglink)
{
	strip(lib, "--strip-all", debuglink);
}

/* debug gets the path of the original's debug file in ROOT/.build-id/xx/rest.debug, root
 * made in dir; the directories are made, not the file. */
static void build_id_debug_file(const struct fixture *fx, const char *dir, char *root, char *debug)
{
	char bid[PATH_MAX], sub[PATH_MAX], hex[2 * sizeof fx->orig.mod.build_id + 1], xx[3];
	const struct symtest_module *m = &fx->orig.mod;
	assert_true(m->build_id_len > 1);
	for (size_t i = 0; i < m->build_id_len; i++)
		snprintf(hex + 2 * i, 3, "%02x", m->build_id[i]);
	memcpy(xx, hex, 2);
	xx[2] = '\0';
	make_dir(root, dir, "root");
	make_dir(bid, root, ".build-id");
	make_dir(sub, bid, xx);
	int n = snprintf(debug, PATH_MAX, "%s/%s.debug", sub, hex + 2);
	assert_true(n > 0 && n < PATH_MAX);
}

/* The original's frames for its marked calls, from its own DWARF: the ones a copy must
 * give. */
static void expect_like_original(const struct fixture *fx, const struct lib *copy,
				 struct hp_symbolizer *s)
{
	struct hp_symbolizer *o = new_sym(&fx->orig, 1);
	const uint64_t want[] = {(uintptr_t)fx->orig.plain(), (uintptr_t)fx->orig.outer(),
				 (uintptr_t)fx->orig.cxx(3)};
	const uint64_t got[] = {(uintptr_t)copy->plain(), (uintptr_t)copy->outer(),
				(uintptr_t)copy->cxx(3)};
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
		struct hp_sym_result a, b;
		/* The copy is another mapping: equal results must come from its own file. */
		assert_int_not_equal(want[i], got[i]);
		assert_true(hp_sym_resolve(o, want[i], &a) > 0);
		hp_sym_resolve(s, got[i], &b);
		assert_int_equal(b.nframes, a.nframes);
		for (uint32_t f = 0; f < a.nframes; f++) {
			assert_non_null(b.frames[f].function);
			assert_non_null(b.frames[f].file);
			assert_string_equal(b.frames[f].function, a.frames[f].function);
			assert_string_equal(b.frames[f].file, a.frames[f].file);
			assert_int_equal(b.frames[f].line, a.frames[f].line);
			assert_int_equal(b.frames[f].column, a.frames[f].column);
		}
		hp_sym_result_clear(&a);
		hp_sym_result_clear(&b);
	}
	hp_sym_free(o);
}

/* The debug file's name differs from the library's so that only the debuglink can lead
 * to it (libdw would also try NAME.debug). */
static void test_debuglink(void **state)
{
	struct fixture *fx = *state;
	char dir[PATH_MAX], sub[PATH_MAX], lib[PATH_MAX], debug[PATH_MAX];
	/* Beside the library, then in its .debug/ subdirectory: both in libdw's default. */
	for (int in_sub = 0; in_sub < 2; in_sub++) {
		make_dir(dir, fx->dir, in_sub ? "link-sub" : "link-beside");
		if (in_sub)
			make_dir(sub, dir, ".debug");
		join(debug, in_sub ? sub : dir, "split-symtest.dbg");
		keep_only_debug(debug);
		join(lib, dir, "libsymtest.so");
		strip_all(lib, debug);

		struct lib copy;
		assert_int_equal(load_lib(lib, &copy), 0);
		struct hp_symbolizer *s = new_sym(&copy, 3);
		expect_like_original(fx, &copy, s);
		hp_sym_free(s);
		dlclose(copy.handle);
	}
}

/* No debuglink: only the build-id leads to ROOT/.build-id/xx/rest.debug, and only the
 * debuginfo path leads to ROOT. */
static void test_build_id_path(void **state)
{
	struct fixture *fx = *state;
	char dir[PATH_MAX], root[PATH_MAX], debug[PATH_MAX], lib[PATH_MAX];
	make_dir(dir, fx->dir, "build-id");
	build_id_debug_file(fx, dir, root, debug);
	keep_only_debug(debug);
	join(lib, dir, "libsymtest.so");
	strip_all(lib, NULL);

	struct lib copy;
	assert_int_equal(load_lib(lib, &copy), 0);
	assert_int_equal(setenv("HEAPPROF_DEBUGINFO_PATH", root, 1), 0);
	struct hp_symbolizer *s = hp_sym_new(0);
	/* Read once: modules reported later still use the path the symbolizer started with. */
	unsetenv("HEAPPROF_DEBUGINFO_PATH");
	assert_non_null(s);
	assert_int_equal(hp_sym_add_module(s, 5, copy.mod.path, copy.mod.bias, copy.mod.start,
					   copy.mod.end, copy.mod.build_id, copy.mod.build_id_len),
			 0);
	expect_like_original(fx, &copy, s);
	hp_sym_free(s);
	dlclose(copy.handle);
}

/* A child that waits to be killed: a target whose /proc/PID/root goes with it. */
static pid_t start_target(void)
{
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		pause();
		_exit(0);
	}
	return pid;
}

static void end_target(pid_t pid)
{
	int status;
	assert_int_equal(kill(pid, SIGKILL), 0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
}

/* Reported through a target's /proc/PID/root, a module resolves as the original after the
 * target is gone, whether its debug file is beside it (found through the target's root,
 * so at once) or by build-id under a debuginfo directory of ours (when first needed). */
static void test_target_gone(void **state)
{
	struct fixture *fx = *state;
	char dir[PATH_MAX], debug[PATH_MAX], lib[PATH_MAX], root[PATH_MAX];
	for (int by_id = 0; by_id < 2; by_id++) {
		make_dir(dir, fx->dir, by_id ? "gone-build-id" : "gone-beside");
		if (by_id)
			build_id_debug_file(fx, dir, root, debug);
		else
			join(debug, dir, "split-symtest.dbg");
		keep_only_debug(debug);
		join(lib, dir, "libsymtest.so");
		/* Beside: with its .symtab kept, nothing but the DWARF leads libdw to the
		 * debug file. */
		strip(lib, by_id ? "--strip-all" : "--strip-debug", by_id ? NULL : debug);

		struct lib copy;
		assert_int_equal(load_lib(lib, &copy), 0);
		if (by_id)
			assert_int_equal(setenv("HEAPPROF_DEBUGINFO_PATH", root, 1), 0);
		pid_t target = start_target();
		struct hp_symbolizer *s = hp_sym_new(target);
		unsetenv("HEAPPROF_DEBUGINFO_PATH");
		assert_non_null(s);
		assert_int_equal(hp_sym_add_module(s, 4, copy.mod.path, copy.mod.bias,
						   copy.mod.start, copy.mod.end, copy.mod.build_id,
						   copy.mod.build_id_len),
				 0);
		end_target(target);
		expect_like_original(fx, &copy, s);
		hp_sym_free(s);
		dlclose(copy.handle);
	}
}

/* Without debug info a frame is its ELF symbol alone: .symtab after strip --strip-debug,
 * .dynsym after --strip-all; an address no symbol holds stays module+offset. */
static void test_no_debug_file(void **state)
{
	struct fixture *fx = *state;
	char dir[PATH_MAX], lib[PATH_MAX];
	for (int all = 0; all < 2; all++) {
		make_dir(dir, fx->dir, all ? "strip-all" : "strip-debug");
		join(lib, dir, "libsymtest.so");
		strip(lib, all ? "--strip-all" : "--strip-debug", NULL);

		struct lib copy;
		assert_int_equal(load_lib(lib, &copy), 0);
		struct hp_symbolizer *s = new_sym(&copy, 6);
		const struct {
			uint64_t addr;
			const char *function;
		} want[] = {
		    {(uintptr_t)copy.plain(), "symtest_plain"},
		    /* symtest_inner was inlined: it has no symbol of its own. */
		    {(uintptr_t)copy.outer(), "symtest_outer"},
		    {(uintptr_t)copy.cxx(3), "ns::f(int)"},
		};
		struct hp_sym_result r;
		for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
			assert_int_equal(hp_sym_resolve(s, want[i].addr, &r), 1);
			assert_int_equal(r.module_id, 6);
			assert_non_null(r.frames[0].function);
			assert_string_equal(r.frames[0].function, want[i].function);
			assert_null(r.frames[0].file);
			assert_int_equal(r.frames[0].line, 0);
			hp_sym_result_clear(&r);
		}
		/* The ELF header: in the module, in no function. */
		assert_int_equal(hp_sym_resolve(s, copy.mod.start + 1, &r), 0);
		assert_int_equal(r.module_id, 6);
		hp_sym_free(s);
		dlclose(copy.handle);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_plain_call),	   cmocka_unit_test(test_inlined_call),
	    cmocka_unit_test(test_cxx_demangled),  cmocka_unit_test(test_no_module),
	    cmocka_unit_test(test_wrong_build_id), cmocka_unit_test(test_unloaded_then_replaced),
	    cmocka_unit_test(test_proc_root),	   cmocka_unit_test(test_debuglink),
	    cmocka_unit_test(test_build_id_path),  cmocka_unit_test(test_target_gone),
	    cmocka_unit_test(test_no_debug_file),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
