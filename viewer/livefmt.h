/* livefmt.h - the live view's text: sizes, rates, durations and the sparkline.
 *
 * Contract: pure functions writing NUL-terminated text that always fits in the buffer
 * given (truncated, never overflowing); numbers are shown in at most 7 columns. Text is
 * measured and cut in the characters of the locale's LC_CTYPE, never inside one.
 */
#ifndef HEAPPROF_VIEWER_LIVEFMT_H
#define HEAPPROF_VIEWER_LIVEFMT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* 1023 -> "1023", 1536 -> "1.5K", 10 MiB -> "10M"; binary units up to E. */
void hp_fmt_size(char *buf, size_t cap, double v);
/* As hp_fmt_size with a sign: "+1.5K", "-300", "0". */
void hp_fmt_signed_size(char *buf, size_t cap, double v);
/* Seconds as "M:SS" or "H:MM:SS". */
void hp_fmt_duration(char *buf, size_t cap, uint64_t seconds);
/* The bytes of s's longest beginning that fits in bytes and in cols columns of the
 * terminal, in the locale's characters (a byte that is none counts one column), never
 * cut inside one; its columns in *width when width is not NULL. */
size_t hp_text_fit(const char *s, size_t bytes, size_t cols, size_t *width);
/* A command line in at most width columns: whole if it fits, else with its program's
 * directory shown as "..." (".../server --port 80"), else cut with "..." at the end. */
void hp_fmt_command(char *buf, size_t cap, const char *cmd, size_t width);
/* One cell per value, scaled between the smallest and the largest of them: the Unicode
 * blocks U+2581..U+2588 when utf8, else "_.:-=+*#". The cells of the newest values
 * are kept when they do not all fit. */
void hp_sparkline(char *buf, size_t cap, const uint64_t *vals, size_t n, bool utf8);

#endif
