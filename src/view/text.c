#include "text.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

char *text_bytes(char *buf, size_t n, uint64_t bytes)
{
	static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
	if (bytes < 1024) {
		snprintf(buf, n, "%" PRIu64 " B", bytes);
		return buf;
	}
	double v = (double)bytes / 1024;
	size_t u = 0;
	while (v >= 1024 && u + 1 < sizeof units / sizeof units[0]) {
		v /= 1024;
		u++;
	}
	snprintf(buf, n, "%.2f %s", v, units[u]);
	return buf;
}

char *text_sbytes(char *buf, size_t n, int64_t bytes)
{
	if (bytes >= 0)
		return text_bytes(buf, n, (uint64_t)bytes);
	if (n < 2) {
		if (n)
			buf[0] = '\0';
		return buf;
	}
	buf[0] = '-';
	text_bytes(buf + 1, n - 1, -(uint64_t)bytes);
	return buf;
}

/* Length of a valid UTF-8 sequence at s, or 0; checks only the shape, which is what a
 * terminal cares about. */
static size_t utf8_seq(const unsigned char *s)
{
	size_t len = s[0] >= 0xf0 && s[0] <= 0xf4   ? 4
		     : s[0] >= 0xe0 && s[0] <= 0xef ? 3
		     : s[0] >= 0xc2 && s[0] <= 0xdf ? 2
						    : 0;
	for (size_t i = 1; i < len; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	return len;
}

char *text_clean(char *buf, size_t n, const char *str)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t o = 0;
	if (!n)
		return buf;
	while (s && *s && o + 1 < n) {
		if (*s >= 0x80) {
			size_t len = utf8_seq(s);
			if (len && o + len < n) {
				memcpy(buf + o, s, len);
				o += len;
				s += len;
				continue;
			}
			if (len)
				break; /* no room for the whole character */
			buf[o++] = '?';
			s++;
			continue;
		}
		buf[o++] = *s < 0x20 || *s == 0x7f ? '?' : (char)*s;
		s++;
	}
	buf[o] = '\0';
	return buf;
}

char *text_function(char *buf, size_t n, const struct pf_loc *l)
{
	if (l->function && *l->function)
		return text_clean(buf, n, l->function);
	if (l->module) {
		char mod[256];
		snprintf(buf, n, "%s+0x%" PRIx64, text_clean(mod, sizeof mod, l->module),
			 l->offset);
	} else {
		snprintf(buf, n, "0x%" PRIx64, l->addr);
	}
	return buf;
}

char *text_where(char *buf, size_t n, const struct pf_loc *l)
{
	char file[512];
	if (!l->file || !*l->file) {
		if (n)
			buf[0] = '\0';
		return buf;
	}
	text_clean(file, sizeof file, l->file);
	if (l->line)
		snprintf(buf, n, "%s:%" PRIu32, file, l->line);
	else
		snprintf(buf, n, "%s", file);
	return buf;
}

char *text_site_function(char *buf, size_t n, const struct pf_loc *l)
{
	text_function(buf, n, l);
	size_t len = strlen(buf);
	if (l->inlined && l->caller && *l->caller && len < n) {
		char caller[512];
		snprintf(buf + len, n - len, " (inlined into %s)",
			 text_clean(caller, sizeof caller, l->caller));
	}
	return buf;
}

char *text_site_where(char *buf, size_t n, const struct pf_loc *l)
{
	text_where(buf, n, l);
	size_t len = strlen(buf);
	if (!l->inlined || !l->call_line || len >= n)
		return buf;
	const char *sep = len ? ", called" : "called";
	if (!l->call_file || (l->file && strcmp(l->file, l->call_file) == 0)) {
		snprintf(buf + len, n - len, "%s at line %" PRIu32, sep, l->call_line);
	} else {
		char file[512];
		snprintf(buf + len, n - len, "%s at %s:%" PRIu32, sep,
			 text_clean(file, sizeof file, l->call_file), l->call_line);
	}
	return buf;
}

char *text_duration(char *buf, size_t n, uint64_t ns)
{
	uint64_t s = ns / 1000000000u;
	if (s < 60)
		snprintf(buf, n, "%.1f s", (double)ns / 1e9);
	else if (s < 3600)
		snprintf(buf, n, "%" PRIu64 " min %02" PRIu64 " s", s / 60, s % 60);
	else
		snprintf(buf, n, "%" PRIu64 " h %02" PRIu64 " min", s / 3600, s / 60 % 60);
	return buf;
}
