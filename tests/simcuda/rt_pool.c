/* Simulated CUDA runtime: stream-ordered memory pools and their sharing between processes, in
 * driver terms (drv_pool.c). The runtime's structures and enums have the driver's layout and
 * values; each call is forwarded field by field all the same, as the real runtime converts. */
#include "rt.h"

#include <stdint.h>
#include <string.h>

RT_API cudaError_t cudaMemPoolCreate(cudaMemPool_t *memPool, const struct cudaMemPoolProps *props)
{
	CTX();
	if (!memPool || !props)
		return rt_ret(cudaErrorInvalidValue);
	CUmemPoolProps p;
	memset(&p, 0, sizeof(p));
	p.allocType = (CUmemAllocationType)props->allocType;
	p.handleTypes = (CUmemAllocationHandleType)props->handleTypes;
	p.location.type = (CUmemLocationType)props->location.type;
	p.location.id = props->location.id;
	p.maxSize = props->maxSize;
	p.usage = props->usage;
	return rt_ret(rt_drv(L->MemPoolCreate((CUmemoryPool *)memPool, &p)));
}

RT_API cudaError_t cudaMemPoolDestroy(cudaMemPool_t memPool)
{
	CTX();
	return rt_ret(rt_drv(L->MemPoolDestroy((CUmemoryPool)memPool)));
}

static cudaError_t malloc_from_pool(const struct drv *d, void **ptr, size_t size,
				    cudaMemPool_t memPool, cudaStream_t stream)
{
	if (!ptr)
		return rt_ret(cudaErrorInvalidValue);
	CTX();
	CUdeviceptr p = 0;
	cudaError_t e =
	    rt_drv(d->MemAllocFromPoolAsync(&p, size, (CUmemoryPool)memPool, (CUstream)stream));
	if (e == cudaSuccess)
		*ptr = (void *)(uintptr_t)p;
	return rt_ret(e);
}

RT_API cudaError_t cudaMallocFromPoolAsync(void **ptr, size_t size, cudaMemPool_t memPool,
					   cudaStream_t stream)
{
	return malloc_from_pool(L, ptr, size, memPool, stream);
}

RT_API cudaError_t cudaMallocFromPoolAsync_ptsz(void **ptr, size_t size, cudaMemPool_t memPool,
						cudaStream_t stream)
{
	return malloc_from_pool(P, ptr, size, memPool, stream);
}

RT_API cudaError_t cudaMemPoolExportToShareableHandle(void *shareableHandle, cudaMemPool_t memPool,
						      enum cudaMemAllocationHandleType handleType,
						      unsigned int flags)
{
	CTX();
	return rt_ret(rt_drv(L->MemPoolExportToShareableHandle(
	    shareableHandle, (CUmemoryPool)memPool, (CUmemAllocationHandleType)handleType, flags)));
}

RT_API cudaError_t cudaMemPoolImportFromShareableHandle(cudaMemPool_t *memPool,
							void *shareableHandle,
							enum cudaMemAllocationHandleType handleType,
							unsigned int flags)
{
	CTX();
	return rt_ret(rt_drv(
	    L->MemPoolImportFromShareableHandle((CUmemoryPool *)memPool, shareableHandle,
						(CUmemAllocationHandleType)handleType, flags)));
}

RT_API cudaError_t cudaMemPoolExportPointer(struct cudaMemPoolPtrExportData *exportData, void *ptr)
{
	CTX();
	return rt_ret(rt_drv(L->MemPoolExportPointer((CUmemPoolPtrExportData *)exportData,
						     (CUdeviceptr)(uintptr_t)ptr)));
}

RT_API cudaError_t cudaMemPoolImportPointer(void **ptr, cudaMemPool_t memPool,
					    struct cudaMemPoolPtrExportData *exportData)
{
	CTX();
	if (!ptr)
		return rt_ret(cudaErrorInvalidValue);
	CUdeviceptr p = 0;
	cudaError_t e = rt_drv(L->MemPoolImportPointer(&p, (CUmemoryPool)memPool,
						       (CUmemPoolPtrExportData *)exportData));
	if (e == cudaSuccess)
		*ptr = (void *)(uintptr_t)p;
	return rt_ret(e);
}

RT_API cudaError_t cudaMemPoolSetAccess(cudaMemPool_t memPool,
					const struct cudaMemAccessDesc *descList, size_t count)
{
	CTX();
	return rt_ret(rt_drv(
	    L->MemPoolSetAccess((CUmemoryPool)memPool, (const CUmemAccessDesc *)descList, count)));
}
