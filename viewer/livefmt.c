#define _GNU_SOURCE /* wcwidth */
#include "livefmt.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <wchar.h>

void hp_fmt_size(char *buf, size_t cap, double v)
{
	static const char units[] = "KMGTPE";
	if (v < 0)
		v = 0;
	if (v < 1024) {
		snprintf(buf, cap, "%.0f", v);
		return;
	}
	int u = -1;
	while (v >= 1024 && u < (int)sizeof units - 2) {
		v /= 1024;
		u++;
	}
	/* One decimal while it fits in four characters, and never "1024K". */
	if (v < 9.95)
		snprintf(buf, cap, "%.1f%c", v, units[u]);
	else
		snprintf(buf, cap, "%.0f%c", fmin(v, 1023), units[u]);
}

void hp_fmt_signed_size(char *buf, size_t cap, double v)
{
	if (cap < 2) {
		if (cap)
			buf[0] = '\0';
		return;
	}
	if (fabs(v) < 0.5) {
		snprintf(buf, cap, "0");
		return;
	}
	buf[0] = v < 0 ? '-' : '+';
	hp_fmt_size(buf + 1, cap - 1, fabs(v));
}

void hp_fmt_duration(char *buf, size_t cap, uint64_t s)
{
	if (s < 3600)
		snprintf(buf, cap, "%u:%02u", (unsigned)(s / 60), (unsigned)(s % 60));
	else
		snprintf(buf, cap, "%llu:%02u:%02u", (unsigned long long)(s / 3600),
			 (unsigned)(s / 60 % 60), (unsigned)(s % 60));
}

size_t hp_text_fit(const char *s, size_t bytes, size_t cols, size_t *width)
{
	mbstate_t st;
	memset(&st, 0, sizeof st);
	size_t i = 0, w = 0;
	while (i < bytes && s[i]) {
		wchar_t wc;
		size_t n = mbrtowc(&wc, s + i, strnlen(s + i, MB_LEN_MAX), &st);
		int cw = 1;
		if (n == (size_t)-1 || n == (size_t)-2) {
			n = 1;
			memset(&st, 0, sizeof st);
		} else if ((cw = wcwidth(wc)) < 0) {
			cw = 1;
		}
		if (i + n > bytes || w + (size_t)cw > cols)
			break;
		i += n;
		w += (size_t)cw;
	}
	if (width)
		*width = w;
	return i;
}

void hp_fmt_command(char *buf, size_t cap, const char *cmd, size_t width)
{
	static const char dots[] = "...";
	const size_t nd = sizeof dots - 1;
	const size_t room = cap - 1;
	size_t n = hp_text_fit(cmd, room, width, NULL);
	if (!cmd[n]) {
		snprintf(buf, cap, "%s", cmd);
		return;
	}
	/* The program's name and arguments say more than its directory. */
	size_t prog = strcspn(cmd, " ");
	const char *slash = NULL;
	for (size_t i = 0; i < prog; i++)
		if (cmd[i] == '/')
			slash = cmd + i;
	const char *tail = slash ? slash : cmd;
	const char *lead = slash ? dots : "";
	if (width < nd || room < nd) {
		snprintf(buf, cap, "%.*s", (int)(width < room ? width : room), dots);
		return;
	}
	if (slash && !tail[hp_text_fit(tail, room - nd, width - nd, NULL)]) {
		snprintf(buf, cap, "%s%s", lead, tail);
		return;
	}
	/* Cut at the end: what fits of the shortened form, then the dots. */
	size_t cols = width - nd, bytes = room - nd, ln = strlen(lead);
	ln = ln < cols ? ln : cols;
	ln = ln < bytes ? ln : bytes;
	n = hp_text_fit(tail, bytes - ln, cols - ln, NULL);
	snprintf(buf, cap, "%.*s%.*s%s", (int)ln, lead, (int)n, tail, dots);
}

void hp_sparkline(char *buf, size_t cap, const uint64_t *vals, size_t n, bool utf8)
{
	static const char *const blocks[] = {"\u2581", "\u2582", "\u2583", "\u2584",
					     "\u2585", "\u2586", "\u2587", "\u2588"};
	static const char ascii[] = "_.:-=+*#";
	size_t cell = utf8 ? strlen(blocks[0]) : 1;
	if (cap == 0)
		return;
	size_t fit = (cap - 1) / cell;
	if (n > fit) {
		vals += n - fit;
		n = fit;
	}
	uint64_t lo = UINT64_MAX, hi = 0;
	for (size_t i = 0; i < n; i++) {
		lo = vals[i] < lo ? vals[i] : lo;
		hi = vals[i] > hi ? vals[i] : hi;
	}
	char *p = buf;
	for (size_t i = 0; i < n; i++) {
		/* A flat line sits in the middle, so it reads as "steady", not "nothing". */
		int level =
		    hi == lo ? 3 : (int)((double)(vals[i] - lo) * 7 / (double)(hi - lo) + 0.5);
		if (utf8) {
			memcpy(p, blocks[level], cell);
			p += cell;
		} else {
			*p++ = ascii[level];
		}
	}
	*p = '\0';
}
