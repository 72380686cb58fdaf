/* Conformance, driver API only: initialisation, cuGetProcAddress version and flag rules, the
 * peer API's codes on contexts, peer copies and pointer attributes. */
#include <cuda.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tap.h"

#define N ((size_t)(1 << 20) + 5)

typedef CUresult (*gpa_v1)(const char *, void **, int, cuuint64_t);
typedef CUresult (*gpa_v2)(const char *, void **, int, cuuint64_t,
			   CUdriverProcAddressQueryResult *);

static void lookup(const char *sym, int version, cuuint64_t flags, CUresult want_r, int want_status,
		   int want_fn, void **out)
{
	void *fn = (void *)1;
	CUdriverProcAddressQueryResult st = (CUdriverProcAddressQueryResult)-1;
	CUresult r = cuGetProcAddress(sym, &fn, version, flags, &st);
	check_code(r, want_r, "cuGetProcAddress(%s, %d, flags %llu)", sym, version,
		   (unsigned long long)flags);
	check_code(st, want_status, "  symbol status");
	check(want_fn ? fn != NULL : fn == NULL, "  function pointer %s", want_fn ? "set" : "NULL");
	if (out)
		*out = fn;
}

static void proc_address(void)
{
	const cuuint64_t LEG = CU_GET_PROC_ADDRESS_LEGACY_STREAM;
	const cuuint64_t PTDS = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
	void *legacy = NULL, *ptds = NULL, *v1 = NULL, *v2 = NULL, *a = NULL, *b = NULL;

	/* Measured on the H200 pair (FACTS.md). */
	lookup("cuMemcpyPeer", 4000, PTDS, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT,
	       0, NULL);
	lookup("cuMemcpyPeer", 7000, PTDS, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS, 1, &ptds);
	lookup("cuMemcpyPeer", 4000, LEG, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS, 1, &legacy);
	check(ptds != legacy, "per-thread and legacy cuMemcpyPeer differ");
	/* Misses succeed: the NULL pointer and the status tell (measured on driver 580). */
	lookup("cuMemcpyPeer", 3000, 0, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT, 0,
	       NULL);
	lookup("cuNoSuchFunctionAnywhere", 12000, 0, CUDA_SUCCESS,
	       CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND, 0, NULL);
	lookup("cuMemcpyPeer_ptds", 12000, 0, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND, 0,
	       NULL);
	lookup("cuMemcpyDtoD", 4000, PTDS, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT,
	       0, NULL);

	/* Bad flags, or a version above the driver's, fail and leave the outputs alone. */
	int dv = 0;
	cuDriverGetVersion(&dv);
	void *fn = (void *)1;
	CUdriverProcAddressQueryResult st = (CUdriverProcAddressQueryResult)77;
	check_code(cuGetProcAddress("cuMemcpyPeer", &fn, dv + 10, 0, &st), CUDA_ERROR_INVALID_VALUE,
		   "cuGetProcAddress above the driver version (%d)", dv + 10);
	check(fn == (void *)1 && st == 77, "  outputs untouched");
	check_code(cuGetProcAddress("cuMemcpyPeer", &fn, 12000, 4, &st), CUDA_ERROR_INVALID_VALUE,
		   "cuGetProcAddress with unknown flags");
	check(fn == (void *)1 && st == 77, "  outputs untouched");

	lookup("cuGetProcAddress", 11030, 0, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS, 1, &v1);
	lookup("cuGetProcAddress", 12000, 0, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS, 1, &v2);
	check(v1 != v2, "cuGetProcAddress at 11030 and 12000 are different functions");
	if (v1 && v2) {
		fn = NULL;
		check_code(((gpa_v2)v2)("cuMemcpyPeer", &fn, 4000, LEG, &st), CUDA_SUCCESS,
			   "lookup through the 12000 cuGetProcAddress");
		check(fn == legacy, "  gives the same cuMemcpyPeer");
		fn = NULL;
		check_code(((gpa_v1)v1)("cuMemcpyPeer", &fn, 4000, LEG), CUDA_SUCCESS,
			   "lookup through the 11030 cuGetProcAddress");
		check(fn == legacy, "  gives the same cuMemcpyPeer");
	}

	lookup("cuMemcpyDtoD", 3020, LEG, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS, 1, &a);
	lookup("cuMemcpyDtoD", 7000, PTDS, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS, 1, &b);
	check(a != b, "per-thread and legacy cuMemcpyDtoD differ");

	/* No per-thread form: the per-thread request gets the legacy function. */
	lookup("cuCtxEnablePeerAccess", 4000, LEG, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS, 1,
	       &a);
	lookup("cuCtxEnablePeerAccess", 12000, PTDS, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS, 1,
	       &b);
	check(a == b, "cuCtxEnablePeerAccess has one form for both flags");
	lookup("cuDeviceCanAccessPeer", 4000, 0, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS, 1,
	       NULL);
	lookup("cuMemcpyPeerAsync", 7000, PTDS, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS, 1, NULL);
	lookup("cuMemcpy3DPeer", 4000, LEG, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS, 1, NULL);
	lookup("cuMemcpyBatchAsync", 13000, LEG, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS, 1,
	       NULL);
}

static void fill(unsigned char *p, size_t n, unsigned salt)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)(i * 13u + salt);
}

static void peer_api(int n)
{
	CUdevice d0, d1;
	CUcontext c0, c1;
	cuDeviceGet(&d0, 0);
	for (int i = 0; i < n; i++) {
		CUdevice di;
		cuDeviceGet(&di, i);
		for (int j = 0; j < n; j++) {
			CUdevice dj;
			int can = -1, attr = -1;
			cuDeviceGet(&dj, j);
			check_code(cuDeviceCanAccessPeer(&can, di, dj), CUDA_SUCCESS,
				   "cuDeviceCanAccessPeer(%d, %d)", i, j);
			if (i == j) {
				check_code(can, 0, "device %d is not its own peer", i);
				check_code(
				    cuDeviceGetP2PAttribute(
					&attr, CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, di, dj),
				    CUDA_ERROR_INVALID_DEVICE,
				    "P2P attribute of a device with itself");
				continue;
			}
			check_code(cuDeviceGetP2PAttribute(
				       &attr, CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, di, dj),
				   CUDA_SUCCESS, "P2P attribute (%d, %d)", i, j);
			check_code(attr, can, "P2P access attribute (%d, %d) matches", i, j);
		}
	}

	check_code(cuDevicePrimaryCtxRetain(&c0, d0), CUDA_SUCCESS, "retain primary context 0");
	check_code(cuCtxSetCurrent(c0), CUDA_SUCCESS, "make it current");
	check_code(cuCtxEnablePeerAccess(c0, 0), CUDA_ERROR_PEER_ACCESS_UNSUPPORTED,
		   "enable peer access to the own context");
	if (n < 2) {
		skip("peer contexts: needs two devices");
		cuDevicePrimaryCtxRelease(d0);
		return;
	}
	cuDeviceGet(&d1, 1);
	check_code(cuDevicePrimaryCtxRetain(&c1, d1), CUDA_SUCCESS, "retain primary context 1");
	int can = 0;
	cuDeviceCanAccessPeer(&can, d0, d1);

	check_code(cuCtxEnablePeerAccess(c1, 1), CUDA_ERROR_INVALID_VALUE,
		   "enable peer access with flags 1");
	check_code(cuCtxDisablePeerAccess(c1), CUDA_ERROR_PEER_ACCESS_NOT_ENABLED,
		   "disable peer access never enabled");
	cuCtxSetCurrent(NULL);
	check_code(cuCtxEnablePeerAccess(c1, 0), CUDA_ERROR_INVALID_CONTEXT,
		   "enable peer access with no current context");
	cuCtxSetCurrent(c0);

	if (!can) {
		check_code(cuCtxEnablePeerAccess(c1, 0), CUDA_ERROR_PEER_ACCESS_UNSUPPORTED,
			   "enable 0 -> 1 without P2P support");
	} else {
		check_code(cuCtxEnablePeerAccess(c1, 0), CUDA_SUCCESS, "enable 0 -> 1");
		check_code(cuCtxEnablePeerAccess(c1, 0), CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED,
			   "enable 0 -> 1 again");
		cuCtxSetCurrent(c1);
		check_code(cuCtxDisablePeerAccess(c0), CUDA_ERROR_PEER_ACCESS_NOT_ENABLED,
			   "disable 1 -> 0 while only 0 -> 1 is enabled");
		cuCtxSetCurrent(c0);
		check_code(cuCtxDisablePeerAccess(c1), CUDA_SUCCESS, "disable 0 -> 1");
		check_code(cuCtxDisablePeerAccess(c1), CUDA_ERROR_PEER_ACCESS_NOT_ENABLED,
			   "disable 0 -> 1 again");
	}

	/* Peer copies, byte-exact, with and without peer access. */
	unsigned char *h = malloc(N), *back = malloc(N);
	CUdeviceptr a = 0, b = 0;
	cuCtxSetCurrent(c0);
	check_code(cuMemAlloc(&a, N), CUDA_SUCCESS, "cuMemAlloc on device 0");
	cuCtxSetCurrent(c1);
	check_code(cuMemAlloc(&b, N), CUDA_SUCCESS, "cuMemAlloc on device 1");
	for (int round = 0; round < 2; round++) {
		const char *mode = round ? "peer access" : "no peer access";
		if (round == 1) {
			if (!can) {
				skip("driver peer copies with peer access: no P2P");
				break;
			}
			cuCtxSetCurrent(c0);
			cuCtxEnablePeerAccess(c1, 0);
			cuCtxSetCurrent(c1);
			cuCtxEnablePeerAccess(c0, 0);
		}
		cuCtxSetCurrent(c0);
		fill(h, N, 3u + (unsigned)round);
		cuMemcpyHtoD(a, h, N);
		check_code(cuMemcpyPeer(b, c1, a, c0, N), CUDA_SUCCESS, "%s: cuMemcpyPeer 0 -> 1",
			   mode);
		memset(back, 0, N);
		cuCtxSetCurrent(c1);
		cuMemcpyDtoH(back, b, N);
		check(memcmp(h, back, N) == 0, "%s: cuMemcpyPeer byte-exact", mode);

		fill(h, N, 40u + (unsigned)round);
		cuMemcpyHtoD(b, h, N);
		/* A blocking stream: the HtoD from pageable memory above may still be in flight on
		 * the legacy stream when it returns. */
		CUstream s;
		cuStreamCreate(&s, 0);
		check_code(cuMemcpyPeerAsync(a, c0, b, c1, N, s), CUDA_SUCCESS,
			   "%s: cuMemcpyPeerAsync 1 -> 0", mode);
		cuStreamSynchronize(s);
		cuStreamDestroy(s);
		memset(back, 0, N);
		cuMemcpyDtoH(back, a, N);
		check(memcmp(h, back, N) == 0, "%s: cuMemcpyPeerAsync byte-exact", mode);

		fill(h, N, 77u + (unsigned)round);
		cuMemcpyHtoD(a, h, N);
		check_code(cuMemcpyDtoD(b, a, N), CUDA_SUCCESS, "%s: cuMemcpyDtoD 0 -> 1", mode);
		memset(back, 0, N);
		cuMemcpyDtoH(back, b, N);
		check(memcmp(h, back, N) == 0, "%s: cuMemcpyDtoD across devices byte-exact", mode);
	}

	/* A reset drops the context's peer mappings: enabling again is a first enable. */
	if (can) {
		cuCtxSetCurrent(c0);
		cuCtxDisablePeerAccess(c1);
		check_code(cuCtxEnablePeerAccess(c1, 0), CUDA_SUCCESS,
			   "enable 0 -> 1 before reset");
		cuCtxSetCurrent(c1);
		cuMemFree(b);
		b = 0;
		cuCtxDisablePeerAccess(c0);
		cuCtxSetCurrent(c0);
		cuMemFree(a);
		a = 0;
		check_code(cuDevicePrimaryCtxReset(d0), CUDA_SUCCESS, "reset primary context 0");
		CUcontext again;
		cuDevicePrimaryCtxRetain(&again, d0);
		cuCtxSetCurrent(again);
		check_code(cuCtxEnablePeerAccess(c1, 0), CUDA_SUCCESS,
			   "enable 0 -> 1 after reset is a first enable");
		cuCtxDisablePeerAccess(c1);
		cuDevicePrimaryCtxRelease(d0);
	}
	cuCtxSetCurrent(c1);
	if (b)
		cuMemFree(b);
	cuCtxSetCurrent(c0);
	if (a)
		cuMemFree(a);
	free(h);
	free(back);
	cuDevicePrimaryCtxRelease(d1);
	cuDevicePrimaryCtxRelease(d0);
}

/* Codes measured on the H200 pair that pin the simulation to the real driver. */
static void codes(int n)
{
	CUdevice d0;
	CUcontext c0, n1, n2;
	cuDeviceGet(&d0, 0);
	cuDevicePrimaryCtxRetain(&c0, d0);
	cuCtxSetCurrent(c0);
	check_code(cuMemFree(0), CUDA_SUCCESS, "cuMemFree(0)");
	void *h = (void *)1;
	check_code(cuMemAllocHost(&h, 0), CUDA_SUCCESS, "cuMemAllocHost of zero bytes");
	check_code(cuCtxDestroy(c0), CUDA_ERROR_INVALID_CONTEXT,
		   "cuCtxDestroy of a primary context");
	check_code(cuCtxCreate(&n1, NULL, 0, d0), CUDA_SUCCESS, "cuCtxCreate on device 0");
	check_code(cuCtxCreate(&n2, NULL, 0, d0), CUDA_SUCCESS, "another on device 0");
	check_code(cuCtxEnablePeerAccess(n1, 0), CUDA_ERROR_PEER_ACCESS_UNSUPPORTED,
		   "peer access between two contexts of one device");
	cuCtxDestroy(n2);
	cuCtxDestroy(n1);
	cuCtxSetCurrent(c0);

	CUstream s;
	CUgraph g = NULL;
	CUdeviceptr a = 0, b = 0;
	cuStreamCreate(&s, 0);
	cuMemAlloc(&a, 4096);
	cuMemAlloc(&b, 4096);
	size_t size = 4096, idx = 0;
	CUmemcpyAttributes attr;
	memset(&attr, 0, sizeof(attr));
	attr.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
	attr.srcLocHint.type = CU_MEM_LOCATION_TYPE_DEVICE;
	attr.dstLocHint.type = CU_MEM_LOCATION_TYPE_DEVICE;
	check_code(cuMemcpyBatchAsync(&b, &a, &size, 1, &attr, &idx, 1, 0),
		   CUDA_ERROR_INVALID_VALUE, "cuMemcpyBatchAsync on the legacy stream");
	check_code(cuMemcpyBatchAsync(&b, &a, &size, 1, &attr, &idx, 1, s), CUDA_SUCCESS,
		   "cuMemcpyBatchAsync on a stream");
	cuStreamSynchronize(s);
	check_code(cuStreamBeginCapture(0, CU_STREAM_CAPTURE_MODE_GLOBAL),
		   CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "capture the legacy stream");
	check_code(cuStreamEndCapture(s, &g), CUDA_ERROR_ILLEGAL_STATE,
		   "end a capture never begun");
	cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
	check_code(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_ERROR_ILLEGAL_STATE,
		   "begin a capture twice");
	check_code(cuMemcpyAsync(b, a, 4096, 0), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT,
		   "legacy stream work while a blocking stream captures");
	check_code(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
		   "that invalidated the capture");
	check(g == NULL, "  no graph");
	char *pageable = malloc(4096);
	cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
	check_code(cuMemcpyHtoDAsync(a, pageable, 4096, s), CUDA_SUCCESS,
		   "capture a copy from pageable memory");
	check_code(cuStreamEndCapture(s, &g), CUDA_SUCCESS, "  the capture is fine");
	if (g)
		cuGraphDestroy(g);
	free(pageable);
	cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
	CUdeviceptr during = 0;
	check_code(cuMemAlloc(&during, 64), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
		   "cuMemAlloc during a global capture");
	check_code(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
		   "  invalidates it");

	char host[64];
	check_code(cuMemcpyDtoD(b, a, 8192), CUDA_ERROR_INVALID_VALUE,
		   "cuMemcpyDtoD past the end of the allocations");
	check_code(cuMemcpyDtoD(b + 4000, a, 200), CUDA_ERROR_INVALID_VALUE,
		   "cuMemcpyDtoD past the end of the destination");
	check_code(cuMemsetD16(a + 1, 1, 4), CUDA_ERROR_INVALID_VALUE, "cuMemsetD16 unaligned");
	check_code(cuMemcpyHtoD((CUdeviceptr)(uintptr_t)host, host, 16), CUDA_ERROR_INVALID_VALUE,
		   "cuMemcpyHtoD to a pageable destination");
	check_code(cuMemcpyDtoH(host, (CUdeviceptr)(uintptr_t)host, 16), CUDA_ERROR_INVALID_VALUE,
		   "cuMemcpyDtoH from a pageable source");

	check_code(cuStreamWaitEvent(s, NULL, 0), CUDA_ERROR_INVALID_HANDLE,
		   "wait for a NULL event");
	check_code(cuStreamDestroy(0), CUDA_ERROR_INVALID_HANDLE, "destroy the NULL stream");
	cuStreamDestroy(s);
	cuMemFree(a);
	cuMemFree(b);

	if (n < 2) {
		skip("a released primary context: needs two devices");
		cuDevicePrimaryCtxRelease(d0);
		return;
	}
	CUdevice d1;
	CUcontext c1;
	cuDeviceGet(&d1, 1);
	cuDevicePrimaryCtxRetain(&c1, d1);
	cuDevicePrimaryCtxRelease(d1);
	check_code(cuCtxSetCurrent(c1), CUDA_SUCCESS, "make a released primary context current");
	CUdeviceptr z;
	check_code(cuMemAlloc(&z, 16), CUDA_ERROR_CONTEXT_IS_DESTROYED, "  then allocate in it");
	cuDevicePrimaryCtxRetain(&c1, d1);
	cuCtxSetCurrent(c1);
	CUdeviceptr on1 = 0;
	cuMemAlloc(&on1, 4096);
	cuCtxSetCurrent(c0);
	CUdeviceptr on0 = 0;
	cuMemAlloc(&on0, 4096);
	cuCtxSetCurrent(NULL);
	check_code(cuMemcpyPeer(on1, c1, on0, c0, 4096), CUDA_ERROR_INVALID_CONTEXT,
		   "cuMemcpyPeer with no current context");
	cuCtxSetCurrent(c0);
	cuMemFree(on0);
	cuCtxSetCurrent(c1);
	cuMemFree(on1);
	cuDevicePrimaryCtxRelease(d1);
	cuCtxSetCurrent(c0);
	cuDevicePrimaryCtxRelease(d0);
}

/* The child of a process that initialised CUDA is refused service. */
static void forked(void)
{
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		CUdeviceptr p;
		int n = 0;
		int refused = cuInit(0) == CUDA_ERROR_NOT_INITIALIZED &&
			      cuDeviceGetCount(&n) == CUDA_ERROR_NOT_INITIALIZED &&
			      cuMemAlloc(&p, 16) == CUDA_ERROR_NOT_INITIALIZED;
		_exit(refused ? 0 : 1);
	}
	int status = -1;
	waitpid(pid, &status, 0);
	check(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	      "a forked child gets CUDA_ERROR_NOT_INITIALIZED from everything");
}

static void pointers(int n)
{
	for (int i = 0; i < n; i++) {
		CUdevice d;
		CUcontext c;
		CUdeviceptr p = 0;
		cuDeviceGet(&d, i);
		cuDevicePrimaryCtxRetain(&c, d);
		cuCtxSetCurrent(c);
		if (!check_code(cuMemAlloc(&p, 4096), CUDA_SUCCESS, "cuMemAlloc on device %d", i))
			continue;
		int ordinal = -1;
		CUcontext owner = NULL;
		unsigned int type = 0;
		check_code(
		    cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p + 8),
		    CUDA_SUCCESS, "DEVICE_ORDINAL of device %d memory", i);
		check_code(ordinal, i, "  is %d", i);
		cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, p);
		check(owner == c, "  CONTEXT is the allocating context");
		cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p);
		check_code((int)type, CU_MEMORYTYPE_DEVICE, "  MEMORY_TYPE is device");
		cuMemFree(p);
		cuDevicePrimaryCtxRelease(d);
	}
	char *m = malloc(64);
	int ordinal = 0;
	check_code(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
					 (CUdeviceptr)(uintptr_t)m),
		   CUDA_ERROR_INVALID_VALUE, "DEVICE_ORDINAL of malloc memory");
	unsigned int type = 99;
	CUpointer_attribute which = CU_POINTER_ATTRIBUTE_MEMORY_TYPE;
	void *data = &type;
	check_code(cuPointerGetAttributes(1, &which, &data, (CUdeviceptr)(uintptr_t)m),
		   CUDA_SUCCESS, "cuPointerGetAttributes of malloc memory succeeds");
	check_code((int)type, 0, "  with memory type 0");
	free(m);
}

int main(void)
{
	int n = -1, version = 0;
	check_code(cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED,
		   "cuDeviceGetCount before cuInit");
	check_code(cuDriverGetVersion(&version), CUDA_SUCCESS, "cuDriverGetVersion before cuInit");
	check(version >= 13000, "driver version %d >= 13000", version);
	const char *s = NULL;
	check_code(cuGetErrorName(CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, &s), CUDA_SUCCESS,
		   "cuGetErrorName before cuInit");
	check(s && strcmp(s, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED") == 0, "  name of 704");
	proc_address();
	check_code(cuInit(0), CUDA_SUCCESS, "cuInit");
	check_code(cuDeviceGetCount(&n), CUDA_SUCCESS, "cuDeviceGetCount");
	if (!check(n >= 1, "at least one device (%d)", n))
		return tap_finish();
	CUcontext none = (CUcontext)1;
	check_code(cuCtxGetCurrent(&none), CUDA_SUCCESS, "cuCtxGetCurrent with nothing current");
	check(none == NULL, "  is NULL");
	CUdeviceptr p;
	check_code(cuMemAlloc(&p, 16), CUDA_ERROR_INVALID_CONTEXT,
		   "cuMemAlloc with no current context");
	peer_api(n);
	pointers(n);
	codes(n);
	forked();
	return tap_finish();
}
