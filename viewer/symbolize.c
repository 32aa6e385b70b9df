#include "symbolize.h"

#include <dwarf.h>
#include <elfutils/libdwfl.h>
#include <gelf.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* From libstdc++ (linked in); declared here so this file stays C. */
char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);

/* Each open module holds a file descriptor (two with separate debug info): stay well
 * inside the usual 1024 descriptor limit whatever the stream announces. */
#define MAX_OPEN_MODULES 400

/* libdw's search for separate debug files when given none (symbolize.h). */
#define DEFAULT_DEBUGINFO_PATH ":.debug:/usr/lib/debug"

/* A sized ELF symbol, for the lookups dwfl_module_addrinfo would make: it scans the whole
 * symbol table for every address, which a server's hundred thousand symbols times its
 * hundred thousand return addresses make hours. */
struct sym_entry {
	uint64_t start, end;
	uint64_t reach;	  /* the highest end among this entry and every one before it */
	const char *name; /* in libelf's string table: lives as long as the Dwfl */
	uint32_t index;	  /* in the symbol table: libdw prefers the first among equals */
	uint8_t bind;	  /* STB_ */
};

struct sym_module {
	uint32_t id;
	bool unloaded;
	uint64_t start, end;
	Dwfl *dwfl; /* NULL: owns its range, resolves nothing */
	Dwfl_Module *dm;
	struct sym_entry *syms; /* sorted by start, then index */
	size_t nsyms;
	uint64_t *labels; /* sorted values of the sizeless global and weak symbols */
	size_t nlabels;
};

struct hp_symbolizer {
	pid_t pid;
	struct sym_module *mods; /* sorted by start, ranges disjoint */
	size_t nmods, cap;
	size_t nopen;
	/* Every Dwfl points at these until it ends, so they live as long as the symbolizer. */
	char *debuginfo_path; /* NULL: libdw's default */
	Dwfl_Callbacks callbacks;
};

struct hp_symbolizer *hp_sym_new(pid_t pid)
{
	struct hp_symbolizer *s = calloc(1, sizeof *s);
	if (!s)
		return NULL;
	s->pid = pid;
	/* Read once, here: the search must not change in the middle of a profile. Passed
	 * as given, so it means what it would to elfutils' tools (--debuginfo-path). */
	const char *path = getenv("HEAPPROF_DEBUGINFO_PATH");
	if (path && !(s->debuginfo_path = strdup(path))) {
		free(s);
		return NULL;
	}
	s->callbacks = (Dwfl_Callbacks){
	    .find_elf = dwfl_build_id_find_elf,
	    .find_debuginfo = dwfl_standard_find_debuginfo,
	    .section_address = dwfl_offline_section_address,
	    .debuginfo_path = &s->debuginfo_path,
	};
	return s;
}

static void module_close(struct hp_symbolizer *s, struct sym_module *m)
{
	if (m->dwfl) {
		dwfl_end(m->dwfl);
		s->nopen--;
	}
	free(m->syms);
	free(m->labels);
	m->syms = NULL;
	m->labels = NULL;
	m->nsyms = m->nlabels = 0;
	m->dwfl = NULL;
	m->dm = NULL;
}

void hp_sym_free(struct hp_symbolizer *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->nmods; i++)
		module_close(s, &s->mods[i]);
	free(s->mods);
	free(s->debuginfo_path);
	free(s);
}

static void remove_at(struct hp_symbolizer *s, size_t i)
{
	module_close(s, &s->mods[i]);
	memmove(&s->mods[i], &s->mods[i + 1], (s->nmods - i - 1) * sizeof s->mods[0]);
	s->nmods--;
}

/* buf gets the path opened, which is where separate debug files are looked for. */
static int open_target_file(const struct hp_symbolizer *s, const char *path, char *buf, size_t len)
{
	int n;
	if (s->pid > 0 && path[0] == '\0')
		n = snprintf(buf, len, "/proc/%d/exe", (int)s->pid);
	else if (s->pid > 0 && path[0] == '/')
		n = snprintf(buf, len, "/proc/%d/root%s", (int)s->pid, path);
	else if (s->pid == 0 && path[0] == '/')
		n = snprintf(buf, len, "%s", path);
	else
		return -1; /* "linux-vdso.so.1" and other names that are no file */
	if (n < 0 || (size_t)n >= len)
		return -1;
	/* The path comes from the untrusted stream: a FIFO or a device must not block us. */
	int fd = open(buf, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	struct stat st;
	if (fd >= 0 && (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))) {
		close(fd);
		return -1;
	}
	return fd;
}

static int entry_cmp(const void *a, const void *b)
{
	const struct sym_entry *x = a, *y = b;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return (x->index > y->index) - (x->index < y->index);
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

/* The symbols libdw's lookup considers that have a size; sizeless ones (assembly labels)
 * are left to libdw, which alone knows their sections. No index when out of memory:
 * lookups are then slow, not wrong. */
static void index_symbols(struct sym_module *m)
{
	int n = dwfl_module_getsymtab(m->dm);
	if (n <= 1)
		return;
	m->syms = malloc((size_t)n * sizeof *m->syms);
	m->labels = malloc((size_t)n * sizeof *m->labels);
	if (!m->syms || !m->labels) {
		free(m->syms);
		free(m->labels);
		m->syms = NULL;
		m->labels = NULL;
		return;
	}
	for (int i = 1; i < n; i++) {
		GElf_Sym sym;
		GElf_Addr value;
		const char *name =
		    dwfl_module_getsym_info(m->dm, i, &sym, &value, NULL, NULL, NULL);
		int type = GELF_ST_TYPE(sym.st_info);
		if (!name || !name[0] || sym.st_shndx == SHN_UNDEF || type == STT_SECTION ||
		    type == STT_FILE || type == STT_TLS || value + sym.st_size < value)
			continue;
		if (sym.st_size == 0) {
			if (GELF_ST_BIND(sym.st_info) != STB_LOCAL)
				m->labels[m->nlabels++] = value;
			continue;
		}
		m->syms[m->nsyms++] = (struct sym_entry){.start = value,
							 .end = value + sym.st_size,
							 .name = name,
							 .index = (uint32_t)i,
							 .bind = GELF_ST_BIND(sym.st_info)};
	}
	qsort(m->syms, m->nsyms, sizeof *m->syms, entry_cmp);
	qsort(m->labels, m->nlabels, sizeof *m->labels, u64_cmp);
	uint64_t reach = 0;
	for (size_t i = 0; i < m->nsyms; i++) {
		if (m->syms[i].end > reach)
			reach = m->syms[i].end;
		m->syms[i].reach = reach;
	}
}

/* 1 if the main file holds DWARF itself. */
static bool has_own_dwarf(Dwfl_Module *dm)
{
	GElf_Addr bias;
	Elf *elf = dwfl_module_getelf(dm, &bias);
	size_t shstrndx;
	if (!elf || elf_getshdrstrndx(elf, &shstrndx) != 0)
		return false;
	for (Elf_Scn *scn = NULL; (scn = elf_nextscn(elf, scn));) {
		GElf_Shdr sh;
		const char *name =
		    gelf_getshdr(scn, &sh) ? elf_strptr(elf, shstrndx, sh.sh_name) : NULL;
		if (name && (!strcmp(name, ".debug_info") || !strcmp(name, ".zdebug_info")))
			return true;
	}
	return false;
}

/* 1 if a debug file for the build-id is in the .build-id tree of a debuginfo path entry
 * that names a directory of ours, not one beside the target's file (relative entries).
 * libdw looks there first (dwfl_standard_find_debuginfo). */
static bool build_id_file_here(const struct hp_symbolizer *s, const uint8_t *id, size_t len)
{
	if (len < 2 || len > 64)
		return false;
	char hex[129];
	for (size_t i = 0; i < len; i++)
		snprintf(hex + 2 * i, 3, "%02x", id[i]);
	const char *path = s->debuginfo_path ? s->debuginfo_path : DEFAULT_DEBUGINFO_PATH;
	for (const char *p = path; *p;) {
		size_t n = strcspn(p, ":");
		const char *dir = p;
		size_t dn = n;
		while (dn && (*dir == '+' || *dir == '-')) /* elfutils' CRC check flags */
			dir++, dn--;
		char file[4096];
		int k = snprintf(file, sizeof file, "%.*s/.build-id/%.2s/%s.debug", (int)dn, dir,
				 hex, hex + 2);
		if (dn && *dir == '/' && k > 0 && (size_t)k < sizeof file &&
		    access(file, R_OK) == 0)
			return true;
		p += n + (p[n] == ':');
	}
	return false;
}

/* Opens the module's file, and its debug info, now, while the target still maps it. The
 * debug info is loaded only when first asked for where the target's end cannot hide it
 * (in the file itself, opened here, or in our own debug directories): libc's from
 * libc6-dbg is compressed and was inflated whole as a session began, about 100 ms of the
 * viewer's CPU taken from the target, for frames that are symbolized only when the session
 * ends (records.h). */
static void module_open(struct hp_symbolizer *s, struct sym_module *m, const char *path,
			uint64_t bias, const uint8_t *build_id, size_t build_id_len)
{
	if (s->nopen >= MAX_OPEN_MODULES)
		return;
	char file[4096 + 64];
	int fd = open_target_file(s, path, file, sizeof file);
	if (fd < 0)
		return;
	Dwfl *dwfl = dwfl_begin(&s->callbacks);
	if (!dwfl) {
		close(fd);
		return;
	}
	dwfl_report_begin(dwfl);
	Dwfl_Module *dm = dwfl_report_elf(dwfl, path[0] ? path : "main", file, fd, bias, true);
	dwfl_report_end(dwfl, NULL, NULL);
	if (!dm) {
		close(fd);
		dwfl_end(dwfl);
		return;
	}
	if (build_id_len > 0) {
		const unsigned char *bits;
		GElf_Addr vaddr;
		int n = dwfl_module_build_id(dm, &bits, &vaddr);
		if (n <= 0 || (size_t)n != build_id_len || memcmp(bits, build_id, build_id_len)) {
			/* The file was replaced since the target loaded it: its symbols would lie.
			 */
			dwfl_end(dwfl);
			return;
		}
	}
	if (!has_own_dwarf(dm) && !build_id_file_here(s, build_id, build_id_len)) {
		Dwarf_Addr b;
		dwfl_module_getdwarf(dm, &b);
	}
	m->dwfl = dwfl;
	m->dm = dm;
	s->nopen++;
	index_symbols(m);
}

int hp_sym_add_module(struct hp_symbolizer *s, uint32_t id, const char *path, uint64_t bias,
		      uint64_t start, uint64_t end, const uint8_t *build_id, size_t build_id_len)
{
	if (start >= end)
		return -1;
	for (size_t i = 0; i < s->nmods;) {
		struct sym_module *o = &s->mods[i];
		if (o->id == id || (o->start < end && start < o->end))
			remove_at(s, i);
		else
			i++;
	}
	if (s->nmods == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 32;
		struct sym_module *n = realloc(s->mods, cap * sizeof *n);
		if (!n)
			return -1;
		s->mods = n;
		s->cap = cap;
	}
	size_t pos = 0;
	while (pos < s->nmods && s->mods[pos].start < start)
		pos++;
	memmove(&s->mods[pos + 1], &s->mods[pos], (s->nmods - pos) * sizeof s->mods[0]);
	s->nmods++;
	struct sym_module *m = &s->mods[pos];
	*m = (struct sym_module){.id = id, .start = start, .end = end};
	module_open(s, m, path, bias, build_id, build_id_len);
	return m->dwfl ? 0 : -1;
}

void hp_sym_remove_module(struct hp_symbolizer *s, uint32_t id)
{
	for (size_t i = 0; i < s->nmods; i++)
		if (s->mods[i].id == id)
			s->mods[i].unloaded = true;
}

static struct sym_module *find_module(const struct hp_symbolizer *s, uint64_t addr)
{
	size_t lo = 0, hi = s->nmods;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (s->mods[mid].end <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < s->nmods && s->mods[lo].start <= addr && addr < s->mods[lo].end)
		return &s->mods[lo];
	return NULL;
}

uint32_t hp_sym_module_at(const struct hp_symbolizer *s, uint64_t addr)
{
	const struct sym_module *m = find_module(s, addr);
	return m ? m->id : 0;
}

static char *name_dup(const char *name)
{
	if (!name || !name[0])
		return NULL;
	if (name[0] == '_' && name[1] == 'Z') {
		int status = -1;
		char *d = __cxa_demangle(name, NULL, NULL, &status);
		if (d && status == 0)
			return d;
		free(d);
	}
	return strdup(name);
}

static const char *die_name(Dwarf_Die *die)
{
	static const int attrs[] = {DW_AT_linkage_name, DW_AT_MIPS_linkage_name, DW_AT_name};
	for (size_t i = 0; i < sizeof attrs / sizeof attrs[0]; i++) {
		Dwarf_Attribute at;
		const char *n = dwarf_formstring(dwarf_attr_integrate(die, attrs[i], &at));
		if (n)
			return n;
	}
	return NULL;
}

static void push_frame(struct hp_sym_result *r, const char *func, const char *file, uint32_t line,
		       uint32_t column)
{
	struct hp_sym_frame *f = &r->frames[r->nframes++];
	f->function = name_dup(func);
	f->file = file && file[0] ? strdup(file) : NULL;
	f->line = line;
	f->column = column;
}

static const char *call_file(Dwarf_Die *die, Dwarf_Word idx)
{
	Dwarf_Die cu;
	Dwarf_Files *files;
	size_t nfiles;
	if (!dwarf_diecu(die, &cu, NULL, NULL) || dwarf_getsrcfiles(&cu, &files, &nfiles) != 0)
		return NULL;
	if (idx >= nfiles)
		return NULL;
	return dwarf_filesrc(files, idx, NULL, NULL);
}

static uint32_t udata_attr(Dwarf_Die *die, int name)
{
	Dwarf_Attribute at;
	Dwarf_Word v;
	if (dwarf_formudata(dwarf_attr(die, name, &at), &v) != 0 || v > UINT32_MAX)
		return 0;
	return (uint32_t)v;
}

/* Walks the scopes around pc from the innermost inlined instance out to the function
 * that holds the code: each inlined instance's call site is its caller's location. */
static void resolve_inlines(Dwfl_Module *dm, Dwarf_Addr pc, const char *file, uint32_t line,
			    uint32_t column, struct hp_sym_result *r)
{
	Dwarf_Addr bias;
	Dwarf_Die *cudie = dwfl_module_addrdie(dm, pc, &bias);
	if (!cudie)
		return;
	Dwarf_Die *scopes = NULL;
	int n = dwarf_getscopes(cudie, pc - bias, &scopes);
	if (n <= 0) {
		free(scopes);
		return;
	}
	/* dwarf_getscopes continues an inlined instance with its abstract definition's
	 * containers; the physical nesting (inlined-into chain) comes from the DIE itself. */
	Dwarf_Die inner = scopes[0];
	free(scopes);
	scopes = NULL;
	n = dwarf_getscopes_die(&inner, &scopes);
	for (int i = 0; i < n && r->nframes < HP_SYM_MAX_FRAMES; i++) {
		Dwarf_Die *d = &scopes[i];
		int tag = dwarf_tag(d);
		if (tag != DW_TAG_inlined_subroutine && tag != DW_TAG_subprogram &&
		    tag != DW_TAG_entry_point)
			continue;
		push_frame(r, die_name(d), file, line, column);
		if (tag != DW_TAG_inlined_subroutine)
			break;
		Dwarf_Attribute at;
		Dwarf_Word idx;
		file = NULL;
		if (dwarf_formudata(dwarf_attr(d, DW_AT_call_file, &at), &idx) == 0)
			file = call_file(d, idx);
		line = udata_attr(d, DW_AT_call_line);
		column = udata_attr(d, DW_AT_call_column);
	}
	free(scopes);
}

/* libdw's preference among symbols, higher is better. */
static int binding_value(uint8_t bind)
{
	return bind == STB_GLOBAL ? 3 : bind == STB_WEAK ? 2 : bind == STB_LOCAL ? 1 : 0;
}

/* Whether candidate c beats the best so far, as libdw's lookup decides in its scan. */
static bool better(const struct sym_entry *best, const struct sym_entry *c)
{
	if (!best || best->start < c->start || binding_value(best->bind) < binding_value(c->bind))
		return true;
	uint64_t bsize = best->end - best->start, csize = c->end - c->start;
	int bb = binding_value(best->bind), cb = binding_value(c->bind);
	return best->start == c->start &&
	       ((bsize > csize && bb <= cb) || (bsize >= csize && bb < cb));
}

#define MAX_CANDIDATES 64

/* The name dwfl_module_addrinfo gives pc, from the index. NULL with *exact false when only
 * libdw can tell (no sized symbol holds pc, or too many overlap it). */
static const char *indexed_name(const struct sym_module *m, uint64_t pc, bool *exact)
{
	*exact = false;
	if (!m->syms)
		return NULL;
	size_t lo = 0, hi = m->nsyms;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (m->syms[mid].start <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* Candidates hold pc; libdw tries globals before locals, each in table order. */
	const struct sym_entry *cand[MAX_CANDIDATES];
	size_t nc = 0;
	for (size_t i = lo; i-- > 0 && m->syms[i].reach > pc;) {
		if (m->syms[i].end <= pc)
			continue;
		if (nc == MAX_CANDIDATES)
			return NULL;
		cand[nc++] = &m->syms[i];
	}
	if (nc == 0)
		return NULL;
	/* Before the locals libdw would take a global label at pc itself. */
	if (bsearch(&pc, m->labels, m->nlabels, sizeof pc, u64_cmp))
		return NULL;
	const struct sym_entry *best = NULL;
	for (int pass = 0; pass < 2 && !best; pass++) {
		const struct sym_entry *prev = NULL;
		for (;;) {
			/* The next candidate of this pass in table order. */
			const struct sym_entry *next = NULL;
			for (size_t k = 0; k < nc; k++) {
				const struct sym_entry *c = cand[k];
				if ((c->bind == STB_LOCAL) != (pass == 1) ||
				    (prev && c->index <= prev->index) ||
				    (next && c->index >= next->index))
					continue;
				next = c;
			}
			if (!next)
				break;
			if (better(best, next))
				best = next;
			prev = next;
		}
	}
	*exact = true;
	return best->name;
}

int hp_sym_resolve(struct hp_symbolizer *s, uint64_t addr, struct hp_sym_result *out)
{
	out->module_id = 0;
	out->nframes = 0;
	if (addr == HP_FRAME_CUT) {
		push_frame(out, HP_FRAME_CUT_TEXT, NULL, 0, 0);
		return 1;
	}
	struct sym_module *m = find_module(s, addr);
	if (!m)
		return 0;
	out->module_id = m->id;
	if (!m->dm || addr == 0)
		return 0;
	Dwarf_Addr pc = addr - 1;

	const char *file = NULL;
	int line = 0, column = 0;
	Dwfl_Line *ln = dwfl_module_getsrc(m->dm, pc);
	if (ln)
		file = dwfl_lineinfo(ln, NULL, &line, &column, NULL, NULL);
	if (line < 0)
		line = 0;
	if (column < 0)
		column = 0;

	resolve_inlines(m->dm, pc, file, (uint32_t)line, (uint32_t)column, out);

	bool exact;
	const char *symname = indexed_name(m, pc, &exact);
	if (!exact) {
		GElf_Off off;
		GElf_Sym sym;
		symname = dwfl_module_addrinfo(m->dm, pc, &off, &sym, NULL, NULL, NULL);
	}
	if (out->nframes == 0) {
		if (symname || file)
			push_frame(out, symname, file, (uint32_t)line, (uint32_t)column);
	} else if (!out->frames[out->nframes - 1].function) {
		out->frames[out->nframes - 1].function = name_dup(symname);
	}
	return (int)out->nframes;
}

void hp_sym_result_clear(struct hp_sym_result *r)
{
	for (uint32_t i = 0; i < r->nframes; i++) {
		free(r->frames[i].function);
		free(r->frames[i].file);
	}
	r->nframes = 0;
}
