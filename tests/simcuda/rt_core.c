/* Simulated CUDA runtime (libcudart.so.13): its start.
 *
 * Like the real static runtime, it reaches the driver only through cuGetProcAddress: it dlopens
 * libcuda.so.1, looks up cuGetProcAddress_v2 with a plain dlsym (the guard interposes dlsym, so
 * that path gets exercised), asks it for "cuGetProcAddress" itself and resolves the whole driver
 * table once. It never links libcuda or names a cu* symbol. Runtime calls are written in driver
 * terms: a device means its primary context, created lazily as the real runtime does. */
#include "rt.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

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
    W(IpcGetMemHandle, 4010, false),
    W(IpcOpenMemHandle, 11000, false),
    W(IpcCloseMemHandle, 4010, false),
    W(MemAllocAsync, 11020, true),
    W(MemFreeAsync, 11020, true),
    W(MemPoolCreate, 11020, false),
    W(MemPoolDestroy, 11020, false),
    W(MemAllocFromPoolAsync, 11020, true),
    W(MemPoolExportToShareableHandle, 11020, false),
    W(MemPoolImportFromShareableHandle, 11020, false),
    W(MemPoolExportPointer, 11020, false),
    W(MemPoolImportPointer, 11020, false),
    W(MemPoolSetAccess, 11020, false),
};

struct drv rt_legacy_tab, rt_pt_tab; /* rt_pt_tab: per-thread forms where they exist */
PFN_cuGetProcAddress_v12000 rt_get_proc;
static cudaError_t init_error;
int rt_device_count;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static pthread_mutex_t prim_mu = PTHREAD_MUTEX_INITIALIZER;
static CUcontext primary_ctx[RT_MAX_DEVICES];

__thread cudaError_t rt_last_error;
__thread int rt_current_device;
/* The exit handler ran: every call gets cudaErrorCudartUnloading (__atomic_* only: clang takes
 * no __atomic builtin on an _Atomic object). */
static bool unloading;

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
	rt_get_proc = (PFN_cuGetProcAddress_v12000)p;
	for (size_t i = 0; i < sizeof(wants) / sizeof(wants[0]); i++) {
		const struct want *w = &wants[i];
		void *fn = NULL, *fnp = NULL;
		if (rt_get_proc(w->name, &fn, w->version, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &st) !=
			CUDA_SUCCESS ||
		    !fn)
			return;
		if (w->per_thread) {
			int v = w->version > 7000 ? w->version : 7000;
			if (rt_get_proc(w->name, &fnp, v,
					CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
					&st) != CUDA_SUCCESS ||
			    !fnp)
				return;
		} else {
			fnp = fn;
		}
		memcpy((char *)&rt_legacy_tab + w->offset, &fn, sizeof(fn));
		memcpy((char *)&rt_pt_tab + w->offset, &fnp, sizeof(fnp));
	}
	CUresult r = L->Init(0);
	if (r == CUDA_ERROR_NO_DEVICE) {
		init_error = cudaErrorNoDevice;
		return;
	}
	if (r != CUDA_SUCCESS || L->DeviceGetCount(&rt_device_count) != CUDA_SUCCESS) {
		init_error = cudaErrorInitializationError;
		return;
	}
	if (rt_device_count > RT_MAX_DEVICES)
		rt_device_count = RT_MAX_DEVICES;
	init_error = rt_device_count ? cudaSuccess : cudaErrorNoDevice;
	if (init_error == cudaSuccess)
		atexit(rt_exit);
}

cudaError_t rt_ready(void)
{
	pthread_once(&init_once, rt_init);
	if (__atomic_load_n(&unloading, __ATOMIC_ACQUIRE))
		return cudaErrorCudartUnloading;
	return init_error;
}

/* Every failing call leaves its code for cudaGetLastError; cudaErrorNotReady is an answer, not
 * a failure, and leaves nothing (measured). */
cudaError_t rt_ret(cudaError_t e)
{
	if (e != cudaSuccess && e != cudaErrorNotReady)
		rt_last_error = e;
	return e;
}

bool rt_bad_device(int dev)
{
	return dev < 0 || dev >= rt_device_count;
}

cudaError_t rt_primary(int dev, CUcontext *out)
{
	cudaError_t e = cudaSuccess;
	pthread_mutex_lock(&prim_mu);
	if (!primary_ctx[dev])
		e = rt_drv(L->DevicePrimaryCtxRetain(&primary_ctx[dev], dev));
	*out = primary_ctx[dev];
	pthread_mutex_unlock(&prim_mu);
	return e;
}

/* The thread's context: one already current (set through the driver API, or by an earlier
 * runtime call) wins; otherwise the current device's primary context is made current. */
cudaError_t rt_context(CUcontext *out)
{
	cudaError_t e = rt_ready();
	if (e != cudaSuccess)
		return e;
	CUcontext c = NULL;
	L->CtxGetCurrent(&c);
	if (!c) {
		e = rt_primary(rt_current_device, &c);
		if (e == cudaSuccess)
			e = rt_drv(L->CtxSetCurrent(c));
	}
	if (out)
		*out = c;
	return e;
}
