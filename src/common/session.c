#include "session.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Fixed-width numbers: rewriting the file (viewer pid) never changes its length, so a
 * reader never sees it truncated. */
#define SESSION_FMT "attach_pid %10d\nstart_time %20llu\nviewer_pid %10d\noutput %s\n"

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

int hp_session_dir(char *buf, size_t len, struct hp_error *err)
{
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	if (geteuid() == 0)
		snprintf(buf, len, "/run/heapprof");
	else if (xdg && xdg[0] == '/')
		snprintf(buf, len, "%s/heapprof", xdg);
	else
		snprintf(buf, len, "/tmp/heapprof-%lu", (unsigned long)geteuid());
	if (mkdir(buf, 0700) < 0 && errno != EEXIST) {
		hp_error_set(err, "cannot create the session directory %s: %s: check its parent",
			     buf, strerror(errno));
		return -1;
	}
	return 0;
}

/* The run directory, opened without following a symlink and verified through the fd, so
 * nobody can swap it between the check and its use. */
static int open_dir(struct hp_error *err)
{
	char dir[PATH_MAX];
	struct stat st;

	if (hp_session_dir(dir, sizeof dir, err) < 0)
		return -1;
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		if (lstat(dir, &st) == 0 && S_ISLNK(st.st_mode))
			hp_error_set(
			    err,
			    "session directory %s is a symlink, which could lead anywhere: "
			    "remove it and try again",
			    dir);
		else
			hp_error_set(err, "session directory %s can't be opened: %s", dir,
				     strerror(e));
		return -1;
	}
	if (fstat(fd, &st) < 0 || st.st_uid != geteuid() || (st.st_mode & 07777) != 0700) {
		hp_error_set(
		    err,
		    "session directory %s is not private (owner uid %lu, mode %04o; it must "
		    "be yours with mode 0700): remove it and try again",
		    dir, (unsigned long)st.st_uid, (unsigned)(st.st_mode & 07777));
		close(fd);
		return -1;
	}
	return fd;
}

static void session_name(char *buf, size_t len, pid_t target)
{
	snprintf(buf, len, "%d.session", (int)target);
}

/* 1 while fd is still the file linked under name. */
static int still_linked(int dirfd, const char *name, int fd)
{
	struct stat a, b;
	if (fstat(fd, &a) < 0 || fstatat(dirfd, name, &b, AT_SYMLINK_NOFOLLOW) < 0)
		return 0;
	return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

static int parse_info(int fd, struct hp_session_info *info)
{
	char buf[PATH_MAX + 128];
	ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	int apid, vpid;
	unsigned long long start;
	int off = 0;
	if (sscanf(buf, "attach_pid %d start_time %llu viewer_pid %d output %n", &apid, &start,
		   &vpid, &off) != 3 ||
	    !off)
		return -1;
	char *out = buf + off;
	char *nl = strchr(out, '\n');
	if (!nl)
		return -1;
	*nl = '\0';
	info->attach_pid = apid;
	info->start_time = start;
	info->viewer_pid = vpid;
	snprintf(info->output, sizeof info->output, "%s", out);
	return 0;
}

/* Opens target's session file: 1 live (fd stays open, *fdp), 0 none (a stale one was
 * removed), -1 error. */
static int probe(int dirfd, const char *name, int *fdp)
{
	for (;;) {
		int fd = openat(dirfd, name, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			return errno == ENOENT ? 0 : -1;
		if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
			if (errno != EWOULDBLOCK) {
				close(fd);
				return -1;
			}
			*fdp = fd;
			return 1;
		}
		/* Nobody holds it: its owner died. Remove it only if it is still the file
		 * under that name; otherwise look again. */
		int linked = still_linked(dirfd, name, fd);
		if (linked)
			unlinkat(dirfd, name, 0);
		close(fd);
		if (linked)
			return 0;
	}
}

int hp_session_live(pid_t target, struct hp_session_info *info, struct hp_error *err)
{
	char name[32];
	int fd;

	int dirfd = open_dir(err);
	if (dirfd < 0)
		return -1;
	session_name(name, sizeof name, target);
	int r = probe(dirfd, name, &fd);
	close(dirfd);
	if (r < 0)
		hp_error_set(err, "cannot read the session file %s: %s: remove it and try again",
			     name, strerror(errno));
	if (r != 1)
		return r;
	memset(info, 0, sizeof *info);
	/* The owner writes the file right after creating it: give it a moment. */
	for (int i = 0; i < 50 && parse_info(fd, info) < 0; i++)
		sleep_ms(10);
	close(fd);
	return 1;
}

static int write_info(struct hp_session_lock *s)
{
	char buf[PATH_MAX + 128];
	int n = snprintf(buf, sizeof buf, SESSION_FMT, (int)s->info.attach_pid, s->info.start_time,
			 (int)s->info.viewer_pid, s->info.output);
	if (n < 0 || (size_t)n >= sizeof buf)
		return -1;
	return pwrite(s->fd, buf, (size_t)n, 0) == n ? 0 : -1;
}

int hp_session_create(struct hp_session_lock *s, pid_t target, unsigned long long start_time,
		      const char *output, struct hp_error *err)
{
	char dir[PATH_MAX];

	s->fd = -1;
	s->dirfd = open_dir(err);
	if (s->dirfd < 0)
		return -1;
	hp_session_dir(dir, sizeof dir, err);
	session_name(s->name, sizeof s->name, target);
	memset(&s->info, 0, sizeof s->info);
	s->info.attach_pid = getpid();
	s->info.start_time = start_time;
	snprintf(s->info.output, sizeof s->info.output, "%s", output);

	for (int tries = 0; tries < 100; tries++) {
		int fd = openat(s->dirfd, s->name,
				O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0 && errno == EEXIST) {
			int live_fd;
			int r = probe(s->dirfd, s->name, &live_fd);
			if (r == 1) {
				struct hp_session_info other = {0};
				for (int i = 0; i < 50 && parse_info(live_fd, &other) < 0; i++)
					sleep_ms(10);
				close(live_fd);
				hp_error_set(
				    err,
				    "process %d is already being profiled by heapprof-attach "
				    "(pid %d): stop that one first (Ctrl-C, or heapprof-detach "
				    "%d)",
				    (int)target, (int)other.attach_pid, (int)target);
				break;
			}
			if (r < 0) {
				hp_error_set(err,
					     "cannot read the session file %s/%s: %s: remove it "
					     "and try again",
					     dir, s->name, strerror(errno));
				break;
			}
			continue;
		}
		if (fd < 0) {
			hp_error_set(err, "cannot create the session file %s/%s: %s", dir, s->name,
				     strerror(errno));
			break;
		}
		/* Someone who took our fresh file for a stale one may have removed it before
		 * we locked it: then start again. */
		if (flock(fd, LOCK_EX) < 0 || !still_linked(s->dirfd, s->name, fd)) {
			close(fd);
			continue;
		}
		s->fd = fd;
		if (write_info(s) < 0) {
			hp_error_set(err, "cannot write the session file %s/%s: %s", dir, s->name,
				     strerror(errno));
			hp_session_remove(s);
			return -1;
		}
		return 0;
	}
	hp_error_set(err, "cannot create the session file %s/%s: it keeps changing under us", dir,
		     s->name);
	close(s->dirfd);
	s->dirfd = -1;
	return -1;
}

int hp_session_set_viewer(struct hp_session_lock *s, pid_t viewer)
{
	if (s->fd < 0)
		return -1;
	s->info.viewer_pid = viewer;
	return write_info(s);
}

void hp_session_remove(struct hp_session_lock *s)
{
	if (s->fd >= 0) {
		if (still_linked(s->dirfd, s->name, s->fd))
			unlinkat(s->dirfd, s->name, 0);
		close(s->fd);
		s->fd = -1;
	}
	if (s->dirfd >= 0) {
		close(s->dirfd);
		s->dirfd = -1;
	}
}
