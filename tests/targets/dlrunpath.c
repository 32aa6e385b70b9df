/* dlrunpath.c - a library that finds another through its own DT_RUNPATH (libdlrunpath.so).
 *
 * Contract: linked with DT_RUNPATH $ORIGIN/plugins, it offers dl-target the same entry
 * point as libdltest.so: dltest_run(K, out) dlopens "libdltest.so" by its bare name, which
 * only this library's DT_RUNPATH finds, and again as "$ORIGIN/plugins/libdltest.so", which
 * must give the same handle; it then runs that library's dltest_run(K, out). The library
 * stays loaded until this one's destructor closes it, so dlclose of libdlrunpath.so unloads
 * both. A failure is reported on stderr and returns -1.
 */
#include <dlfcn.h>
#include <stdio.h>

int dltest_run(unsigned nallocs, unsigned char **out);

static void *plugin;

int dltest_run(unsigned nallocs, unsigned char **out)
{
	if (!plugin) {
		plugin = dlopen("libdltest.so", RTLD_NOW);
		if (!plugin) {
			fprintf(stderr, "libdlrunpath: %s\n", dlerror());
			return -1;
		}
		void *again = dlopen("$ORIGIN/plugins/libdltest.so", RTLD_NOW);
		if (again != plugin) {
			fprintf(stderr, "libdlrunpath: $ORIGIN/plugins/libdltest.so: %s\n",
				again ? "another object" : dlerror());
			return -1;
		}
		dlclose(again);
	}
	int (*run)(unsigned, unsigned char **) =
	    (int (*)(unsigned, unsigned char **))dlsym(plugin, "dltest_run");
	return run ? run(nallocs, out) : -1;
}

__attribute__((destructor)) static void dlrunpath_fini(void)
{
	if (plugin)
		dlclose(plugin);
}
