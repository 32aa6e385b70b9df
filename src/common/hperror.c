#include "hperror.h"

#include <stdarg.h>
#include <stdio.h>

void hp_error_set(struct hp_error *e, const char *fmt, ...)
{
	if (!e || e->set)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof e->msg, fmt, ap);
	va_end(ap);
	e->set = 1;
}
