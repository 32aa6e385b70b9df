/* tramp.h - the return trampoline that makes a remote call survive the death of its tracer.
 *
 * Contract: the trampoline is position-independent code with no data of its own, written
 * through /proc/PID/mem into zero slack after a code segment of the target (slack.h), so
 * creating and removing it takes no syscall in the target and no mapping. Every remote call
 * returns into it with rbx (callee-saved, so the call keeps it) at a frame
 * (hp_tramp_frame_build) that the injector wrote once on the thread's own stack, below the
 * red zone and above everything the calls use: the thread's state as found (registers
 * to resume with, an interrupted restartable syscall already rewound so that it is issued
 * again; signal mask; XSAVE area). The trampoline's first instruction after the magic is
 * an rt_sigprocmask syscall: a live tracer (running the thread with PTRACE_SYSCALL) takes
 * the syscall-entry stop at hp_tramp_stop_ip() as "the call returned" (result in r12) and
 * goes on steering the thread; if the tracer died, the kernel has detached the thread and
 * the code restores the mask, the extended state and every register from the frame, and
 * returns to where the thread was interrupted with iretq (which sets rsp and rip at once,
 * so no register and no byte below the thread's stack pointer is touched). State is per
 * thread and the code is shared, so a call still finishing on its own after its tracer
 * gave up is safe as long as the code stays.
 */
#ifndef HEAPPROF_INJECT_TRAMP_H
#define HEAPPROF_INJECT_TRAMP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/user.h>

#define HP_TRAMP_MAGIC "HEAPPROF-TRAMP2"
#define HP_TRAMP_RET_OFF 16 /* where calls return: after the magic and its NUL */

/* The code to write into the target: hp_tramp_len() bytes, starting with the magic. */
const unsigned char *hp_tramp_image(void);
size_t hp_tramp_len(void);

/* The address calls return to / of the trampoline's syscall-entry stop, for a trampoline
 * written at base. */
uint64_t hp_tramp_ret(uint64_t base);
uint64_t hp_tramp_stop_ip(uint64_t base);

/* The size of the frame for an XSAVE area of xstate_len bytes; the frame must start on a
 * 64-byte boundary (xrstor's). */
size_t hp_tramp_frame_len(size_t xstate_len);

/* Fills frame (hp_tramp_frame_len bytes) with the state to resume with. */
void hp_tramp_frame_build(void *frame, const struct user_regs_struct *resume, uint64_t sigmask,
			  const void *xstate, size_t xstate_len);

/* The registers the thread must resume with for regs as found at a ptrace stop: when it
 * was interrupted in a syscall the kernel would restart, the syscall is set up to be issued
 * again (rip at the syscall instruction, rax its number, or restart_syscall after
 * -ERESTART_RESTARTBLOCK); orig_rax is -1 so no stop can rewind it once more. */
struct user_regs_struct hp_resume_regs(const struct user_regs_struct *regs);

#endif
