/* SPDX-License-Identifier: MIT */
/*
 * Cross-process and VMM mappings: an entry point describes its call here (CUDA IPC, cuMem export,
 * import, map, access, unmap, release), the real call runs in between, and the core works out
 * whose memory it is and which device gains access, records it and diagnoses a failure. Exact
 * pass-through: the caller's arguments and status are never changed, and no lock is held across
 * the real call (an interposer that did once deadlocked NCCL's start: Project-HAMi/HAMi#2641).
 */
#pragma once

#include <cuda.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "guard.h"

enum p2pg_map_op {
	P2PG_MAP_OP_IPC_GET,	/* cudaIpcGetMemHandle, cuIpcGetMemHandle: ptr */
	P2PG_MAP_OP_IPC_OPEN,	/* cudaIpcOpenMemHandle, cuIpcOpenMemHandle(_v2): ret_ptr, flags */
	P2PG_MAP_OP_IPC_CLOSE,	/* cudaIpcCloseMemHandle, cuIpcCloseMemHandle: ptr */
	P2PG_MAP_OP_EXPORT,	/* cuMemExportToShareableHandle: handle, handle_type, flags */
	P2PG_MAP_OP_IMPORT,	/* cuMemImportFromShareableHandle: ret_handle, os_handle, type */
	P2PG_MAP_OP_MAP,	/* cuMemMap: ptr, size, handle, flags */
	P2PG_MAP_OP_UNMAP,	/* cuMemUnmap: ptr, size */
	P2PG_MAP_OP_SET_ACCESS, /* cuMemSetAccess: ptr, size, desc, count */
	P2PG_MAP_OP_RELEASE,	/* cuMemRelease: handle */
	P2PG_MAP_OP_RETAIN,	/* cuMemRetainAllocationHandle: ret_handle, ptr (not recorded) */
	/* Stream-ordered pools (cudaMemPool*, cuMemPool*): a pool shared between processes, the
	 * pointers allocated from it, and the devices given access to it. */
	P2PG_MAP_OP_POOL_EXPORT,     /* pool, handle_type, flags */
	P2PG_MAP_OP_POOL_IMPORT,     /* ret_pool, os_handle, handle_type, flags */
	P2PG_MAP_OP_POOL_EXPORT_PTR, /* ptr */
	P2PG_MAP_OP_POOL_IMPORT_PTR, /* ret_ptr, pool */
	P2PG_MAP_OP_POOL_SET_ACCESS, /* pool, desc, count */
};

struct p2pg_mapping {
	unsigned api;
	enum p2pg_map_op op;
	CUdeviceptr ptr;
	CUdeviceptr *ret_ptr;
	size_t size;
	unsigned long long flags;
	CUmemGenericAllocationHandle handle;
	CUmemGenericAllocationHandle *ret_handle;
	int handle_type;       /* CUmemAllocationHandleType of an export or import */
	const void *os_handle; /* a cuMem import's OS handle; a legacy IPC handle's 64 bytes */
	const CUmemAccessDesc *desc;
	size_t count;
	CUmemoryPool pool;
	CUmemoryPool *ret_pool;
	/* owned by the core */
	uint64_t t0, started_ns, host_ns;
	int owner; /* learnt before the call where the call takes the answer away */
};

P2PG_CORE_API void p2pg_mapping_begin(struct p2pg_mapping *m);
/* Called right after the real call: records. Returns status unchanged. */
P2PG_CORE_API int p2pg_mapping_end(struct p2pg_mapping *m, int status);

/* A copy's pointer inside a live mapping of another device's memory given to the copy's other
 * device: the copy goes over P2P. Cheap when the process has no such mapping. */
bool p2pg_mapping_peer_path(CUdeviceptr p, int other_device);
/* The device whose memory a pointer inside a live peer mapping is (-1 when it is in none, or its
 * owner is unknown): the driver names a legacy IPC mapping by the importer's device instead. */
int p2pg_mapping_owner(CUdeviceptr p);
/* Whether device's copy engine may touch p: any memory outside a live mapping, a legacy IPC
 * mapping (usable from every context, measured), a VMM mapping only where cuMemSetAccess granted
 * device (the staged engine cannot read a peer's mapping on the owner's stream: the driver says
 * CUDA_ERROR_INVALID_VALUE, measured on two H200s). */
bool p2pg_mapping_usable_by(CUdeviceptr p, int device);
