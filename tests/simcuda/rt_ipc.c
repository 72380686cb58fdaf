/* Simulated CUDA runtime: CUDA IPC and stream-ordered allocation, in driver terms. As in the real
 * runtime, IPC calls make the current device's primary context current first. */
#include "rt.h"

#include <stdint.h>
#include <string.h>

RT_API cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *handle, void *devPtr)
{
	CTX();
	if (!handle)
		return rt_ret(cudaErrorInvalidValue);
	return rt_ret(
	    rt_drv(L->IpcGetMemHandle((CUipcMemHandle *)handle, (CUdeviceptr)(uintptr_t)devPtr)));
}

RT_API cudaError_t cudaIpcOpenMemHandle(void **devPtr, cudaIpcMemHandle_t handle,
					unsigned int flags)
{
	CTX();
	if (!devPtr)
		return rt_ret(cudaErrorInvalidValue);
	CUipcMemHandle h;
	memcpy(&h, &handle, sizeof(h));
	CUdeviceptr p = 0;
	cudaError_t e = rt_drv(L->IpcOpenMemHandle(&p, h, flags));
	if (e == cudaSuccess)
		*devPtr = (void *)(uintptr_t)p;
	return rt_ret(e);
}

RT_API cudaError_t cudaIpcCloseMemHandle(void *devPtr)
{
	CTX();
	return rt_ret(rt_drv(L->IpcCloseMemHandle((CUdeviceptr)(uintptr_t)devPtr)));
}

static cudaError_t malloc_async(const struct drv *d, void **devPtr, size_t size,
				cudaStream_t stream)
{
	if (!devPtr)
		return rt_ret(cudaErrorInvalidValue);
	CTX();
	CUdeviceptr p = 0;
	cudaError_t e = rt_drv(d->MemAllocAsync(&p, size, (CUstream)stream));
	if (e == cudaSuccess)
		*devPtr = (void *)(uintptr_t)p;
	return rt_ret(e);
}

RT_API cudaError_t cudaMallocAsync(void **devPtr, size_t size, cudaStream_t stream)
{
	return malloc_async(L, devPtr, size, stream);
}

RT_API cudaError_t cudaMallocAsync_ptsz(void **devPtr, size_t size, cudaStream_t stream)
{
	return malloc_async(P, devPtr, size, stream);
}

RT_API cudaError_t cudaFreeAsync(void *devPtr, cudaStream_t stream)
{
	CTX();
	return rt_ret(rt_drv(L->MemFreeAsync((CUdeviceptr)(uintptr_t)devPtr, (CUstream)stream)));
}

RT_API cudaError_t cudaFreeAsync_ptsz(void *devPtr, cudaStream_t stream)
{
	CTX();
	return rt_ret(rt_drv(P->MemFreeAsync((CUdeviceptr)(uintptr_t)devPtr, (CUstream)stream)));
}
