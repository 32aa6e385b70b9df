/* view-run.h - the built heapprof-view run from a unit test (test-view, test-view-v2).
 *
 * Contract: vr_setup makes a fresh directory /tmp/NAME.XXXXXX (vr_dir) and names vr_out and
 * vr_err in it; vr_view runs VIEW_PATH with its arguments (printf-style), standard output to
 * vr_out and standard error to vr_err, and returns the exit status, failing the test if it
 * did not exit; vr_view_from does the same with standard input a pipe from a file.
 * vr_json_check and vr_py run python3 on vr_out; vr_teardown removes the directory.
 */
#ifndef HEAPPROF_TESTS_VIEW_RUN_H
#define HEAPPROF_TESTS_VIEW_RUN_H

extern char vr_dir[64], vr_out[96], vr_err[96];

int vr_setup(const char *name);
int vr_teardown(void);

int vr_view_from(const char *piped, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define vr_view(...) vr_view_from(NULL, __VA_ARGS__)

/* Whether python3 -c prog exits 0, with argv[1] = vr_out and argv[2] = arg. */
int vr_py(const char *prog, const char *arg);
/* Whether vr_out parses as JSON and the expression over it (d) holds; prints d if not. */
int vr_json_check(const char *expr);
/* Whether the file holds needle. */
int vr_file_has(const char *path, const char *needle);

#endif
