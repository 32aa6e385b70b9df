#include "profile-writer.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "hpstream.h"

#define CMDLINE_MAX (1u << 20)
/* Level 1 rather than 3: 3 makes binary-trees' profile a quarter smaller at the same cost,
 * but a server-like stream only 4% smaller for 60% more compression time, and the viewer
 * shares the machine with the program it profiles (docs/performance.md, "Profile size"). */
#define ZSTD_LEVEL 1

static size_t read_proc(pid_t pid, const char *name, char *buf, size_t cap)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, name);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	size_t got = 0;
	while (got < cap) {
		ssize_t n = read(fd, buf + got, cap - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	return got;
}

void hp_proc_info_read(pid_t pid, struct hp_proc_info *si)
{
	memset(si, 0, sizeof *si);
	si->pid = pid;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	si->attach_real_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;

	size_t n = read_proc(pid, "comm", si->comm, sizeof si->comm - 1);
	while (n > 0 && si->comm[n - 1] == '\n')
		n--;
	si->comm[n] = '\0';

	char path[64];
	snprintf(path, sizeof path, "/proc/%d/exe", (int)pid);
	ssize_t len = readlink(path, si->exe, sizeof si->exe - 1);
	si->exe[len > 0 ? len : 0] = '\0';

	si->cmdline = malloc(CMDLINE_MAX);
	if (si->cmdline) {
		si->cmdline_len = read_proc(pid, "cmdline", si->cmdline, CMDLINE_MAX - 1);
		while (si->cmdline_len > 0 && si->cmdline[si->cmdline_len - 1] == '\0')
			si->cmdline_len--;
		char *shrunk = realloc(si->cmdline, si->cmdline_len + 1);
		if (shrunk)
			si->cmdline = shrunk;
		si->cmdline[si->cmdline_len] = '\0';
	}

	if (gethostname(si->host, sizeof si->host - 1) != 0)
		si->host[0] = '\0';
	si->host[sizeof si->host - 1] = '\0';
}

void hp_proc_info_release(struct hp_proc_info *si)
{
	free(si->cmdline);
	si->cmdline = NULL;
	si->cmdline_len = 0;
}

/* Compresses len bytes of src. ZSTD_e_flush and ZSTD_e_end also write out all that is
 * compressed, so the file then ends at a point a reader decodes up to. */
static int compress(struct hp_profile_writer *w, const void *src, size_t len,
		    ZSTD_EndDirective mode)
{
	ZSTD_inBuffer in = {src, len, 0};
	for (;;) {
		ZSTD_outBuffer out = {w->z, w->z_cap, w->z_len};
		size_t left = ZSTD_compressStream2(w->zc, &out, &in, mode);
		if (ZSTD_isError(left))
			return ZSTD_getErrorCode(left) == ZSTD_error_memory_allocation ? -ENOMEM
										       : -EIO;
		w->z_len = out.pos;
		int done = mode == ZSTD_e_continue ? in.pos == in.size : left == 0;
		if (w->z_len == w->z_cap || (done && mode != ZSTD_e_continue)) {
			int rc = hp_write_all(w->fd, w->z, w->z_len);
			w->z_len = 0;
			if (rc < 0)
				return rc;
		}
		if (done)
			return 0;
	}
}

static int start_frame(struct hp_profile_writer *w)
{
	w->zc = ZSTD_createCCtx();
	w->z_cap = ZSTD_CStreamOutSize();
	w->z = malloc(w->z_cap);
	if (!w->zc || !w->z)
		return -ENOMEM;
	/* The checksum makes damage anywhere in a finished file show as an error on reading. */
	if (ZSTD_isError(ZSTD_CCtx_setParameter(w->zc, ZSTD_c_compressionLevel, ZSTD_LEVEL)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(w->zc, ZSTD_c_checksumFlag, 1)))
		return -EINVAL;
	struct hp_file_header h = {.version = HP_FORMAT_VERSION};
	memcpy(h.magic, HP_MAGIC, sizeof h.magic);
	return compress(w, &h, sizeof h, ZSTD_e_flush);
}

static void release(struct hp_profile_writer *w)
{
	ZSTD_freeCCtx(w->zc);
	free(w->z);
	free(w->buf);
	free(w->out);
	w->zc = NULL;
	w->z = w->buf = w->out = NULL;
	w->z_cap = w->z_len = w->cap = w->out_cap = w->out_len = 0;
}

int hp_pw_open(struct hp_profile_writer *w, const char *path, struct hp_error *err)
{
	memset(w, 0, sizeof *w);
	w->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (w->fd < 0) {
		hp_error_set(err, "cannot create %s: %s: try another --output path", path,
			     strerror(errno));
		return -1;
	}
	int rc = start_frame(w);
	if (rc < 0) {
		hp_error_set(err, "cannot write %s: %s", path, strerror(-rc));
		close(w->fd);
		w->fd = -1;
		release(w);
		return -1;
	}
	return 0;
}

static int grow(uint8_t **buf, size_t *cap, size_t len)
{
	if (len <= *cap)
		return 0;
	size_t ncap = *cap ? *cap : 4096;
	while (ncap < len)
		ncap *= 2;
	uint8_t *nb = realloc(*buf, ncap);
	if (!nb)
		return -ENOMEM;
	*buf = nb;
	*cap = ncap;
	return 0;
}

static int reserve(struct hp_profile_writer *w, size_t len)
{
	return grow(&w->buf, &w->cap, len);
}

static int flush(struct hp_profile_writer *w, ZSTD_EndDirective mode)
{
	int rc = compress(w, w->out, w->out_len, mode);
	w->out_len = 0;
	return rc;
}

static uint8_t *put(uint8_t *p, const void *src, size_t len)
{
	if (len)
		memcpy(p, src, len);
	return p + len;
}

static uint16_t len16(const char *s)
{
	size_t n = s ? strlen(s) : 0;
	return n > UINT16_MAX ? UINT16_MAX : (uint16_t)n;
}

int hp_pw_session(struct hp_profile_writer *w, const struct hp_proc_info *si)
{
	struct hp_session h = {
	    .pid = (uint32_t)si->pid,
	    .comm_len = len16(si->comm),
	    .exe_len = len16(si->exe),
	    .cmdline_len = (uint32_t)si->cmdline_len,
	    .host_len = len16(si->host),
	    .attach_real_ns = si->attach_real_ns,
	};
	size_t len = sizeof h + h.comm_len + h.exe_len + h.cmdline_len + h.host_len;
	int rc = reserve(w, len);
	if (rc < 0)
		return rc;
	uint8_t *p = put(w->buf, &h, sizeof h);
	p = put(p, si->comm, h.comm_len);
	p = put(p, si->exe, h.exe_len);
	p = put(p, si->cmdline, h.cmdline_len);
	put(p, si->host, h.host_len);
	return hp_pw_record(w, HP_REC_SESSION, w->buf, (uint32_t)len);
}

int hp_pw_record(struct hp_profile_writer *w, uint32_t type, const void *body, uint32_t len)
{
	/* Large records (SITES of a busy round) go to the compressor as they are, without a
	 * copy: only their header is buffered. */
	int large = len >= HP_PW_FLUSH_AT;
	size_t n = sizeof(struct hp_rec_hdr) + (large ? 0 : len);
	int rc = grow(&w->out, &w->out_cap, w->out_len + n);
	if (rc < 0)
		return rc;
	uint8_t *p = w->out + w->out_len;
	p += hp_rec_put_hdr(p, type, len);
	if (large) {
		w->out_len += n;
		rc = flush(w, ZSTD_e_continue);
		return rc < 0 ? rc : compress(w, body, len, ZSTD_e_flush);
	}
	put(p, body, len);
	w->out_len += n;
	if (type == HP_REC_ROUND || type == HP_REC_END || type == HP_REC_SESSION ||
	    w->out_len >= HP_PW_FLUSH_AT)
		rc = flush(w, ZSTD_e_flush);
	return rc;
}

int hp_pw_symbol(struct hp_profile_writer *w, uint64_t addr, const struct hp_sym_result *r)
{
	struct hp_symbol h = {.addr = addr, .module_id = r->module_id, .nframes = r->nframes};
	size_t len = sizeof h;
	for (uint32_t i = 0; i < r->nframes; i++)
		len += sizeof(struct hp_symbol_frame) + len16(r->frames[i].function) +
		       len16(r->frames[i].file);
	int rc = reserve(w, len);
	if (rc < 0)
		return rc;
	uint8_t *p = put(w->buf, &h, sizeof h);
	for (uint32_t i = 0; i < r->nframes; i++) {
		const struct hp_sym_frame *f = &r->frames[i];
		struct hp_symbol_frame sf = {
		    .line = f->line,
		    .column = f->column,
		    .func_len = len16(f->function),
		    .file_len = len16(f->file),
		};
		p = put(p, &sf, sizeof sf);
		p = put(p, f->function, sf.func_len);
		p = put(p, f->file, sf.file_len);
	}
	return hp_pw_record(w, HP_REC_SYMBOL, w->buf, (uint32_t)len);
}

int hp_pw_close(struct hp_profile_writer *w)
{
	int rc = w->fd >= 0 ? flush(w, ZSTD_e_end) : 0;
	if (w->fd >= 0 && close(w->fd) != 0 && rc == 0)
		rc = -errno;
	w->fd = -1;
	release(w);
	return rc;
}
