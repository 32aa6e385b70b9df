/* elfsym.h - addresses of exported functions and objects in a module of the target.
 *
 * Contract: reads the module's file as the target sees it (/proc/PID/root/<path>, so a
 * target in another mount namespace works), or the image of the file heapprof loaded
 * itself, with libelf, looks each name up in .dynsym, taking only defined functions and
 * objects of the default version (the one a normal link would bind to; never an IFUNC,
 * which is a resolver), and adds the load bias: derived from the module's base in
 * /proc/PID/maps, or the one the loader reported. Nothing in the target is touched.
 */
#ifndef HEAPPROF_INJECT_ELFSYM_H
#define HEAPPROF_INJECT_ELFSYM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Resolves names[0..n) into addrs (0 for a name not found). Returns the number found, or
 * -1 with errno when the file can't be read as an ELF object. */
int hp_elf_symbols(pid_t pid, const char *path, uint64_t base, const char *const *names,
		   uint64_t *addrs, size_t n);
/* The same in image (len bytes of an ELF file, as it was loaded) for a module loaded at
 * bias (its link_map's l_addr). */
int hp_elf_symbols_image(char *image, size_t len, uint64_t bias, const char *const *names,
			 uint64_t *addrs, size_t n);

#endif
