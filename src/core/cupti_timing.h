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
 * Loads libcupti and enables its MEMCPY activity; before the program's first CUDA call, so that
 * every copy is traced. false with a reason in why when it cannot (no libcupti, a profiler owns
 * CUPTI, CUPTI refuses): the caller falls back to timing events.
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
 * call into CUPTI or CUDA.
 */
void p2pg_cupti_collect(struct p2pg_gpu_match *m, bool flush);

void p2pg_cupti_after_fork_child(void);
