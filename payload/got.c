#include "got.h"

#include <elf.h>
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

void got_module_range(const struct dl_phdr_info *info, uintptr_t *lo, uintptr_t *hi)
{
	uintptr_t l = UINTPTR_MAX, h = 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD)
			continue;
		uintptr_t s = info->dlpi_addr + ph->p_vaddr;
		if (s < l)
			l = s;
		if (s + ph->p_memsz > h)
			h = s + ph->p_memsz;
	}
	*lo = l == UINTPTR_MAX ? 0 : l;
	*hi = h;
}

/* glibc relocates most d_ptr entries of a module's dynamic section in place, but not for
 * a read-only dynamic section (the vdso): accept both forms. */
static uintptr_t dyn_addr(uintptr_t v, uintptr_t bias, uintptr_t lo, uintptr_t hi)
{
	if (v >= lo && v < hi)
		return v;
	return bias + v;
}

struct dyninfo {
	const ElfW(Rela) * jmprel, *rela;
	size_t jmprelsz, relasz;
	const ElfW(Sym) * symtab;
	const char *strtab;
	size_t strsz;
};

static int read_dynamic(const struct dl_phdr_info *info, struct dyninfo *di)
{
	const ElfW(Dyn) *dyn = NULL;
	for (int i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
			dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
	if (!dyn)
		return -1;
	uintptr_t lo, hi, bias = info->dlpi_addr;
	got_module_range(info, &lo, &hi);
	*di = (struct dyninfo){0};
	for (; dyn->d_tag != DT_NULL; dyn++) {
		uintptr_t v = dyn->d_un.d_ptr;
		switch (dyn->d_tag) {
		case DT_JMPREL:
			di->jmprel = (const ElfW(Rela) *)dyn_addr(v, bias, lo, hi);
			break;
		case DT_PLTRELSZ:
			di->jmprelsz = dyn->d_un.d_val;
			break;
		case DT_RELA:
			di->rela = (const ElfW(Rela) *)dyn_addr(v, bias, lo, hi);
			break;
		case DT_RELASZ:
			di->relasz = dyn->d_un.d_val;
			break;
		case DT_SYMTAB:
			di->symtab = (const ElfW(Sym) *)dyn_addr(v, bias, lo, hi);
			break;
		case DT_STRTAB:
			di->strtab = (const char *)dyn_addr(v, bias, lo, hi);
			break;
		case DT_STRSZ:
			di->strsz = dyn->d_un.d_val;
			break;
		case DT_PLTREL:
			if (dyn->d_un.d_val != DT_RELA)
				return -1;
			break;
		default:
			break;
		}
	}
	return di->symtab && di->strtab ? 0 : -1;
}

static int walk_table(const struct dl_phdr_info *info, const struct dyninfo *di,
		      const ElfW(Rela) * tab, size_t sz, int skip_jmprel, got_fn fn, void *arg)
{
	int n = 0;
	const ElfW(Rela) *jend =
	    di->jmprel ? (const ElfW(Rela) *)((const char *)di->jmprel + di->jmprelsz) : NULL;
	for (size_t i = 0; tab && i < sz / sizeof *tab; i++) {
		const ElfW(Rela) *r = &tab[i];
		if (skip_jmprel && di->jmprel && r >= di->jmprel && r < jend)
			continue;
		uint32_t type = ELF64_R_TYPE(r->r_info);
		if (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT)
			continue;
		uint32_t si = ELF64_R_SYM(r->r_info);
		if (si == 0)
			continue;
		size_t off = di->symtab[si].st_name;
		if (di->strsz && off >= di->strsz)
			continue;
		struct got_slot s = {
		    .name = di->strtab + off,
		    .slot = (void **)(info->dlpi_addr + r->r_offset),
		    .type = type,
		};
		fn(&s, arg);
		n++;
	}
	return n;
}

int got_walk(const struct dl_phdr_info *info, got_fn fn, void *arg)
{
	struct dyninfo di;
	if (read_dynamic(info, &di) < 0)
		return -1;
	int n = walk_table(info, &di, di.jmprel, di.jmprelsz, 0, fn, arg);
	return n + walk_table(info, &di, di.rela, di.relasz, 1, fn, arg);
}

void got_called_through(const struct dl_phdr_info *info, void **const *slots, int n,
			unsigned char *called)
{
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X) || ph->p_memsz < 6)
			continue;
		const uint8_t *c = (const uint8_t *)(info->dlpi_addr + ph->p_vaddr);
		const uint8_t *end = c + ph->p_memsz - 5;
		/* ff 15 / ff 25 disp32: the slot is at the next instruction + disp32. */
		for (const uint8_t *p = c; (p = memchr(p, 0xff, (size_t)(end - p))); p++) {
			if (p[1] != 0x15 && p[1] != 0x25)
				continue;
			int32_t disp;
			memcpy(&disp, p + 2, sizeof disp);
			void **target = (void **)((uintptr_t)p + 6 + (intptr_t)disp);
			for (int k = 0; k < n; k++)
				if (slots[k] == target)
					called[k] = 1;
		}
	}
}

/* The protection the loader left on the page holding addr: PT_GNU_RELRO pages (rounded
 * down at both ends, as glibc's _dl_protect_relro does) are read-only, other pages keep
 * their PT_LOAD flags. */
static int page_prot(const struct dl_phdr_info *info, uintptr_t addr, uintptr_t pg)
{
	int prot = -1;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t s = info->dlpi_addr + ph->p_vaddr;
		if (ph->p_type == PT_GNU_RELRO) {
			uintptr_t rs = s & ~(pg - 1), re = (s + ph->p_memsz) & ~(pg - 1);
			if (addr >= rs && addr < re)
				return PROT_READ;
		}
		if (ph->p_type == PT_LOAD && addr >= s && addr < s + ph->p_memsz && prot < 0)
			prot = (ph->p_flags & PF_R ? PROT_READ : 0) |
			       (ph->p_flags & PF_W ? PROT_WRITE : 0) |
			       (ph->p_flags & PF_X ? PROT_EXEC : 0);
	}
	return prot;
}

/* Writes slots[i..j) of one page, whose protection is prot: made writable once for all. */
static int write_page(void **const *slots, void *const *values, const int *ix, int i, int j,
		      int prot, uintptr_t pg)
{
	void *page = (void *)((uintptr_t)slots[ix[i]] & ~(pg - 1));
	if (!(prot & PROT_WRITE) && mprotect(page, pg, prot | PROT_WRITE) < 0)
		return 0;
	for (int k = i; k < j; k++)
		__atomic_store_n(slots[ix[k]], values[ix[k]], __ATOMIC_RELEASE);
	if (!(prot & PROT_WRITE))
		mprotect(page, pg, prot);
	return j - i;
}

int got_write_all(const struct dl_phdr_info *info, void **const *slots, void *const *values, int n)
{
	uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
	int ix[GOT_WRITE_MAX];
	if (n > GOT_WRITE_MAX)
		n = GOT_WRITE_MAX;
	/* In address order, so that the slots of a page are together (insertion sort: a
	 * module's slots come mostly in order already). */
	for (int i = 0; i < n; i++) {
		int k = i;
		for (; k > 0 && slots[ix[k - 1]] > slots[i]; k--)
			ix[k] = ix[k - 1];
		ix[k] = i;
	}
	int written = 0;
	for (int i = 0, j; i < n; i = j) {
		uintptr_t page = (uintptr_t)slots[ix[i]] & ~(pg - 1);
		for (j = i + 1; j < n && ((uintptr_t)slots[ix[j]] & ~(pg - 1)) == page; j++)
			;
		int prot = page_prot(info, (uintptr_t)slots[ix[i]], pg);
		if (prot >= 0)
			written += write_page(slots, values, ix, i, j, prot, pg);
	}
	return written;
}
