/* SPDX-License-Identifier: MIT */
/*
 * GPU times of asynchronous peer copies from CUPTI's activity records (P2PGUARD_GPU_TIMING=cupti):
 * every copy timed by the GPU itself, at a cost the caller does not see beyond a stream-ID lookup,
 * in exchange for CUPTI's MEMCPY activity, which traces every copy of the process, and for the
 * process's one set of CUPTI activity buffers (see the README for the trade). libcupti is loaded
 * with dlopen, never linked.
 */
#pragma once

#include <cuda.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpu_match.h"

/*
 * Loads libcupti and enables its MEMCPY activity. Called when the program first initialises the
 * driver (its cuInit), before the driver is: starting then costs the process about 4 ms once.
 * Started once the driver has contexts, it took 21-29 ms and held the program's
 * copies up to 18 ms, and tracing cost 0.7-1.8 us more per copy for the next few hundred
 * milliseconds (tests/bench/bench_cupti_start on the H200 pair), so it is never started later.
 * false with a reason in why when it cannot (no libcupti, a profiler owns CUPTI, CUPTI refuses):
 * the caller keeps timing events.
 */
bool p2pg_cupti_start(char *why, size_t why_len);

extern bool p2pg_cupti_on; /* set once by p2pg_cupti_start, cleared in a forked child */

static inline bool p2pg_cupti_active(void)
{
	return __atomic_load_n(&p2pg_cupti_on, __ATOMIC_ACQUIRE);
}

/* Hot path, after the copy was enqueued: CUPTI's IDs of the stream the copy went on and of its
 * context (a stream's ID is unique only within its context). */
bool p2pg_cupti_stream_id(CUstream stream, bool per_thread, uint32_t *ret_context,
			  uint32_t *ret_stream);

/*
 * Drainer: queues in m the peer copies of the records CUPTI handed over, after asking it for the
 * finished ones (cuptiActivityFlushAll) when flush is set. Once exit has begun, flush is false:
 * records CUPTI delivers by itself (full buffers, context teardown) are still taken, without a
 * call into CUPTI or CUDA. Returns how many peer copies it queued.
 */
size_t p2pg_cupti_collect(struct p2pg_gpu_match *m, bool flush);

/* Drainer: CUPTI delivers no more (another client took its activity callbacks over); copies are
 * timed with sampled events from now on. */
void p2pg_cupti_give_up(void);

void p2pg_cupti_after_fork_child(void);

/* P2PGUARD_TEST=local-copies: CUPTI's records of copies within one device time their rows too. */
void p2pg_cupti_time_local_copies(bool on);
