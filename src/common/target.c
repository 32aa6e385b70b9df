#include "target.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hppaths.h"
#include "session.h"

#define PF_KTHREAD_FLAG 0x00200000u
#define CAP_SYS_PTRACE_BIT 19

struct proc_stat {
	char state;
	unsigned long flags;
	unsigned long long start;
};

static int read_stat(pid_t pid, struct proc_stat *st)
{
	char name[64], buf[1024];
	snprintf(name, sizeof name, "/proc/%d/stat", (int)pid);
	FILE *f = fopen(name, "re");
	if (!f)
		return -1;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* comm may hold spaces and parentheses: the fields resume after the last ')'. */
	char *p = strrchr(buf, ')');
	if (!p)
		return -1;
	/* Fields 3 (state), 9 (flags) and 22 (starttime). */
	if (sscanf(p + 1,
		   " %c %*d %*d %*d %*d %*d %lu %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d "
		   "%*d %*d %llu",
		   &st->state, &st->flags, &st->start) != 3)
		return -1;
	return 0;
}

void hp_target_comm(pid_t pid, char *buf, size_t len)
{
	char name[64];
	snprintf(name, sizeof name, "/proc/%d/comm", (int)pid);
	snprintf(buf, len, "?");
	FILE *f = fopen(name, "re");
	if (!f)
		return;
	if (fgets(buf, (int)len, f))
		buf[strcspn(buf, "\n")] = '\0';
	fclose(f);
}

int hp_target_start_time(pid_t pid, unsigned long long *start)
{
	struct proc_stat st;
	if (read_stat(pid, &st) < 0)
		return -1;
	*start = st.start;
	return 0;
}

int hp_target_alive(pid_t pid, unsigned long long start)
{
	struct proc_stat st;
	if (read_stat(pid, &st) < 0)
		return 0;
	return st.state != 'Z' && st.state != 'X' && st.start == start;
}

int hp_target_stopped(pid_t pid)
{
	struct proc_stat st;
	return read_stat(pid, &st) == 0 && (st.state == 'T' || st.state == 't');
}

int hp_task_status_fields(pid_t pid, pid_t tid, unsigned n, const char *const *keys,
			  char *const *vals, size_t len)
{
	char name[96], line[512];
	if (!pid)
		snprintf(name, sizeof name, "/proc/self/status");
	else if (!tid)
		snprintf(name, sizeof name, "/proc/%d/status", (int)pid);
	else
		snprintf(name, sizeof name, "/proc/%d/task/%d/status", (int)pid, (int)tid);
	FILE *f = fopen(name, "re");
	if (!f)
		return -1;
	unsigned found = 0;
	uint64_t seen = 0;
	while (found < n && fgets(line, sizeof line, f))
		for (unsigned i = 0; i < n; i++) {
			size_t kl = strlen(keys[i]);
			if ((seen >> i & 1) || strncmp(line, keys[i], kl) || line[kl] != ':')
				continue;
			char *v = line + kl + 1;
			v += strspn(v, " \t");
			v[strcspn(v, "\n")] = '\0';
			snprintf(vals[i], len, "%s", v);
			seen |= 1ull << i;
			found++;
			break;
		}
	fclose(f);
	return (int)found;
}

int hp_task_status_field(pid_t pid, pid_t tid, const char *key, char *val, size_t len)
{
	return hp_task_status_fields(pid, tid, 1, &key, &val, len) == 1 ? 0 : -1;
}

/* The four ids (real, effective, saved, filesystem) of a Uid: or Gid: line. */
static int status_ids(pid_t pid, const char *key, unsigned long ids[4])
{
	char v[128];
	if (hp_task_status_field(pid, 0, key, v, sizeof v) < 0)
		return -1;
	return sscanf(v, "%lu %lu %lu %lu", &ids[0], &ids[1], &ids[2], &ids[3]) == 4 ? 0 : -1;
}

static int have_cap_sys_ptrace(void)
{
	char v[64];
	if (hp_task_status_field(0, 0, "CapEff", v, sizeof v) < 0)
		return 0;
	unsigned long long caps = strtoull(v, NULL, 16);
	return (caps >> CAP_SYS_PTRACE_BIT) & 1;
}

/* The kernel's ptrace-attach rule for credentials: every uid and gid of the target must be
 * ours, unless we have CAP_SYS_PTRACE. */
static int same_credentials(pid_t pid)
{
	unsigned long uids[4], gids[4];
	if (status_ids(pid, "Uid", uids) < 0 || status_ids(pid, "Gid", gids) < 0)
		return 1;
	unsigned long uid = getuid(), gid = getgid();
	for (int i = 0; i < 3; i++)
		if (uids[i] != uid || gids[i] != gid)
			return 0;
	return 1;
}

static void explain_not_permitted(pid_t pid, const char *comm, int open_errno, struct hp_error *err)
{
	unsigned long uids[4] = {0};
	char procfile[64];
	struct stat st;

	status_ids(pid, "Uid", uids);
	if (!have_cap_sys_ptrace() && !same_credentials(pid)) {
		hp_error_set(err,
			     "not permitted to profile process %d (%s): it belongs to uid %lu and "
			     "you are uid %lu without CAP_SYS_PTRACE: run heapprof-attach as that "
			     "user or as root",
			     (int)pid, comm, uids[1], (unsigned long)getuid());
		return;
	}
	/* The kernel hands the files of a non-dumpable process to root. */
	snprintf(procfile, sizeof procfile, "/proc/%d/mem", (int)pid);
	if (!have_cap_sys_ptrace() && stat(procfile, &st) == 0 && st.st_uid == 0 && uids[1] != 0) {
		hp_error_set(err,
			     "not permitted to profile process %d (%s): it is not dumpable (a "
			     "setuid/setgid program, or it called prctl(PR_SET_DUMPABLE, 0)): only "
			     "root can profile it",
			     (int)pid, comm);
		return;
	}
	FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "re");
	int scope = 0;
	if (f) {
		if (fscanf(f, "%d", &scope) != 1)
			scope = 0;
		fclose(f);
	}
	if (scope == 1 && !have_cap_sys_ptrace()) {
		hp_error_set(
		    err,
		    "not permitted to profile process %d (%s): kernel.yama.ptrace_scope is "
		    "1 (only a parent may trace its children): run heapprof-attach as root, "
		    "or allow it with 'sysctl kernel.yama.ptrace_scope=0'",
		    (int)pid, comm);
		return;
	}
	if (scope == 2 && !have_cap_sys_ptrace()) {
		hp_error_set(
		    err,
		    "not permitted to profile process %d (%s): kernel.yama.ptrace_scope is "
		    "2 (only root may trace): run heapprof-attach as root",
		    (int)pid, comm);
		return;
	}
	if (scope >= 3) {
		hp_error_set(
		    err,
		    "not permitted to profile process %d (%s): kernel.yama.ptrace_scope is "
		    "%d (tracing disabled until reboot): nobody can profile it until the "
		    "machine restarts with a lower ptrace_scope",
		    (int)pid, comm, scope);
		return;
	}
	hp_error_set(err,
		     "not permitted to profile process %d (%s): opening /proc/%d/mem: %s (a "
		     "security module or container policy refuses ptrace): run heapprof-attach "
		     "as root in the process's own namespace",
		     (int)pid, comm, (int)pid, strerror(open_errno));
}

int hp_target_check_traceable(pid_t pid, struct hp_error *err)
{
	struct proc_stat st;
	char comm[32], name[64], v[64];

	if (pid <= 0) {
		hp_error_set(err, "%d is not a process id: give the pid of a running process",
			     (int)pid);
		return -1;
	}
	if (read_stat(pid, &st) < 0) {
		hp_error_set(err, "no process with pid %d: check the pid (ps -p %d)", (int)pid,
			     (int)pid);
		return -1;
	}
	hp_target_comm(pid, comm, sizeof comm);
	if (st.state == 'Z' || st.state == 'X') {
		hp_error_set(err,
			     "process %d (%s) has exited and waits for its parent (a zombie): "
			     "nothing left to profile",
			     (int)pid, comm);
		return -1;
	}
	if (st.state == 'T' || st.state == 't') {
		hp_error_set(err,
			     "process %d (%s) is stopped (%s): heapprof leaves it so; resume it "
			     "with 'kill -CONT %d' and try again",
			     (int)pid, comm,
			     st.state == 'T' ? "job control, e.g. Ctrl-Z" : "by a debugger",
			     (int)pid);
		return -1;
	}
	if (st.flags & PF_KTHREAD_FLAG) {
		hp_error_set(err,
			     "process %d (%s) is a kernel thread: only user programs can be "
			     "profiled",
			     (int)pid, comm);
		return -1;
	}
	if (pid == getpid()) {
		hp_error_set(err, "process %d is heapprof itself: give the pid of another process",
			     (int)pid);
		return -1;
	}
	snprintf(name, sizeof name, "/proc/%d/mem", (int)pid);
	int fd = open(name, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT || errno == ESRCH)
			hp_error_set(err, "process %d (%s) exited: nothing to profile", (int)pid,
				     comm);
		else
			explain_not_permitted(pid, comm, errno, err);
		return -1;
	}
	close(fd);
	if (hp_task_status_field(pid, 0, "TracerPid", v, sizeof v) == 0 && atoi(v) > 0) {
		pid_t tracer = atoi(v);
		char tcomm[32];
		hp_target_comm(tracer, tcomm, sizeof tcomm);
		hp_error_set(err,
			     "process %d (%s) is already traced by process %d (%s), and a process "
			     "can have only one tracer: detach %s (or end it) and try again",
			     (int)pid, comm, (int)tracer, tcomm, tcomm);
		return -1;
	}
	return 0;
}

int hp_target_has_payload(pid_t pid)
{
	char name[64], line[PATH_MAX + 128];
	snprintf(name, sizeof name, "/proc/%d/maps", (int)pid);
	FILE *f = fopen(name, "re");
	if (!f)
		return -1;
	int found = 0;
	while (!found && fgets(line, sizeof line, f)) {
		int pathpos = 0;
		sscanf(line, "%*s %*s %*s %*s %*s %n", &pathpos);
		if (!pathpos)
			continue;
		line[strcspn(line, "\n")] = '\0';
		found = hp_is_payload_mapping(line + pathpos);
	}
	fclose(f);
	return found;
}

enum libc_kind { LIBC_NONE, LIBC_GLIBC, LIBC_MUSL };

static enum libc_kind mapped_libc(pid_t pid)
{
	char name[64], line[PATH_MAX + 128];
	snprintf(name, sizeof name, "/proc/%d/maps", (int)pid);
	FILE *f = fopen(name, "re");
	if (!f)
		return LIBC_NONE;
	enum libc_kind kind = LIBC_NONE;
	while (kind != LIBC_GLIBC && fgets(line, sizeof line, f)) {
		line[strcspn(line, "\n")] = '\0';
		const char *base = strrchr(line, '/');
		if (!base)
			continue;
		base++;
		if (!strcmp(base, "libc.so.6"))
			kind = LIBC_GLIBC;
		else if (!strncmp(base, "ld-musl", 7) || !strncmp(base, "libc.musl", 9))
			kind = LIBC_MUSL;
	}
	fclose(f);
	return kind;
}

/* ELFCLASS32 or ELFCLASS64 of /proc/PID/exe; 0 when unreadable. */
static int exe_class(pid_t pid)
{
	char name[64];
	unsigned char ident[EI_NIDENT];
	snprintf(name, sizeof name, "/proc/%d/exe", (int)pid);
	int fd = open(name, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, ident, sizeof ident);
	close(fd);
	if (n != (ssize_t)sizeof ident || memcmp(ident, ELFMAG, SELFMAG))
		return 0;
	return ident[EI_CLASS];
}

int hp_target_check(pid_t pid, struct hp_error *err)
{
	char comm[32];

	if (hp_target_check_traceable(pid, err) < 0)
		return -1;
	hp_target_comm(pid, comm, sizeof comm);
	struct hp_session_info info;
	struct hp_error ignored = {0};
	if (hp_session_live(pid, &info, &ignored) == 1) {
		hp_error_set(err,
			     "process %d (%s) is already being profiled by heapprof-attach (pid "
			     "%d): stop that one first (Ctrl-C, or heapprof-detach %d)",
			     (int)pid, comm, (int)info.attach_pid, (int)pid);
		return -1;
	}
	if (hp_target_has_payload(pid) == 1) {
		hp_error_set(err,
			     "process %d (%s) still has heapprof loaded from an earlier session: "
			     "run heapprof-detach %d first",
			     (int)pid, comm, (int)pid);
		return -1;
	}
	if (exe_class(pid) == ELFCLASS32) {
		hp_error_set(
		    err,
		    "process %d (%s) is a 32-bit program: not supported (heapprof profiles "
		    "x86_64 programs only)",
		    (int)pid, comm);
		return -1;
	}
	switch (mapped_libc(pid)) {
	case LIBC_GLIBC:
		return 0;
	case LIBC_MUSL:
		hp_error_set(err,
			     "process %d (%s) uses musl libc: not supported yet (heapprof needs a "
			     "program dynamically linked against glibc)",
			     (int)pid, comm);
		return -1;
	case LIBC_NONE:
		break;
	}
	hp_error_set(err,
		     "process %d (%s) is statically linked (no libc.so.6 is mapped): not "
		     "supported yet (heapprof needs a program dynamically linked against glibc)",
		     (int)pid, comm);
	return -1;
}
