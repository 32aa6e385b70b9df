/* text.h - formatting for the human-readable output.
 *
 * Contract: every function writes a NUL-terminated string of at most n bytes into buf and
 * returns buf. text_clean makes file bytes safe for a terminal: control characters and bytes
 * that are not valid UTF-8 become '?', so untrusted names can never emit escape sequences.
 */
#ifndef HEAPPROF_VIEW_TEXT_H
#define HEAPPROF_VIEW_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include "loc.h"

/* "512 B", "1.50 KiB", "3.20 MiB", ... */
char *text_bytes(char *buf, size_t n, uint64_t bytes);
/* Signed byte counts (live numbers can be negative in damaged profiles). */
char *text_sbytes(char *buf, size_t n, int64_t bytes);
char *text_clean(char *buf, size_t n, const char *s);
/* The function of a location, or module+0xOFFSET when unresolved, or 0xADDR. */
char *text_function(char *buf, size_t n, const struct pf_loc *l);
/* "file:line", "file", or "" when unknown. */
char *text_where(char *buf, size_t n, const struct pf_loc *l);
/* A site's names: those of text_function and text_where, and for a level inlined into
 * another function that function and the line calling it, "xmalloc (inlined into
 * cache_store)" and "a.c:88, called at line 308" (or "at b.c:308" from another file). An
 * inline wrapper called from many places is then a different row for each. */
char *text_site_function(char *buf, size_t n, const struct pf_loc *l);
char *text_site_where(char *buf, size_t n, const struct pf_loc *l);
/* Seconds as "12.3 s", "4 min 05 s", "1 h 02 min". */
char *text_duration(char *buf, size_t n, uint64_t ns);

#endif
