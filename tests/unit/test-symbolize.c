/* test-symbolize.c - viewer/symbolize.c against libsymtest.so, a real -g -O2 library:
 * plain call, inlined call chain, demangled C++ name, unknown address, wrong build-id,
 * unloaded and replaced modules. */
#include <dlfcn.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "symtest-phdr.h"
#include "viewer/symbolize.h"

struct fixture {
	void *lib;
	void *(*plain)(void);
	void *(*outer)(void);
	void *(*cxx)(int);
	struct symtest_module mod;
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

static int setup(void **state)
{
	struct fixture *fx = calloc(1, sizeof *fx);
	fx->lib = dlopen(SYMTEST_LIB, RTLD_NOW | RTLD_LOCAL);
	if (!fx->lib) {
		fprintf(stderr, "dlopen %s: %s\n", SYMTEST_LIB, dlerror());
		return -1;
	}
	*(void **)&fx->plain = dlsym(fx->lib, "symtest_plain");
	*(void **)&fx->outer = dlsym(fx->lib, "symtest_outer");
	*(void **)&fx->cxx = dlsym(fx->lib, "symtest_cxx");
	if (!fx->plain || !fx->outer || !fx->cxx)
		return -1;
	if (symtest_find_module((void *)fx->plain, &fx->mod) != 0)
		return -1;
	*state = fx;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *fx = *state;
	dlclose(fx->lib);
	free(fx);
	return 0;
}

static struct hp_symbolizer *new_sym(const struct fixture *fx, uint32_t id)
{
	struct hp_symbolizer *s = hp_sym_new(0);
	assert_non_null(s);
	assert_int_equal(fx->mod.build_id_len > 0, 1);
	assert_int_equal(hp_sym_add_module(s, id, fx->mod.path, fx->mod.bias, fx->mod.start,
					   fx->mod.end, fx->mod.build_id, fx->mod.build_id_len),
			 0);
	return s;
}

static void test_plain_call(void **state)
{
	struct fixture *fx = *state;
	struct hp_symbolizer *s = new_sym(fx, 7);
	uint64_t addr = (uintptr_t)fx->plain();
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
	struct hp_symbolizer *s = new_sym(fx, 1);
	uint64_t addr = (uintptr_t)fx->outer();
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
	struct hp_symbolizer *s = new_sym(fx, 1);
	uint64_t addr = (uintptr_t)fx->cxx(3);
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
	struct hp_symbolizer *s = new_sym(fx, 1);
	struct hp_sym_result r;
	assert_int_equal(hp_sym_resolve(s, 0x1000, &r), 0);
	assert_int_equal(r.module_id, 0);
	assert_int_equal(hp_sym_resolve(s, fx->mod.end + 0x1000, &r), 0);
	assert_int_equal(hp_sym_module_at(s, fx->mod.end), 0);
	hp_sym_free(s);
}

static void test_wrong_build_id(void **state)
{
	struct fixture *fx = *state;
	struct hp_symbolizer *s = hp_sym_new(0);
	uint8_t bad[20] = {1, 2, 3};
	assert_int_equal(hp_sym_add_module(s, 4, fx->mod.path, fx->mod.bias, fx->mod.start,
					   fx->mod.end, bad, sizeof bad),
			 -1);
	struct hp_sym_result r;
	assert_int_equal(hp_sym_resolve(s, (uintptr_t)fx->plain(), &r), 0);
	assert_int_equal(r.module_id, 4);
	hp_sym_free(s);
}

static void test_unloaded_then_replaced(void **state)
{
	struct fixture *fx = *state;
	struct hp_symbolizer *s = new_sym(fx, 1);
	uint64_t addr = (uintptr_t)fx->plain();
	struct hp_sym_result r;
	hp_sym_remove_module(s, 1);
	assert_int_equal(hp_sym_resolve(s, addr, &r), 1);
	assert_int_equal(r.module_id, 1);
	assert_string_equal(r.frames[0].function, "symtest_plain");
	hp_sym_result_clear(&r);

	/* Something else mapped at the same range takes the addresses over. */
	assert_int_equal(hp_sym_add_module(s, 2, "/nonexistent/libother.so", fx->mod.bias,
					   fx->mod.start, fx->mod.end, NULL, 0),
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
	assert_int_equal(hp_sym_add_module(s, 9, fx->mod.path, fx->mod.bias, fx->mod.start,
					   fx->mod.end, fx->mod.build_id, fx->mod.build_id_len),
			 0);
	struct hp_sym_result r;
	assert_int_equal(hp_sym_resolve(s, (uintptr_t)fx->plain(), &r), 1);
	assert_string_equal(r.frames[0].function, "symtest_plain");
	hp_sym_result_clear(&r);
	hp_sym_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_plain_call),	   cmocka_unit_test(test_inlined_call),
	    cmocka_unit_test(test_cxx_demangled),  cmocka_unit_test(test_no_module),
	    cmocka_unit_test(test_wrong_build_id), cmocka_unit_test(test_unloaded_then_replaced),
	    cmocka_unit_test(test_proc_root),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
