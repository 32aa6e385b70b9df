/* buildid.h - the GNU build-id of a loaded module, from its program headers.
 *
 * Contract: reads the PT_NOTE segments of the module dl_iterate_phdr describes, in place
 * (no allocation, no file access, so the payload can call it), and returns the length of
 * its NT_GNU_BUILD_ID note with *id pointing at the bytes in the module's memory; 0 when
 * there is none or a note runs past its segment. Shared by the payload's module records
 * and the viewer benchmark, which writes the same records.
 */
#ifndef HEAPPROF_BUILDID_H
#define HEAPPROF_BUILDID_H

#include <elf.h>
#include <link.h>
#include <stdint.h>
#include <string.h>

static inline uint16_t hp_build_id(const struct dl_phdr_info *info, const uint8_t **id)
{
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_NOTE)
			continue;
		const uint8_t *p = (const uint8_t *)(info->dlpi_addr + ph->p_vaddr);
		const uint8_t *end = p + ph->p_memsz;
		size_t al = ph->p_align == 8 ? 8 : 4;
		while ((size_t)(end - p) >= sizeof(ElfW(Nhdr))) {
			ElfW(Nhdr) n;
			memcpy(&n, p, sizeof n);
			size_t name_sz = (n.n_namesz + al - 1) & ~(al - 1);
			size_t desc_sz = (n.n_descsz + al - 1) & ~(al - 1);
			const uint8_t *name = p + sizeof n, *desc = name + name_sz;
			if (desc + n.n_descsz > end)
				break;
			if (n.n_type == NT_GNU_BUILD_ID && n.n_namesz == 4 &&
			    memcmp(name, "GNU", 4) == 0 && n.n_descsz <= UINT16_MAX) {
				*id = desc;
				return (uint16_t)n.n_descsz;
			}
			p = desc + desc_sz;
		}
	}
	return 0;
}

#endif
