#include "inject/safepoint.h"

#include <capstone/capstone.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "hpabi.h"
#include "hppaths.h"
#include "inject/maps.h"
#include "inject/remote.h"
#include "inject/unwind.h"

#define PASSES 10
#define PASS_DELAY_MS 20
#define PAYLOAD_PASSES 150

/* heapprof's collector runs payload code, so it is never safe; and seizing it can wait
 * out its membarrier, 232 ms once on a loaded 2-CPU host, a stop the attach then reports.
 * Its name puts it last, since a thread of the application may have that name too. */
enum rank { RANK_SYSCALL, RANK_FUTEX, RANK_RUNNING, RANK_COLLECTOR, RANK_SKIP };

struct cand {
	pid_t tid;
	int rank;
};

int hp_list_threads(pid_t pid, pid_t **tids)
{
	char name[64];
	snprintf(name, sizeof name, "/proc/%d/task", (int)pid);
	DIR *d = opendir(name);
	if (!d)
		return -1;
	size_t n = 0, cap = 16;
	pid_t *v = malloc(cap * sizeof *v);
	struct dirent *de;
	while (v && (de = readdir(d))) {
		int tid = atoi(de->d_name);
		if (tid <= 0)
			continue;
		if (n == cap) {
			pid_t *nv = realloc(v, 2 * cap * sizeof *v);
			if (!nv) {
				free(v);
				v = NULL;
				break;
			}
			v = nv;
			cap *= 2;
		}
		v[n++] = tid;
	}
	closedir(d);
	if (!v)
		return -1;
	*tids = v;
	return (int)n;
}

static int thread_rank(pid_t pid, pid_t tid)
{
	char name[96], buf[256];
	snprintf(name, sizeof name, "/proc/%d/task/%d/stat", (int)pid, (int)tid);
	FILE *f = fopen(name, "re");
	if (!f)
		return RANK_SKIP;
	int ok = fgets(buf, sizeof buf, f) != NULL;
	fclose(f);
	/* "tid (comm) state ...", where comm may hold parentheses itself. */
	char *lp = ok ? strchr(buf, '(') : NULL, *rp = ok ? strrchr(buf, ')') : NULL;
	if (!lp || !rp || rp < lp || !rp[1] || !rp[2] || rp[2] == 'Z' || rp[2] == 'X')
		return RANK_SKIP;
	*rp = 0;
	if (!strcmp(lp + 1, HP_COLLECTOR_NAME))
		return RANK_COLLECTOR;
	snprintf(name, sizeof name, "/proc/%d/task/%d/syscall", (int)pid, (int)tid);
	f = fopen(name, "re");
	if (!f)
		return RANK_RUNNING;
	ok = fgets(buf, sizeof buf, f) != NULL;
	fclose(f);
	if (!ok || !strncmp(buf, "running", 7))
		return RANK_RUNNING;
	long nr = strtol(buf, NULL, 10);
	if (nr < 0)
		return RANK_RUNNING;
	return nr == SYS_futex ? RANK_FUTEX : RANK_SYSCALL;
}

static int cmp_cand(const void *a, const void *b)
{
	const struct cand *x = a, *y = b;
	if (x->rank != y->rank)
		return x->rank - y->rank;
	return (x->tid > y->tid) - (x->tid < y->tid);
}

static int name_unsafe(const char *n)
{
	static const char *const contains[] = {"malloc", "calloc", "realloc", "memalign",
					       "valloc", "fork",   "tcache"};
	static const char *const prefix[] = {"_int_", "_Znw", "_Zna",	   "_Zdl", "_Zda",  "dl",
					     "_dl_",  "__dl", "__libc_dl", "_dl",  "arena_"};
	static const char *const exact[] = {"free",	  "cfree", "__libc_free",
					    "sysmalloc",  "exit",  "__run_exit_handlers",
					    "_IO_cleanup"};
	for (size_t i = 0; i < sizeof contains / sizeof *contains; i++)
		if (strstr(n, contains[i]))
			return 1;
	for (size_t i = 0; i < sizeof prefix / sizeof *prefix; i++)
		if (!strncmp(n, prefix[i], strlen(prefix[i])))
			return 1;
	for (size_t i = 0; i < sizeof exact / sizeof *exact; i++)
		if (!strcmp(n, exact[i]))
			return 1;
	return 0;
}

/* The dynamic loader's range, and heapprof's payload's when one is loaded. A thread with a
 * frame in the payload is never borrowed: inside a hook it may hold a lock of the payload's
 * (a live-map shard, a table being counted into) that heapprof_stop waits for through the
 * collector; the collector itself would join itself; and a thread still finishing a
 * heapprof_start or heapprof_stop of a heapprof that died holds the lock a second
 * heapprof_stop takes (all seen: heapprof_stop never returned). The payload's frames have
 * no names to go by (it is loaded from a memfd). */
struct ranges {
	const struct hp_module_range *loader, *payload;
};

struct check {
	const struct ranges *r;
	int unsafe;
	int in_payload; /* the reason: mostly a hook, which the thread leaves within microseconds */
};

static int in_range(const struct hp_module_range *m, uint64_t ip)
{
	return m && ip >= m->lo && ip < m->hi;
}

static int check_frame(void *ctx, uint64_t ip, const char *name)
{
	struct check *c = ctx;
	if (in_range(c->r->payload, ip))
		c->in_payload = c->unsafe = 1;
	if (in_range(c->r->loader, ip) || (name && name_unsafe(name)))
		c->unsafe = 1;
	return c->unsafe;
}

/* The kernel restarts an interrupted syscall by moving rip back two bytes; make sure those
 * two bytes really are a syscall instruction before relying on it. */
static int at_syscall_insn(struct hp_thread *t, csh cs)
{
	uint8_t code[2];
	if (pread(t->mem_fd, code, sizeof code, (off_t)(t->regs.rip - 2)) != sizeof code)
		return 0;
	cs_insn *insn;
	size_t n = cs_disasm(cs, code, sizeof code, t->regs.rip - 2, 1, &insn);
	int ok = n == 1 && insn[0].id == X86_INS_SYSCALL;
	if (n)
		cs_free(insn, n);
	return ok;
}

/* *in_payload is set when the thread was refused for being inside heapprof's hooks. */
static int thread_safe(struct hp_thread *t, const struct ranges *r, csh cs, struct hp_unwinder *u,
		       int *in_payload)
{
	/* A thread that stopped for a signal of its own gets it back at once (release):
	 * once calls run from that stop the signal lives only in our memory, and would be
	 * lost if we died. Let go, it stops at an interrupt next time. */
	if (t->stop_sig)
		return 0;
	if ((int64_t)t->regs.orig_rax >= 0 && !at_syscall_insn(t, cs))
		return 0;
	struct check c = {r, 0, 0};
	if (hp_unwind(u, t->tid, t->mem_fd, 1, check_frame, &c) < 1)
		return 0;
	*in_payload |= c.in_payload;
	return !c.unsafe;
}

static int candidates(pid_t pid, struct cand **out)
{
	pid_t *tids;
	int n = hp_list_threads(pid, &tids);
	if (n < 0)
		return -1;
	struct cand *c = calloc((size_t)n + 1, sizeof *c);
	if (!c) {
		free(tids);
		return -1;
	}
	int k = 0;
	for (int i = 0; i < n; i++) {
		int r = thread_rank(pid, tids[i]);
		if (r != RANK_SKIP)
			c[k++] = (struct cand){tids[i], r};
	}
	free(tids);
	qsort(c, (size_t)k, sizeof *c, cmp_cand);
	*out = c;
	return k;
}

/* One pass over the candidates: 1 = holding a safe thread, 0 = none safe now, -1 = a
 * seize error that retrying cannot fix (*code says which). *in_payload as thread_safe. */
static int one_pass(pid_t pid, struct hp_thread *t, const struct ranges *unsafe, csh cs, int *code,
		    pid_t *code_tid, int *in_payload)
{
	struct cand *c;
	int n = candidates(pid, &c);
	if (n < 0) {
		*code = -ESRCH;
		*code_tid = pid;
		return -1;
	}
	struct hp_unwinder *u = hp_unwinder_new();
	if (!u) {
		free(c);
		*code = -ENOMEM;
		*code_tid = pid;
		return -1;
	}
	int seized_any = 0;
	for (int i = 0; i < n; i++) {
		int r = hp_thread_seize(pid, c[i].tid, t);
		if (r) {
			if (!*code || *code == -ESRCH) {
				*code = r;
				*code_tid = c[i].tid;
			}
			continue;
		}
		seized_any = 1;
		if (thread_safe(t, unsafe, cs, u, in_payload)) {
			hp_unwinder_free(u);
			free(c);
			return 1;
		}
		hp_thread_release(t, NULL);
	}
	hp_unwinder_free(u);
	free(c);
	if (!seized_any && (n == 0 || *code == -EPERM || *code == -EBUSY || !hp_process_alive(pid)))
		return -1;
	return 0;
}

int hp_borrow_thread(pid_t pid, struct hp_thread *t, struct hp_error *err)
{
	if (!hp_process_alive(pid)) {
		hp_error_set(err, "process %d does not exist (or exited): check the pid", (int)pid);
		return -1;
	}
	struct hp_module_range loader, payload;
	int have_loader = hp_maps_find(pid, hp_maps_is_loader, &loader);
	int have_payload = hp_maps_find(pid, hp_is_payload_mapping, &payload);
	if (have_loader < 0 || have_payload < 0) {
		hp_error_set(err, "cannot read /proc/%d/maps: %s", (int)pid, strerror(errno));
		return -1;
	}
	struct ranges r = {have_loader ? &loader : NULL, have_payload ? &payload : NULL};
	csh cs;
	if (cs_open(CS_ARCH_X86, CS_MODE_64, &cs) != CS_ERR_OK) {
		hp_error_set(err, "capstone cannot disassemble x86_64: reinstall libcapstone");
		return -1;
	}
	int ret = -1, code = 0, explained = 0, in_payload = 0;
	pid_t code_tid = pid;
	uint64_t hint = hp_remote_tramp_hint(pid);
	/* A program that allocates all the time may be inside a hook at most interrupts;
	 * it leaves it within microseconds, so passes go on longer for that reason. */
	for (int pass = 0; pass < PASSES || (in_payload && pass < PAYLOAD_PASSES); pass++) {
		int rc = one_pass(pid, t, &r, cs, &code, &code_tid, &in_payload);
		if (rc > 0) {
			t->tramp_hint = hint;
			ret = 0;
			break;
		}
		if (rc < 0) {
			hp_ptrace_explain(pid, code_tid, code ? code : -ESRCH, err);
			explained = 1;
			break;
		}
		struct timespec d = {0, PASS_DELAY_MS * 1000000L};
		nanosleep(&d, NULL);
	}
	cs_close(&cs);
	if (ret && !explained)
		hp_error_set(err,
			     "no thread of process %d is at a safe point (all are inside malloc, "
			     "the dynamic loader or heapprof's hooks): try again",
			     (int)pid);
	return ret;
}
