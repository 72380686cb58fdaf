/* SPDX-License-Identifier: MIT */
/*
 * The real CUDA driver, as the core uses it for its own work (classifying pointers, staged copies,
 * timing, evidence, topology). Every entry is resolved once through the real cuGetProcAddress, the
 * way a CUDA runtime does it, so these pointers never lead back into the guard's wrappers.
 */
#pragma once

#include <cuda.h>
#include <stdbool.h>

/*
 * X(name, cudaVersion, parameter list). The version is the one whose ABI the parameter list
 * describes: cuGetProcAddress returns the newest ABI at or below it, and newer CUDA releases change
 * signatures under the same name (cuCtxGetDevice and cuCtxSynchronize gained a context argument in
 * 13.0, cuStreamGetCtx a green-context one in 12.5).
 */
/* Whose memory an allocation handle is (cross-process and VMM mappings). */
#define P2PG_DRIVER_MAPPING_FUNCTIONS(X)                                                           \
	X(cuMemRetainAllocationHandle, 11000, (CUmemGenericAllocationHandle * handle, void *addr)) \
	X(cuMemGetAllocationPropertiesFromHandle, 10020,                                           \
	  (CUmemAllocationProp * prop, CUmemGenericAllocationHandle handle))                       \
	X(cuMemRelease, 10020, (CUmemGenericAllocationHandle handle))

#define P2PG_DRIVER_FUNCTIONS(X)                                                                 \
	X(cuInit, 2000, (unsigned int flags))                                                    \
	X(cuDriverGetVersion, 2020, (int *version))                                              \
	X(cuGetErrorName, 6000, (CUresult error, const char **str))                              \
	X(cuGetErrorString, 6000, (CUresult error, const char **str))                            \
	X(cuDeviceGetCount, 2000, (int *count))                                                  \
	X(cuDeviceGet, 2000, (CUdevice * device, int ordinal))                                   \
	X(cuDeviceGetName, 2000, (char *name, int len, CUdevice dev))                            \
	X(cuDeviceGetPCIBusId, 4010, (char *busid, int len, CUdevice dev))                       \
	X(cuDeviceGetUuid, 11040, (CUuuid * uuid, CUdevice dev))                                 \
	X(cuDeviceGetAttribute, 2000, (int *value, CUdevice_attribute attrib, CUdevice dev))     \
	X(cuDeviceCanAccessPeer, 4000, (int *can, CUdevice dev, CUdevice peer))                  \
	X(cuDeviceGetP2PAttribute, 8000,                                                         \
	  (int *value, CUdevice_P2PAttribute attrib, CUdevice src, CUdevice dst))                \
	X(cuDevicePrimaryCtxRetain, 7000, (CUcontext * ctx, CUdevice dev))                       \
	X(cuDevicePrimaryCtxRelease, 11000, (CUdevice dev))                                      \
	X(cuCtxGetCurrent, 4000, (CUcontext * ctx))                                              \
	X(cuCtxSetCurrent, 4000, (CUcontext ctx))                                                \
	X(cuCtxPushCurrent, 4000, (CUcontext ctx))                                               \
	X(cuCtxPopCurrent, 4000, (CUcontext * ctx))                                              \
	X(cuCtxGetDevice, 2000, (CUdevice * dev))                                                \
	X(cuCtxGetId, 12000, (CUcontext ctx, unsigned long long *id))                            \
	X(cuCtxSynchronize, 2000, (void))                                                        \
	X(cuCtxEnablePeerAccess, 4000, (CUcontext peer, unsigned int flags))                     \
	X(cuCtxDisablePeerAccess, 4000, (CUcontext peer))                                        \
	X(cuPointerGetAttribute, 4000, (void *data, CUpointer_attribute attr, CUdeviceptr ptr))  \
	X(cuPointerGetAttributes, 7000,                                                          \
	  (unsigned int n, CUpointer_attribute *attrs, void **data, CUdeviceptr ptr))            \
	X(cuStreamCreate, 2000, (CUstream * stream, unsigned int flags))                         \
	X(cuStreamDestroy, 4000, (CUstream stream))                                              \
	X(cuStreamSynchronize, 2000, (CUstream stream))                                          \
	X(cuStreamQuery, 2000, (CUstream stream))                                                \
	X(cuStreamWaitEvent, 3020, (CUstream stream, CUevent event, unsigned int flags))         \
	X(cuStreamIsCapturing, 10000, (CUstream stream, CUstreamCaptureStatus * status))         \
	X(cuThreadExchangeStreamCaptureMode, 10010, (CUstreamCaptureMode * mode))                \
	X(cuStreamGetCtx, 9020, (CUstream stream, CUcontext * ctx))                              \
	X(cuStreamGetId, 12000, (CUstream stream, unsigned long long *id))                       \
	X(cuEventCreate, 2000, (CUevent * event, unsigned int flags))                            \
	X(cuEventDestroy, 4000, (CUevent event))                                                 \
	X(cuEventRecord, 2000, (CUevent event, CUstream stream))                                 \
	X(cuEventQuery, 2000, (CUevent event))                                                   \
	X(cuEventSynchronize, 2000, (CUevent event))                                             \
	X(cuEventElapsedTime, 2000, (float *ms, CUevent start, CUevent end))                     \
	X(cuMemAlloc, 3020, (CUdeviceptr * ptr, size_t bytes))                                   \
	X(cuMemFree, 3020, (CUdeviceptr ptr))                                                    \
	X(cuMemAllocHost, 3020, (void **ptr, size_t bytes))                                      \
	X(cuMemFreeHost, 2000, (void *ptr))                                                      \
	X(cuMemcpyHtoD, 3020, (CUdeviceptr dst, const void *src, size_t bytes))                  \
	X(cuMemcpyDtoH, 3020, (void *dst, CUdeviceptr src, size_t bytes))                        \
	X(cuMemcpyHtoDAsync, 3020, (CUdeviceptr dst, const void *src, size_t bytes, CUstream s)) \
	X(cuMemcpyDtoHAsync, 3020, (void *dst, CUdeviceptr src, size_t bytes, CUstream s))       \
	X(cuMemcpyPeer, 4000,                                                                    \
	  (CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx, size_t bytes))      \
	X(cuMemcpyPeerAsync, 4000,                                                               \
	  (CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx, size_t bytes,       \
	   CUstream s))                                                                          \
	X(cuMemsetD8, 3020, (CUdeviceptr dst, unsigned char value, size_t count))                \
	P2PG_DRIVER_MAPPING_FUNCTIONS(X)                                                         \
	X(cuMemsetD8Async, 3020, (CUdeviceptr dst, unsigned char value, size_t count, CUstream s))

struct p2pg_driver {
#define P2PG_DRIVER_MEMBER(name, version, params) CUresult(CUDAAPI *name) params;
	P2PG_DRIVER_FUNCTIONS(P2PG_DRIVER_MEMBER)
#undef P2PG_DRIVER_MEMBER
};

/* Valid after p2pg_driver_load() returned 0; never modified afterwards. */
extern struct p2pg_driver p2pg_drv;

/*
 * Resolves the table above from the libcuda.so.1 the process uses (loading it if needed). Makes no
 * CUDA call besides cuGetProcAddress. Idempotent and thread-safe. Returns 0, or -ENOENT when no
 * driver library can be found, or -ENOSYS when it lacks cuGetProcAddress_v2.
 */
int p2pg_driver_load(void);

/*
 * For code the guard's exported dlsym runs: a sanitizer runtime preloaded first (libasan) resolves
 * its interceptors with dlsym while it initialises, before its shadow memory is mapped, and in a
 * process that preloads the guard those calls land in the guard. Instrumented code there would
 * touch the unmapped shadow and fault. The ThreadSanitizer runtime does the same, from a dynamic
 * dependency's constructor of the guard itself, before its thread state exists: an instrumented
 * function's entry hook would fault there.
 */
#define P2PG_NO_ASAN __attribute__((no_sanitize("address", "thread")))

/* The real dlsym, never the guard's own: the core resolves symbols of other libraries with it. */
P2PG_NO_ASAN void *p2pg_real_dlsym(void *handle, const char *symbol);
/* glibc's dlsym itself (the preload layer jumps to it for RTLD_NEXT lookups). */
P2PG_NO_ASAN void *p2pg_real_dlsym_function(void);

/*
 * A context's identity for caches: its cuCtxGetId plus one (never 0). The driver reuses handles (a
 * destroyed context's can come back for a new one, on any device), never IDs. Drivers older than
 * CUDA 12 have no IDs: there the handle stands in.
 */
unsigned long long p2pg_context_key(CUcontext ctx);

/* "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED" for a driver status; a static string, never NULL. */
const char *p2pg_cu_error_name(int status);
/* "cudaErrorPeerAccessUnsupported" for a runtime status; a static string, never NULL. */
const char *p2pg_cuda_error_name(int status);
/* The three spellings of a status the guard knows (driver name, runtime name, runtime message);
 * false for a status it does not know. Used to understand pasted log lines. */
bool p2pg_status_spellings(int status, const char **ret_driver, const char **ret_runtime,
			   const char **ret_message);
/* HIP's names for a status whose value HIP shares ("hipErrorInvalidDevice" for 101, and a
 * deprecated alias for a few): how many (0 to 2). */
size_t p2pg_status_hip_names(int status, const char *ret_names[2]);
/* The statuses p2pg_status_spellings knows, one per index from 0; -1 past the last. */
int p2pg_status_at(size_t index);
/* The runtime's message for a status ("peer access is not supported between these two devices"). */
const char *p2pg_cuda_error_string(int status);
