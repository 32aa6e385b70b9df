#include "hppaths.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hpabi.h"

/* True when this executable sits in the build tree it was configured in. */
static int in_build_tree(void)
{
	char exe[PATH_MAX], dir[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (n <= 0)
		return 0;
	exe[n] = '\0';
	char *slash = strrchr(exe, '/');
	if (!slash)
		return 0;
	*slash = '\0';
	if (!realpath(HP_BUILDDIR, dir))
		return 0;
	size_t dl = strlen(dir);
	/* Build-tree binaries live one directory below the top (src/, viewer/, tests/...). */
	char *parent = strrchr(exe, '/');
	return parent && (size_t)(parent - exe) == dl && strncmp(exe, dir, dl) == 0;
}

static int locate(char *buf, size_t len, const char *env, const char *built, const char *installed)
{
	const char *override = getenv(env);
	if (override && *override)
		snprintf(buf, len, "%s", override);
	else if (in_build_tree())
		snprintf(buf, len, "%s/%s", HP_BUILDDIR, built);
	else
		snprintf(buf, len, "%s", installed);
	return access(buf, R_OK) == 0 ? 0 : -1;
}

int hp_payload_path(char *buf, size_t len)
{
	return locate(buf, len, "HEAPPROF_PAYLOAD", "payload/" HP_PAYLOAD_FILE,
		      PKGLIBDIR "/" HP_PAYLOAD_FILE);
}

int hp_payload_fallback_path(const char *payload, char *buf, size_t len)
{
	const char *slash = strrchr(payload, '/');
	int dir = slash ? (int)(slash - payload + 1) : 0;
	snprintf(buf, len, "%.*s%s", dir, payload, HP_PAYLOAD_FALLBACK_FILE);
	return access(buf, R_OK) == 0 ? 0 : -1;
}

int hp_viewer_path(char *buf, size_t len)
{
	return locate(buf, len, "HEAPPROF_VIEWER", "viewer/heapprof-viewer",
		      PKGLIBEXECDIR "/heapprof-viewer");
}

int hp_is_payload_mapping(const char *path)
{
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	return strncmp(path, "/memfd:" HP_MEMFD_NAME, strlen("/memfd:" HP_MEMFD_NAME)) == 0 ||
	       strncmp(base, "heapprof-payload", strlen("heapprof-payload")) == 0;
}
