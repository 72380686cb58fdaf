/* The simulated driver's interface to the simulated tools library (libcupti.so.13, cupti.c).
 *
 * Not CUDA API: libcuda.so.1 exports these under simcuda_* names, outside the cuGetProcAddress
 * table (check_exports.py knows them), and libcupti.so.13 finds them with dlopen("libcuda.so.1")
 * and dlsym. A program that is handed the real driver finds none of them. */
#ifndef SIMCUDA_TOOLS_H
#define SIMCUDA_TOOLS_H

#include <cuda.h>

#include <stdint.h>

/* Where a copy's source or destination lies, when not in device memory. */
#define SIMCUDA_MEM_PINNED   (-1) /* host memory the driver allocated */
#define SIMCUDA_MEM_PAGEABLE (-2) /* any other host memory */

/* A copy (linear, or pitched 2D/3D) that has finished executing on a stream. */
struct simcuda_copy_info {
	uint64_t bytes;
	uint64_t start_ns, end_ns;  /* CLOCK_REALTIME, when the copy began and ended executing */
	uint64_t graph_node_id;	    /* 0 unless the copy is a node of a launched graph */
	uint32_t graph_id;	    /* 0 unless launched from a graph: the executable graph's ID */
	uint32_t correlation_id;    /* of the API call that enqueued it (process-wide counter) */
	uint32_t context_id;	    /* the stream's context (simcuda_context_tool_id) */
	uint32_t stream_id;	    /* the stream (simcuda_stream_tool_id) */
	int device;		    /* the stream's device */
	int src_device, dst_device; /* device ordinal, or SIMCUDA_MEM_PINNED / _PAGEABLE */
	uint32_t src_context_id;    /* context that allocated device memory; 0 for host memory */
	uint32_t dst_context_id;
	int async; /* enqueued by an asynchronous call (cu*Async, batches, graph launches) */
	/* A copy between two devices without peer access between them, which the driver moves
	 * through the host (the real CUPTI then reports a DTOH and an HTOD record, not a PTOP). */
	int staged_by_driver;
};

/* Called once per copy, after its bytes are in place and before the stream counts it complete
 * (a synchronize that returns has seen the call). Runs on the stream's worker thread, without any
 * driver lock held; only after the driver's exit destructor (no workers) on the enqueueing thread
 * with the driver lock held. Must not block on CUDA work. */
typedef void (*simcuda_copy_observer_fn)(const struct simcuda_copy_info *info);

/* Installs fn (NULL: none). Copies that finish after it returns are reported to fn. */
typedef void simcuda_set_copy_observer_t(simcuda_copy_observer_fn fn);

/* A context's tool ID (a process-unique number, new whenever a context is created). Returns
 * CUDA_ERROR_INVALID_CONTEXT for NULL or a handle that is no context,
 * CUDA_ERROR_CONTEXT_IS_DESTROYED, CUDA_ERROR_INVALID_VALUE for a NULL id. */
typedef CUresult simcuda_context_tool_id_t(CUcontext ctx, uint32_t *id);

/* A stream's tool ID: unique within its context, the legacy and each thread's per-thread default
 * stream having their own. NULL, CU_STREAM_LEGACY and CU_STREAM_PER_THREAD name the default
 * streams of ctx, or of the current context when ctx is NULL (per_thread set: NULL is the calling
 * thread's per-thread stream). Returns CUDA_ERROR_INVALID_HANDLE for a stream that is not one or
 * does not belong to a non-NULL ctx, the driver's error when no context can be had,
 * CUDA_ERROR_INVALID_VALUE for a NULL id. */
typedef CUresult simcuda_stream_tool_id_t(CUcontext ctx, CUstream stream, int per_thread,
					  uint32_t *id);

#endif
