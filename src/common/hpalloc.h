/* hpalloc.h - which functions are allocator code rather than a call site.
 *
 * Contract: a stack's *site* is its innermost frame whose real (not inlined) function is
 * not allocator code. The viewer's live report and heapprof-view's analyses both ask this
 * one function, so they always agree on where an allocation was made.
 */
#ifndef HEAPPROF_HPALLOC_H
#define HEAPPROF_HPALLOC_H

/* 1 if function (demangled, or a mangled operator new/delete) is an allocation function,
 * a C library wrapper that only allocates (strdup), or glibc's internals of them. */
int hp_is_allocator_function(const char *function);

#endif
