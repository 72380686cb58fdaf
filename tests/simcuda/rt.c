/* Simulated CUDA runtime (libcudart.so.13).
 *
 * Like the real static runtime, it reaches the driver only through cuGetProcAddress: it dlopens
 * libcuda.so.1, looks up cuGetProcAddress_v2 with a plain dlsym (the guard interposes dlsym, so
 * that path gets exercised), asks it for "cuGetProcAddress" itself and resolves the whole driver
 * table once. It never links libcuda or names a cu* symbol. Runtime calls are written in driver
 * terms: a device means its primary context, created lazily as the real runtime does. */
#define __CUDA_API_VERSION_INTERNAL 1 /* declares both the legacy and the _ptds/_ptsz names */
#include <cuda_runtime_api.h>
#include <cudaTypedefs.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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
};

struct want {
	const char *name;
	int version;
	size_t offset;
	bool per_thread; /* has a _ptds/_ptsz form the per-thread exports use */
};

/* clang-format off */
#define W(f, v, pt) {"cu" #f, v, offsetof(struct drv, f), pt}
/* clang-format on */

static const struct want wants[] = {
    W(Init, 2000, false),
    W(DriverGetVersion, 2020, false),
    W(DeviceGetCount, 2000, false),
    W(DeviceGetAttribute, 2000, false),
    W(DeviceGetName, 2000, false),
    W(DeviceTotalMem, 3020, false),
    W(DeviceGetUuid, 11040, false),
    W(DeviceCanAccessPeer, 4000, false),
    W(DeviceGetP2PAttribute, 8000, false),
    W(DevicePrimaryCtxRetain, 7000, false),
    W(DevicePrimaryCtxReset, 11000, false),
    W(DevicePrimaryCtxRelease, 11000, false),
    W(CtxGetCurrent, 4000, false),
    W(CtxSetCurrent, 4000, false),
    W(CtxGetDevice, 2000, false),
    W(CtxSynchronize, 2000, false),
    W(CtxEnablePeerAccess, 4000, false),
    W(CtxDisablePeerAccess, 4000, false),
    W(MemAlloc, 3020, false),
    W(MemFree, 3020, false),
    W(MemAllocHost, 3020, false),
    W(MemHostAlloc, 2020, false),
    W(MemFreeHost, 2000, false),
    W(MemGetInfo, 3020, false),
    W(PointerGetAttributes, 7000, false),
    W(Memcpy, 4000, true),
    W(MemcpyAsync, 4000, true),
    W(MemcpyHtoD, 3020, true),
    W(MemcpyDtoH, 3020, true),
    W(MemcpyDtoD, 3020, true),
    W(MemcpyHtoDAsync, 3020, true),
    W(MemcpyDtoHAsync, 3020, true),
    W(MemcpyDtoDAsync, 3020, true),
    W(MemcpyPeer, 4000, true),
    W(MemcpyPeerAsync, 4000, true),
    W(Memcpy3DPeer, 4000, true),
    W(Memcpy3DPeerAsync, 4000, true),
    W(MemsetD8, 3020, true),
    W(MemsetD8Async, 3020, true),
    W(StreamCreate, 2000, false),
    W(StreamCreateWithPriority, 5050, false),
    W(StreamDestroy, 4000, false),
    W(StreamSynchronize, 2000, true),
    W(StreamQuery, 2000, true),
    W(StreamWaitEvent, 3020, true),
    W(LaunchHostFunc, 10000, true),
    W(EventCreate, 2000, false),
    W(EventRecord, 2000, true),
    W(EventQuery, 2000, false),
    W(EventSynchronize, 2000, false),
    W(EventElapsedTime, 12080, false),
    W(EventDestroy, 4000, false),
    W(StreamBeginCapture, 10010, true),
    W(StreamEndCapture, 10000, true),
    W(StreamIsCapturing, 10000, true),
    W(GraphInstantiateWithFlags, 11040, false),
    W(GraphLaunch, 10000, true),
    W(GraphDestroy, 10000, false),
    W(GraphExecDestroy, 10000, false),
};

static struct drv legacy_tab, pt_tab; /* pt_tab: per-thread forms where they exist */
static const struct drv *const L = &legacy_tab;
static const struct drv *const P = &pt_tab;
static PFN_cuGetProcAddress_v12000 get_proc;
static cudaError_t init_error;
static int device_count;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static pthread_mutex_t prim_mu = PTHREAD_MUTEX_INITIALIZER;
static CUcontext primary_ctx[RT_MAX_DEVICES];

static __thread cudaError_t last_error;
static __thread int current_device;
static _Atomic bool unloading; /* the exit handler ran: every call gets cudaErrorCudartUnloading */

/*
 * The runtime's exit handler, registered with atexit once the runtime has initialised, as the
 * real one does: it releases the primary contexts the runtime retained, which destroys them (their
 * memory, streams and events) unless another user still retains them. It does not synchronise
 * first (the real runtime does not: work still queued at exit is not waited for, and its errors go
 * unreported), but a context's destruction lets what can finish finish. Other exit handlers run
 * before it only if they were registered after it, so a tool that needs the contexts at exit
 * (events to read) registers its own handler after the runtime's initialisation. Later runtime
 * calls get cudaErrorCudartUnloading ("driver shutting down").
 */
static void rt_exit(void)
{
	__atomic_store_n(&unloading, true, __ATOMIC_RELEASE);
	pthread_mutex_lock(&prim_mu);
	for (int d = 0; d < RT_MAX_DEVICES; d++)
		if (primary_ctx[d]) {
			L->DevicePrimaryCtxRelease(d);
			primary_ctx[d] = NULL;
		}
	pthread_mutex_unlock(&prim_mu);
}

static void rt_init(void)
{
	init_error = cudaErrorInsufficientDriver;
	void *h = dlopen("libcuda.so.1", RTLD_NOW);
	if (!h)
		return;
	PFN_cuGetProcAddress_v12000 first =
	    (PFN_cuGetProcAddress_v12000)dlsym(h, "cuGetProcAddress_v2");
	if (!first)
		return;
	void *p = NULL;
	CUdriverProcAddressQueryResult st;
	if (first("cuGetProcAddress", &p, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &st) !=
		CUDA_SUCCESS ||
	    !p)
		return;
	get_proc = (PFN_cuGetProcAddress_v12000)p;
	for (size_t i = 0; i < sizeof(wants) / sizeof(wants[0]); i++) {
		const struct want *w = &wants[i];
		void *fn = NULL, *fnp = NULL;
		if (get_proc(w->name, &fn, w->version, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &st) !=
			CUDA_SUCCESS ||
		    !fn)
			return;
		if (w->per_thread) {
			int v = w->version > 7000 ? w->version : 7000;
			if (get_proc(w->name, &fnp, v,
				     CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
				     &st) != CUDA_SUCCESS ||
			    !fnp)
				return;
		} else {
			fnp = fn;
		}
		memcpy((char *)&legacy_tab + w->offset, &fn, sizeof(fn));
		memcpy((char *)&pt_tab + w->offset, &fnp, sizeof(fnp));
	}
	CUresult r = L->Init(0);
	if (r == CUDA_ERROR_NO_DEVICE) {
		init_error = cudaErrorNoDevice;
		return;
	}
	if (r != CUDA_SUCCESS || L->DeviceGetCount(&device_count) != CUDA_SUCCESS) {
		init_error = cudaErrorInitializationError;
		return;
	}
	if (device_count > RT_MAX_DEVICES)
		device_count = RT_MAX_DEVICES;
	init_error = device_count ? cudaSuccess : cudaErrorNoDevice;
	if (init_error == cudaSuccess)
		atexit(rt_exit);
}

static cudaError_t ready(void)
{
	pthread_once(&init_once, rt_init);
	if (__atomic_load_n(&unloading, __ATOMIC_ACQUIRE))
		return cudaErrorCudartUnloading;
	return init_error;
}

/* Every failing call leaves its code for cudaGetLastError; cudaErrorNotReady is an answer, not
 * a failure, and leaves nothing (measured). */
static cudaError_t ret(cudaError_t e)
{
	if (e != cudaSuccess && e != cudaErrorNotReady)
		last_error = e;
	return e;
}

static cudaError_t drv(CUresult r)
{
	return (cudaError_t)r; /* the codes share their numbers */
}

static bool bad_device(int dev)
{
	return dev < 0 || dev >= device_count;
}

static cudaError_t primary(int dev, CUcontext *out)
{
	cudaError_t e = cudaSuccess;
	pthread_mutex_lock(&prim_mu);
	if (!primary_ctx[dev])
		e = drv(L->DevicePrimaryCtxRetain(&primary_ctx[dev], dev));
	*out = primary_ctx[dev];
	pthread_mutex_unlock(&prim_mu);
	return e;
}

/* The thread's context: one already current (set through the driver API, or by an earlier
 * runtime call) wins; otherwise the current device's primary context is made current. */
static cudaError_t context(CUcontext *out)
{
	cudaError_t e = ready();
	if (e != cudaSuccess)
		return e;
	CUcontext c = NULL;
	L->CtxGetCurrent(&c);
	if (!c) {
		e = primary(current_device, &c);
		if (e == cudaSuccess)
			e = drv(L->CtxSetCurrent(c));
	}
	if (out)
		*out = c;
	return e;
}

#define CTX()                                   \
	do {                                    \
		cudaError_t e_ = context(NULL); \
		if (e_ != cudaSuccess)          \
			return ret(e_);         \
	} while (0)

#define READY()                           \
	do {                              \
		cudaError_t e_ = ready(); \
		if (e_ != cudaSuccess)    \
			return ret(e_);   \
	} while (0)

/* ---- errors and versions ---- */

RT_API cudaError_t cudaGetLastError(void)
{
	cudaError_t e = last_error;
	last_error = cudaSuccess;
	return e;
}

RT_API cudaError_t cudaPeekAtLastError(void)
{
	return last_error;
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
		return ret(cudaErrorInvalidValue);
	*runtimeVersion = RT_VERSION;
	return cudaSuccess;
}

RT_API cudaError_t cudaDriverGetVersion(int *driverVersion)
{
	if (!driverVersion)
		return ret(cudaErrorInvalidValue);
	ready();
	*driverVersion = 0;
	if (L->DriverGetVersion)
		L->DriverGetVersion(driverVersion);
	return cudaSuccess;
}

/* ---- devices ---- */

RT_API cudaError_t cudaGetDeviceCount(int *count)
{
	if (!count)
		return ret(cudaErrorInvalidValue);
	cudaError_t e = ready();
	*count = e == cudaSuccess ? device_count : 0;
	return ret(e);
}

RT_API cudaError_t cudaSetDevice(int device)
{
	READY();
	if (bad_device(device))
		return ret(cudaErrorInvalidDevice);
	CUcontext c;
	cudaError_t e = primary(device, &c);
	if (e == cudaSuccess)
		e = drv(L->CtxSetCurrent(c));
	if (e == cudaSuccess)
		current_device = device;
	return ret(e);
}

RT_API cudaError_t cudaGetDevice(int *device)
{
	READY();
	if (!device)
		return ret(cudaErrorInvalidValue);
	CUcontext c = NULL;
	L->CtxGetCurrent(&c);
	CUdevice d;
	if (c && L->CtxGetDevice(&d) == CUDA_SUCCESS)
		*device = d;
	else
		*device = current_device;
	return cudaSuccess;
}

RT_API cudaError_t cudaDeviceSynchronize(void)
{
	CTX();
	return ret(drv(L->CtxSynchronize()));
}

RT_API cudaError_t cudaDeviceReset(void)
{
	int dev;
	cudaError_t e = cudaGetDevice(&dev);
	if (e != cudaSuccess)
		return e;
	return ret(drv(L->DevicePrimaryCtxReset(dev)));
}

RT_API cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device)
{
	READY();
	if (!value)
		return ret(cudaErrorInvalidValue);
	if (bad_device(device))
		return ret(cudaErrorInvalidDevice);
	return ret(drv(L->DeviceGetAttribute(value, (CUdevice_attribute)attr, device)));
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
		return ret(cudaErrorInvalidValue);
	if (bad_device(device))
		return ret(cudaErrorInvalidDevice);
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
		return ret(cudaErrorInvalidValue);
	*devPtr = NULL;
	CTX();
	if (size == 0)
		return cudaSuccess;
	CUdeviceptr p = 0;
	cudaError_t e = drv(L->MemAlloc(&p, size));
	*devPtr = (void *)(uintptr_t)p;
	return ret(e);
}

RT_API cudaError_t cudaFree(void *devPtr)
{
	CTX();
	if (!devPtr)
		return cudaSuccess;
	return ret(drv(L->MemFree((CUdeviceptr)(uintptr_t)devPtr)));
}

RT_API cudaError_t cudaHostAlloc(void **pHost, size_t size, unsigned int flags)
{
	if (!pHost)
		return ret(cudaErrorInvalidValue);
	*pHost = NULL;
	CTX();
	if (size == 0)
		return cudaSuccess;
	return ret(drv(L->MemHostAlloc(pHost, size, flags)));
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
	return ret(drv(L->MemFreeHost(ptr)));
}

RT_API cudaError_t cudaMemGetInfo(size_t *free, size_t *total)
{
	CTX();
	return ret(drv(L->MemGetInfo(free, total)));
}

RT_API cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *attributes,
					    const void *ptr)
{
	READY();
	if (!attributes)
		return ret(cudaErrorInvalidValue);
	unsigned int type = 0;
	int ordinal = -2;
	CUpointer_attribute which[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
				       CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
	void *data[] = {&type, &ordinal};
	CUresult r = L->PointerGetAttributes(2, which, data, (CUdeviceptr)(uintptr_t)ptr);
	if (r != CUDA_SUCCESS)
		return ret(drv(r));
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
		return ret(cudaErrorInvalidMemcpyDirection);
	}
	return ret(drv(r));
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
	cudaError_t e = context(NULL);
	if (e != cudaSuccess)
		return e;
	if (bad_device(dstDevice) || bad_device(srcDevice))
		return cudaErrorInvalidDevice;
	e = primary(dstDevice, dc);
	if (e == cudaSuccess)
		e = primary(srcDevice, sc);
	return e;
}

RT_API cudaError_t cudaMemcpyPeer(void *dst, int dstDevice, const void *src, int srcDevice,
				  size_t count)
{
	CUcontext dc, sc;
	cudaError_t e = peer_contexts(dstDevice, srcDevice, &dc, &sc);
	if (e != cudaSuccess)
		return ret(e);
	return ret(drv(L->MemcpyPeer((CUdeviceptr)(uintptr_t)dst, dc, (CUdeviceptr)(uintptr_t)src,
				     sc, count)));
}

RT_API cudaError_t cudaMemcpyPeerAsync(void *dst, int dstDevice, const void *src, int srcDevice,
				       size_t count, cudaStream_t stream)
{
	CUcontext dc, sc;
	cudaError_t e = peer_contexts(dstDevice, srcDevice, &dc, &sc);
	if (e != cudaSuccess)
		return ret(e);
	return ret(drv(L->MemcpyPeerAsync((CUdeviceptr)(uintptr_t)dst, dc,
					  (CUdeviceptr)(uintptr_t)src, sc, count, stream)));
}

static cudaError_t memcpy3d_peer(const struct drv *d, const struct cudaMemcpy3DPeerParms *p,
				 bool async, cudaStream_t stream)
{
	if (!p)
		return ret(cudaErrorInvalidValue);
	CUcontext dc, sc;
	cudaError_t e = peer_contexts(p->dstDevice, p->srcDevice, &dc, &sc);
	if (e != cudaSuccess)
		return ret(e);
	if (p->srcArray || p->dstArray)
		return ret(cudaErrorNotSupported); /* arrays are not simulated */
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
	return ret(drv(async ? d->Memcpy3DPeerAsync(&c, stream) : d->Memcpy3DPeer(&c)));
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
	return ret(drv(async ? d->MemsetD8Async(D, v, count, stream) : d->MemsetD8(D, v, count)));
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
		return ret(cudaErrorInvalidValue);
	if (bad_device(device) || bad_device(peerDevice))
		return ret(cudaErrorInvalidDevice);
	return ret(drv(L->DeviceCanAccessPeer(canAccessPeer, device, peerDevice)));
}

RT_API cudaError_t cudaDeviceGetP2PAttribute(int *value, enum cudaDeviceP2PAttr attr, int srcDevice,
					     int dstDevice)
{
	READY();
	if (!value)
		return ret(cudaErrorInvalidValue);
	if (bad_device(srcDevice) || bad_device(dstDevice))
		return ret(cudaErrorInvalidDevice);
	return ret(drv(
	    L->DeviceGetP2PAttribute(value, (CUdevice_P2PAttribute)attr, srcDevice, dstDevice)));
}

RT_API cudaError_t cudaDeviceEnablePeerAccess(int peerDevice, unsigned int flags)
{
	READY();
	if (bad_device(peerDevice))
		return ret(cudaErrorInvalidDevice);
	CTX();
	CUcontext pc;
	cudaError_t e = primary(peerDevice, &pc);
	if (e != cudaSuccess)
		return ret(e);
	return ret(drv(L->CtxEnablePeerAccess(pc, flags)));
}

RT_API cudaError_t cudaDeviceDisablePeerAccess(int peerDevice)
{
	READY();
	if (bad_device(peerDevice))
		return ret(cudaErrorInvalidDevice);
	CTX();
	CUcontext pc;
	cudaError_t e = primary(peerDevice, &pc);
	if (e != cudaSuccess)
		return ret(e);
	return ret(drv(L->CtxDisablePeerAccess(pc)));
}

/* ---- streams and events ---- */

RT_API cudaError_t cudaStreamCreate(cudaStream_t *pStream)
{
	CTX();
	return ret(drv(L->StreamCreate(pStream, 0)));
}

RT_API cudaError_t cudaStreamCreateWithFlags(cudaStream_t *pStream, unsigned int flags)
{
	CTX();
	return ret(drv(L->StreamCreate(pStream, flags)));
}

RT_API cudaError_t cudaStreamCreateWithPriority(cudaStream_t *pStream, unsigned int flags,
						int priority)
{
	CTX();
	return ret(drv(L->StreamCreateWithPriority(pStream, flags, priority)));
}

RT_API cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
	CTX();
	return ret(drv(L->StreamDestroy(stream)));
}

#define STREAM_PAIR(name, call)                             \
	RT_API cudaError_t name(cudaStream_t stream)        \
	{                                                   \
		CTX();                                      \
		return ret(drv(L->call(stream)));           \
	}                                                   \
	RT_API cudaError_t name##_ptsz(cudaStream_t stream) \
	{                                                   \
		CTX();                                      \
		return ret(drv(P->call(stream)));           \
	}

STREAM_PAIR(cudaStreamSynchronize, StreamSynchronize)
STREAM_PAIR(cudaStreamQuery, StreamQuery)

RT_API cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags)
{
	CTX();
	return ret(drv(L->StreamWaitEvent(stream, event, flags)));
}

RT_API cudaError_t cudaStreamWaitEvent_ptsz(cudaStream_t stream, cudaEvent_t event,
					    unsigned int flags)
{
	CTX();
	return ret(drv(P->StreamWaitEvent(stream, event, flags)));
}

RT_API cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void *userData)
{
	CTX();
	return ret(drv(L->LaunchHostFunc(stream, fn, userData)));
}

RT_API cudaError_t cudaLaunchHostFunc_ptsz(cudaStream_t stream, cudaHostFn_t fn, void *userData)
{
	CTX();
	return ret(drv(P->LaunchHostFunc(stream, fn, userData)));
}

RT_API cudaError_t cudaEventCreate(cudaEvent_t *event)
{
	CTX();
	return ret(drv(L->EventCreate(event, cudaEventDefault)));
}

RT_API cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags)
{
	CTX();
	return ret(drv(L->EventCreate(event, flags)));
}

RT_API cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
	CTX();
	return ret(drv(L->EventRecord(event, stream)));
}

RT_API cudaError_t cudaEventRecord_ptsz(cudaEvent_t event, cudaStream_t stream)
{
	CTX();
	return ret(drv(P->EventRecord(event, stream)));
}

RT_API cudaError_t cudaEventQuery(cudaEvent_t event)
{
	READY();
	return ret(drv(L->EventQuery(event)));
}

RT_API cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
	READY();
	return ret(drv(L->EventSynchronize(event)));
}

RT_API cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
	READY();
	return ret(drv(L->EventElapsedTime(ms, start, end)));
}

RT_API cudaError_t cudaEventDestroy(cudaEvent_t event)
{
	READY();
	return ret(drv(L->EventDestroy(event)));
}

/* ---- capture and graphs ---- */

RT_API cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode)
{
	CTX();
	return ret(drv(L->StreamBeginCapture(stream, (CUstreamCaptureMode)mode)));
}

RT_API cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t stream, enum cudaStreamCaptureMode mode)
{
	CTX();
	return ret(drv(P->StreamBeginCapture(stream, (CUstreamCaptureMode)mode)));
}

RT_API cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *pGraph)
{
	CTX();
	return ret(drv(L->StreamEndCapture(stream, pGraph)));
}

RT_API cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t stream, cudaGraph_t *pGraph)
{
	CTX();
	return ret(drv(P->StreamEndCapture(stream, pGraph)));
}

RT_API cudaError_t cudaStreamIsCapturing(cudaStream_t stream,
					 enum cudaStreamCaptureStatus *pCaptureStatus)
{
	CTX();
	return ret(drv(L->StreamIsCapturing(stream, (CUstreamCaptureStatus *)pCaptureStatus)));
}

RT_API cudaError_t cudaStreamIsCapturing_ptsz(cudaStream_t stream,
					      enum cudaStreamCaptureStatus *pCaptureStatus)
{
	CTX();
	return ret(drv(P->StreamIsCapturing(stream, (CUstreamCaptureStatus *)pCaptureStatus)));
}

RT_API cudaError_t cudaGraphInstantiate(cudaGraphExec_t *pGraphExec, cudaGraph_t graph,
					unsigned long long flags)
{
	CTX();
	return ret(drv(L->GraphInstantiateWithFlags(pGraphExec, graph, flags)));
}

RT_API cudaError_t cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream)
{
	CTX();
	return ret(drv(L->GraphLaunch(graphExec, stream)));
}

RT_API cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t graphExec, cudaStream_t stream)
{
	CTX();
	return ret(drv(P->GraphLaunch(graphExec, stream)));
}

RT_API cudaError_t cudaGraphDestroy(cudaGraph_t graph)
{
	READY();
	return ret(drv(L->GraphDestroy(graph)));
}

RT_API cudaError_t cudaGraphExecDestroy(cudaGraphExec_t graphExec)
{
	READY();
	return ret(drv(L->GraphExecDestroy(graphExec)));
}

/* ---- driver entry points ---- */

static cudaError_t entry_point(const char *symbol, void **funcPtr, int version,
			       unsigned long long flags, bool ptsz,
			       enum cudaDriverEntryPointQueryResult *driverStatus)
{
	READY();
	if (!symbol || !funcPtr)
		return ret(cudaErrorInvalidValue);
	if (ptsz && !(flags & (cudaEnableLegacyStream | cudaEnablePerThreadDefaultStream)))
		flags |= cudaEnablePerThreadDefaultStream;
	CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	CUresult r = get_proc(symbol, funcPtr, version, flags, &st);
	if (driverStatus)
		*driverStatus = (enum cudaDriverEntryPointQueryResult)st;
	return ret(drv(r));
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
