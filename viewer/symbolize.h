/* symbolize.h - code addresses of a target to function, file, line and inlined frames.
 *
 * Contract: modules are reported as the stream announces them (id, path, bias, address
 * range, build-id); each one's file is opened at once, through /proc/PID/root when a pid
 * is given, so it resolves while the target is still alive, and so is its debug info,
 * unless the file holds it or it is found by build-id under an absolute debuginfo
 * directory (neither of which the target's end takes away): then it is loaded when an
 * address first needs it. Debug info comes from the
 * file itself or from separate debug files (build-id, .gnu_debuglink, /usr/lib/debug),
 * searched along HEAPPROF_DEBUGINFO_PATH: elfutils' --debuginfo-path syntax, read once by
 * hp_sym_new; unset, ":.debug:/usr/lib/debug" (beside the file, in its .debug/, and under
 * /usr/lib/debug by the file's path and by ROOT/.build-id/xx/rest.debug). Without debug
 * info a frame gets only its ELF symbol (.symtab, else .dynsym), or nothing. HP_FRAME_CUT
 * (hpformat.h) resolves to one frame named HP_FRAME_CUT_TEXT, in no module.
 * A module marked unloaded keeps resolving until a later module overlapping its range
 * replaces it. A module whose file cannot be opened, or whose build-id differs from the
 * one announced, still owns its range but resolves nothing. Results are for `addr - 1`,
 * since stack frames are return addresses. Nothing here trusts its input: lengths are
 * bounded by the callers' records and every libdw failure only means "unresolved".
 */
#ifndef HEAPPROF_VIEWER_SYMBOLIZE_H
#define HEAPPROF_VIEWER_SYMBOLIZE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "hpformat.h"

#define HP_SYM_MAX_FRAMES HP_MAX_INLINE /* deepest inline chain reported for one address */

struct hp_sym_frame {
	char *function; /* demangled; NULL if unknown */
	char *file;	/* NULL if unknown */
	uint32_t line;	/* 0 if unknown */
	uint32_t column;
};

struct hp_sym_result {
	uint32_t module_id; /* 0: the address lies in no known module */
	uint32_t nframes;   /* 0: unresolved; else innermost inlined first, real function last */
	struct hp_sym_frame frames[HP_SYM_MAX_FRAMES];
};

struct hp_symbolizer;

/* pid > 0: module paths are opened as /proc/PID/root/<path> (and an empty path as
 * /proc/PID/exe); pid == 0: paths are used as given. NULL when out of memory. */
struct hp_symbolizer *hp_sym_new(pid_t pid);
void hp_sym_free(struct hp_symbolizer *s);

/* Reports a module. path is NUL-terminated; build_id may be NULL when build_id_len is 0.
 * A module with the same id or an overlapping range is replaced. Returns 0 when the file
 * was opened and matches, -1 when the module only owns its range. */
int hp_sym_add_module(struct hp_symbolizer *s, uint32_t id, const char *path, uint64_t bias,
		      uint64_t start, uint64_t end, const uint8_t *build_id, size_t build_id_len);
/* Marks module id unloaded: it keeps its symbols until its range is reused. */
void hp_sym_remove_module(struct hp_symbolizer *s, uint32_t id);

/* The module that owns addr now, or 0. */
uint32_t hp_sym_module_at(const struct hp_symbolizer *s, uint64_t addr);

/* Resolves a return address. Always fills *out (release it with hp_sym_result_clear);
 * returns out->nframes. */
int hp_sym_resolve(struct hp_symbolizer *s, uint64_t addr, struct hp_sym_result *out);
void hp_sym_result_clear(struct hp_sym_result *r);

#endif
