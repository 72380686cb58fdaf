/* SPDX-License-Identifier: MIT */
#include "driver.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

struct p2pg_driver p2pg_drv;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static int load_result = -ENOENT;

static void load_driver(void)
{
	void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	if (!lib)
		lib = dlopen("libcuda.so.1", RTLD_NOW);
	if (!lib) {
		load_result = -ENOENT;
		return;
	}
	typedef CUresult(CUDAAPI * proc_fn)(const char *, void **, int, cuuint64_t,
					    CUdriverProcAddressQueryResult *);
	proc_fn get_proc = (proc_fn)p2pg_real_dlsym(lib, "cuGetProcAddress_v2");
	if (!get_proc) {
		load_result = -ENOSYS;
		return;
	}
	struct p2pg_driver table = {0};
#define P2PG_DRIVER_RESOLVE(name, version, params)                                              \
	do {                                                                                    \
		void *fn = NULL;                                                                \
		CUdriverProcAddressQueryResult found;                                           \
		if (get_proc(#name, &fn, version, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &found) != \
		    CUDA_SUCCESS)                                                               \
			fn = NULL;                                                              \
		table.name = (CUresult(CUDAAPI *) params)fn;                                    \
	} while (0);
	P2PG_DRIVER_FUNCTIONS(P2PG_DRIVER_RESOLVE)
#undef P2PG_DRIVER_RESOLVE
	p2pg_drv = table;
	/* A driver older than the headers may lack a few entries: callers check what they use. */
	load_result = 0;
}

int p2pg_driver_load(void)
{
	pthread_once(&load_once, load_driver);
	return load_result;
}

unsigned long long p2pg_context_key(CUcontext ctx)
{
	unsigned long long id = 0;
	if (p2pg_drv.cuCtxGetId && p2pg_drv.cuCtxGetId(ctx, &id) == CUDA_SUCCESS)
		return id + 1;
	return (unsigned long long)(uintptr_t)ctx;
}

struct error_names {
	int code;
	const char *cu_name;
	const char *cuda_name;
	const char *message;
};

/* HIP's names for the statuses whose value HIP shares with CUDA (hip_runtime_api.h's hipError_t),
 * the deprecated alias second: ROCm stacks print them where CUDA stacks print cudaErrorX. CUDA's
 * 46, 220, 226, 711, 800 and 802 have no HIP counterpart. */
struct hip_names {
	int code;
	const char *names[2];
};

static const struct hip_names hip_table[] = {
    {1, {"hipErrorInvalidValue", NULL}},
    {2, {"hipErrorOutOfMemory", "hipErrorMemoryAllocation"}},
    {3, {"hipErrorNotInitialized", "hipErrorInitializationError"}},
    {4, {"hipErrorDeinitialized", NULL}},
    {35, {"hipErrorInsufficientDriver", NULL}},
    {100, {"hipErrorNoDevice", NULL}},
    {101, {"hipErrorInvalidDevice", NULL}},
    {201, {"hipErrorInvalidContext", NULL}},
    {205, {"hipErrorMapFailed", "hipErrorMapBufferObjectFailed"}},
    {208, {"hipErrorAlreadyMapped", NULL}},
    {209, {"hipErrorNoBinaryForGpu", NULL}},
    {217, {"hipErrorPeerAccessUnsupported", NULL}},
    {304, {"hipErrorOperatingSystem", NULL}},
    {400, {"hipErrorInvalidHandle", "hipErrorInvalidResourceHandle"}},
    {401, {"hipErrorIllegalState", NULL}},
    {500, {"hipErrorNotFound", NULL}},
    {600, {"hipErrorNotReady", NULL}},
    {700, {"hipErrorIllegalAddress", NULL}},
    {704, {"hipErrorPeerAccessAlreadyEnabled", NULL}},
    {705, {"hipErrorPeerAccessNotEnabled", NULL}},
    {708, {"hipErrorSetOnActiveProcess", NULL}},
    {709, {"hipErrorContextIsDestroyed", NULL}},
    {710, {"hipErrorAssert", NULL}},
    {719, {"hipErrorLaunchFailure", NULL}},
    {801, {"hipErrorNotSupported", NULL}},
    {900, {"hipErrorStreamCaptureUnsupported", NULL}},
    {907, {"hipErrorCapturedEvent", NULL}},
    {999, {"hipErrorUnknown", NULL}},
};

/* The statuses a peer call can end with (driver and runtime share these values), plus the common
 * ones a copy can return and those users paste most from other failures (so that explain can tell
 * a line about them from a peer failure). */
static const struct error_names error_table[] = {
    {0, "CUDA_SUCCESS", "cudaSuccess", "no error"},
    {1, "CUDA_ERROR_INVALID_VALUE", "cudaErrorInvalidValue", "invalid argument"},
    {2, "CUDA_ERROR_OUT_OF_MEMORY", "cudaErrorMemoryAllocation", "out of memory"},
    {3, "CUDA_ERROR_NOT_INITIALIZED", "cudaErrorInitializationError", "initialization error"},
    {4, "CUDA_ERROR_DEINITIALIZED", "cudaErrorCudartUnloading", "driver shutting down"},
    {35, "CUDA_ERROR_INSUFFICIENT_DRIVER", "cudaErrorInsufficientDriver",
     "CUDA driver version is insufficient for CUDA runtime version"},
    {46, "CUDA_ERROR_DEVICE_UNAVAILABLE", "cudaErrorDevicesUnavailable",
     "CUDA-capable device(s) is/are busy or unavailable"},
    {100, "CUDA_ERROR_NO_DEVICE", "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {101, "CUDA_ERROR_INVALID_DEVICE", "cudaErrorInvalidDevice", "invalid device ordinal"},
    {201, "CUDA_ERROR_INVALID_CONTEXT", "cudaErrorDeviceUninitialized", "invalid device context"},
    {205, "CUDA_ERROR_MAP_FAILED", "cudaErrorMapBufferObjectFailed",
     "mapping of buffer object failed"},
    {208, "CUDA_ERROR_ALREADY_MAPPED", "cudaErrorAlreadyMapped", "resource already mapped"},
    {209, "CUDA_ERROR_NO_BINARY_FOR_GPU", "cudaErrorNoKernelImageForDevice",
     "no kernel image is available for execution on the device"},
    {217, "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED", "cudaErrorPeerAccessUnsupported",
     "peer access is not supported between these two devices"},
    {220, "CUDA_ERROR_NVLINK_UNCORRECTABLE", "cudaErrorNvlinkUncorrectable",
     "uncorrectable NVLink error detected during the execution"},
    {226, "CUDA_ERROR_CONTAINED", "cudaErrorContained",
     "an error occurred that was contained to the affected device"},
    {304, "CUDA_ERROR_OPERATING_SYSTEM", "cudaErrorOperatingSystem",
     "OS call failed or operation not supported on this OS"},
    {400, "CUDA_ERROR_INVALID_HANDLE", "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {401, "CUDA_ERROR_ILLEGAL_STATE", "cudaErrorIllegalState",
     "the operation cannot be performed in the present state"},
    {500, "CUDA_ERROR_NOT_FOUND", "cudaErrorSymbolNotFound", "named symbol not found"},
    {600, "CUDA_ERROR_NOT_READY", "cudaErrorNotReady", "device not ready"},
    {700, "CUDA_ERROR_ILLEGAL_ADDRESS", "cudaErrorIllegalAddress",
     "an illegal memory access was encountered"},
    {704, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED", "cudaErrorPeerAccessAlreadyEnabled",
     "peer access is already enabled"},
    {705, "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED", "cudaErrorPeerAccessNotEnabled",
     "peer access has not been enabled"},
    {708, "CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE", "cudaErrorSetOnActiveProcess",
     "cannot set while device is active in this process"},
    {709, "CUDA_ERROR_CONTEXT_IS_DESTROYED", "cudaErrorContextIsDestroyed", "context is destroyed"},
    {710, "CUDA_ERROR_ASSERT", "cudaErrorAssert", "device-side assert triggered"},
    {711, "CUDA_ERROR_TOO_MANY_PEERS", "cudaErrorTooManyPeers", "peer mapping resources exhausted"},
    {716, "CUDA_ERROR_MISALIGNED_ADDRESS", "cudaErrorMisalignedAddress", "misaligned address"},
    {719, "CUDA_ERROR_LAUNCH_FAILED", "cudaErrorLaunchFailure", "unspecified launch failure"},
    {800, "CUDA_ERROR_NOT_PERMITTED", "cudaErrorNotPermitted", "operation not permitted"},
    {801, "CUDA_ERROR_NOT_SUPPORTED", "cudaErrorNotSupported", "operation not supported"},
    {802, "CUDA_ERROR_SYSTEM_NOT_READY", "cudaErrorSystemNotReady", "system not yet initialized"},
    {900, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", "cudaErrorStreamCaptureUnsupported",
     "operation not permitted when stream is capturing"},
    {907, "CUDA_ERROR_CAPTURED_EVENT", "cudaErrorCapturedEvent",
     "operation not permitted on an event last recorded in a capturing stream"},
    {999, "CUDA_ERROR_UNKNOWN", "cudaErrorUnknown", "unknown error"},
};

static const struct error_names *error_lookup(int status)
{
	for (size_t k = 0; k < sizeof(error_table) / sizeof(error_table[0]); k++)
		if (error_table[k].code == status)
			return &error_table[k];
	return NULL;
}

bool p2pg_status_spellings(int status, const char **ret_driver, const char **ret_runtime,
			   const char **ret_message)
{
	const struct error_names *e = error_lookup(status);
	if (!e)
		return false;
	*ret_driver = e->cu_name;
	*ret_runtime = e->cuda_name;
	*ret_message = e->message;
	return true;
}

size_t p2pg_status_hip_names(int status, const char *ret_names[2])
{
	for (size_t k = 0; k < sizeof(hip_table) / sizeof(hip_table[0]); k++)
		if (hip_table[k].code == status) {
			ret_names[0] = hip_table[k].names[0];
			ret_names[1] = hip_table[k].names[1];
			return ret_names[1] ? 2 : 1;
		}
	return 0;
}

int p2pg_status_at(size_t index)
{
	return index < sizeof(error_table) / sizeof(error_table[0]) ? error_table[index].code : -1;
}

const char *p2pg_cu_error_name(int status)
{
	const struct error_names *e = error_lookup(status);
	return e ? e->cu_name : "CUDA_ERROR_UNRECOGNIZED";
}

const char *p2pg_cuda_error_name(int status)
{
	const struct error_names *e = error_lookup(status);
	return e ? e->cuda_name : "cudaErrorUnrecognized";
}

const char *p2pg_cuda_error_string(int status)
{
	const struct error_names *e = error_lookup(status);
	return e ? e->message : "unrecognized error code";
}
