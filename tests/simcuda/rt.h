/* Internal interfaces of the simulated CUDA runtime (libcudart.so.13): the driver table it resolved
 * through cuGetProcAddress, its per-thread state and the helpers every runtime call uses. Nothing
 * here is exported. */
#ifndef SIMCUDA_RT_H
#define SIMCUDA_RT_H

#define __CUDA_API_VERSION_INTERNAL 1 /* declares both the legacy and the _ptds/_ptsz names */
#include <cuda_runtime_api.h>
#include <cudaTypedefs.h>

#include <stdbool.h>

#include "errors.h"

#define RT_API	       __attribute__((visibility("default")))
#define RT_VERSION     13000
#define RT_MAX_DEVICES 64

struct drv {
	PFN_cuInit_v2000 Init;
	PFN_cuDriverGetVersion_v2020 DriverGetVersion;
	PFN_cuDeviceGetCount_v2000 DeviceGetCount;
	PFN_cuDeviceGetAttribute_v2000 DeviceGetAttribute;
	PFN_cuDeviceGetName_v2000 DeviceGetName;
	PFN_cuDeviceTotalMem_v3020 DeviceTotalMem;
	PFN_cuDeviceGetUuid_v11040 DeviceGetUuid;
	PFN_cuDeviceCanAccessPeer_v4000 DeviceCanAccessPeer;
	PFN_cuDeviceGetP2PAttribute_v8000 DeviceGetP2PAttribute;
	PFN_cuDevicePrimaryCtxRetain_v7000 DevicePrimaryCtxRetain;
	PFN_cuDevicePrimaryCtxReset_v11000 DevicePrimaryCtxReset;
	PFN_cuDevicePrimaryCtxRelease_v11000 DevicePrimaryCtxRelease;
	PFN_cuCtxGetCurrent_v4000 CtxGetCurrent;
	PFN_cuCtxSetCurrent_v4000 CtxSetCurrent;
	PFN_cuCtxGetDevice_v2000 CtxGetDevice;
	PFN_cuCtxSynchronize_v2000 CtxSynchronize;
	PFN_cuCtxEnablePeerAccess_v4000 CtxEnablePeerAccess;
	PFN_cuCtxDisablePeerAccess_v4000 CtxDisablePeerAccess;
	PFN_cuMemAlloc_v3020 MemAlloc;
	PFN_cuMemFree_v3020 MemFree;
	PFN_cuMemAllocHost_v3020 MemAllocHost;
	PFN_cuMemHostAlloc_v2020 MemHostAlloc;
	PFN_cuMemFreeHost_v2000 MemFreeHost;
	PFN_cuMemGetInfo_v3020 MemGetInfo;
	PFN_cuPointerGetAttributes_v7000 PointerGetAttributes;
	PFN_cuMemcpy_v4000 Memcpy;
	PFN_cuMemcpyAsync_v4000 MemcpyAsync;
	PFN_cuMemcpyHtoD_v3020 MemcpyHtoD;
	PFN_cuMemcpyDtoH_v3020 MemcpyDtoH;
	PFN_cuMemcpyDtoD_v3020 MemcpyDtoD;
	PFN_cuMemcpyHtoDAsync_v3020 MemcpyHtoDAsync;
	PFN_cuMemcpyDtoHAsync_v3020 MemcpyDtoHAsync;
	PFN_cuMemcpyDtoDAsync_v3020 MemcpyDtoDAsync;
	PFN_cuMemcpyPeer_v4000 MemcpyPeer;
	PFN_cuMemcpyPeerAsync_v4000 MemcpyPeerAsync;
	PFN_cuMemcpy3DPeer_v4000 Memcpy3DPeer;
	PFN_cuMemcpy3DPeerAsync_v4000 Memcpy3DPeerAsync;
	PFN_cuMemsetD8_v3020 MemsetD8;
	PFN_cuMemsetD8Async_v3020 MemsetD8Async;
	PFN_cuStreamCreate_v2000 StreamCreate;
	PFN_cuStreamCreateWithPriority_v5050 StreamCreateWithPriority;
	PFN_cuStreamDestroy_v4000 StreamDestroy;
	PFN_cuStreamSynchronize_v2000 StreamSynchronize;
	PFN_cuStreamQuery_v2000 StreamQuery;
	PFN_cuStreamWaitEvent_v3020 StreamWaitEvent;
	PFN_cuLaunchHostFunc_v10000 LaunchHostFunc;
	PFN_cuEventCreate_v2000 EventCreate;
	PFN_cuEventRecord_v2000 EventRecord;
	PFN_cuEventQuery_v2000 EventQuery;
	PFN_cuEventSynchronize_v2000 EventSynchronize;
	PFN_cuEventElapsedTime_v12080 EventElapsedTime;
	PFN_cuEventDestroy_v4000 EventDestroy;
	PFN_cuStreamBeginCapture_v10010 StreamBeginCapture;
	PFN_cuStreamEndCapture_v10000 StreamEndCapture;
	PFN_cuStreamIsCapturing_v10000 StreamIsCapturing;
	PFN_cuGraphInstantiateWithFlags_v11040 GraphInstantiateWithFlags;
	PFN_cuGraphLaunch_v10000 GraphLaunch;
	PFN_cuGraphDestroy_v10000 GraphDestroy;
	PFN_cuGraphExecDestroy_v10000 GraphExecDestroy;
	PFN_cuIpcGetMemHandle_v4010 IpcGetMemHandle;
	PFN_cuIpcOpenMemHandle_v11000 IpcOpenMemHandle;
	PFN_cuIpcCloseMemHandle_v4010 IpcCloseMemHandle;
	PFN_cuMemAllocAsync_v11020 MemAllocAsync;
	PFN_cuMemFreeAsync_v11020 MemFreeAsync;
	PFN_cuMemPoolCreate_v11020 MemPoolCreate;
	PFN_cuMemPoolDestroy_v11020 MemPoolDestroy;
	PFN_cuMemAllocFromPoolAsync_v11020 MemAllocFromPoolAsync;
	PFN_cuMemPoolExportToShareableHandle_v11020 MemPoolExportToShareableHandle;
	PFN_cuMemPoolImportFromShareableHandle_v11020 MemPoolImportFromShareableHandle;
	PFN_cuMemPoolExportPointer_v11020 MemPoolExportPointer;
	PFN_cuMemPoolImportPointer_v11020 MemPoolImportPointer;
	PFN_cuMemPoolSetAccess_v11020 MemPoolSetAccess;
};

extern struct drv rt_legacy_tab, rt_pt_tab; /* rt_pt_tab: per-thread forms where they exist */
#define L (&rt_legacy_tab)
#define P (&rt_pt_tab)
extern PFN_cuGetProcAddress_v12000 rt_get_proc;
extern int rt_device_count;
extern __thread cudaError_t rt_last_error;
extern __thread int rt_current_device;

/* Initialises the runtime once: the driver table, cuInit, the device count. */
cudaError_t rt_ready(void);
/* Every failing call leaves its code for cudaGetLastError (cudaErrorNotReady excepted). */
cudaError_t rt_ret(cudaError_t e);
static inline cudaError_t rt_drv(CUresult r)
{
	return (cudaError_t)r; /* the codes share their numbers */
}
bool rt_bad_device(int dev);
/* The device's primary context, retained once. */
cudaError_t rt_primary(int dev, CUcontext *out);
/* The thread's context: one already current wins; otherwise the current device's primary. */
cudaError_t rt_context(CUcontext *out);

#define CTX()                                      \
	do {                                       \
		cudaError_t e_ = rt_context(NULL); \
		if (e_ != cudaSuccess)             \
			return rt_ret(e_);         \
	} while (0)

#define READY()                              \
	do {                                 \
		cudaError_t e_ = rt_ready(); \
		if (e_ != cudaSuccess)       \
			return rt_ret(e_);   \
	} while (0)

#endif
