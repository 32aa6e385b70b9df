#include "inject/tramp.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define PAGE 4096u
#define ERESTARTSYS 512
#define ERESTARTNOINTR 513
#define ERESTARTNOHAND 514
#define ERESTART_RESTARTBLOCK 516

/* Register slots in the REGS block, in the order the code below reads them. */
enum {
	R_RAX,
	R_RBX,
	R_RCX,
	R_RDX,
	R_RSI,
	R_RDI,
	R_RBP,
	R_R8,
	R_R9,
	R_R10,
	R_R11,
	R_R12,
	R_R13,
	R_R14,
	R_R15,
	R_RSP,
	R_RIP,
	R_EFLAGS,
	R_COUNT
};

/* The code is position independent: it reaches its data through .Lhp_tramp, a local label,
 * so the assembler resolves every displacement itself. Only ever copied, never run here. */
#define S_(x) #x
#define S(x) S_(x)
#define AT(off) S(.Lhp_tramp + off) "(%rip)"
#define REG(i) AT(HP_TRAMP_REGS_OFF + 8 * i)
/* clang-format off */
__asm__(".section .rodata.hp_tramp,\"a\"\n"
	".p2align 6\n"
	".globl hp_tramp_code\n.hidden hp_tramp_code\n"
	"hp_tramp_code:\n.Lhp_tramp:\n"
	".ascii \"" HP_TRAMP_MAGIC "\\0\"\n"
	/* HP_TRAMP_RET_OFF: where calls return. */
	"mov %rax, %r12\n"
	"mov $" S(SYS_rt_sigprocmask) ", %eax\n"
	"mov $2, %edi\n" /* SIG_SETMASK */
	"lea " AT(HP_TRAMP_MASK_OFF) ", %rsi\n"
	"xor %edx, %edx\n"
	"mov $8, %r10d\n"
	"syscall\n"
	".globl hp_tramp_stop\n.hidden hp_tramp_stop\n"
	"hp_tramp_stop:\n"
	"mov $-1, %eax\n"
	"mov $-1, %edx\n"
	"xrstor64 " AT(HP_TRAMP_XSAVE_OFF) "\n"
	/* Still on the scratch stack below the red zone: the flags go through it. */
	"pushq " REG(17) "\n"
	"popfq\n"
	"mov " REG(1) ", %rbx\n"
	"mov " REG(2) ", %rcx\n"
	"mov " REG(3) ", %rdx\n"
	"mov " REG(4) ", %rsi\n"
	"mov " REG(5) ", %rdi\n"
	"mov " REG(6) ", %rbp\n"
	"mov " REG(7) ", %r8\n"
	"mov " REG(8) ", %r9\n"
	"mov " REG(9) ", %r10\n"
	"mov " REG(10) ", %r11\n"
	"mov " REG(11) ", %r12\n"
	"mov " REG(12) ", %r13\n"
	"mov " REG(13) ", %r14\n"
	"mov " REG(14) ", %r15\n"
	"mov " REG(0) ", %rax\n"
	"mov " REG(15) ", %rsp\n"
	"jmp *" REG(16) "\n"
	".globl hp_tramp_code_end\n.hidden hp_tramp_code_end\n"
	"hp_tramp_code_end:\n"
	".previous\n");
/* clang-format on */

extern const unsigned char hp_tramp_code[], hp_tramp_stop[], hp_tramp_code_end[];

size_t hp_tramp_size(size_t xstate_len)
{
	return (HP_TRAMP_XSAVE_OFF + xstate_len + PAGE - 1) & ~(size_t)(PAGE - 1);
}

uint64_t hp_tramp_ret(uint64_t base)
{
	return base + HP_TRAMP_RET_OFF;
}

uint64_t hp_tramp_stop_ip(uint64_t base)
{
	return base + (uint64_t)(hp_tramp_stop - hp_tramp_code);
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

void hp_tramp_build(void *img, const struct user_regs_struct *resume, uint64_t sigmask,
		    const void *xstate, size_t xstate_len)
{
	unsigned char *p = img;
	memset(p, 0, hp_tramp_size(xstate_len));
	memcpy(p, hp_tramp_code, (size_t)(hp_tramp_code_end - hp_tramp_code));
	uint64_t v[R_COUNT] = {
	    [R_RAX] = resume->rax, [R_RBX] = resume->rbx, [R_RCX] = resume->rcx,
	    [R_RDX] = resume->rdx, [R_RSI] = resume->rsi, [R_RDI] = resume->rdi,
	    [R_RBP] = resume->rbp, [R_R8] = resume->r8,	  [R_R9] = resume->r9,
	    [R_R10] = resume->r10, [R_R11] = resume->r11, [R_R12] = resume->r12,
	    [R_R13] = resume->r13, [R_R14] = resume->r14, [R_R15] = resume->r15,
	    [R_RSP] = resume->rsp, [R_RIP] = resume->rip, [R_EFLAGS] = resume->eflags,
	};
	memcpy(p + HP_TRAMP_REGS_OFF, v, sizeof v);
	memcpy(p + HP_TRAMP_MASK_OFF, &sigmask, sizeof sigmask);
	memcpy(p + HP_TRAMP_XSAVE_OFF, xstate, xstate_len);
}

int hp_tramp_find_stale(pid_t pid, uint64_t (*ranges)[2], int max)
{
	char name[64], line[512];
	snprintf(name, sizeof name, "/proc/%d/maps", (int)pid);
	FILE *f = fopen(name, "re");
	if (!f)
		return -1;
	snprintf(name, sizeof name, "/proc/%d/mem", (int)pid);
	int mem = open(name, O_RDONLY | O_CLOEXEC);
	if (mem < 0) {
		fclose(f);
		return -1;
	}
	int n = 0;
	while (n < max && fgets(line, sizeof line, f)) {
		unsigned long lo, hi, ino;
		char perms[8];
		int pathpos = 0;
		if (sscanf(line, "%lx-%lx %7s %*s %*s %lu %n", &lo, &hi, perms, &ino, &pathpos) < 4)
			continue;
		line[strcspn(line, "\n")] = '\0';
		if (ino || strcmp(perms, "r-xp") || (pathpos && line[pathpos]))
			continue;
		char magic[HP_TRAMP_MAGIC_LEN];
		if (pread(mem, magic, sizeof magic, (off_t)lo) == (ssize_t)sizeof magic &&
		    !memcmp(magic, HP_TRAMP_MAGIC, sizeof magic)) {
			ranges[n][0] = lo;
			ranges[n][1] = hi;
			n++;
		}
	}
	close(mem);
	fclose(f);
	return n;
}
