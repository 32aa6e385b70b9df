#include "profile.h"

#include <stdlib.h>
#include <string.h>

#define ELLIPSIS "\xe2\x80\xa6" /* U+2026 */

/* Length of an operator token at s whose '<' or '>' is not a template bracket. */
static size_t operator_len(const char *start, const char *s)
{
	static const char *const ops[] = {
	    "operator<=>", "operator<<=", "operator>>=", "operator<<", "operator>>", "operator<=",
	    "operator>=",  "operator->*", "operator->",	 "operator<",  "operator>"};
	/* "operator" must begin a name, not end one (my_operator<int>). */
	if (s > start && (s[-1] == '_' || (s[-1] >= 'a' && s[-1] <= 'z') ||
			  (s[-1] >= 'A' && s[-1] <= 'Z') || (s[-1] >= '0' && s[-1] <= '9')))
		return 0;
	for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
		if (strncmp(s, ops[i], strlen(ops[i])) == 0)
			return strlen(ops[i]);
	return 0;
}

char *pf_short_templates(const char *name)
{
	/* "<>" becomes "<…>": at most 5 bytes out for 2 in. */
	char *out = malloc(strlen(name) * 3 + 1);
	if (!out)
		return NULL;
	size_t o = 0;
	int depth = 0;
	for (const char *s = name; *s;) {
		size_t op = operator_len(name, s);
		if (op) {
			if (!depth) {
				memcpy(out + o, s, op);
				o += op;
			}
			s += op;
			continue;
		}
		if (*s == '<') {
			if (!depth++) {
				memcpy(out + o, "<" ELLIPSIS, 4);
				o += 4;
			}
		} else if (*s == '>' && depth) {
			if (!--depth)
				out[o++] = '>';
		} else if (!depth) {
			out[o++] = *s;
		}
		s++;
	}
	if (depth) {
		/* Unbalanced: not a template we understand; keep the name as it was. */
		free(out);
		return strdup(name);
	}
	out[o] = '\0';
	return out;
}

int pf_apply_style(struct profile *p, int names_only, int short_templates)
{
	for (size_t i = 0; i < p->nsymbols; i++) {
		struct pf_symbol *s = &p->symbols[i];
		for (uint32_t k = 0; k < s->nframes; k++) {
			struct pf_symframe *f = &s->frames[k];
			if (names_only) {
				free(f->file);
				f->file = NULL;
				f->line = 0;
				f->column = 0;
			}
			if (short_templates && f->function) {
				char *t = pf_short_templates(f->function);
				if (!t)
					return -1;
				free(f->function);
				f->function = t;
			}
		}
	}
	return 0;
}
