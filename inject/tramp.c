#include "inject/tramp.h"

#include <string.h>
#include <sys/syscall.h>

#define ERESTARTSYS 512
#define ERESTARTNOINTR 513
#define ERESTARTNOHAND 514
#define ERESTART_RESTARTBLOCK 516

/* The frame, in qwords: first what iretq pops (rip, cs, rflags, rsp, ss), then the general
 * registers in the order the code below reads them, the signal mask, the call's result and
 * the word that says it returned, the wait's timeout (a struct timeval), and at byte
 * F_XSAVE the XSAVE area. Macros, not an enum: the assembly below uses them. */
#define F_RIP 0
#define F_CS 1
#define F_RFLAGS 2
#define F_RSP 3
#define F_SS 4
#define F_RAX 5
#define F_RBX 6
#define F_RCX 7
#define F_RDX 8
#define F_RSI 9
#define F_RDI 10
#define F_RBP 11
#define F_R8 12
#define F_R9 13
#define F_R10 14
#define F_R11 15
#define F_R12 16
#define F_R13 17
#define F_R14 18
#define F_R15 19
#define F_MASK 20
#define F_RESULT 21
#define F_DONE 22
#define F_TIMEOUT 23 /* and 24: a struct timeval */
#define F_QWORDS 25
#define F_XSAVE 256 /* the first 64-byte boundary after the qwords */
_Static_assert(F_QWORDS * 8 <= F_XSAVE, "frame qwords overlap the XSAVE area");

/* How many times the wait is made again when it returns before its timeout: never, as
 * nothing wakes it and every signal is blocked, but a bound keeps an unforeseen answer
 * from keeping the thread here. The wait is a select() of no fds: a timed futex or
 * nanosleep interrupted by our PTRACE_INTERRUPT leaves the thread's restart block set for
 * itself, and the syscall the thread was found in, if it is restarted through
 * restart_syscall, would then wait out the futex instead (an inject-target nanosleep
 * failed with ETIMEDOUT). select is restarted by rewinding, with no restart block. */
#define WAIT_TRIES 8

#define S_(x) #x
#define S(x) S_(x)
#define AT(i) S(8 * i) "(%rsp)"
#define FRAME(i) S(8 * i) "(%rbx)"
/* Only ever copied into the target, never run here. Its symbols are compared as integers:
 * they are one object to the assembler, three to C. */
/* clang-format off */
__asm__(".section .rodata.hp_tramp,\"a\"\n"
	".globl hp_tramp_code\n.hidden hp_tramp_code\n"
	"hp_tramp_code:\n"
	".ascii \"" HP_TRAMP_MAGIC "\\0\"\n"
	/* HP_TRAMP_RET_OFF: where calls return, rbx at the frame. */
	"mov %rax, " FRAME(F_RESULT) "\n"
	"movq $1, " FRAME(F_DONE) "\n"
	"mov $" S(WAIT_TRIES) ", %r13d\n"
	"1:\n"
	"mov $" S(SYS_select) ", %eax\n"
	"xor %edi, %edi\n"
	"xor %esi, %esi\n"
	"xor %edx, %edx\n"
	"xor %r10d, %r10d\n"
	"lea " FRAME(F_TIMEOUT) ", %r8\n"
	"syscall\n"
	"test %rax, %rax\n"
	"jz 2f\n"
	"dec %r13d\n"
	"jnz 1b\n"
	"2:\n"
	"mov $" S(SYS_rt_sigprocmask) ", %eax\n"
	"mov $2, %edi\n" /* SIG_SETMASK */
	"lea " FRAME(F_MASK) ", %rsi\n"
	"xor %edx, %edx\n"
	"mov $8, %r10d\n"
	"syscall\n"
	"mov %rbx, %rsp\n"
	"mov $-1, %eax\n"
	"mov $-1, %edx\n"
	"xrstor64 " S(F_XSAVE) "(%rsp)\n"
	"mov " AT(F_RBX) ", %rbx\n"
	"mov " AT(F_RCX) ", %rcx\n"
	"mov " AT(F_RDX) ", %rdx\n"
	"mov " AT(F_RSI) ", %rsi\n"
	"mov " AT(F_RDI) ", %rdi\n"
	"mov " AT(F_RBP) ", %rbp\n"
	"mov " AT(F_R8) ", %r8\n"
	"mov " AT(F_R9) ", %r9\n"
	"mov " AT(F_R10) ", %r10\n"
	"mov " AT(F_R11) ", %r11\n"
	"mov " AT(F_R12) ", %r12\n"
	"mov " AT(F_R13) ", %r13\n"
	"mov " AT(F_R14) ", %r14\n"
	"mov " AT(F_R15) ", %r15\n"
	"mov " AT(F_RAX) ", %rax\n"
	"iretq\n"
	".globl hp_tramp_code_end\n.hidden hp_tramp_code_end\n"
	"hp_tramp_code_end:\n"
	".previous\n");
/* clang-format on */

extern const unsigned char hp_tramp_code[], hp_tramp_code_end[];

const unsigned char *hp_tramp_image(void)
{
	return hp_tramp_code;
}

size_t hp_tramp_len(void)
{
	return (size_t)((uintptr_t)hp_tramp_code_end - (uintptr_t)hp_tramp_code);
}

uint64_t hp_tramp_ret(uint64_t base)
{
	return base + HP_TRAMP_RET_OFF;
}

uint64_t hp_tramp_done_at(uint64_t frame)
{
	return frame + 8 * F_DONE;
}

void hp_tramp_arm(uint64_t w[HP_TRAMP_ARM_WORDS])
{
	_Static_assert(F_TIMEOUT == F_DONE + 1 && HP_TRAMP_ARM_WORDS == 3, "done, then timeout");
	w[0] = 0;
	w[1] = HP_TRAMP_WAIT_S;
	w[2] = 0;
}

uint64_t hp_tramp_result_at(uint64_t frame)
{
	return frame + 8 * F_RESULT;
}

size_t hp_tramp_frame_len(size_t xstate_len)
{
	return F_XSAVE + xstate_len;
}

struct user_regs_struct hp_resume_regs(const struct user_regs_struct *regs)
{
	struct user_regs_struct r = *regs;
	if ((int64_t)r.orig_rax >= 0) {
		switch (-(int64_t)r.rax) {
		case ERESTARTSYS:
		case ERESTARTNOINTR:
		case ERESTARTNOHAND:
			r.rax = r.orig_rax;
			r.rip -= 2;
			break;
		case ERESTART_RESTARTBLOCK:
			r.rax = SYS_restart_syscall;
			r.rip -= 2;
			break;
		default:
			break;
		}
	}
	r.orig_rax = (uint64_t)-1;
	return r;
}

void hp_tramp_frame_build(void *frame, const struct user_regs_struct *resume, uint64_t sigmask,
			  const void *xstate, size_t xstate_len)
{
	uint64_t v[F_QWORDS] = {
	    [F_RIP] = resume->rip, [F_CS] = resume->cs,	  [F_RFLAGS] = resume->eflags,
	    [F_RSP] = resume->rsp, [F_SS] = resume->ss,	  [F_RAX] = resume->rax,
	    [F_RBX] = resume->rbx, [F_RCX] = resume->rcx, [F_RDX] = resume->rdx,
	    [F_RSI] = resume->rsi, [F_RDI] = resume->rdi, [F_RBP] = resume->rbp,
	    [F_R8] = resume->r8,   [F_R9] = resume->r9,	  [F_R10] = resume->r10,
	    [F_R11] = resume->r11, [F_R12] = resume->r12, [F_R13] = resume->r13,
	    [F_R14] = resume->r14, [F_R15] = resume->r15, [F_MASK] = sigmask,
	};
	memset(frame, 0, F_XSAVE);
	memcpy(frame, v, sizeof v);
	memcpy((unsigned char *)frame + F_XSAVE, xstate, xstate_len);
}
