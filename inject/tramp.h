/* tramp.h - the return trampoline that makes a remote call survive the death of its tracer.
 *
 * Contract: a trampoline is an anonymous r-x mapping created in the target for one borrowed
 * thread. It starts with HP_TRAMP_MAGIC (so heapprof-detach can recognise one left behind)
 * and holds the thread's state as found: the registers to resume with (an interrupted
 * restartable syscall already rewound so that it is issued again), the signal mask and the
 * XSAVE area. Every remote call returns into it. Its first instruction is a
 * rt_sigprocmask syscall: a live tracer (which runs the thread with PTRACE_SYSCALL) takes
 * the syscall-entry stop at hp_tramp_stop_ip() as "the call returned" (result in r12) and
 * goes on steering the thread; if the tracer died, the kernel has detached the thread and
 * the trampoline itself restores the mask, the extended state and every register, and
 * jumps back to where the thread was interrupted. The thread never runs garbage.
 */
#ifndef HEAPPROF_INJECT_TRAMP_H
#define HEAPPROF_INJECT_TRAMP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/user.h>

#define HP_TRAMP_MAGIC "HEAPPROF-TRAMP1"
#define HP_TRAMP_MAGIC_LEN 16
#define HP_TRAMP_RET_OFF 16	/* where calls return */
#define HP_TRAMP_REGS_OFF 0x200 /* 18 qwords, see hp_tramp_build */
#define HP_TRAMP_MASK_OFF 0x300
#define HP_TRAMP_XSAVE_OFF 0x400 /* 64-byte aligned, as xrstor requires */

/* The size of the mapping for an XSAVE area of xstate_len bytes (whole pages). */
size_t hp_tramp_size(size_t xstate_len);

/* Fills img (hp_tramp_size bytes) with the code and the state to resume with. */
void hp_tramp_build(void *img, const struct user_regs_struct *resume, uint64_t sigmask,
		    const void *xstate, size_t xstate_len);

/* The registers the thread must resume with for regs as found at a ptrace stop: when it
 * was interrupted in a syscall the kernel would restart, the syscall is set up to be issued
 * again (rip at the syscall instruction, rax its number, or restart_syscall after
 * -ERESTART_RESTARTBLOCK); orig_rax is -1 so no stop can rewind it once more. */
struct user_regs_struct hp_resume_regs(const struct user_regs_struct *regs);

/* The address of the trampoline's return point / its syscall-entry stop, for a trampoline
 * mapped at base. */
uint64_t hp_tramp_ret(uint64_t base);
uint64_t hp_tramp_stop_ip(uint64_t base);

/* Trampolines left in pid by a tracer that died (anonymous r-x mappings starting with the
 * magic): fills at most max ranges [lo, hi) and returns how many, or -1. */
int hp_tramp_find_stale(pid_t pid, uint64_t (*ranges)[2], int max);

#endif
