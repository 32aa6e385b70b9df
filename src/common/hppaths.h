/* hppaths.h - where our own files are.
 *
 * Contract: a command run from the build tree uses the payload and viewer built beside
 * it; an installed command uses the installed ones (PKGLIBDIR, PKGLIBEXECDIR). The
 * environment variables HEAPPROF_PAYLOAD and HEAPPROF_VIEWER override both (for tests
 * of a broken or missing payload).
 */
#ifndef HEAPPROF_HPPATHS_H
#define HEAPPROF_HPPATHS_H

#include <stddef.h>

/* Fill buf with the absolute path; 0 if the file exists, -1 (buf still filled with the
 * path looked for) if it does not. */
int hp_payload_path(char *buf, size_t len);
int hp_viewer_path(char *buf, size_t len);
/* The fallback payload (hpabi.h) in payload's directory, the same way. */
int hp_payload_fallback_path(const char *payload, char *buf, size_t len);

/* 1 if a /proc/PID/maps path is our payload: its memfd, or the payload file itself. A plain
 * substring test would also match a target that lives in a directory named heapprof-x. */
int hp_is_payload_mapping(const char *path);

#endif
