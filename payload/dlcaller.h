/* dlcaller.h - dlopen on behalf of another module.
 *
 * Contract: glibc's dlopen takes its caller from its return address, and the caller
 * decides three things: the directories searched for a bare name (the caller's DT_RPATH
 * chain, LD_LIBRARY_PATH, its DT_RUNPATH), what $ORIGIN means, and the namespace loaded
 * into. Called from the dlopen hook, the real dlopen sees the payload as its caller.
 * hp_dlopen_as finds the file as glibc would have for caller (an address in the module
 * that called dlopen) and hands real (the real dlopen) a name that means the same from
 * the payload: an object already loaded under that name, else the first file in the
 * caller's own directories, else the name itself for the cache and default directories
 * that every caller shares. Nothing is allocated. Approximations: a file in the caller's
 * directories that dlopen rejects is skipped (as glibc skips a wrong-class ELF file, but
 * also when its dependencies are missing), and a caller in another namespace is served by
 * dlmopen.
 */
#ifndef HEAPPROF_PAYLOAD_DLCALLER_H
#define HEAPPROF_PAYLOAD_DLCALLER_H

typedef void *(*hp_dlopen_fn)(const char *file, int mode);

/* probe(file, mode) must be real(file, mode | RTLD_NOLOAD) with the caller's allocations
 * unrecorded and the error of a miss cleared: libc allocates the message of a miss, which
 * the application never asked for. */
void *hp_dlopen_as(const void *caller, hp_dlopen_fn real, hp_dlopen_fn probe, const char *file,
		   int mode);

#endif
