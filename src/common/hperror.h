/* hperror.h - the one-line error every failure ends in.
 *
 * Contract: a failing step fills a struct hp_error with one line that says what failed and
 * what the user can do about it ("...: try ..."), no trailing newline. The first error set
 * wins, so a cleanup failure cannot hide its cause. Commands print it prefixed with their
 * name and exit nonzero.
 */
#ifndef HEAPPROF_HPERROR_H
#define HEAPPROF_HPERROR_H

struct hp_error {
	int set;
	char msg[512];
};

void hp_error_set(struct hp_error *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
