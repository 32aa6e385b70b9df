/* tramp.h - the return trampoline that makes a remote call survive the death of its tracer.
 *
 * Contract: the trampoline is position-independent code with no data of its own, written
 * through /proc/PID/mem into zero slack after a code segment of the target (slack.h), so
 * creating and removing it takes no syscall in the target and no mapping. Every remote call
 * returns into it with rbx (callee-saved, so the call keeps it) at a frame
 * (hp_tramp_frame_build) that the injector wrote once on the thread's own stack, below the
 * red zone and above everything the calls use: the thread's state as found (registers
 * to resume with, an interrupted restartable syscall already rewound so that it is issued
 * again; signal mask; XSAVE area). The trampoline stores the call's result and sets the
 * frame's done word (hp_tramp_result_at, hp_tramp_done_at), then waits HP_TRAMP_WAIT_S in
 * a select() of no fds, whose timeout the tracer writes before each call with the done
 * word cleared (hp_tramp_arm). The tracer runs the call with PTRACE_CONT, so the
 * callee's own syscalls stop nothing; it reads the done word through /proc/PID/mem and
 * interrupts the thread in the wait (PTRACE_INTERRUPT), and from there goes on steering
 * it. If the tracer died, the kernel has detached the thread: the wait times out, and the
 * code restores the mask, the extended state and every register from the frame, and
 * returns to where the thread was interrupted with iretq (which sets rsp and rip at once,
 * so no register and no byte below the thread's stack pointer is touched). A tracer that
 * was not scheduled for the whole wait finds the thread outside the trampoline: it went
 * back to its work as found, and must not be touched. State is per thread and the code is
 * shared, so a call still finishing on its own after its tracer gave up is safe as long as
 * the code stays.
 */
#ifndef HEAPPROF_INJECT_TRAMP_H
#define HEAPPROF_INJECT_TRAMP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/user.h>

#define HP_TRAMP_MAGIC "HEAPPROF-TRAMP3"
#define HP_TRAMP_RET_OFF 16 /* where calls return: after the magic and its NUL */

/* The code to write into the target: hp_tramp_len() bytes, starting with the magic. */
const unsigned char *hp_tramp_image(void);
size_t hp_tramp_len(void);

/* How long a call's thread waits in the trampoline for its tracer once the call returned:
 * what a tracer that died costs the thread, and how long a live one may go unscheduled.
 * At 1 s, two stress tests side by side on 2 CPUs had heapprof-attach go 1.43 s without
 * running between two looks at the done word (about once in 100 attaches), and the
 * attach failed though nothing had gone wrong. */
#define HP_TRAMP_WAIT_S 3

/* The address calls return to, for a trampoline written at base. */
uint64_t hp_tramp_ret(uint64_t base);
/* Where, in a frame at frame, the call's result is, and the word that the trampoline sets
 * to 1 when the call returned. */
uint64_t hp_tramp_result_at(uint64_t frame);
uint64_t hp_tramp_done_at(uint64_t frame);
/* The words to write at hp_tramp_done_at before each call: done cleared and the wait's
 * timeout, which a wait interrupted by the tracer leaves shortened. */
#define HP_TRAMP_ARM_WORDS 3
void hp_tramp_arm(uint64_t w[HP_TRAMP_ARM_WORDS]);

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
