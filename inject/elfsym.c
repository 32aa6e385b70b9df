#include "inject/elfsym.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* The bias is the base minus the page-truncated vaddr of the first PT_LOAD, which is the
 * segment mapped at file offset 0. */
static int load_bias(Elf *e, uint64_t base, uint64_t *bias)
{
	size_t n;
	if (elf_getphdrnum(e, &n))
		return -1;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		*bias = base - (ph.p_vaddr & ~(uint64_t)0xfff);
		return 0;
	}
	return -1;
}

static int scan_dynsym(Elf *e, uint64_t bias, const char *const *names, uint64_t *addrs, size_t n)
{
	Elf_Scn *scn = NULL, *dynsym = NULL, *versym = NULL;
	GElf_Shdr dsh = {0};
	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh))
			continue;
		if (sh.sh_type == SHT_DYNSYM) {
			dynsym = scn;
			dsh = sh;
		} else if (sh.sh_type == SHT_GNU_versym) {
			versym = scn;
		}
	}
	if (!dynsym || !dsh.sh_entsize)
		return -1;
	Elf_Data *data = elf_getdata(dynsym, NULL);
	Elf_Data *vdata = versym ? elf_getdata(versym, NULL) : NULL;
	if (!data)
		return -1;
	size_t count = dsh.sh_size / dsh.sh_entsize;
	int found = 0;
	for (size_t i = 0; i < count; i++) {
		GElf_Sym sym;
		if (!gelf_getsym(data, (int)i, &sym) || sym.st_shndx == SHN_UNDEF || !sym.st_value)
			continue;
		int type = GELF_ST_TYPE(sym.st_info);
		/* An IFUNC symbol is its resolver, not a function we could call. */
		if (type != STT_FUNC && type != STT_OBJECT)
			continue;
		GElf_Versym vs;
		/* Bit 15 marks a hidden (non-default) version such as memcpy@GLIBC_2.2.5. */
		if (vdata && gelf_getversym(vdata, (int)i, &vs) && (vs & 0x8000))
			continue;
		const char *name = elf_strptr(e, dsh.sh_link, sym.st_name);
		if (!name)
			continue;
		for (size_t k = 0; k < n; k++) {
			if (!addrs[k] && !strcmp(name, names[k])) {
				addrs[k] = bias + sym.st_value;
				found++;
			}
		}
	}
	return found;
}

/* scan_dynsym over e (ended here), with the bias found from *base, or bias itself when base
 * is NULL. */
static int lookup(Elf *e, const uint64_t *base, uint64_t bias, const char *const *names,
		  uint64_t *addrs, size_t n)
{
	for (size_t k = 0; k < n; k++)
		addrs[k] = 0;
	int ret = -1;
	if (e && elf_kind(e) == ELF_K_ELF && (!base || !load_bias(e, *base, &bias)))
		ret = scan_dynsym(e, bias, names, addrs, n);
	if (e)
		elf_end(e);
	if (ret < 0)
		errno = ENOEXEC;
	return ret;
}

int hp_elf_symbols(pid_t pid, const char *path, uint64_t base, const char *const *names,
		   uint64_t *addrs, size_t n)
{
	char file[PATH_MAX + 32];
	snprintf(file, sizeof file, "/proc/%d/root%s", (int)pid, path);
	elf_version(EV_CURRENT);
	int fd = open(file, O_RDONLY | O_CLOEXEC);
	int ret =
	    lookup(fd < 0 ? NULL : elf_begin(fd, ELF_C_READ_MMAP, NULL), &base, 0, names, addrs, n);
	if (fd >= 0)
		close(fd);
	return ret;
}

int hp_elf_symbols_image(char *image, size_t len, uint64_t bias, const char *const *names,
			 uint64_t *addrs, size_t n)
{
	elf_version(EV_CURRENT);
	return lookup(elf_memory(image, len), NULL, bias, names, addrs, n);
}
