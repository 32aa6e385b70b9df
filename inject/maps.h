/* maps.h - what /proc/PID/maps says about the modules of a target.
 *
 * Contract: pure readers of /proc/PID/maps, nothing is stopped. A module is every mapping
 * with the same path; its base is the start of its lowest mapping (file offset 0 for an
 * ELF object) and [lo, hi) spans all of its mappings. The payload is any mapping whose
 * name says heapprof (the memfd it is loaded from is named "heapprof").
 */
#ifndef HEAPPROF_INJECT_MAPS_H
#define HEAPPROF_INJECT_MAPS_H

#include <limits.h>
#include <stdint.h>
#include <sys/types.h>

struct hp_module_range {
	char path[PATH_MAX];
	uint64_t base;
	uint64_t lo, hi;
};

typedef int (*hp_maps_match_fn)(const char *path);

int hp_maps_is_libc(const char *path);
int hp_maps_is_loader(const char *path);

/* 1 and *out filled when a mapping matches (all matching mappings are merged into one
 * range, the path is the first match's), 0 when none does, -1 with errno when maps can't
 * be read. */
int hp_maps_find(pid_t pid, hp_maps_match_fn match, struct hp_module_range *out);

/* A mapping of a file: [lo, hi) maps the file (device dev, inode ino) from offset off. */
struct hp_file_map {
	uint64_t lo, hi, off, dev, ino;
};

/* The process's mappings of files, in address order, in *v (malloc'd): how many, or -1. */
int hp_maps_files(pid_t pid, struct hp_file_map **v);

#endif
