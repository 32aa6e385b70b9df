/* fuzz-input.h - what both fuzz targets share: the input as a file, and the checks.
 *
 * Contract: the parsers read from a file descriptor, so each input is copied into one
 * memfd, rewound, for every run (no file on disk, nothing left behind). fuzz_check_line
 * aborts, so that libFuzzer saves the input, when an error message is empty or is more
 * than one line.
 */
#ifndef HEAPPROF_FUZZ_INPUT_H
#define HEAPPROF_FUZZ_INPUT_H

#define _GNU_SOURCE /* memfd_create */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static inline void fuzz_die(const char *what, const char *why)
{
	fprintf(stderr, "%s: %s\n", what, why);
	abort();
}

static inline int fuzz_input_open(const char *name)
{
	int fd = memfd_create(name, MFD_CLOEXEC);
	if (fd < 0)
		fuzz_die("memfd_create", strerror(errno));
	return fd;
}

static inline void fuzz_input_load(int fd, const uint8_t *data, size_t size)
{
	if (ftruncate(fd, 0) != 0)
		fuzz_die("ftruncate", strerror(errno));
	size_t done = 0;
	while (done < size) {
		ssize_t n = pwrite(fd, data + done, size - done, (off_t)done);
		if (n <= 0)
			fuzz_die("pwrite", n < 0 ? strerror(errno) : "no progress");
		done += (size_t)n;
	}
	if (lseek(fd, 0, SEEK_SET) != 0)
		fuzz_die("lseek", strerror(errno));
}

/* msg: an error the code under test reported, or NULL for none. */
static inline void fuzz_check_line(const char *msg)
{
	if (!msg)
		return;
	if (!msg[0] || strchr(msg, '\n'))
		fuzz_die("error message is not one line", msg);
}

#endif
