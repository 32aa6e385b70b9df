/* mem.c - the payload's memory (payload.h): what it maps is counted in hp_mapped_bytes,
 * and held against max_memory, where reaching it switches the session to sampling.
 *
 * Reserved address space (hp_reserve) is counted by its users page by page as they first
 * write it; hp_map counts the whole mapping at once.
 */
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "hpformat.h"
#include "payload.h"
#include "stacks.h"

_Atomic uint64_t hp_mapped_bytes;

size_t hp_page_round(size_t len)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	return (len + pg - 1) & ~(pg - 1);
}

void *hp_reserve(size_t len)
{
	void *p = mmap(NULL, hp_page_round(len), PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

void hp_unreserve(void *p, size_t len)
{
	munmap(p, hp_page_round(len));
}

void *hp_map(size_t len)
{
	void *p = hp_reserve(len);
	if (p)
		atomic_fetch_add(&hp_mapped_bytes, hp_page_round(len));
	return p;
}

void hp_unmap(void *p, size_t len)
{
	hp_unreserve(p, len);
	atomic_fetch_sub(&hp_mapped_bytes, hp_page_round(len));
}

int hp_reserve_is_free(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur != RLIM_INFINITY)
		return 0;
	char mode = '2';
	int fd = open("/proc/sys/vm/overcommit_memory", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		if (read(fd, &mode, 1) != 1)
			mode = '2';
		close(fd);
	}
	return mode != '2';
}

static uint64_t held_after(size_t len)
{
	return atomic_load_explicit(&hp_mapped_bytes, memory_order_relaxed) + hp_stacks_bytes() +
	       hp_page_round(len);
}

int hp_mem_spare(size_t len)
{
	return held_after(len) <= hp.max_memory - hp.max_memory / 4;
}

int hp_mem_admit_live(size_t len)
{
	if (held_after(len) <= hp.max_memory - hp.max_memory / 8)
		return 1;
	hp_go_sampled();
	return 0;
}

int hp_mem_fits(size_t len)
{
	return held_after(len) <= hp.max_memory;
}

int hp_mem_admit(size_t len)
{
	if (held_after(len) <= hp.max_memory)
		return 1;
	hp_go_sampled();
	return 0;
}

void hp_go_sampled(void)
{
	if (atomic_exchange(&hp.went_sampled, 1))
		return;
	uint64_t none = 0;
	atomic_compare_exchange_strong(&hp.rate, &none, HP_SWITCH_SAMPLE_RATE);
	/* After the rate: an allocation whose hook finds the flip sees the rate. */
	atomic_store(&hp.alloc_flip, HP_SELF_STOPPED);
}
