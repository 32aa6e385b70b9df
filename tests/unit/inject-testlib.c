/* inject-testlib.c - a stand-in payload for test-inject.
 *
 * Contract: built as a shared object with soname libheapprof-payload.so.1 and loaded by
 * the injector exactly like the real payload. heapprof_start makes a pipe, writes the file
 * header and a HELLO record echoing the pid and the start args to it and returns the read
 * end (-EBUSY if already started, -EINVAL on a wrong ABI version); heapprof_release_pipe
 * closes that read end; heapprof_stop closes the write end, so the reader sees EOF;
 * heapprof_free_memory does nothing and heapprof_collector always says no collector runs.
 * No threads, no hooks, no allocations.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "hpabi.h"
#include "hpformat.h"

int heapprof_start(const struct hp_start_args *args);
int heapprof_stop(void);
int heapprof_release_pipe(void);
int heapprof_free_memory(void);

struct hp_collector_state heapprof_collector;

static int write_fd = -1, read_fd = -1;

int heapprof_start(const struct hp_start_args *args)
{
	if (write_fd >= 0)
		return -EBUSY;
	if (!args || args->abi_version != HP_ABI_VERSION)
		return -EINVAL;
	int p[2];
	if (pipe2(p, O_CLOEXEC))
		return -errno;
	struct {
		struct hp_file_header fh;
		struct hp_rec_hdr rh;
		struct hp_hello hello;
	} out;
	memset(&out, 0, sizeof out);
	memcpy(out.fh.magic, HP_MAGIC, sizeof out.fh.magic);
	out.fh.version = HP_FORMAT_VERSION;
	out.rh.type = HP_REC_HELLO;
	out.rh.len = sizeof out.hello;
	out.hello.pid = (uint32_t)getpid();
	out.hello.mode = args->mode;
	out.hello.interval_ms = args->interval_ms;
	out.hello.max_depth = args->max_depth;
	out.hello.sample_rate = args->sample_rate;
	if (write(p[1], &out, sizeof out) != (ssize_t)sizeof out) {
		int e = errno;
		close(p[0]);
		close(p[1]);
		return -e;
	}
	write_fd = p[1];
	read_fd = p[0];
	return p[0];
}

int heapprof_release_pipe(void)
{
	if (read_fd >= 0)
		close(read_fd);
	read_fd = -1;
	return 0;
}

int heapprof_stop(void)
{
	if (write_fd >= 0)
		close(write_fd);
	write_fd = -1;
	return 0;
}

int heapprof_free_memory(void)
{
	return 0;
}
