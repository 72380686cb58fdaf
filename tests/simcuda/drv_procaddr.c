/* Simulated driver: cuGetProcAddress. Every exported function is reachable from this table: the
 * simulated runtime (like the real static runtime) finds the whole driver through it. */
#include "sim.h"

#include <string.h>

struct entry {
	const char *name; /* base name, as callers ask for it */
	int version;	  /* CUDA version that introduced this ABI form */
	void *fn;	  /* legacy default stream form */
	void *ptds;	  /* per-thread default stream form (_ptds/_ptsz), if any */
};

/* Per-thread forms exist from CUDA 7.0. */
#define PTDS_VERSION 7000

/* clang-format off */
#define E(n, v, f)     {#n, v, (void *)f, NULL}
#define T(n, v, f, pt) {#n, v, (void *)f, (void *)pt}
/* clang-format on */

static const struct entry table[] = {
    E(cuInit, 2000, cuInit),
    E(cuDriverGetVersion, 2020, cuDriverGetVersion),
    E(cuGetErrorString, 6000, cuGetErrorString),
    E(cuGetErrorName, 6000, cuGetErrorName),
    E(cuGetProcAddress, 11030, cuGetProcAddress),
    E(cuGetProcAddress, 12000, cuGetProcAddress_v2),

    E(cuDeviceGet, 2000, cuDeviceGet),
    E(cuDeviceGetCount, 2000, cuDeviceGetCount),
    E(cuDeviceGetName, 2000, cuDeviceGetName),
    E(cuDeviceGetUuid, 9020, cuDeviceGetUuid),
    E(cuDeviceGetUuid, 11040, cuDeviceGetUuid_v2),
    E(cuDeviceTotalMem, 3020, cuDeviceTotalMem_v2),
    E(cuDeviceGetAttribute, 2000, cuDeviceGetAttribute),
    E(cuDeviceGetPCIBusId, 4010, cuDeviceGetPCIBusId),
    E(cuDeviceGetByPCIBusId, 4010, cuDeviceGetByPCIBusId),
    E(cuDeviceCanAccessPeer, 4000, cuDeviceCanAccessPeer),
    E(cuDeviceGetP2PAttribute, 8000, cuDeviceGetP2PAttribute),

    E(cuDevicePrimaryCtxRetain, 7000, cuDevicePrimaryCtxRetain),
    E(cuDevicePrimaryCtxRelease, 7000, cuDevicePrimaryCtxRelease),
    E(cuDevicePrimaryCtxRelease, 11000, cuDevicePrimaryCtxRelease_v2),
    E(cuDevicePrimaryCtxReset, 7000, cuDevicePrimaryCtxReset),
    E(cuDevicePrimaryCtxReset, 11000, cuDevicePrimaryCtxReset_v2),
    E(cuDevicePrimaryCtxSetFlags, 7000, cuDevicePrimaryCtxSetFlags),
    E(cuDevicePrimaryCtxSetFlags, 11000, cuDevicePrimaryCtxSetFlags_v2),
    E(cuDevicePrimaryCtxGetState, 7000, cuDevicePrimaryCtxGetState),

    E(cuCtxCreate, 12050, cuCtxCreate_v4),
    E(cuCtxDestroy, 2000, cuCtxDestroy),
    E(cuCtxDestroy, 4000, cuCtxDestroy_v2),
    E(cuCtxPushCurrent, 2000, cuCtxPushCurrent),
    E(cuCtxPushCurrent, 4000, cuCtxPushCurrent_v2),
    E(cuCtxPopCurrent, 2000, cuCtxPopCurrent),
    E(cuCtxPopCurrent, 4000, cuCtxPopCurrent_v2),
    E(cuCtxSetCurrent, 4000, cuCtxSetCurrent),
    E(cuCtxGetCurrent, 4000, cuCtxGetCurrent),
    E(cuCtxGetDevice, 2000, cuCtxGetDevice),
    E(cuCtxGetDevice, 13000, cuCtxGetDevice_v2),
    E(cuCtxSynchronize, 2000, cuCtxSynchronize),
    E(cuCtxSynchronize, 13000, cuCtxSynchronize_v2),
    E(cuCtxGetFlags, 7000, cuCtxGetFlags),
    E(cuCtxGetId, 12000, cuCtxGetId),
    E(cuCtxGetStreamPriorityRange, 5050, cuCtxGetStreamPriorityRange),
    E(cuCtxEnablePeerAccess, 4000, cuCtxEnablePeerAccess),
    E(cuCtxDisablePeerAccess, 4000, cuCtxDisablePeerAccess),

    E(cuMemGetInfo, 3020, cuMemGetInfo_v2),
    E(cuMemAlloc, 3020, cuMemAlloc_v2),
    E(cuMemAllocPitch, 3020, cuMemAllocPitch_v2),
    E(cuMemFree, 3020, cuMemFree_v2),
    E(cuMemGetAddressRange, 3020, cuMemGetAddressRange_v2),
    E(cuMemAllocHost, 3020, cuMemAllocHost_v2),
    E(cuMemFreeHost, 2000, cuMemFreeHost),
    E(cuMemHostAlloc, 2020, cuMemHostAlloc),
    E(cuMemHostGetDevicePointer, 3020, cuMemHostGetDevicePointer_v2),
    E(cuMemHostGetFlags, 2030, cuMemHostGetFlags),
    T(cuMemAllocAsync, 11020, cuMemAllocAsync, cuMemAllocAsync_ptsz),
    T(cuMemFreeAsync, 11020, cuMemFreeAsync, cuMemFreeAsync_ptsz),
    E(cuMemPoolCreate, 11020, cuMemPoolCreate),
    E(cuMemPoolDestroy, 11020, cuMemPoolDestroy),
    T(cuMemAllocFromPoolAsync, 11020, cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync_ptsz),
    E(cuMemPoolExportToShareableHandle, 11020, cuMemPoolExportToShareableHandle),
    E(cuMemPoolImportFromShareableHandle, 11020, cuMemPoolImportFromShareableHandle),
    E(cuMemPoolExportPointer, 11020, cuMemPoolExportPointer),
    E(cuMemPoolImportPointer, 11020, cuMemPoolImportPointer),
    E(cuMemPoolSetAccess, 11020, cuMemPoolSetAccess),

    E(cuIpcGetMemHandle, 4010, cuIpcGetMemHandle),
    E(cuIpcOpenMemHandle, 4010, cuIpcOpenMemHandle),
    E(cuIpcOpenMemHandle, 11000, cuIpcOpenMemHandle_v2),
    E(cuIpcCloseMemHandle, 4010, cuIpcCloseMemHandle),

    E(cuMemAddressReserve, 10020, cuMemAddressReserve),
    E(cuMemAddressFree, 10020, cuMemAddressFree),
    E(cuMemCreate, 10020, cuMemCreate),
    E(cuMemRelease, 10020, cuMemRelease),
    E(cuMemMap, 10020, cuMemMap),
    E(cuMemUnmap, 10020, cuMemUnmap),
    E(cuMemSetAccess, 10020, cuMemSetAccess),
    E(cuMemGetAllocationGranularity, 10020, cuMemGetAllocationGranularity),
    E(cuMemExportToShareableHandle, 10020, cuMemExportToShareableHandle),
    E(cuMemImportFromShareableHandle, 10020, cuMemImportFromShareableHandle),
    E(cuMemRetainAllocationHandle, 11000, cuMemRetainAllocationHandle),
    E(cuMemGetAllocationPropertiesFromHandle, 10020, cuMemGetAllocationPropertiesFromHandle),

    E(cuPointerGetAttribute, 4000, cuPointerGetAttribute),
    E(cuPointerGetAttributes, 7000, cuPointerGetAttributes),

    T(cuMemcpy, 4000, cuMemcpy, cuMemcpy_ptds),
    T(cuMemcpyAsync, 4000, cuMemcpyAsync, cuMemcpyAsync_ptsz),
    T(cuMemcpyPeer, 4000, cuMemcpyPeer, cuMemcpyPeer_ptds),
    T(cuMemcpyPeerAsync, 4000, cuMemcpyPeerAsync, cuMemcpyPeerAsync_ptsz),
    T(cuMemcpyHtoD, 3020, cuMemcpyHtoD_v2, cuMemcpyHtoD_v2_ptds),
    T(cuMemcpyDtoH, 3020, cuMemcpyDtoH_v2, cuMemcpyDtoH_v2_ptds),
    T(cuMemcpyDtoD, 3020, cuMemcpyDtoD_v2, cuMemcpyDtoD_v2_ptds),
    T(cuMemcpyHtoDAsync, 3020, cuMemcpyHtoDAsync_v2, cuMemcpyHtoDAsync_v2_ptsz),
    T(cuMemcpyDtoHAsync, 3020, cuMemcpyDtoHAsync_v2, cuMemcpyDtoHAsync_v2_ptsz),
    T(cuMemcpyDtoDAsync, 3020, cuMemcpyDtoDAsync_v2, cuMemcpyDtoDAsync_v2_ptsz),
    T(cuMemcpy2D, 3020, cuMemcpy2D_v2, cuMemcpy2D_v2_ptds),
    T(cuMemcpy2DUnaligned, 3020, cuMemcpy2DUnaligned_v2, cuMemcpy2DUnaligned_v2_ptds),
    T(cuMemcpy2DAsync, 3020, cuMemcpy2DAsync_v2, cuMemcpy2DAsync_v2_ptsz),
    T(cuMemcpy3D, 3020, cuMemcpy3D_v2, cuMemcpy3D_v2_ptds),
    T(cuMemcpy3DAsync, 3020, cuMemcpy3DAsync_v2, cuMemcpy3DAsync_v2_ptsz),
    T(cuMemcpy3DPeer, 4000, cuMemcpy3DPeer, cuMemcpy3DPeer_ptds),
    T(cuMemcpy3DPeerAsync, 4000, cuMemcpy3DPeerAsync, cuMemcpy3DPeerAsync_ptsz),
    T(cuMemcpyBatchAsync, 12080, cuMemcpyBatchAsync, cuMemcpyBatchAsync_ptsz),
    T(cuMemcpyBatchAsync, 13000, cuMemcpyBatchAsync_v2, cuMemcpyBatchAsync_v2_ptsz),
    T(cuMemsetD8, 3020, cuMemsetD8_v2, cuMemsetD8_v2_ptds),
    T(cuMemsetD16, 3020, cuMemsetD16_v2, cuMemsetD16_v2_ptds),
    T(cuMemsetD32, 3020, cuMemsetD32_v2, cuMemsetD32_v2_ptds),
    T(cuMemsetD8Async, 3020, cuMemsetD8Async, cuMemsetD8Async_ptsz),
    T(cuMemsetD16Async, 3020, cuMemsetD16Async, cuMemsetD16Async_ptsz),
    T(cuMemsetD32Async, 3020, cuMemsetD32Async, cuMemsetD32Async_ptsz),

    E(cuStreamCreate, 2000, cuStreamCreate),
    E(cuStreamCreateWithPriority, 5050, cuStreamCreateWithPriority),
    E(cuStreamDestroy, 2000, cuStreamDestroy),
    E(cuStreamDestroy, 4000, cuStreamDestroy_v2),
    T(cuStreamQuery, 2000, cuStreamQuery, cuStreamQuery_ptsz),
    T(cuStreamSynchronize, 2000, cuStreamSynchronize, cuStreamSynchronize_ptsz),
    T(cuStreamWaitEvent, 3020, cuStreamWaitEvent, cuStreamWaitEvent_ptsz),
    T(cuStreamAddCallback, 5000, cuStreamAddCallback, cuStreamAddCallback_ptsz),
    T(cuStreamGetCtx, 9020, cuStreamGetCtx, cuStreamGetCtx_ptsz),
    T(cuStreamGetCtx, 12050, cuStreamGetCtx_v2, cuStreamGetCtx_v2_ptsz),
    T(cuStreamGetFlags, 5050, cuStreamGetFlags, cuStreamGetFlags_ptsz),
    T(cuStreamGetPriority, 5050, cuStreamGetPriority, cuStreamGetPriority_ptsz),
    T(cuStreamGetId, 12000, cuStreamGetId, cuStreamGetId_ptsz),
    T(cuStreamGetDevice, 12080, cuStreamGetDevice, cuStreamGetDevice_ptsz),
    T(cuLaunchHostFunc, 10000, cuLaunchHostFunc, cuLaunchHostFunc_ptsz),

    E(cuEventCreate, 2000, cuEventCreate),
    T(cuEventRecord, 2000, cuEventRecord, cuEventRecord_ptsz),
    T(cuEventRecordWithFlags, 11010, cuEventRecordWithFlags, cuEventRecordWithFlags_ptsz),
    E(cuEventQuery, 2000, cuEventQuery),
    E(cuEventSynchronize, 2000, cuEventSynchronize),
    E(cuEventDestroy, 2000, cuEventDestroy),
    E(cuEventDestroy, 4000, cuEventDestroy_v2),
    E(cuEventElapsedTime, 2000, cuEventElapsedTime),
    E(cuEventElapsedTime, 12080, cuEventElapsedTime_v2),

    T(cuStreamBeginCapture, 10000, cuStreamBeginCapture, cuStreamBeginCapture_ptsz),
    T(cuStreamBeginCapture, 10010, cuStreamBeginCapture_v2, cuStreamBeginCapture_v2_ptsz),
    T(cuStreamEndCapture, 10000, cuStreamEndCapture, cuStreamEndCapture_ptsz),
    T(cuStreamIsCapturing, 10000, cuStreamIsCapturing, cuStreamIsCapturing_ptsz),
    T(cuStreamGetCaptureInfo, 10010, cuStreamGetCaptureInfo, cuStreamGetCaptureInfo_ptsz),
    T(cuStreamGetCaptureInfo, 11030, cuStreamGetCaptureInfo_v2, cuStreamGetCaptureInfo_v2_ptsz),
    T(cuStreamGetCaptureInfo, 12030, cuStreamGetCaptureInfo_v3, cuStreamGetCaptureInfo_v3_ptsz),
    E(cuGraphInstantiate, 10000, cuGraphInstantiate),
    E(cuGraphInstantiate, 11000, cuGraphInstantiate_v2),
    E(cuGraphInstantiateWithFlags, 11040, cuGraphInstantiateWithFlags),
    T(cuGraphLaunch, 10000, cuGraphLaunch, cuGraphLaunch_ptsz),
    E(cuGraphDestroy, 10000, cuGraphDestroy),
    E(cuGraphExecDestroy, 10000, cuGraphExecDestroy),
};

static CUresult lookup(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
		       CUdriverProcAddressQueryResult *status)
{
	/* Measured on driver 580 (13.0): bad flags, or a version above the driver's, fail and leave
	 * the outputs alone; everything else succeeds, a miss being told by a NULL pointer and the
	 * status. */
	if (!symbol || !pfn || cudaVersion > SIM_DRIVER_VERSION ||
	    (flags & ~(cuuint64_t)(CU_GET_PROC_ADDRESS_LEGACY_STREAM |
				   CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)))
		return CUDA_ERROR_INVALID_VALUE;
	CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	*pfn = NULL;
	const struct entry *best = NULL;
	bool known = false, has_ptds = false;
	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
		const struct entry *e = &table[i];
		if (strcmp(e->name, symbol) != 0)
			continue;
		known = true;
		has_ptds |= e->ptds != NULL;
		if (e->version <= cudaVersion && (!best || e->version > best->version))
			best = e;
	}
	if (known)
		st = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
	if (best) {
		bool per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) &&
				  !(flags & CU_GET_PROC_ADDRESS_LEGACY_STREAM);
		if (per_thread && has_ptds) {
			/* Measured on the real driver: a per-thread request below 7.0 succeeds
			 * with no function and "version not sufficient". */
			if (best->ptds && cudaVersion >= PTDS_VERSION) {
				*pfn = best->ptds;
				st = CU_GET_PROC_ADDRESS_SUCCESS;
			}
		} else {
			*pfn = best->fn;
			st = CU_GET_PROC_ADDRESS_SUCCESS;
		}
	}
	if (status)
		*status = st;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
				     cuuint64_t flags, CUdriverProcAddressQueryResult *symbolStatus)
{
	SIM_FAULT();
	return lookup(symbol, pfn, cudaVersion, flags, symbolStatus);
}

SIM_API CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
	SIM_FAULT();
	return lookup(symbol, pfn, cudaVersion, flags, NULL);
}

/* ---- first-version forms whose signature did not change ---- */

SIM_API CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
	SIM_FAULT();
	return cuDevicePrimaryCtxRelease_v2(dev);
}

SIM_API CUresult cuDevicePrimaryCtxReset(CUdevice dev)
{
	SIM_FAULT();
	return cuDevicePrimaryCtxReset_v2(dev);
}

SIM_API CUresult cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags)
{
	SIM_FAULT();
	return cuDevicePrimaryCtxSetFlags_v2(dev, flags);
}

SIM_API CUresult cuCtxDestroy(CUcontext ctx)
{
	SIM_FAULT();
	return cuCtxDestroy_v2(ctx);
}

SIM_API CUresult cuCtxPushCurrent(CUcontext ctx)
{
	SIM_FAULT();
	return cuCtxPushCurrent_v2(ctx);
}

SIM_API CUresult cuCtxPopCurrent(CUcontext *pctx)
{
	SIM_FAULT();
	return cuCtxPopCurrent_v2(pctx);
}

SIM_API CUresult cuStreamDestroy(CUstream hStream)
{
	SIM_FAULT();
	return cuStreamDestroy_v2(hStream);
}

SIM_API CUresult cuEventDestroy(CUevent hEvent)
{
	SIM_FAULT();
	return cuEventDestroy_v2(hEvent);
}
