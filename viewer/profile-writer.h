/* profile-writer.h - writes the profile file: header, SESSION, copied records, SYMBOL.
 *
 * Contract: the file is created (or truncated) without following a symlink, mode 0644, and
 * holds one zstd frame (hpformat.h), closed by hp_pw_close. Records are buffered and
 * compressed and written out with a zstd flush at the header and at every SESSION, ROUND
 * and END record (and whenever HP_PW_FLUSH_AT bytes wait), so the file holds every closed
 * round as soon as the viewer has it, and a viewer killed at any point leaves a prefix that
 * decodes; a write error shows at the call that flushes. SYMBOL records use hpformat.h's
 * layout, with names and paths cut to what the 16-bit length fields hold.
 */
#ifndef HEAPPROF_VIEWER_PROFILE_WRITER_H
#define HEAPPROF_VIEWER_PROFILE_WRITER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "hperror.h"
#include "symbolize.h"

/* What the target is, read from /proc/PID when the session starts. */
struct hp_proc_info {
	pid_t pid;
	char comm[64];
	char exe[4096];
	char host[256];
	char *cmdline; /* NUL-separated arguments; malloc'd, may be NULL */
	size_t cmdline_len;
	uint64_t attach_real_ns;
};

/* Never fails: what cannot be read stays empty. */
void hp_proc_info_read(pid_t pid, struct hp_proc_info *si);
void hp_proc_info_release(struct hp_proc_info *si);

#define HP_PW_FLUSH_AT (1u << 20)

struct ZSTD_CCtx_s;

struct hp_profile_writer {
	int fd;
	uint8_t *buf; /* encodes one SESSION or SYMBOL record */
	size_t cap;
	uint8_t *out; /* records not yet compressed: the compressor takes them a batch at a
		       * time, up to the next flush point */
	size_t out_len, out_cap;
	struct ZSTD_CCtx_s *zc;
	uint8_t *z; /* compressed bytes not yet written */
	size_t z_len, z_cap;
};

/* Creates the file and writes its header. 0, or -1 with err set. */
int hp_pw_open(struct hp_profile_writer *w, const char *path, struct hp_error *err);
/* These return 0 or -errno. */
int hp_pw_session(struct hp_profile_writer *w, const struct hp_proc_info *si);
int hp_pw_record(struct hp_profile_writer *w, uint32_t type, const void *body, uint32_t len);
int hp_pw_symbol(struct hp_profile_writer *w, uint64_t addr, const struct hp_sym_result *r);
/* Writes what is buffered, then closes the file; 0 or -errno (a failed close can lose
 * written data). */
int hp_pw_close(struct hp_profile_writer *w);

#endif
