/* SPDX-License-Identifier: MIT */
/*
 * The staged copy engine: moves bytes between two devices through pinned host memory, with the
 * device-to-host half on the source device and the host-to-device half on the destination device
 * pipelined chunk by chunk. Driver API only, so static and shared runtimes both reach it.
 */
#pragma once

#include <cuda.h>
#include <stdbool.h>
#include <stddef.h>

struct p2pg_staged_copy {
	CUdeviceptr dst;
	CUdeviceptr src;
	int dst_device;
	int src_device;
	size_t bytes;
	/*
	 * The caller's stream. For an asynchronous copy the staged work is ordered after everything
	 * enqueued on it before the call and before everything enqueued after. NULL (0) is the
	 * legacy default stream, or CU_STREAM_PER_THREAD when per_thread_stream is set.
	 */
	CUstream stream;
	bool per_thread_stream;
	/* Synchronous copies return once the bytes are in place. */
	bool async;
	/* The caller has just asked the driver whether the stream is being captured (answer: no),
	 * so the engine need not ask again. */
	bool not_capturing;
};

/*
 * Performs the copy. Returns CUDA_SUCCESS or the first driver error met (the copy is then
 * incomplete and the caller gets that status, as it would from the driver). Thread-safe.
 * Asynchronous copies never block the calling thread on the GPU.
 */
CUresult p2pg_staged_copy(const struct p2pg_staged_copy *copy);

/*
 * Sets up what copies from src_device to dst_device need (the engine, the pair's streams and
 * events, the destination's staging ring) unless done already. Returns CUDA_SUCCESS, or the
 * driver's error with nothing of the pair left allocated: the caller then hands the copy to the
 * driver as the program called it (the guard is never why a copy fails).
 */
CUresult p2pg_staged_prepare(int src_device, int dst_device);

/* Bytes of pinned staging memory the engine may hold in total (P2PGUARD_STAGING_MB). */
void p2pg_staged_set_budget(size_t bytes);

/*
 * Knobs of the pipeline, for the benchmark and the tests; the defaults are the measured choice
 * (see staged_setup.c). Ring geometry is fixed when a destination's ring is first allocated.
 */
struct p2pg_staged_tuning {
	size_t slot_bytes; /* size of one ring slot: the largest chunk */
	unsigned slots;	   /* ring depth per destination device */
	size_t min_chunk;  /* copies up to this size travel as one chunk */
	size_t chunk_cost; /* fixed cost of a chunk in bytes of transfer: n bytes go as
			      sqrt(n / chunk_cost) chunks */
};

void p2pg_staged_get_tuning(struct p2pg_staged_tuning *ret);
/*
 * Replaces the knobs. Returns 0, -EINVAL for a zero field or a slot smaller than 4 KiB, or -EBUSY
 * once the engine has set up a pair (call it before the first copy).
 */
int p2pg_staged_set_tuning(const struct p2pg_staged_tuning *tuning);

/* Pinned staging bytes the engine holds now (never more than the budget, see staged_setup.c). */
size_t p2pg_staged_pinned_bytes(void);
