/* SPDX-License-Identifier: MIT */
/*
 * Cross-process and VMM mapping entry points: CUDA IPC (runtime and driver, every ABI of
 * cuIpcOpenMemHandle) and the cuMem calls that export, import, map, give access to, unmap and
 * release memory. Each describes its call and hands it to the core (guard/mapping.h) around the
 * real call; the status goes back untouched. The runtime's IPC calls reach the driver's through
 * its table, as re-entrant calls that pass straight through: each call is recorded once.
 */
#include <cuda.h>
#include <cuda_runtime_api.h>

#include "entry.h"
#include "mapping_hooks.h"

#define DRIVER_REAL(type, name)	 P2PG_REAL(type, name, P2PG_LIB_DRIVER)
#define RUNTIME_REAL(type, name) P2PG_REAL(type, name, P2PG_LIB_RUNTIME)

#define REAL_SLOT(name) void *_Atomic p2pg_real_##name;
P2PG_MAPPING_DRIVER_HOOKS(REAL_SLOT)
P2PG_MAPPING_RUNTIME_HOOKS(REAL_SLOT)
#undef REAL_SLOT

typedef CUresult(CUDAAPI *ipc_get_fn)(CUipcMemHandle *, CUdeviceptr);
typedef CUresult(CUDAAPI *ipc_open_fn)(CUdeviceptr *, CUipcMemHandle, unsigned int);
typedef CUresult(CUDAAPI *ipc_close_fn)(CUdeviceptr);
typedef CUresult(CUDAAPI *export_fn)(void *, CUmemGenericAllocationHandle,
				     CUmemAllocationHandleType, unsigned long long);
typedef CUresult(CUDAAPI *import_fn)(CUmemGenericAllocationHandle *, void *,
				     CUmemAllocationHandleType);
typedef CUresult(CUDAAPI *map_fn)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
				  unsigned long long);
typedef CUresult(CUDAAPI *unmap_fn)(CUdeviceptr, size_t);
typedef CUresult(CUDAAPI *set_access_fn)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
typedef CUresult(CUDAAPI *release_fn)(CUmemGenericAllocationHandle);
typedef CUresult(CUDAAPI *retain_fn)(CUmemGenericAllocationHandle *, void *);
typedef cudaError_t (*rt_ipc_get_fn)(cudaIpcMemHandle_t *, void *);
typedef cudaError_t (*rt_ipc_open_fn)(void **, cudaIpcMemHandle_t, unsigned int);
typedef cudaError_t (*rt_ipc_close_fn)(void *);

/* ---- driver: legacy IPC ---- */

P2PG_EXPORT CUresult CUDAAPI cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr)
{
	ipc_get_fn real = DRIVER_REAL(ipc_get_fn, cuIpcGetMemHandle);
	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	struct p2pg_scope scope;
	if (!p2pg_enter(&scope))
		return P2PG_PASS_THROUGH(scope, real(pHandle, dptr));
	struct p2pg_mapping m = {.api = P2PG_API_cuIpcGetMemHandle,
				 .op = P2PG_MAP_OP_IPC_GET,
				 .ptr = dptr,
				 .os_handle = pHandle};
	return P2PG_MAPPING(scope, m, CUresult, real(pHandle, dptr));
}

static CUresult ipc_open(unsigned api, ipc_open_fn real, CUdeviceptr *pdptr, CUipcMemHandle handle,
			 unsigned int flags)
{
	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	struct p2pg_scope scope;
	if (!p2pg_enter(&scope))
		return P2PG_PASS_THROUGH(scope, real(pdptr, handle, flags));
	struct p2pg_mapping m = {.api = api,
				 .op = P2PG_MAP_OP_IPC_OPEN,
				 .ret_ptr = pdptr,
				 .flags = flags,
				 .os_handle = &handle};
	return P2PG_MAPPING(scope, m, CUresult, real(pdptr, handle, flags));
}

P2PG_EXPORT CUresult CUDAAPI cuIpcOpenMemHandle_v1(CUdeviceptr *pdptr, CUipcMemHandle handle,
						   unsigned int Flags)
{
	ipc_open_fn real = (ipc_open_fn)p2pg_resolve_real(
	    "cuIpcOpenMemHandle", &p2pg_real_cuIpcOpenMemHandle_v1, P2PG_LIB_DRIVER);
	return ipc_open(P2PG_API_cuIpcOpenMemHandle, real, pdptr, handle, Flags);
}

P2PG_EXPORT CUresult CUDAAPI cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle,
						   unsigned int Flags)
{
	return ipc_open(P2PG_API_cuIpcOpenMemHandle_v2,
			DRIVER_REAL(ipc_open_fn, cuIpcOpenMemHandle_v2), pdptr, handle, Flags);
}

P2PG_EXPORT CUresult CUDAAPI cuIpcCloseMemHandle(CUdeviceptr dptr)
{
	ipc_close_fn real = DRIVER_REAL(ipc_close_fn, cuIpcCloseMemHandle);
	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	struct p2pg_scope scope;
	if (!p2pg_enter(&scope))
		return P2PG_PASS_THROUGH(scope, real(dptr));
	struct p2pg_mapping m = {
	    .api = P2PG_API_cuIpcCloseMemHandle, .op = P2PG_MAP_OP_IPC_CLOSE, .ptr = dptr};
	return P2PG_MAPPING(scope, m, CUresult, real(dptr));
}

/* ---- driver: virtual memory management ---- */

P2PG_EXPORT CUresult CUDAAPI cuMemExportToShareableHandle(void *shareableHandle,
							  CUmemGenericAllocationHandle handle,
							  CUmemAllocationHandleType handleType,
							  unsigned long long flags)
{
	export_fn real = DRIVER_REAL(export_fn, cuMemExportToShareableHandle);
	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	struct p2pg_scope scope;
	if (!p2pg_enter(&scope))
		return P2PG_PASS_THROUGH(scope, real(shareableHandle, handle, handleType, flags));
	struct p2pg_mapping m = {.api = P2PG_API_cuMemExportToShareableHandle,
				 .op = P2PG_MAP_OP_EXPORT,
				 .handle = handle,
				 .handle_type = (int)handleType,
				 .flags = flags};
	return P2PG_MAPPING(scope, m, CUresult, real(shareableHandle, handle, handleType, flags));
}

P2PG_EXPORT CUresult CUDAAPI cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle,
							    void *osHandle,
							    CUmemAllocationHandleType shHandleType)
{
	import_fn real = DRIVER_REAL(import_fn, cuMemImportFromShareableHandle);
	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	struct p2pg_scope scope;
	if (!p2pg_enter(&scope))
		return P2PG_PASS_THROUGH(scope, real(handle, osHandle, shHandleType));
	struct p2pg_mapping m = {.api = P2PG_API_cuMemImportFromShareableHandle,
				 .op = P2PG_MAP_OP_IMPORT,
				 .ret_handle = handle,
				 .handle_type = (int)shHandleType,
				 .os_handle = osHandle};
	return P2PG_MAPPING(scope, m, CUresult, real(handle, osHandle, shHandleType));
}

P2PG_EXPORT CUresult CUDAAPI cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
				      CUmemGenericAllocationHandle handle, unsigned long long flags)
{
	map_fn real = DRIVER_REAL(map_fn, cuMemMap);
	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	struct p2pg_scope scope;
	if (!p2pg_enter(&scope))
		return P2PG_PASS_THROUGH(scope, real(ptr, size, offset, handle, flags));
	struct p2pg_mapping m = {.api = P2PG_API_cuMemMap,
				 .op = P2PG_MAP_OP_MAP,
				 .ptr = ptr,
				 .size = size,
				 .handle = handle,
				 .flags = flags};
	return P2PG_MAPPING(scope, m, CUresult, real(ptr, size, offset, handle, flags));
}

P2PG_EXPORT CUresult CUDAAPI cuMemUnmap(CUdeviceptr ptr, size_t size)
{
	unmap_fn real = DRIVER_REAL(unmap_fn, cuMemUnmap);
	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	struct p2pg_scope scope;
	if (!p2pg_enter(&scope))
		return P2PG_PASS_THROUGH(scope, real(ptr, size));
	struct p2pg_mapping m = {
	    .api = P2PG_API_cuMemUnmap, .op = P2PG_MAP_OP_UNMAP, .ptr = ptr, .size = size};
	return P2PG_MAPPING(scope, m, CUresult, real(ptr, size));
}

P2PG_EXPORT CUresult CUDAAPI cuMemSetAccess(CUdeviceptr ptr, size_t size,
					    const CUmemAccessDesc *desc, size_t count)
{
	set_access_fn real = DRIVER_REAL(set_access_fn, cuMemSetAccess);
	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	struct p2pg_scope scope;
	if (!p2pg_enter(&scope))
		return P2PG_PASS_THROUGH(scope, real(ptr, size, desc, count));
	struct p2pg_mapping m = {.api = P2PG_API_cuMemSetAccess,
				 .op = P2PG_MAP_OP_SET_ACCESS,
				 .ptr = ptr,
				 .size = size,
				 .desc = desc,
				 .count = count,
				 .flags = desc && count ? desc[0].flags : 0};
	return P2PG_MAPPING(scope, m, CUresult, real(ptr, size, desc, count));
}

P2PG_EXPORT CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle handle)
{
	release_fn real = DRIVER_REAL(release_fn, cuMemRelease);
	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	struct p2pg_scope scope;
	if (!p2pg_enter(&scope))
		return P2PG_PASS_THROUGH(scope, real(handle));
	struct p2pg_mapping m = {
	    .api = P2PG_API_cuMemRelease, .op = P2PG_MAP_OP_RELEASE, .handle = handle};
	return P2PG_MAPPING(scope, m, CUresult, real(handle));
}

P2PG_EXPORT CUresult CUDAAPI cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle,
							 void *addr)
{
	retain_fn real = DRIVER_REAL(retain_fn, cuMemRetainAllocationHandle);
	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	struct p2pg_scope scope;
	if (!p2pg_enter(&scope))
		return P2PG_PASS_THROUGH(scope, real(handle, addr));
	struct p2pg_mapping m = {.api = P2PG_API_cuMemRelease,
				 .op = P2PG_MAP_OP_RETAIN,
				 .ret_handle = handle,
				 .ptr = (CUdeviceptr)(uintptr_t)addr};
	return P2PG_MAPPING(scope, m, CUresult, real(handle, addr));
}

/* ---- runtime: legacy IPC (PyTorch's shared tensors, vLLM's custom all-reduce) ---- */

P2PG_EXPORT cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *handle, void *devPtr)
{
	rt_ipc_get_fn real = RUNTIME_REAL(rt_ipc_get_fn, cudaIpcGetMemHandle);
	if (!real)
		return cudaErrorInitializationError;
	struct p2pg_scope scope;
	if (!p2pg_enter(&scope))
		return P2PG_PASS_THROUGH(scope, real(handle, devPtr));
	struct p2pg_mapping m = {.api = P2PG_API_cudaIpcGetMemHandle,
				 .op = P2PG_MAP_OP_IPC_GET,
				 .ptr = (CUdeviceptr)(uintptr_t)devPtr,
				 .os_handle = handle};
	return P2PG_MAPPING(scope, m, cudaError_t, real(handle, devPtr));
}

P2PG_EXPORT cudaError_t cudaIpcOpenMemHandle(void **devPtr, cudaIpcMemHandle_t handle,
					     unsigned int flags)
{
	rt_ipc_open_fn real = RUNTIME_REAL(rt_ipc_open_fn, cudaIpcOpenMemHandle);
	if (!real)
		return cudaErrorInitializationError;
	struct p2pg_scope scope;
	if (!p2pg_enter(&scope))
		return P2PG_PASS_THROUGH(scope, real(devPtr, handle, flags));
	struct p2pg_mapping m = {.api = P2PG_API_cudaIpcOpenMemHandle,
				 .op = P2PG_MAP_OP_IPC_OPEN,
				 .ret_ptr = (CUdeviceptr *)devPtr,
				 .flags = flags,
				 .os_handle = &handle};
	return P2PG_MAPPING(scope, m, cudaError_t, real(devPtr, handle, flags));
}

P2PG_EXPORT cudaError_t cudaIpcCloseMemHandle(void *devPtr)
{
	rt_ipc_close_fn real = RUNTIME_REAL(rt_ipc_close_fn, cudaIpcCloseMemHandle);
	if (!real)
		return cudaErrorInitializationError;
	struct p2pg_scope scope;
	if (!p2pg_enter(&scope))
		return P2PG_PASS_THROUGH(scope, real(devPtr));
	struct p2pg_mapping m = {.api = P2PG_API_cudaIpcCloseMemHandle,
				 .op = P2PG_MAP_OP_IPC_CLOSE,
				 .ptr = (CUdeviceptr)(uintptr_t)devPtr};
	return P2PG_MAPPING(scope, m, cudaError_t, real(devPtr));
}
