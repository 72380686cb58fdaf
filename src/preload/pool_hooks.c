/* SPDX-License-Identifier: MIT */
/*
 * Stream-ordered memory pools shared between processes (driver and runtime): a pool exported to
 * a shareable handle and imported, a pointer's export data and its import, and the devices given
 * access to a pool. The runtime's forms reach the driver's through its table, as re-entrant calls
 * that pass straight through: each call is recorded once. Each describes its call to the core
 * (guard/mapping.h) around the real call; the status goes back untouched.
 */
#include <cuda.h>
#include <cuda_runtime_api.h>

#include "entry.h"
#include "mapping_hooks.h"

#define DRIVER_REAL(type, name)	 P2PG_REAL(type, name, P2PG_LIB_DRIVER)
#define RUNTIME_REAL(type, name) P2PG_REAL(type, name, P2PG_LIB_RUNTIME)

typedef CUresult(CUDAAPI *pool_export_fn)(void *, CUmemoryPool, CUmemAllocationHandleType,
					  unsigned long long);
typedef CUresult(CUDAAPI *pool_import_fn)(CUmemoryPool *, void *, CUmemAllocationHandleType,
					  unsigned long long);
typedef CUresult(CUDAAPI *pool_export_ptr_fn)(CUmemPoolPtrExportData *, CUdeviceptr);
typedef CUresult(CUDAAPI *pool_import_ptr_fn)(CUdeviceptr *, CUmemoryPool,
					      CUmemPoolPtrExportData *);
typedef CUresult(CUDAAPI *pool_set_access_fn)(CUmemoryPool, const CUmemAccessDesc *, size_t);
typedef cudaError_t (*rt_pool_export_fn)(void *, cudaMemPool_t, enum cudaMemAllocationHandleType,
					 unsigned int);
typedef cudaError_t (*rt_pool_import_fn)(cudaMemPool_t *, void *, enum cudaMemAllocationHandleType,
					 unsigned int);
typedef cudaError_t (*rt_pool_export_ptr_fn)(struct cudaMemPoolPtrExportData *, void *);
typedef cudaError_t (*rt_pool_import_ptr_fn)(void **, cudaMemPool_t,
					     struct cudaMemPoolPtrExportData *);
typedef cudaError_t (*rt_pool_set_access_fn)(cudaMemPool_t, const struct cudaMemAccessDesc *,
					     size_t);

/* The runtime's pool and access descriptor are the driver's (same object, same layout). */
_Static_assert(sizeof(struct cudaMemAccessDesc) == sizeof(CUmemAccessDesc),
	       "cudaMemAccessDesc is CUmemAccessDesc");

/* ---- driver ---- */

P2PG_EXPORT CUresult CUDAAPI cuMemPoolExportToShareableHandle(void *handle_out, CUmemoryPool pool,
							      CUmemAllocationHandleType handleType,
							      unsigned long long flags)
{
	pool_export_fn real = DRIVER_REAL(pool_export_fn, cuMemPoolExportToShareableHandle);
	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	struct p2pg_scope scope;
	if (!p2pg_enter(&scope))
		return P2PG_PASS_THROUGH(scope, real(handle_out, pool, handleType, flags));
	struct p2pg_mapping m = {.api = P2PG_API_cuMemPoolExportToShareableHandle,
				 .op = P2PG_MAP_OP_POOL_EXPORT,
				 .pool = pool,
				 .handle_type = (int)handleType,
				 .flags = flags};
	return P2PG_MAPPING(scope, m, CUresult, real(handle_out, pool, handleType, flags));
}

P2PG_EXPORT CUresult CUDAAPI
cuMemPoolImportFromShareableHandle(CUmemoryPool *pool_out, void *handle,
				   CUmemAllocationHandleType handleType, unsigned long long flags)
{
	pool_import_fn real = DRIVER_REAL(pool_import_fn, cuMemPoolImportFromShareableHandle);
	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	struct p2pg_scope scope;
	if (!p2pg_enter(&scope))
		return P2PG_PASS_THROUGH(scope, real(pool_out, handle, handleType, flags));
	struct p2pg_mapping m = {.api = P2PG_API_cuMemPoolImportFromShareableHandle,
				 .op = P2PG_MAP_OP_POOL_IMPORT,
				 .ret_pool = pool_out,
				 .os_handle = handle,
				 .handle_type = (int)handleType,
				 .flags = flags};
	return P2PG_MAPPING(scope, m, CUresult, real(pool_out, handle, handleType, flags));
}

P2PG_EXPORT CUresult CUDAAPI cuMemPoolExportPointer(CUmemPoolPtrExportData *shareData_out,
						    CUdeviceptr ptr)
{
	pool_export_ptr_fn real = DRIVER_REAL(pool_export_ptr_fn, cuMemPoolExportPointer);
	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	struct p2pg_scope scope;
	if (!p2pg_enter(&scope))
		return P2PG_PASS_THROUGH(scope, real(shareData_out, ptr));
	struct p2pg_mapping m = {
	    .api = P2PG_API_cuMemPoolExportPointer, .op = P2PG_MAP_OP_POOL_EXPORT_PTR, .ptr = ptr};
	return P2PG_MAPPING(scope, m, CUresult, real(shareData_out, ptr));
}

P2PG_EXPORT CUresult CUDAAPI cuMemPoolImportPointer(CUdeviceptr *ptr_out, CUmemoryPool pool,
						    CUmemPoolPtrExportData *shareData)
{
	pool_import_ptr_fn real = DRIVER_REAL(pool_import_ptr_fn, cuMemPoolImportPointer);
	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	struct p2pg_scope scope;
	if (!p2pg_enter(&scope))
		return P2PG_PASS_THROUGH(scope, real(ptr_out, pool, shareData));
	struct p2pg_mapping m = {.api = P2PG_API_cuMemPoolImportPointer,
				 .op = P2PG_MAP_OP_POOL_IMPORT_PTR,
				 .ret_ptr = ptr_out,
				 .pool = pool};
	return P2PG_MAPPING(scope, m, CUresult, real(ptr_out, pool, shareData));
}

P2PG_EXPORT CUresult CUDAAPI cuMemPoolSetAccess(CUmemoryPool pool, const CUmemAccessDesc *map,
						size_t count)
{
	pool_set_access_fn real = DRIVER_REAL(pool_set_access_fn, cuMemPoolSetAccess);
	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	struct p2pg_scope scope;
	if (!p2pg_enter(&scope))
		return P2PG_PASS_THROUGH(scope, real(pool, map, count));
	struct p2pg_mapping m = {.api = P2PG_API_cuMemPoolSetAccess,
				 .op = P2PG_MAP_OP_POOL_SET_ACCESS,
				 .pool = pool,
				 .desc = map,
				 .count = count};
	return P2PG_MAPPING(scope, m, CUresult, real(pool, map, count));
}

/* ---- runtime (PyTorch's and RMM's cudaMallocAsync pools) ---- */

P2PG_EXPORT cudaError_t
cudaMemPoolExportToShareableHandle(void *shareableHandle, cudaMemPool_t memPool,
				   enum cudaMemAllocationHandleType handleType, unsigned int flags)
{
	rt_pool_export_fn real =
	    RUNTIME_REAL(rt_pool_export_fn, cudaMemPoolExportToShareableHandle);
	if (!real)
		return cudaErrorInitializationError;
	struct p2pg_scope scope;
	if (!p2pg_enter(&scope))
		return P2PG_PASS_THROUGH(scope, real(shareableHandle, memPool, handleType, flags));
	struct p2pg_mapping m = {.api = P2PG_API_cudaMemPoolExportToShareableHandle,
				 .op = P2PG_MAP_OP_POOL_EXPORT,
				 .pool = (CUmemoryPool)memPool,
				 .handle_type = (int)handleType,
				 .flags = flags};
	return P2PG_MAPPING(scope, m, cudaError_t,
			    real(shareableHandle, memPool, handleType, flags));
}

P2PG_EXPORT cudaError_t cudaMemPoolImportFromShareableHandle(
    cudaMemPool_t *memPool, void *shareableHandle, enum cudaMemAllocationHandleType handleType,
    unsigned int flags)
{
	rt_pool_import_fn real =
	    RUNTIME_REAL(rt_pool_import_fn, cudaMemPoolImportFromShareableHandle);
	if (!real)
		return cudaErrorInitializationError;
	struct p2pg_scope scope;
	if (!p2pg_enter(&scope))
		return P2PG_PASS_THROUGH(scope, real(memPool, shareableHandle, handleType, flags));
	struct p2pg_mapping m = {.api = P2PG_API_cudaMemPoolImportFromShareableHandle,
				 .op = P2PG_MAP_OP_POOL_IMPORT,
				 .ret_pool = (CUmemoryPool *)memPool,
				 .os_handle = shareableHandle,
				 .handle_type = (int)handleType,
				 .flags = flags};
	return P2PG_MAPPING(scope, m, cudaError_t,
			    real(memPool, shareableHandle, handleType, flags));
}

P2PG_EXPORT cudaError_t cudaMemPoolExportPointer(struct cudaMemPoolPtrExportData *exportData,
						 void *ptr)
{
	rt_pool_export_ptr_fn real = RUNTIME_REAL(rt_pool_export_ptr_fn, cudaMemPoolExportPointer);
	if (!real)
		return cudaErrorInitializationError;
	struct p2pg_scope scope;
	if (!p2pg_enter(&scope))
		return P2PG_PASS_THROUGH(scope, real(exportData, ptr));
	struct p2pg_mapping m = {.api = P2PG_API_cudaMemPoolExportPointer,
				 .op = P2PG_MAP_OP_POOL_EXPORT_PTR,
				 .ptr = (CUdeviceptr)(uintptr_t)ptr};
	return P2PG_MAPPING(scope, m, cudaError_t, real(exportData, ptr));
}

P2PG_EXPORT cudaError_t cudaMemPoolImportPointer(void **ptr, cudaMemPool_t memPool,
						 struct cudaMemPoolPtrExportData *exportData)
{
	rt_pool_import_ptr_fn real = RUNTIME_REAL(rt_pool_import_ptr_fn, cudaMemPoolImportPointer);
	if (!real)
		return cudaErrorInitializationError;
	struct p2pg_scope scope;
	if (!p2pg_enter(&scope))
		return P2PG_PASS_THROUGH(scope, real(ptr, memPool, exportData));
	struct p2pg_mapping m = {.api = P2PG_API_cudaMemPoolImportPointer,
				 .op = P2PG_MAP_OP_POOL_IMPORT_PTR,
				 .ret_ptr = (CUdeviceptr *)ptr,
				 .pool = (CUmemoryPool)memPool};
	return P2PG_MAPPING(scope, m, cudaError_t, real(ptr, memPool, exportData));
}

P2PG_EXPORT cudaError_t cudaMemPoolSetAccess(cudaMemPool_t memPool,
					     const struct cudaMemAccessDesc *descList, size_t count)
{
	rt_pool_set_access_fn real = RUNTIME_REAL(rt_pool_set_access_fn, cudaMemPoolSetAccess);
	if (!real)
		return cudaErrorInitializationError;
	struct p2pg_scope scope;
	if (!p2pg_enter(&scope))
		return P2PG_PASS_THROUGH(scope, real(memPool, descList, count));
	struct p2pg_mapping m = {.api = P2PG_API_cudaMemPoolSetAccess,
				 .op = P2PG_MAP_OP_POOL_SET_ACCESS,
				 .pool = (CUmemoryPool)memPool,
				 .desc = (const CUmemAccessDesc *)descList,
				 .count = count};
	return P2PG_MAPPING(scope, m, cudaError_t, real(memPool, descList, count));
}
