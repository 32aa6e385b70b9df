/* hpabi.h - the calls the injector makes into a loaded payload.
 *
 * Contract: the injector dlopens the payload (soname HP_PAYLOAD_SONAME) in the target,
 * writes a struct hp_start_args into the target's memory and calls heapprof_start(args)
 * in a borrowed thread whose signals are all blocked. heapprof_start creates the pipe,
 * patches the GOT slots and starts the collector thread; it returns the pipe's *read*
 * fd (>= 0), or -errno. The injector opens that fd through /proc/PID/fd, then calls
 * heapprof_release_pipe() to close it in the target; if no call comes (the injector died),
 * the payload closes it itself HP_PIPE_GRACE_S seconds after the start, or at unload.
 * heapprof_stop restores every slot and asks the collector for a last round and END; after it
 * returns 0 no thread enters payload code again except those already inside a hook and the
 * collector. The collector then parks (struct hp_collector_state). Once it has and no other
 * thread is inside payload code, heapprof_free_memory lets it unmap the payload's memory and
 * end, and the payload may be dlclosed once its thread is gone (its destructor joins it, and
 * frees what is left when no collector ran). heapprof_start and heapprof_stop are safe to call
 * when the payload is already started / stopped (-EBUSY / 0). A detach that finds no session uses
 * dlopen(HP_PAYLOAD_SONAME, RTLD_NOLOAD) to get the handle of the loaded payload. The last round
 * waits at most HP_STOP_WRITE_S for a reader that takes nothing; a detach of a payload another
 * injector loaded calls heapprof_release_pipe before heapprof_stop, so that the payload's own
 * read end, left by an injector that died before taking its copy, is not a reader that last
 * round waits for. The entry points are exported functions and heapprof_collector an exported
 * object, found in .dynsym.
 */
#ifndef HEAPPROF_HPABI_H
#define HEAPPROF_HPABI_H

#include <stdint.h>

#define HP_PAYLOAD_SONAME "libheapprof-payload.so.1"
#define HP_PAYLOAD_FILE "heapprof-payload.so"
/* Beside it: the same payload finding thread records by a hash instead of TLS, for a target
 * with no static TLS left (inject.h, hp_inject_load). */
#define HP_PAYLOAD_FALLBACK_FILE "heapprof-payload-hashed.so"
/* The memfd the payload is loaded from: /proc/PID/maps shows "/memfd:heapprof (deleted)". */
#define HP_MEMFD_NAME "heapprof"
/* The collector thread's name (/proc/PID/task/TID/comm). */
#define HP_COLLECTOR_NAME "heapprof"
#define HP_ABI_VERSION 3
#define HP_START_SYMBOL "heapprof_start"
#define HP_STOP_SYMBOL "heapprof_stop"
#define HP_RELEASE_SYMBOL "heapprof_release_pipe"
#define HP_FREE_SYMBOL "heapprof_free_memory"
#define HP_COLLECTOR_SYMBOL "heapprof_collector"
#define HP_PIPE_GRACE_S 30
#define HP_STOP_WRITE_S 8

/* The stubs GLOB_DAT slots point at while attached, because code also reads those slots
 * to take a function's address and may call it long after the payload is gone. The stub
 * area (in the zero tail of a module's code segment, written by the injector) is
 * HP_STUBS_MAGIC then HP_STUB_COUNT stubs of HP_STUB_SIZE bytes, stub i being
 * "jmp *slot_i(%rip)"; the data area (the zero tail of the same module's last writable
 * segment) holds a qword that is nonzero once any slot was pointed at a stub, then the
 * HP_STUB_COUNT slots. The payload keeps slot i at hook i while attached and sets it to
 * the real function before it can be unloaded; a used area is never removed. */
#define HP_STUBS_MAGIC "HEAPPROF-STUBS1"
#define HP_STUBS_MAGIC_LEN 16
#define HP_STUB_COUNT 32
#define HP_STUB_SIZE 8
#define HP_STUBS_CODE_LEN (HP_STUBS_MAGIC_LEN + HP_STUB_COUNT * HP_STUB_SIZE)
#define HP_STUBS_DATA_LEN (8 + HP_STUB_COUNT * 8)

/* Stub i of the areas at code, and its slot in the areas' data. */
static inline uint64_t hp_stub_at(uint64_t code, int i)
{
	return code + HP_STUBS_MAGIC_LEN + (uint64_t)i * HP_STUB_SIZE;
}

static inline uint64_t hp_stub_slot_at(uint64_t data, int i)
{
	return data + 8 + 8 * (uint64_t)i;
}

struct hp_start_args {
	uint32_t abi_version; /* HP_ABI_VERSION */
	uint32_t mode;	      /* enum hp_mode */
	uint32_t interval_ms; /* round length, >= 10 */
	uint32_t max_depth;   /* frames per stack, 1..HP_MAX_DEPTH */
	uint64_t sample_rate; /* bytes; 0 = record every allocation */
	uint64_t max_memory;  /* bytes the payload may hold; 0 = its default */
	uint64_t stub_code;   /* the stub areas in the target; 0 = none: GLOB_DAT slots */
	uint64_t stub_data;   /* point at the hooks themselves */
};

/* The least max_memory heapprof_start takes: its fixed tables (threads, unwind rules, the
 * live map's shards and filter) take about 4 MiB before anything is admitted against it,
 * and a cap below them could not be kept. */
#define HP_MIN_MAX_MEMORY (8ull << 20)

/* The exported object HP_COLLECTOR_SYMBOL, which a detach reads through /proc/PID/mem
 * without holding any thread: the thread tid is in payload code while phase is RUNNING,
 * PARKED or FREEING. The unmapping (every thread's tables) runs there, at full speed,
 * rather than in the dlclose's borrowed thread, which would be held through all of it. */
enum hp_collector_phase {
	HP_COLLECTOR_NONE,    /* no collector thread: none started, or it was joined */
	HP_COLLECTOR_RUNNING, /* streaming rounds, or writing the last one */
	HP_COLLECTOR_PARKED,  /* last round written (or the pipe given up); waits */
	HP_COLLECTOR_FREEING, /* unmapping the payload's memory, then ending */
};

struct hp_collector_state {
	uint32_t phase; /* enum hp_collector_phase */
	int32_t tid;	/* its gettid(): in a PID namespace, that namespace's number */
};

typedef int (*hp_start_fn)(const struct hp_start_args *args);
typedef int (*hp_stop_fn)(void);

#endif
