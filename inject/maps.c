#include "inject/maps.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');
	return s ? s + 1 : path;
}

int hp_maps_is_libc(const char *path)
{
	const char *b = base_name(path);
	return !strncmp(b, "libc.so", 7) || !strncmp(b, "libc-2.", 7);
}

int hp_maps_is_loader(const char *path)
{
	const char *b = base_name(path);
	return !strncmp(b, "ld-linux", 8) || !strncmp(b, "ld-2.", 5) || !strncmp(b, "ld64.so", 7);
}

static FILE *open_maps(pid_t pid)
{
	char name[64];
	snprintf(name, sizeof name, "/proc/%d/maps", (int)pid);
	return fopen(name, "re");
}

int hp_maps_find(pid_t pid, hp_maps_match_fn match, struct hp_module_range *out)
{
	FILE *f = open_maps(pid);
	if (!f)
		return -1;
	char line[PATH_MAX + 128];
	int found = 0;
	while (fgets(line, sizeof line, f)) {
		uint64_t start, end;
		int pathpos = 0;
		if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %*s %*s %*s %*s %n", &start, &end,
			   &pathpos) < 2 ||
		    pathpos == 0)
			continue;
		char *path = line + pathpos;
		path[strcspn(path, "\n")] = '\0';
		if (!*path || !match(path))
			continue;
		if (!found) {
			snprintf(out->path, sizeof out->path, "%s", path);
			out->base = start;
			out->lo = start;
			out->hi = end;
			found = 1;
			continue;
		}
		if (start < out->lo)
			out->lo = start;
		if (end > out->hi)
			out->hi = end;
		if (!strcmp(path, out->path) && start < out->base)
			out->base = start;
	}
	int rerr = ferror(f);
	fclose(f);
	if (rerr) {
		errno = EIO;
		return -1;
	}
	return found;
}

int hp_maps_files(pid_t pid, struct hp_file_map **v)
{
	FILE *f = open_maps(pid);
	if (!f)
		return -1;
	char line[PATH_MAX + 128];
	size_t n = 0, cap = 0;
	struct hp_file_map *m = NULL;
	while (fgets(line, sizeof line, f)) {
		struct hp_file_map e;
		unsigned major, minor;
		if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %*s %" SCNx64 " %x:%x %" SCNu64, &e.lo,
			   &e.hi, &e.off, &major, &minor, &e.ino) != 6 ||
		    !e.ino)
			continue;
		e.dev = (uint64_t)major << 32 | minor;
		if (n == cap) {
			cap = cap ? 2 * cap : 64;
			struct hp_file_map *nm = realloc(m, cap * sizeof *m);
			if (!nm) {
				free(m);
				fclose(f);
				errno = ENOMEM;
				return -1;
			}
			m = nm;
		}
		m[n++] = e;
	}
	fclose(f);
	*v = m;
	return (int)n;
}
