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
 * Loads libcupti and enables its MEMCPY activity. Called by the drainer once the program made its
 * first asynchronous peer copy (p2pg_cupti_request), never on the program's own threads: a process
 * that makes no peer copy (a child, a data loader, a single-GPU job) never loads CUPTI, and none
 * of its copies is traced. false with a reason in why when it cannot (no libcupti, a profiler owns
 * CUPTI, CUPTI refuses): the caller keeps timing events.
 */
bool p2pg_cupti_start(char *why, size_t why_len);

extern bool p2pg_cupti_on;	  /* set once by p2pg_cupti_start, cleared in a forked child */
extern bool p2pg_cupti_requested; /* set once by p2pg_cupti_request */
extern bool p2pg_cupti_refused;	  /* the start failed, or this is a forked child: events for good */

/* Neither started nor refused yet: the caller times every copy with events meanwhile. */
static inline bool p2pg_cupti_pending(void)
{
	return !__atomic_load_n(&p2pg_cupti_on, __ATOMIC_ACQUIRE) &&
	       !__atomic_load_n(&p2pg_cupti_refused, __ATOMIC_ACQUIRE);
}

/* Hot path: asks the drainer to start CUPTI (one store, once per process). */
static inline void p2pg_cupti_request(void)
{
	if (!__atomic_load_n(&p2pg_cupti_requested, __ATOMIC_RELAXED))
		__atomic_store_n(&p2pg_cupti_requested, true, __ATOMIC_RELEASE);
}

/* Drainer: whether a start was asked for and not yet tried; true at most once per process. */
bool p2pg_cupti_start_due(void);

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
