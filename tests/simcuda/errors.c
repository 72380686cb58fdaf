/* Runtime and driver error codes share their numbers; only the names differ. Strings follow the
 * real libraries' wording, so messages printed under the simulation read like real ones. */
#include "errors.h"

#include <stddef.h>

struct err {
	int code;
	const char *drv;
	const char *rt;
	const char *str;
};

static const struct err errs[] = {
    {0, "CUDA_SUCCESS", "cudaSuccess", "no error"},
    {1, "CUDA_ERROR_INVALID_VALUE", "cudaErrorInvalidValue", "invalid argument"},
    {2, "CUDA_ERROR_OUT_OF_MEMORY", "cudaErrorMemoryAllocation", "out of memory"},
    {3, "CUDA_ERROR_NOT_INITIALIZED", "cudaErrorInitializationError", "initialization error"},
    {4, "CUDA_ERROR_DEINITIALIZED", "cudaErrorCudartUnloading", "driver shutting down"},
    {12, NULL, "cudaErrorInvalidPitchValue", "invalid pitch argument"},
    {16, NULL, "cudaErrorInvalidHostPointer", "invalid host pointer"},
    {17, NULL, "cudaErrorInvalidDevicePointer", "invalid device pointer"},
    {21, NULL, "cudaErrorInvalidMemcpyDirection", "invalid copy direction for memcpy"},
    {34, "CUDA_ERROR_STUB_LIBRARY", "cudaErrorStubLibrary", "CUDA driver is a stub library"},
    {35, NULL, "cudaErrorInsufficientDriver",
     "CUDA driver version is insufficient for CUDA runtime version"},
    {36, "CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER", "cudaErrorCallRequiresNewerDriver",
     "API call is not supported in the installed CUDA driver"},
    {46, "CUDA_ERROR_DEVICE_UNAVAILABLE", "cudaErrorDevicesUnavailable",
     "CUDA-capable device(s) is/are busy or unavailable"},
    {100, "CUDA_ERROR_NO_DEVICE", "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {101, "CUDA_ERROR_INVALID_DEVICE", "cudaErrorInvalidDevice", "invalid device ordinal"},
    {201, "CUDA_ERROR_INVALID_CONTEXT", "cudaErrorDeviceUninitialized", "invalid device context"},
    {202, "CUDA_ERROR_CONTEXT_ALREADY_CURRENT", NULL, "context already current"},
    {205, "CUDA_ERROR_MAP_FAILED", "cudaErrorMapBufferObjectFailed",
     "mapping of buffer object failed"},
    {217, "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED", "cudaErrorPeerAccessUnsupported",
     "peer access is not supported between these two devices"},
    {220, "CUDA_ERROR_NVLINK_UNCORRECTABLE", "cudaErrorNvlinkUncorrectable",
     "uncorrectable NVLink error detected during the execution"},
    {226, "CUDA_ERROR_CONTAINED", "cudaErrorContained",
     "Invalid access of peer GPU memory over nvlink or a hardware error"},
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
    {711, "CUDA_ERROR_TOO_MANY_PEERS", "cudaErrorTooManyPeers", "peer mapping resources exhausted"},
    {712, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED", "cudaErrorHostMemoryAlreadyRegistered",
     "part or all of the requested memory range is already mapped"},
    {713, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED", "cudaErrorHostMemoryNotRegistered",
     "pointer does not correspond to a registered memory region"},
    {719, "CUDA_ERROR_LAUNCH_FAILED", "cudaErrorLaunchFailure", "unspecified launch failure"},
    {800, "CUDA_ERROR_NOT_PERMITTED", "cudaErrorNotPermitted", "operation not permitted"},
    {801, "CUDA_ERROR_NOT_SUPPORTED", "cudaErrorNotSupported", "operation not supported"},
    {802, "CUDA_ERROR_SYSTEM_NOT_READY", "cudaErrorSystemNotReady", "system not yet initialized"},
    {900, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", "cudaErrorStreamCaptureUnsupported",
     "operation not permitted when stream is capturing"},
    {901, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED", "cudaErrorStreamCaptureInvalidated",
     "operation failed due to a previous error during capture"},
    {902, "CUDA_ERROR_STREAM_CAPTURE_MERGE", "cudaErrorStreamCaptureMerge",
     "operation would result in a merge of separate capture sequences"},
    {903, "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED", "cudaErrorStreamCaptureUnmatched",
     "capture was not ended in the same stream as it began"},
    {904, "CUDA_ERROR_STREAM_CAPTURE_UNJOINED", "cudaErrorStreamCaptureUnjoined",
     "capturing stream has unjoined work"},
    {905, "CUDA_ERROR_STREAM_CAPTURE_ISOLATION", "cudaErrorStreamCaptureIsolation",
     "dependency created on uncaptured work in another stream"},
    {906, "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT", "cudaErrorStreamCaptureImplicit",
     "operation would make the legacy stream depend on a capturing blocking stream"},
    {907, "CUDA_ERROR_CAPTURED_EVENT", "cudaErrorCapturedEvent",
     "operation not permitted on an event last recorded in a capturing stream"},
    {908, "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD", "cudaErrorStreamCaptureWrongThread",
     "attempt to terminate a thread-local capture sequence from another thread"},
    {999, "CUDA_ERROR_UNKNOWN", "cudaErrorUnknown", "unknown error"},
};

static const struct err *find(int code)
{
	for (size_t i = 0; i < sizeof(errs) / sizeof(errs[0]); i++)
		if (errs[i].code == code)
			return &errs[i];
	return NULL;
}

const char *simcuda_drv_error_name(int code)
{
	const struct err *e = find(code);
	return e ? e->drv : NULL;
}

const char *simcuda_rt_error_name(int code)
{
	const struct err *e = find(code);
	return e ? e->rt : NULL;
}

const char *simcuda_error_string(int code)
{
	const struct err *e = find(code);
	return e ? e->str : NULL;
}
