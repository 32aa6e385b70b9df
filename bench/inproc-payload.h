/* inproc-payload.h - the payload started inside the calling process, for counting its
 * instructions under callgrind (bench/inproc.sh, bench/redis-inproc.sh).
 *
 * Contract: bench_payload_start dlopens the payload at path and starts it as
 * tests/unit/test-payload does, in mode (an enum hp_mode), full mode sampled when
 * rate > 0, with rounds that never end while a run lasts, and a thread that reads its pipe
 * and drops the rounds so that it never fills. It returns the payload's handle, or NULL after a
 * message on stderr that starts with name.
 */
#ifndef HEAPPROF_BENCH_INPROC_PAYLOAD_H
#define HEAPPROF_BENCH_INPROC_PAYLOAD_H

void *bench_payload_start(const char *path, int mode, long rate, const char *name);

#endif
