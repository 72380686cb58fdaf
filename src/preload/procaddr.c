/* SPDX-License-Identifier: MIT */
/*
 * Driver entry-point lookups. Every CUDA 13 runtime, NCCL, CuPy and JAX resolve their whole driver
 * table this way at start-up, after first asking for cuGetProcAddress itself: the guard answers
 * that with its own lookup, then wraps what the real lookup returns for the symbols it guards.
 * Versions and stream flags are honoured by the real lookup; the guard only picks the wrapper of
 * the same ABI and stream mode, and never turns a NULL answer into a pointer.
 */
#include <cuda.h>
#include <stdatomic.h>
/* cudaGetDriverEntryPoint is deprecated, and still exported: the guard must hook it. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#include <cuda_runtime_api.h>
#include <limits.h>
#include <string.h>

#include "driver_hooks.h"
#include "mapping_hooks.h"
#include "entry.h"
#include "runtime_hooks.h"

struct entry_map {
	const char *symbol;
	int min_version; /* the cudaVersion range that selects this ABI */
	int max_version;
	void *legacy;
	void *per_thread;
	void *_Atomic *legacy_real;
	void *_Atomic *per_thread_real;
};

#define SAME(name)	   (void *)name, (void *)name, &p2pg_real_##name, &p2pg_real_##name
#define PAIR(legacy, ptds) (void *)legacy, (void *)ptds, &p2pg_real_##legacy, &p2pg_real_##ptds

static const struct entry_map entry_maps[] = {
    {"cuInit", 2000, INT_MAX, SAME(cuInit)},
    {"cuDeviceCanAccessPeer", 4000, INT_MAX, SAME(cuDeviceCanAccessPeer)},
    {"cuDeviceGetP2PAttribute", 8000, INT_MAX, SAME(cuDeviceGetP2PAttribute)},
    {"cuCtxEnablePeerAccess", 4000, INT_MAX, SAME(cuCtxEnablePeerAccess)},
    {"cuCtxDisablePeerAccess", 4000, INT_MAX, SAME(cuCtxDisablePeerAccess)},
    {"cuMemcpyPeer", 4000, INT_MAX, PAIR(cuMemcpyPeer, cuMemcpyPeer_ptds)},
    {"cuMemcpyPeerAsync", 4000, INT_MAX, PAIR(cuMemcpyPeerAsync, cuMemcpyPeerAsync_ptsz)},
    {"cuMemcpy3DPeer", 4000, INT_MAX, PAIR(cuMemcpy3DPeer, cuMemcpy3DPeer_ptds)},
    {"cuMemcpy3DPeerAsync", 4000, INT_MAX, PAIR(cuMemcpy3DPeerAsync, cuMemcpy3DPeerAsync_ptsz)},
    {"cuMemcpy", 4000, INT_MAX, PAIR(cuMemcpy, cuMemcpy_ptds)},
    {"cuMemcpyAsync", 4000, INT_MAX, PAIR(cuMemcpyAsync, cuMemcpyAsync_ptsz)},
    {"cuMemcpyDtoD", 3020, INT_MAX, PAIR(cuMemcpyDtoD_v2, cuMemcpyDtoD_v2_ptds)},
    {"cuMemcpyDtoDAsync", 3020, INT_MAX, PAIR(cuMemcpyDtoDAsync_v2, cuMemcpyDtoDAsync_v2_ptsz)},
    {"cuMemcpyBatchAsync", 12080, 12999, PAIR(cuMemcpyBatchAsync_v1, cuMemcpyBatchAsync_ptsz)},
    {"cuMemcpyBatchAsync", 13000, INT_MAX, PAIR(cuMemcpyBatchAsync_v2, cuMemcpyBatchAsync_v2_ptsz)},
    {"cuIpcGetMemHandle", 4010, INT_MAX, SAME(cuIpcGetMemHandle)},
    {"cuIpcOpenMemHandle", 4010, 10999, SAME(cuIpcOpenMemHandle_v1)},
    {"cuIpcOpenMemHandle", 11000, INT_MAX, SAME(cuIpcOpenMemHandle_v2)},
    {"cuIpcCloseMemHandle", 4010, INT_MAX, SAME(cuIpcCloseMemHandle)},
    {"cuMemExportToShareableHandle", 10020, INT_MAX, SAME(cuMemExportToShareableHandle)},
    {"cuMemImportFromShareableHandle", 10020, INT_MAX, SAME(cuMemImportFromShareableHandle)},
    {"cuMemMap", 10020, INT_MAX, SAME(cuMemMap)},
    {"cuMemUnmap", 10020, INT_MAX, SAME(cuMemUnmap)},
    {"cuMemSetAccess", 10020, INT_MAX, SAME(cuMemSetAccess)},
    {"cuMemRelease", 10020, INT_MAX, SAME(cuMemRelease)},
    {"cuMemRetainAllocationHandle", 11000, INT_MAX, SAME(cuMemRetainAllocationHandle)},
    {"cuGetProcAddress", 11030, 11999, SAME(cuGetProcAddress_v1)},
    {"cuGetProcAddress", 12000, INT_MAX, SAME(cuGetProcAddress_v2)},
};

void *p2pg_wrap_driver_entry(const char *symbol, int cuda_version, bool per_thread, void *fn)
{
	if (!fn || !symbol || symbol[0] != 'c' || symbol[1] != 'u' || p2pg_is_wrapper(fn))
		return fn;
	for (size_t k = 0; k < sizeof(entry_maps) / sizeof(entry_maps[0]); k++) {
		const struct entry_map *m = &entry_maps[k];
		if (cuda_version < m->min_version || cuda_version > m->max_version ||
		    strcmp(symbol, m->symbol) != 0)
			continue;
		void *_Atomic *slot = per_thread ? m->per_thread_real : m->legacy_real;
		void *expected = NULL;
		atomic_compare_exchange_strong(slot, &expected, fn);
		return per_thread ? m->per_thread : m->legacy;
	}
	return fn;
}

typedef CUresult(CUDAAPI *proc_v2_fn)(const char *, void **, int, cuuint64_t,
				      CUdriverProcAddressQueryResult *);
typedef CUresult(CUDAAPI *proc_v1_fn)(const char *, void **, int, cuuint64_t);

P2PG_EXPORT CUresult CUDAAPI cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
						 cuuint64_t flags,
						 CUdriverProcAddressQueryResult *symbolStatus)
{
	proc_v2_fn real = P2PG_REAL(proc_v2_fn, cuGetProcAddress_v2, P2PG_LIB_DRIVER);
	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	CUresult rc = real(symbol, pfn, cudaVersion, flags, symbolStatus);
	if (rc == CUDA_SUCCESS && pfn)
		*pfn = p2pg_wrap_driver_entry(
		    symbol, cudaVersion,
		    (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0, *pfn);
	return rc;
}

P2PG_EXPORT CUresult CUDAAPI cuGetProcAddress_v1(const char *symbol, void **pfn, int cudaVersion,
						 cuuint64_t flags)
{
	proc_v1_fn real = (proc_v1_fn)p2pg_resolve_real(
	    "cuGetProcAddress", &p2pg_real_cuGetProcAddress_v1, P2PG_LIB_DRIVER);
	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	CUresult rc = real(symbol, pfn, cudaVersion, flags);
	if (rc == CUDA_SUCCESS && pfn)
		*pfn = p2pg_wrap_driver_entry(
		    symbol, cudaVersion,
		    (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0, *pfn);
	return rc;
}

/* ---- the runtime's lookups (NCCL uses them) ---- */

typedef cudaError_t (*entry_fn)(const char *, void **, unsigned long long,
				enum cudaDriverEntryPointQueryResult *);
typedef cudaError_t (*entry_by_version_fn)(const char *, void **, unsigned int, unsigned long long,
					   enum cudaDriverEntryPointQueryResult *);
typedef cudaError_t (*runtime_version_fn)(int *);

static void *_Atomic p2pg_real_cudaRuntimeGetVersion;

/* cudaGetDriverEntryPoint resolves at the runtime's own version; the wrapper must match that ABI.
 */
static int runtime_version(void)
{
	static _Atomic int cached;
	int v = atomic_load(&cached);
	if (v)
		return v;
	runtime_version_fn get =
	    P2PG_REAL(runtime_version_fn, cudaRuntimeGetVersion, P2PG_LIB_RUNTIME);
	if (!get || get(&v) != cudaSuccess || v <= 0)
		return CUDA_VERSION;
	atomic_store(&cached, v);
	return v;
}

static bool runtime_per_thread(unsigned long long flags, bool ptsz_export)
{
	if (flags & cudaEnablePerThreadDefaultStream)
		return true;
	if (flags & cudaEnableLegacyStream)
		return false;
	return ptsz_export;
}

static cudaError_t entry_point(entry_fn real, bool ptsz_export, const char *symbol, void **funcPtr,
			       unsigned long long flags,
			       enum cudaDriverEntryPointQueryResult *driverStatus)
{
	if (!real)
		return cudaErrorInitializationError;
	cudaError_t rc = real(symbol, funcPtr, flags, driverStatus);
	if (rc == cudaSuccess && funcPtr)
		*funcPtr = p2pg_wrap_driver_entry(symbol, runtime_version(),
						  runtime_per_thread(flags, ptsz_export), *funcPtr);
	return rc;
}

static cudaError_t entry_point_by_version(entry_by_version_fn real, bool ptsz_export,
					  const char *symbol, void **funcPtr,
					  unsigned int cudaVersion, unsigned long long flags,
					  enum cudaDriverEntryPointQueryResult *driverStatus)
{
	if (!real)
		return cudaErrorInitializationError;
	cudaError_t rc = real(symbol, funcPtr, cudaVersion, flags, driverStatus);
	if (rc == cudaSuccess && funcPtr)
		*funcPtr = p2pg_wrap_driver_entry(symbol, (int)cudaVersion,
						  runtime_per_thread(flags, ptsz_export), *funcPtr);
	return rc;
}

P2PG_EXPORT cudaError_t cudaGetDriverEntryPoint(const char *symbol, void **funcPtr,
						unsigned long long flags,
						enum cudaDriverEntryPointQueryResult *driverStatus)
{
	return entry_point(P2PG_REAL(entry_fn, cudaGetDriverEntryPoint, P2PG_LIB_RUNTIME), false,
			   symbol, funcPtr, flags, driverStatus);
}

P2PG_EXPORT cudaError_t
cudaGetDriverEntryPoint_ptsz(const char *symbol, void **funcPtr, unsigned long long flags,
			     enum cudaDriverEntryPointQueryResult *driverStatus)
{
	return entry_point(P2PG_REAL(entry_fn, cudaGetDriverEntryPoint_ptsz, P2PG_LIB_RUNTIME),
			   true, symbol, funcPtr, flags, driverStatus);
}

P2PG_EXPORT cudaError_t cudaGetDriverEntryPointByVersion(
    const char *symbol, void **funcPtr, unsigned int cudaVersion, unsigned long long flags,
    enum cudaDriverEntryPointQueryResult *driverStatus)
{
	return entry_point_by_version(
	    P2PG_REAL(entry_by_version_fn, cudaGetDriverEntryPointByVersion, P2PG_LIB_RUNTIME),
	    false, symbol, funcPtr, cudaVersion, flags, driverStatus);
}

P2PG_EXPORT cudaError_t cudaGetDriverEntryPointByVersion_ptsz(
    const char *symbol, void **funcPtr, unsigned int cudaVersion, unsigned long long flags,
    enum cudaDriverEntryPointQueryResult *driverStatus)
{
	return entry_point_by_version(
	    P2PG_REAL(entry_by_version_fn, cudaGetDriverEntryPointByVersion_ptsz, P2PG_LIB_RUNTIME),
	    true, symbol, funcPtr, cudaVersion, flags, driverStatus);
}
