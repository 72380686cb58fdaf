/* Simulated CUDA runtime (libcudart.so.13): the API calls (rt_core.c resolves the driver). */
#include "rt.h"

#include <stdint.h>
#include <string.h>

/* ---- errors and versions ---- */

RT_API cudaError_t cudaGetLastError(void)
{
	cudaError_t e = rt_last_error;
	rt_last_error = cudaSuccess;
	return e;
}

RT_API cudaError_t cudaPeekAtLastError(void)
{
	return rt_last_error;
}

RT_API const char *cudaGetErrorName(cudaError_t error)
{
	const char *s = simcuda_rt_error_name((int)error);
	return s ? s : "unrecognized error code";
}

RT_API const char *cudaGetErrorString(cudaError_t error)
{
	const char *s = simcuda_rt_error_name((int)error) ? simcuda_error_string((int)error) : NULL;
	return s ? s : "unrecognized error code";
}

RT_API cudaError_t cudaRuntimeGetVersion(int *runtimeVersion)
{
	if (!runtimeVersion)
		return rt_ret(cudaErrorInvalidValue);
	*runtimeVersion = RT_VERSION;
	return cudaSuccess;
}

RT_API cudaError_t cudaDriverGetVersion(int *driverVersion)
{
	if (!driverVersion)
		return rt_ret(cudaErrorInvalidValue);
	rt_ready();
	*driverVersion = 0;
	if (L->DriverGetVersion)
		L->DriverGetVersion(driverVersion);
	return cudaSuccess;
}

/* ---- devices ---- */

RT_API cudaError_t cudaGetDeviceCount(int *count)
{
	if (!count)
		return rt_ret(cudaErrorInvalidValue);
	cudaError_t e = rt_ready();
	*count = e == cudaSuccess ? rt_device_count : 0;
	return rt_ret(e);
}

RT_API cudaError_t cudaSetDevice(int device)
{
	READY();
	if (rt_bad_device(device))
		return rt_ret(cudaErrorInvalidDevice);
	CUcontext c;
	cudaError_t e = rt_primary(device, &c);
	if (e == cudaSuccess)
		e = rt_drv(L->CtxSetCurrent(c));
	if (e == cudaSuccess)
		rt_current_device = device;
	return rt_ret(e);
}

RT_API cudaError_t cudaGetDevice(int *device)
{
	READY();
	if (!device)
		return rt_ret(cudaErrorInvalidValue);
	CUcontext c = NULL;
	L->CtxGetCurrent(&c);
	CUdevice d;
	if (c && L->CtxGetDevice(&d) == CUDA_SUCCESS)
		*device = d;
	else
		*device = rt_current_device;
	return cudaSuccess;
}

RT_API cudaError_t cudaDeviceSynchronize(void)
{
	CTX();
	return rt_ret(rt_drv(L->CtxSynchronize()));
}

RT_API cudaError_t cudaDeviceReset(void)
{
	int dev;
	cudaError_t e = cudaGetDevice(&dev);
	if (e != cudaSuccess)
		return e;
	return rt_ret(rt_drv(L->DevicePrimaryCtxReset(dev)));
}

RT_API cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device)
{
	READY();
	if (!value)
		return rt_ret(cudaErrorInvalidValue);
	if (rt_bad_device(device))
		return rt_ret(cudaErrorInvalidDevice);
	return rt_ret(rt_drv(L->DeviceGetAttribute(value, (CUdevice_attribute)attr, device)));
}

static int attr(CUdevice_attribute a, int dev)
{
	int v = 0;
	L->DeviceGetAttribute(&v, a, dev);
	return v;
}

RT_API cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
	READY();
	if (!prop)
		return rt_ret(cudaErrorInvalidValue);
	if (rt_bad_device(device))
		return rt_ret(cudaErrorInvalidDevice);
	memset(prop, 0, sizeof(*prop));
	L->DeviceGetName(prop->name, sizeof(prop->name), device);
	CUuuid u;
	if (L->DeviceGetUuid(&u, device) == CUDA_SUCCESS)
		memcpy(prop->uuid.bytes, u.bytes, sizeof(u.bytes));
	L->DeviceTotalMem(&prop->totalGlobalMem, device);
	prop->sharedMemPerBlock =
	    (size_t)attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, device);
	prop->regsPerBlock = attr(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK, device);
	prop->warpSize = attr(CU_DEVICE_ATTRIBUTE_WARP_SIZE, device);
	prop->memPitch = (size_t)attr(CU_DEVICE_ATTRIBUTE_MAX_PITCH, device);
	prop->maxThreadsPerBlock = attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, device);
	prop->maxThreadsDim[0] = attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, device);
	prop->maxThreadsDim[1] = attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y, device);
	prop->maxThreadsDim[2] = attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z, device);
	prop->maxGridSize[0] = attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, device);
	prop->maxGridSize[1] = attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, device);
	prop->maxGridSize[2] = attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z, device);
	prop->totalConstMem = (size_t)attr(CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY, device);
	prop->major = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device);
	prop->minor = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device);
	prop->textureAlignment = (size_t)attr(CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT, device);
	prop->texturePitchAlignment =
	    (size_t)attr(CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT, device);
	prop->multiProcessorCount = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device);
	prop->integrated = attr(CU_DEVICE_ATTRIBUTE_INTEGRATED, device);
	prop->canMapHostMemory = attr(CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, device);
	prop->concurrentKernels = attr(CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS, device);
	prop->ECCEnabled = attr(CU_DEVICE_ATTRIBUTE_ECC_ENABLED, device);
	prop->pciBusID = attr(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, device);
	prop->pciDeviceID = attr(CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, device);
	prop->pciDomainID = attr(CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, device);
	prop->asyncEngineCount = attr(CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT, device);
	prop->unifiedAddressing = attr(CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, device);
	prop->memoryBusWidth = attr(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, device);
	prop->l2CacheSize = attr(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, device);
	prop->persistingL2CacheMaxSize =
	    attr(CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE, device);
	prop->maxThreadsPerMultiProcessor =
	    attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, device);
	prop->streamPrioritiesSupported =
	    attr(CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED, device);
	prop->globalL1CacheSupported = attr(CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED, device);
	prop->localL1CacheSupported = attr(CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED, device);
	prop->sharedMemPerMultiprocessor =
	    (size_t)attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, device);
	prop->regsPerMultiprocessor =
	    attr(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR, device);
	prop->managedMemory = attr(CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, device);
	prop->concurrentManagedAccess = attr(CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, device);
	prop->computePreemptionSupported =
	    attr(CU_DEVICE_ATTRIBUTE_COMPUTE_PREEMPTION_SUPPORTED, device);
	prop->canUseHostPointerForRegisteredMem =
	    attr(CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM, device);
	prop->cooperativeLaunch = attr(CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH, device);
	prop->sharedMemPerBlockOptin =
	    (size_t)attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, device);
	prop->maxBlocksPerMultiProcessor =
	    attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR, device);
	prop->accessPolicyMaxWindowSize =
	    attr(CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE, device);
	prop->reservedSharedMemPerBlock =
	    (size_t)attr(CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK, device);
	prop->hostRegisterSupported = attr(CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED, device);
	prop->memoryPoolsSupported = attr(CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, device);
	prop->gpuDirectRDMASupported = attr(CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED, device);
	prop->clusterLaunch = attr(CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH, device);
	prop->deviceNumaId = -1;
	prop->hostNumaId = -1;
	return cudaSuccess;
}

/* ---- memory ---- */

RT_API cudaError_t cudaMalloc(void **devPtr, size_t size)
{
	if (!devPtr)
		return rt_ret(cudaErrorInvalidValue);
	*devPtr = NULL;
	CTX();
	if (size == 0)
		return cudaSuccess;
	CUdeviceptr p = 0;
	cudaError_t e = rt_drv(L->MemAlloc(&p, size));
	*devPtr = (void *)(uintptr_t)p;
	return rt_ret(e);
}

RT_API cudaError_t cudaFree(void *devPtr)
{
	CTX();
	if (!devPtr)
		return cudaSuccess;
	return rt_ret(rt_drv(L->MemFree((CUdeviceptr)(uintptr_t)devPtr)));
}

RT_API cudaError_t cudaHostAlloc(void **pHost, size_t size, unsigned int flags)
{
	if (!pHost)
		return rt_ret(cudaErrorInvalidValue);
	*pHost = NULL;
	CTX();
	if (size == 0)
		return cudaSuccess;
	return rt_ret(rt_drv(L->MemHostAlloc(pHost, size, flags)));
}

RT_API cudaError_t cudaMallocHost(void **ptr, size_t size)
{
	return cudaHostAlloc(ptr, size, cudaHostAllocDefault);
}

RT_API cudaError_t cudaFreeHost(void *ptr)
{
	CTX();
	if (!ptr)
		return cudaSuccess;
	return rt_ret(rt_drv(L->MemFreeHost(ptr)));
}

RT_API cudaError_t cudaMemGetInfo(size_t *free, size_t *total)
{
	CTX();
	return rt_ret(rt_drv(L->MemGetInfo(free, total)));
}

RT_API cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *attributes,
					    const void *ptr)
{
	READY();
	if (!attributes)
		return rt_ret(cudaErrorInvalidValue);
	unsigned int type = 0;
	int ordinal = -2;
	CUpointer_attribute which[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
				       CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
	void *data[] = {&type, &ordinal};
	CUresult r = L->PointerGetAttributes(2, which, data, (CUdeviceptr)(uintptr_t)ptr);
	if (r != CUDA_SUCCESS)
		return rt_ret(rt_drv(r));
	memset(attributes, 0, sizeof(*attributes));
	attributes->device = ordinal;
	switch (type) {
	case CU_MEMORYTYPE_DEVICE:
		attributes->type = cudaMemoryTypeDevice;
		attributes->devicePointer = (void *)ptr;
		break;
	case CU_MEMORYTYPE_HOST:
		attributes->type = cudaMemoryTypeHost;
		attributes->devicePointer = (void *)ptr;
		attributes->hostPointer = (void *)ptr;
		break;
	default:
		/* CUDA >= 11: unknown host memory is not an error. */
		attributes->type = cudaMemoryTypeUnregistered;
		attributes->device = -2;
		attributes->hostPointer = (void *)ptr;
		break;
	}
	return cudaSuccess;
}

/* ---- copies ---- */

static cudaError_t memcpy_any(const struct drv *d, void *dst, const void *src, size_t count,
			      enum cudaMemcpyKind kind, bool async, cudaStream_t stream)
{
	CTX();
	CUdeviceptr D = (CUdeviceptr)(uintptr_t)dst, S = (CUdeviceptr)(uintptr_t)src;
	CUresult r;
	switch (kind) {
	case cudaMemcpyHostToHost:
	case cudaMemcpyDefault:
		r = async ? d->MemcpyAsync(D, S, count, stream) : d->Memcpy(D, S, count);
		break;
	case cudaMemcpyHostToDevice:
		r = async ? d->MemcpyHtoDAsync(D, src, count, stream)
			  : d->MemcpyHtoD(D, src, count);
		break;
	case cudaMemcpyDeviceToHost:
		r = async ? d->MemcpyDtoHAsync(dst, S, count, stream)
			  : d->MemcpyDtoH(dst, S, count);
		break;
	case cudaMemcpyDeviceToDevice:
		r = async ? d->MemcpyDtoDAsync(D, S, count, stream) : d->MemcpyDtoD(D, S, count);
		break;
	default:
		return rt_ret(cudaErrorInvalidMemcpyDirection);
	}
	return rt_ret(rt_drv(r));
}

RT_API cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
	return memcpy_any(L, dst, src, count, kind, false, NULL);
}

RT_API cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t count,
				   enum cudaMemcpyKind kind)
{
	return memcpy_any(P, dst, src, count, kind, false, NULL);
}

RT_API cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count,
				   enum cudaMemcpyKind kind, cudaStream_t stream)
{
	return memcpy_any(L, dst, src, count, kind, true, stream);
}

RT_API cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t count,
					enum cudaMemcpyKind kind, cudaStream_t stream)
{
	return memcpy_any(P, dst, src, count, kind, true, stream);
}

static cudaError_t peer_contexts(int dstDevice, int srcDevice, CUcontext *dc, CUcontext *sc)
{
	cudaError_t e = rt_context(NULL);
	if (e != cudaSuccess)
		return e;
	if (rt_bad_device(dstDevice) || rt_bad_device(srcDevice))
		return cudaErrorInvalidDevice;
	e = rt_primary(dstDevice, dc);
	if (e == cudaSuccess)
		e = rt_primary(srcDevice, sc);
	return e;
}

RT_API cudaError_t cudaMemcpyPeer(void *dst, int dstDevice, const void *src, int srcDevice,
				  size_t count)
{
	CUcontext dc, sc;
	cudaError_t e = peer_contexts(dstDevice, srcDevice, &dc, &sc);
	if (e != cudaSuccess)
		return rt_ret(e);
	return rt_ret(rt_drv(L->MemcpyPeer((CUdeviceptr)(uintptr_t)dst, dc,
					   (CUdeviceptr)(uintptr_t)src, sc, count)));
}

RT_API cudaError_t cudaMemcpyPeerAsync(void *dst, int dstDevice, const void *src, int srcDevice,
				       size_t count, cudaStream_t stream)
{
	CUcontext dc, sc;
	cudaError_t e = peer_contexts(dstDevice, srcDevice, &dc, &sc);
	if (e != cudaSuccess)
		return rt_ret(e);
	return rt_ret(rt_drv(L->MemcpyPeerAsync((CUdeviceptr)(uintptr_t)dst, dc,
						(CUdeviceptr)(uintptr_t)src, sc, count, stream)));
}

static cudaError_t memcpy3d_peer(const struct drv *d, const struct cudaMemcpy3DPeerParms *p,
				 bool async, cudaStream_t stream)
{
	if (!p)
		return rt_ret(cudaErrorInvalidValue);
	CUcontext dc, sc;
	cudaError_t e = peer_contexts(p->dstDevice, p->srcDevice, &dc, &sc);
	if (e != cudaSuccess)
		return rt_ret(e);
	if (p->srcArray || p->dstArray)
		return rt_ret(cudaErrorNotSupported); /* arrays are not simulated */
	CUDA_MEMCPY3D_PEER c;
	memset(&c, 0, sizeof(c));
	c.srcXInBytes = p->srcPos.x;
	c.srcY = p->srcPos.y;
	c.srcZ = p->srcPos.z;
	c.srcMemoryType = CU_MEMORYTYPE_UNIFIED;
	c.srcDevice = (CUdeviceptr)(uintptr_t)p->srcPtr.ptr;
	c.srcContext = sc;
	c.srcPitch = p->srcPtr.pitch;
	c.srcHeight = p->srcPtr.ysize;
	c.dstXInBytes = p->dstPos.x;
	c.dstY = p->dstPos.y;
	c.dstZ = p->dstPos.z;
	c.dstMemoryType = CU_MEMORYTYPE_UNIFIED;
	c.dstDevice = (CUdeviceptr)(uintptr_t)p->dstPtr.ptr;
	c.dstContext = dc;
	c.dstPitch = p->dstPtr.pitch;
	c.dstHeight = p->dstPtr.ysize;
	c.WidthInBytes = p->extent.width;
	c.Height = p->extent.height;
	c.Depth = p->extent.depth;
	return rt_ret(rt_drv(async ? d->Memcpy3DPeerAsync(&c, stream) : d->Memcpy3DPeer(&c)));
}

RT_API cudaError_t cudaMemcpy3DPeer(const struct cudaMemcpy3DPeerParms *p)
{
	return memcpy3d_peer(L, p, false, NULL);
}

RT_API cudaError_t cudaMemcpy3DPeer_ptds(const struct cudaMemcpy3DPeerParms *p)
{
	return memcpy3d_peer(P, p, false, NULL);
}

RT_API cudaError_t cudaMemcpy3DPeerAsync(const struct cudaMemcpy3DPeerParms *p, cudaStream_t stream)
{
	return memcpy3d_peer(L, p, true, stream);
}

RT_API cudaError_t cudaMemcpy3DPeerAsync_ptsz(const struct cudaMemcpy3DPeerParms *p,
					      cudaStream_t stream)
{
	return memcpy3d_peer(P, p, true, stream);
}

static cudaError_t memset_any(const struct drv *d, void *p, int value, size_t count, bool async,
			      cudaStream_t stream)
{
	CTX();
	CUdeviceptr D = (CUdeviceptr)(uintptr_t)p;
	unsigned char v = (unsigned char)value;
	return rt_ret(
	    rt_drv(async ? d->MemsetD8Async(D, v, count, stream) : d->MemsetD8(D, v, count)));
}

RT_API cudaError_t cudaMemset(void *devPtr, int value, size_t count)
{
	return memset_any(L, devPtr, value, count, false, NULL);
}

RT_API cudaError_t cudaMemset_ptds(void *devPtr, int value, size_t count)
{
	return memset_any(P, devPtr, value, count, false, NULL);
}

RT_API cudaError_t cudaMemsetAsync(void *devPtr, int value, size_t count, cudaStream_t stream)
{
	return memset_any(L, devPtr, value, count, true, stream);
}

RT_API cudaError_t cudaMemsetAsync_ptsz(void *devPtr, int value, size_t count, cudaStream_t stream)
{
	return memset_any(P, devPtr, value, count, true, stream);
}

/* ---- peers ---- */

RT_API cudaError_t cudaDeviceCanAccessPeer(int *canAccessPeer, int device, int peerDevice)
{
	READY();
	if (!canAccessPeer)
		return rt_ret(cudaErrorInvalidValue);
	if (rt_bad_device(device) || rt_bad_device(peerDevice))
		return rt_ret(cudaErrorInvalidDevice);
	return rt_ret(rt_drv(L->DeviceCanAccessPeer(canAccessPeer, device, peerDevice)));
}

RT_API cudaError_t cudaDeviceGetP2PAttribute(int *value, enum cudaDeviceP2PAttr attr, int srcDevice,
					     int dstDevice)
{
	READY();
	if (!value)
		return rt_ret(cudaErrorInvalidValue);
	if (rt_bad_device(srcDevice) || rt_bad_device(dstDevice))
		return rt_ret(cudaErrorInvalidDevice);
	return rt_ret(rt_drv(
	    L->DeviceGetP2PAttribute(value, (CUdevice_P2PAttribute)attr, srcDevice, dstDevice)));
}

RT_API cudaError_t cudaDeviceEnablePeerAccess(int peerDevice, unsigned int flags)
{
	READY();
	if (rt_bad_device(peerDevice))
		return rt_ret(cudaErrorInvalidDevice);
	CTX();
	CUcontext pc;
	cudaError_t e = rt_primary(peerDevice, &pc);
	if (e != cudaSuccess)
		return rt_ret(e);
	return rt_ret(rt_drv(L->CtxEnablePeerAccess(pc, flags)));
}

RT_API cudaError_t cudaDeviceDisablePeerAccess(int peerDevice)
{
	READY();
	if (rt_bad_device(peerDevice))
		return rt_ret(cudaErrorInvalidDevice);
	CTX();
	CUcontext pc;
	cudaError_t e = rt_primary(peerDevice, &pc);
	if (e != cudaSuccess)
		return rt_ret(e);
	return rt_ret(rt_drv(L->CtxDisablePeerAccess(pc)));
}

/* ---- streams and events ---- */

RT_API cudaError_t cudaStreamCreate(cudaStream_t *pStream)
{
	CTX();
	return rt_ret(rt_drv(L->StreamCreate(pStream, 0)));
}

RT_API cudaError_t cudaStreamCreateWithFlags(cudaStream_t *pStream, unsigned int flags)
{
	CTX();
	return rt_ret(rt_drv(L->StreamCreate(pStream, flags)));
}

RT_API cudaError_t cudaStreamCreateWithPriority(cudaStream_t *pStream, unsigned int flags,
						int priority)
{
	CTX();
	return rt_ret(rt_drv(L->StreamCreateWithPriority(pStream, flags, priority)));
}

RT_API cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
	CTX();
	return rt_ret(rt_drv(L->StreamDestroy(stream)));
}

#define STREAM_PAIR(name, call)                             \
	RT_API cudaError_t name(cudaStream_t stream)        \
	{                                                   \
		CTX();                                      \
		return rt_ret(rt_drv(L->call(stream)));     \
	}                                                   \
	RT_API cudaError_t name##_ptsz(cudaStream_t stream) \
	{                                                   \
		CTX();                                      \
		return rt_ret(rt_drv(P->call(stream)));     \
	}

STREAM_PAIR(cudaStreamSynchronize, StreamSynchronize)
STREAM_PAIR(cudaStreamQuery, StreamQuery)

RT_API cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags)
{
	CTX();
	return rt_ret(rt_drv(L->StreamWaitEvent(stream, event, flags)));
}

RT_API cudaError_t cudaStreamWaitEvent_ptsz(cudaStream_t stream, cudaEvent_t event,
					    unsigned int flags)
{
	CTX();
	return rt_ret(rt_drv(P->StreamWaitEvent(stream, event, flags)));
}

RT_API cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void *userData)
{
	CTX();
	return rt_ret(rt_drv(L->LaunchHostFunc(stream, fn, userData)));
}

RT_API cudaError_t cudaLaunchHostFunc_ptsz(cudaStream_t stream, cudaHostFn_t fn, void *userData)
{
	CTX();
	return rt_ret(rt_drv(P->LaunchHostFunc(stream, fn, userData)));
}

RT_API cudaError_t cudaEventCreate(cudaEvent_t *event)
{
	CTX();
	return rt_ret(rt_drv(L->EventCreate(event, cudaEventDefault)));
}

RT_API cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags)
{
	CTX();
	return rt_ret(rt_drv(L->EventCreate(event, flags)));
}

RT_API cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
	CTX();
	return rt_ret(rt_drv(L->EventRecord(event, stream)));
}

RT_API cudaError_t cudaEventRecord_ptsz(cudaEvent_t event, cudaStream_t stream)
{
	CTX();
	return rt_ret(rt_drv(P->EventRecord(event, stream)));
}

RT_API cudaError_t cudaEventQuery(cudaEvent_t event)
{
	READY();
	return rt_ret(rt_drv(L->EventQuery(event)));
}

RT_API cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
	READY();
	return rt_ret(rt_drv(L->EventSynchronize(event)));
}

RT_API cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
	READY();
	return rt_ret(rt_drv(L->EventElapsedTime(ms, start, end)));
}

RT_API cudaError_t cudaEventDestroy(cudaEvent_t event)
{
	READY();
	return rt_ret(rt_drv(L->EventDestroy(event)));
}

/* ---- capture and graphs ---- */

RT_API cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode)
{
	CTX();
	return rt_ret(rt_drv(L->StreamBeginCapture(stream, (CUstreamCaptureMode)mode)));
}

RT_API cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t stream, enum cudaStreamCaptureMode mode)
{
	CTX();
	return rt_ret(rt_drv(P->StreamBeginCapture(stream, (CUstreamCaptureMode)mode)));
}

RT_API cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *pGraph)
{
	CTX();
	return rt_ret(rt_drv(L->StreamEndCapture(stream, pGraph)));
}

RT_API cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t stream, cudaGraph_t *pGraph)
{
	CTX();
	return rt_ret(rt_drv(P->StreamEndCapture(stream, pGraph)));
}

RT_API cudaError_t cudaStreamIsCapturing(cudaStream_t stream,
					 enum cudaStreamCaptureStatus *pCaptureStatus)
{
	CTX();
	return rt_ret(
	    rt_drv(L->StreamIsCapturing(stream, (CUstreamCaptureStatus *)pCaptureStatus)));
}

RT_API cudaError_t cudaStreamIsCapturing_ptsz(cudaStream_t stream,
					      enum cudaStreamCaptureStatus *pCaptureStatus)
{
	CTX();
	return rt_ret(
	    rt_drv(P->StreamIsCapturing(stream, (CUstreamCaptureStatus *)pCaptureStatus)));
}

RT_API cudaError_t cudaGraphInstantiate(cudaGraphExec_t *pGraphExec, cudaGraph_t graph,
					unsigned long long flags)
{
	CTX();
	return rt_ret(rt_drv(L->GraphInstantiateWithFlags(pGraphExec, graph, flags)));
}

RT_API cudaError_t cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream)
{
	CTX();
	return rt_ret(rt_drv(L->GraphLaunch(graphExec, stream)));
}

RT_API cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t graphExec, cudaStream_t stream)
{
	CTX();
	return rt_ret(rt_drv(P->GraphLaunch(graphExec, stream)));
}

RT_API cudaError_t cudaGraphDestroy(cudaGraph_t graph)
{
	READY();
	return rt_ret(rt_drv(L->GraphDestroy(graph)));
}

RT_API cudaError_t cudaGraphExecDestroy(cudaGraphExec_t graphExec)
{
	READY();
	return rt_ret(rt_drv(L->GraphExecDestroy(graphExec)));
}

/* ---- driver entry points ---- */

static cudaError_t entry_point(const char *symbol, void **funcPtr, int version,
			       unsigned long long flags, bool ptsz,
			       enum cudaDriverEntryPointQueryResult *driverStatus)
{
	READY();
	if (!symbol || !funcPtr)
		return rt_ret(cudaErrorInvalidValue);
	if (ptsz && !(flags & (cudaEnableLegacyStream | cudaEnablePerThreadDefaultStream)))
		flags |= cudaEnablePerThreadDefaultStream;
	CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	CUresult r = rt_get_proc(symbol, funcPtr, version, flags, &st);
	if (driverStatus)
		*driverStatus = (enum cudaDriverEntryPointQueryResult)st;
	return rt_ret(rt_drv(r));
}

RT_API cudaError_t cudaGetDriverEntryPoint(const char *symbol, void **funcPtr,
					   unsigned long long flags,
					   enum cudaDriverEntryPointQueryResult *driverStatus)
{
	return entry_point(symbol, funcPtr, RT_VERSION, flags, false, driverStatus);
}

RT_API cudaError_t cudaGetDriverEntryPoint_ptsz(const char *symbol, void **funcPtr,
						unsigned long long flags,
						enum cudaDriverEntryPointQueryResult *driverStatus)
{
	return entry_point(symbol, funcPtr, RT_VERSION, flags, true, driverStatus);
}

RT_API cudaError_t cudaGetDriverEntryPointByVersion(
    const char *symbol, void **funcPtr, unsigned int cudaVersion, unsigned long long flags,
    enum cudaDriverEntryPointQueryResult *driverStatus)
{
	return entry_point(symbol, funcPtr, (int)cudaVersion, flags, false, driverStatus);
}

RT_API cudaError_t cudaGetDriverEntryPointByVersion_ptsz(
    const char *symbol, void **funcPtr, unsigned int cudaVersion, unsigned long long flags,
    enum cudaDriverEntryPointQueryResult *driverStatus)
{
	return entry_point(symbol, funcPtr, (int)cudaVersion, flags, true, driverStatus);
}
