/* stubs.c - hp_stubs_ensure and hp_stubs_erase_unused (see stubs.h). */
#include "inject/stubs.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "hpabi.h"
#include "inject/ptrace.h"
#include "inject/slack.h"

/* The areas left by a previous session: 1 and both addresses, 0, or -1. */
static int find_areas(pid_t pid, int mem_fd, uint64_t *code, uint64_t *data)
{
	int r = hp_slack_find(pid, mem_fd, HP_STUBS_MAGIC, HP_STUBS_MAGIC_LEN, code);
	if (r <= 0)
		return r;
	unsigned char stub[HP_STUB_SIZE];
	if (pread(mem_fd, stub, sizeof stub, (off_t)(*code + HP_STUBS_MAGIC_LEN)) !=
		(ssize_t)sizeof stub ||
	    stub[0] != 0xff || stub[1] != 0x25)
		return 0;
	/* Stub 0's slot: the next instruction plus its disp32. */
	int32_t disp;
	memcpy(&disp, stub + 2, sizeof disp);
	*data = hp_stub_at(*code, 0) + 6 + (uint64_t)(int64_t)disp - hp_stub_slot_at(0, 0);
	return 1;
}

static int ensure(pid_t pid, int mem_fd, uint64_t *code, uint64_t *data)
{
	*code = *data = 0;
	int r = find_areas(pid, mem_fd, code, data);
	if (r)
		return r < 0 ? -1 : 0;
	r = hp_slack_find_free_pair(pid, mem_fd, HP_STUBS_CODE_LEN, HP_STUBS_DATA_LEN, code, data);
	if (r <= 0) {
		*code = *data = 0;
		return r;
	}
	unsigned char img[HP_STUBS_CODE_LEN];
	memcpy(img, HP_STUBS_MAGIC, HP_STUBS_MAGIC_LEN);
	for (int i = 0; i < HP_STUB_COUNT; i++) {
		unsigned char *s = img + (hp_stub_at(*code, i) - *code);
		int32_t disp =
		    (int32_t)(int64_t)(hp_stub_slot_at(*data, i) - (hp_stub_at(*code, i) + 6));
		s[0] = 0xff; /* jmp *disp32(%rip) */
		s[1] = 0x25;
		memcpy(s + 2, &disp, sizeof disp);
		s[6] = s[7] = 0xcc; /* int3 */
	}
	if (pwrite(mem_fd, img, sizeof img, (off_t)*code) != (ssize_t)sizeof img) {
		*code = *data = 0;
		return -1;
	}
	return 0;
}

int hp_stubs_ensure(pid_t pid, uint64_t *code, uint64_t *data)
{
	*code = *data = 0;
	int mem = hp_open_mem(pid, O_RDWR);
	if (mem < 0)
		return -1;
	int r = ensure(pid, mem, code, data);
	int e = errno;
	close(mem);
	errno = e;
	return r;
}

int hp_stubs_erase_unused(pid_t pid)
{
	int mem = hp_open_mem(pid, O_RDWR);
	if (mem < 0)
		return -1;
	uint64_t code, data, used = 1;
	int r = find_areas(pid, mem, &code, &data);
	if (r > 0 && pread(mem, &used, sizeof used, (off_t)data) != (ssize_t)sizeof used)
		r = -1;
	if (r > 0 && !used &&
	    (hp_slack_zero(mem, data, HP_STUBS_DATA_LEN) ||
	     hp_slack_zero(mem, code, HP_STUBS_CODE_LEN)))
		r = -1;
	int e = errno;
	close(mem);
	errno = e;
	return r < 0 ? -1 : 0;
}
