/* dlcaller.c - dlopen on behalf of another module (see dlcaller.h). */
#include "dlcaller.h"

#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "payload.h"

/* Scratch for one call: two search lists and two paths. mmap'd rather than on the stack,
 * which may be a small thread's; a dlopen costs far more than the mapping. */
#define SERINFO_MAX 16384
struct scratch {
	union {
		Dl_serinfo si;
		char raw[SERINFO_MAX];
	} caller, self;
	char origin[PATH_MAX];
	char path[PATH_MAX];
};

static void *open_in(Lmid_t ns, hp_dlopen_fn real, const char *file, int mode)
{
	return ns == LM_ID_BASE ? real(file, mode) : dlmopen(ns, file, mode);
}

/* The directories dlopen searches for a bare name asked by lm, or NULL. */
static Dl_serinfo *search_list(struct link_map *lm, char *raw)
{
	Dl_serinfo size;
	if (dlinfo(lm, RTLD_DI_SERINFOSIZE, &size) != 0 || size.dls_size > SERINFO_MAX)
		return NULL;
	Dl_serinfo *si = (Dl_serinfo *)raw;
	si->dls_size = size.dls_size;
	si->dls_cnt = size.dls_cnt;
	return dlinfo(lm, RTLD_DI_SERINFO, si) == 0 ? si : NULL;
}

/* How many trailing entries a and b share: the directories every caller searches. */
static unsigned common_tail(const Dl_serinfo *a, const Dl_serinfo *b)
{
	unsigned n = 0;
	while (n < a->dls_cnt && n < b->dls_cnt &&
	       strcmp(a->dls_serpath[a->dls_cnt - 1 - n].dls_name,
		      b->dls_serpath[b->dls_cnt - 1 - n].dls_name) == 0)
		n++;
	return n;
}

/* file with $ORIGIN and ${ORIGIN} replaced by origin into out; 0, or -1 if too long.
 * $LIB and $PLATFORM are left to dlopen: they do not depend on the caller. */
static int expand_origin(const char *file, const char *origin, char *out, size_t cap)
{
	size_t o = 0, olen = strlen(origin);
	for (const char *p = file; *p;) {
		size_t skip = strncmp(p, "$ORIGIN", 7) == 0	? 7
			      : strncmp(p, "${ORIGIN}", 9) == 0 ? 9
								: 0;
		const char *src = skip ? origin : p;
		size_t len = skip ? olen : 1;
		if (o + len >= cap)
			return -1;
		memcpy(out + o, src, len);
		o += len;
		p += skip ? skip : 1;
	}
	out[o] = 0;
	return 0;
}

/* For a bare name: the first file in the directories the caller searches and the payload
 * does not (its DT_RPATH chain, LD_LIBRARY_PATH when it has a DT_RUNPATH, its DT_RUNPATH);
 * name itself when there is none. */
static void *search(struct scratch *s, struct link_map *lm, Lmid_t ns, hp_dlopen_fn real,
		    const char *name, int mode)
{
	Dl_info self_info;
	struct link_map *self = NULL;
	Dl_serinfo *mine = search_list(lm, s->caller.raw), *ours = NULL;
	if (dladdr1((void *)search, &self_info, (void **)&self, RTLD_DL_LINKMAP) && self)
		ours = search_list(self, s->self.raw);
	if (!mine || !ours)
		return open_in(ns, real, name, mode);
	unsigned own = mine->dls_cnt - common_tail(mine, ours);
	int tried = 0;
	for (unsigned i = 0; i < own; i++) {
		const char *dir = mine->dls_serpath[i].dls_name;
		size_t dl = strlen(dir), nl = strlen(name);
		if (dl + 1 + nl >= sizeof s->path)
			continue;
		memcpy(s->path, dir, dl);
		s->path[dl] = '/';
		memcpy(s->path + dl + 1, name, nl + 1);
		if (access(s->path, F_OK) != 0)
			continue;
		void *h = open_in(ns, real, s->path, mode);
		if (h) {
			/* The ones rejected on the way leave no error behind, as in glibc. */
			if (tried)
				dlerror();
			return h;
		}
		tried = 1;
	}
	return open_in(ns, real, name, mode);
}

void *hp_dlopen_as(const void *caller, hp_dlopen_fn real, hp_dlopen_fn probe, const char *file,
		   int mode)
{
	Dl_info info;
	struct link_map *lm = NULL;
	if (!file || !dladdr1(caller, &info, (void **)&lm, RTLD_DL_LINKMAP) || !lm)
		return real(file, mode);
	Lmid_t ns = LM_ID_BASE;
	if (dlinfo(lm, RTLD_DI_LMID, &ns) != 0)
		ns = LM_ID_BASE;
	int dst = strchr(file, '$') != NULL, bare = strchr(file, '/') == NULL;
	if (!dst && !bare)
		return open_in(ns, real, file, mode);
	/* An object already loaded under this name is found before any search. */
	if (bare) {
		void *h =
		    ns == LM_ID_BASE ? probe(file, mode) : dlmopen(ns, file, mode | RTLD_NOLOAD);
		if (h)
			return h;
		if (ns != LM_ID_BASE)
			dlerror();
	}
	struct scratch *s = hp_map(sizeof *s);
	if (!s)
		return open_in(ns, real, file, mode);
	void *h;
	if (dst && dlinfo(lm, RTLD_DI_ORIGIN, s->origin) == 0 &&
	    expand_origin(file, s->origin, s->path, sizeof s->path) == 0) {
		memcpy(s->origin, s->path, sizeof s->path);
		h = strchr(s->origin, '/') ? open_in(ns, real, s->origin, mode)
					   : search(s, lm, ns, real, s->origin, mode);
	} else {
		h = bare ? search(s, lm, ns, real, file, mode) : open_in(ns, real, file, mode);
	}
	hp_unmap(s, sizeof *s);
	return h;
}
