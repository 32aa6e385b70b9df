#define _GNU_SOURCE
#include "view-run.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "config.h"

char vr_dir[64], vr_out[96], vr_err[96];

int vr_setup(const char *name)
{
	snprintf(vr_dir, sizeof vr_dir, "/tmp/%s.XXXXXX", name);
	if (!mkdtemp(vr_dir))
		return -1;
	snprintf(vr_out, sizeof vr_out, "%s/out", vr_dir);
	snprintf(vr_err, sizeof vr_err, "%s/err", vr_dir);
	return 0;
}

int vr_teardown(void)
{
	char cmd[160];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", vr_dir);
	return system(cmd) == 0 ? 0 : -1;
}

int vr_view_from(const char *piped, const char *fmt, ...)
{
	char args[512], cmd[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(args, sizeof args, fmt, ap);
	va_end(ap);
	snprintf(cmd, sizeof cmd, "%s%s%s %s %s >%s 2>%s", piped ? "cat " : "", piped ? piped : "",
		 piped ? " |" : "", VIEW_PATH, args, vr_out, vr_err);
	int rc = system(cmd);
	assert_true(WIFEXITED(rc));
	return WEXITSTATUS(rc);
}

/* Without a shell, so that prog and arg need no quoting. */
int vr_py(const char *prog, const char *arg)
{
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		execlp("python3", "python3", "-c", prog, vr_out, arg, (char *)NULL);
		_exit(127);
	}
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

int vr_json_check(const char *expr)
{
	return vr_py("import json,sys; d=json.load(open(sys.argv[1])); "
		     "r=eval(sys.argv[2]); print(repr(d)[:3000]) if not r else 0; "
		     "sys.exit(0 if r else 1)",
		     expr);
}

int vr_file_has(const char *path, const char *needle)
{
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	char *buf = NULL;
	size_t cap = 0, n = 0, got;
	do {
		if (n + 4096 > cap) {
			cap = cap ? cap * 2 : 65536;
			char *more = realloc(buf, cap);
			assert_non_null(more);
			buf = more;
		}
		got = fread(buf + n, 1, cap - n, f);
		n += got;
	} while (got);
	fclose(f);
	int found = memmem(buf, n, needle, strlen(needle)) != NULL;
	free(buf);
	return found;
}
