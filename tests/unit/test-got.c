/* test-got.c - payload/got.c on real libraries: gotlib.c built with a lazy PLT, with
 * -fno-plt (GLOB_DAT) and with full RELRO. Each is dlopened, its malloc/free/calloc slots
 * found with the right relocation type, patched to counting functions, called, restored,
 * and checked for the original behaviour and the page protection the loader left.
 * gotaddr.c, which takes free's address, shows which GLOB_DAT slots calls go through. */
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "payload/got.h"

enum { S_MALLOC, S_FREE, S_CALLOC, S_N };
static const char *const names[S_N] = {"malloc", "free", "calloc"};

struct found {
	const char *lib;
	void **slot[S_N];
	uint32_t type[S_N];
	int hits[S_N];
	void *value[S_N]; /* to write; NULL = only look */
	int write_rc;
	int seen;
};

static int counted_malloc, counted_free, counted_calloc;

static void *count_malloc(size_t n)
{
	counted_malloc++;
	return malloc(n);
}

static void count_free(void *p)
{
	counted_free++;
	free(p);
}

static void *count_calloc(size_t a, size_t b)
{
	counted_calloc++;
	return calloc(a, b);
}

static void slot_cb(const struct got_slot *s, void *arg)
{
	struct found *f = arg;
	for (int i = 0; i < S_N; i++) {
		if (strcmp(s->name, names[i]) != 0)
			continue;
		f->slot[i] = s->slot;
		f->type[i] = s->type;
		f->hits[i]++;
	}
}

static int phdr_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	struct found *f = arg;
	if (!info->dlpi_name || !strstr(info->dlpi_name, f->lib))
		return 0;
	f->seen = 1;
	memset(f->hits, 0, sizeof f->hits);
	if (got_walk(info, slot_cb, f) < 0)
		return 1;
	void **slots[S_N], *values[S_N];
	int n = 0;
	for (int i = 0; i < S_N; i++)
		if (f->value[i] && f->slot[i]) {
			slots[n] = f->slot[i];
			values[n++] = f->value[i];
		}
	if (got_write_all(info, slots, values, n) != n)
		f->write_rc = -1;
	return 1;
}

/* The protection /proc/self/maps shows for the page holding addr, as "rwx" letters. */
static void prot_of(const void *addr, char out[4])
{
	char line[512];
	strcpy(out, "???");
	FILE *m = fopen("/proc/self/maps", "r");
	assert_non_null(m);
	while (fgets(line, sizeof line, m)) {
		unsigned long lo, hi;
		char perm[5];
		if (sscanf(line, "%lx-%lx %4s", &lo, &hi, perm) != 3)
			continue;
		if ((uintptr_t)addr >= lo && (uintptr_t)addr < hi) {
			memcpy(out, perm, 3);
			out[3] = 0;
		}
	}
	fclose(m);
}

static void check_lib(const char *file, int mode, uint32_t want_type, const char *want_prot)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/tests/unit/%s", HP_BUILDDIR, file);
	void *h = dlopen(path, mode);
	assert_non_null(h);
	void *(*lm)(size_t) = (void *(*)(size_t))dlsym(h, "gotlib_malloc");
	void (*lf)(void *) = (void (*)(void *))dlsym(h, "gotlib_free");
	void *(*lc)(size_t, size_t) = (void *(*)(size_t, size_t))dlsym(h, "gotlib_calloc");
	assert_non_null(lm);
	assert_non_null(lf);
	assert_non_null(lc);

	struct found f = {.lib = file};
	dl_iterate_phdr(phdr_cb, &f);
	assert_true(f.seen);
	for (int i = 0; i < S_N; i++) {
		assert_int_equal(f.hits[i], 1);
		assert_int_equal(f.type[i], want_type);
	}
	char before[4], during[4], after[4];
	prot_of(f.slot[S_MALLOC], before);
	assert_string_equal(before, want_prot);
	void *orig[S_N];
	for (int i = 0; i < S_N; i++)
		orig[i] = *f.slot[i];

	f.value[S_MALLOC] = (void *)count_malloc;
	f.value[S_FREE] = (void *)count_free;
	f.value[S_CALLOC] = (void *)count_calloc;
	counted_malloc = counted_free = counted_calloc = 0;
	dl_iterate_phdr(phdr_cb, &f);
	assert_int_equal(f.write_rc, 0);
	prot_of(f.slot[S_MALLOC], during);
	assert_string_equal(during, want_prot);
	void *p = lm(32), *q = lc(2, 8);
	assert_non_null(p);
	assert_non_null(q);
	lf(p);
	lf(q);
	assert_int_equal(counted_malloc, 1);
	assert_int_equal(counted_calloc, 1);
	assert_int_equal(counted_free, 2);

	for (int i = 0; i < S_N; i++)
		f.value[i] = orig[i];
	dl_iterate_phdr(phdr_cb, &f);
	assert_int_equal(f.write_rc, 0);
	for (int i = 0; i < S_N; i++)
		assert_ptr_equal(*f.slot[i], orig[i]);
	prot_of(f.slot[S_MALLOC], after);
	assert_string_equal(after, before);
	lf(lm(16));
	assert_int_equal(counted_malloc, 1);
	assert_int_equal(counted_free, 2);
	dlclose(h);
}

static void test_lazy(void **state)
{
	(void)state;
	check_lib("gotlib-lazy.so", RTLD_LAZY, R_X86_64_JUMP_SLOT, "rw-");
}

static void test_noplt(void **state)
{
	(void)state;
	check_lib("gotlib-noplt.so", RTLD_NOW, R_X86_64_GLOB_DAT, "r--");
}

static void test_relro(void **state)
{
	(void)state;
	check_lib("gotlib-now.so", RTLD_NOW, R_X86_64_JUMP_SLOT, "r--");
}

struct free_slot {
	const char *lib;
	void **data, **call; /* free's GLOB_DAT and JUMP_SLOT slots */
	unsigned char called;
};

static void free_slot_cb(const struct got_slot *s, void *arg)
{
	struct free_slot *f = arg;
	if (strcmp(s->name, "free"))
		return;
	if (s->type == R_X86_64_GLOB_DAT)
		f->data = s->slot;
	else
		f->call = s->slot;
}

static int free_phdr_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	struct free_slot *f = arg;
	if (!info->dlpi_name || !strstr(info->dlpi_name, f->lib))
		return 0;
	assert_true(got_walk(info, free_slot_cb, f) > 0);
	assert_non_null(f->data);
	got_called_through(info, &f->data, 1, &f->called);
	return 1;
}

static struct free_slot free_slot_of(const char *file)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/tests/unit/%s", HP_BUILDDIR, file);
	void *h = dlopen(path, RTLD_NOW);
	assert_non_null(h);
	void (*(*fn)(void))(void *) = (void (*(*)(void))(void *))dlsym(h, "gotaddr_free_fn");
	assert_non_null(fn);
	assert_ptr_equal(fn(), free);
	struct free_slot f = {.lib = file};
	dl_iterate_phdr(free_phdr_cb, &f);
	dlclose(h);
	return f;
}

/* A GLOB_DAT slot that only gives free's address is not called through; with -fno-plt the
 * one GLOB_DAT slot serves both. (With a PLT, ld makes a library that calls free and takes
 * its address jump through the GLOB_DAT slot too, from .plt.got.) */
static void test_called_through(void **state)
{
	(void)state;
	struct free_slot take = free_slot_of("gotaddr-take.so");
	assert_null(take.call);
	assert_int_equal(take.called, 0);
	struct free_slot noplt = free_slot_of("gotaddr-noplt.so");
	assert_null(noplt.call);
	assert_int_equal(noplt.called, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_lazy),
	    cmocka_unit_test(test_noplt),
	    cmocka_unit_test(test_relro),
	    cmocka_unit_test(test_called_through),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
