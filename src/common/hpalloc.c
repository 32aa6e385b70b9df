#include "hpalloc.h"

#include <string.h>

static int starts_with(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

int hp_is_allocator_function(const char *function)
{
	static const char *const names[] = {
	    "malloc",	      "calloc",	       "realloc",  "reallocarray", "free",
	    "posix_memalign", "aligned_alloc", "memalign", "valloc",	   "pvalloc",
	    "cfree",	      "strdup",	       "strndup",  "wcsdup",
	};
	if (!function)
		return 0;
	/* glibc's internal aliases of the public names (__GI___strdup, __libc_malloc). */
	if (starts_with(function, "__GI_"))
		function += strlen("__GI_");
	if (starts_with(function, "__libc_") || starts_with(function, "_int_"))
		return 1;
	while (*function == '_')
		function++;
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		if (strcmp(function, names[i]) == 0)
			return 1;
	/* Every operator new/delete variant: sized, aligned, nothrow, array. */
	if (starts_with(function, "operator new") || starts_with(function, "operator delete"))
		return 1;
	/* The same operators when a name reached us undemangled (leading '_' stripped). */
	return starts_with(function, "Znw") || starts_with(function, "Zna") ||
	       starts_with(function, "Zdl") || starts_with(function, "Zda");
}
