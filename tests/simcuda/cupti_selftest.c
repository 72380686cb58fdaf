/* Self-test of the simulated CUPTI (libcupti.so.13, cupti.c) on the simulated driver: which
 * copies give which activity records, their fields, buffer handling, many records from
 * concurrent streams, and SIMCUDA_CUPTI_FAIL.
 *
 * Usage: simcuda-cupti-selftest MODE (records, fail), with SIMCUDA_DEVICES=2 and, for fail,
 * SIMCUDA_CUPTI_FAIL=1 (see meson.build). libcupti.so.13 is loaded with dlopen, as a tool does. */
#include <cuda.h>
#include <cupti_activity.h>
#include <cupti_result.h>
#include <cupti_version.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BUF_BYTES ((size_t)64 << 10)
#define N	  4096
#define MANY	  10000

static int failed;

static void check(int ok, const char *what)
{
	printf("%s - %s\n", ok ? "ok" : "not ok", what);
	if (!ok)
		failed++;
}

static struct {
	__typeof__(cuptiActivityRegisterCallbacks) *RegisterCallbacks;
	__typeof__(cuptiActivityEnable) *Enable;
	__typeof__(cuptiActivityDisable) *Disable;
	__typeof__(cuptiActivityFlushAll) *FlushAll;
	__typeof__(cuptiActivityGetNextRecord) *GetNextRecord;
	__typeof__(cuptiActivityGetNumDroppedRecords) *GetNumDroppedRecords;
	__typeof__(cuptiGetResultString) *GetResultString;
	__typeof__(cuptiGetVersion) *GetVersion;
	__typeof__(cuptiGetStreamIdEx) *GetStreamIdEx;
	__typeof__(cuptiGetContextId) *GetContextId;
} cp;

static int load_cupti(void)
{
	void *lib = dlopen("libcupti.so.13", RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		printf("not ok - dlopen libcupti.so.13: %s\n", dlerror());
		return -1;
	}
#define SYM(field, name)                                                     \
	do {                                                                 \
		cp.field = (__typeof__(cp.field))dlsym(lib, name);           \
		if (!cp.field) {                                             \
			printf("not ok - libcupti.so.13 has no %s\n", name); \
			return -1;                                           \
		}                                                            \
	} while (0)
	SYM(RegisterCallbacks, "cuptiActivityRegisterCallbacks");
	SYM(Enable, "cuptiActivityEnable");
	SYM(Disable, "cuptiActivityDisable");
	SYM(FlushAll, "cuptiActivityFlushAll");
	SYM(GetNextRecord, "cuptiActivityGetNextRecord");
	SYM(GetNumDroppedRecords, "cuptiActivityGetNumDroppedRecords");
	SYM(GetResultString, "cuptiGetResultString");
	SYM(GetVersion, "cuptiGetVersion");
	SYM(GetStreamIdEx, "cuptiGetStreamIdEx");
	SYM(GetContextId, "cuptiGetContextId");
#undef SYM
	Dl_info info;
	check(dladdr((void *)cp.Enable, &info) && info.dli_fname &&
		  strstr(info.dli_fname, "simcuda/libcupti.so.13"),
	      "the simulated libcupti.so.13 is the one loaded");
	return 0;
}

/* ---- what the buffer callbacks collected ---- */

union rec {
	CUpti_Activity a;
	CUpti_ActivityMemcpy6 m;
	CUpti_ActivityMemcpyPtoP4 p;
};

static pthread_mutex_t rec_mu = PTHREAD_MUTEX_INITIALIZER;
static union rec *recs;
static size_t nrecs, caprecs, nother, walk_errors, nrequested, ndelivered, nmisaligned;
static int request_mode; /* 0: 64 KiB buffers; 1: the same, at most one record each; 2: none */

static void CUPTIAPI requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
	*buffer = request_mode == 2 ? NULL : aligned_alloc(8, BUF_BYTES);
	*size = *buffer ? BUF_BYTES : 0;
	*max_records = request_mode == 1 ? 1 : 0;
	pthread_mutex_lock(&rec_mu);
	nrequested++;
	pthread_mutex_unlock(&rec_mu);
}

static void add(const CUpti_Activity *a, size_t n)
{
	if (nrecs == caprecs) {
		size_t cap = caprecs ? 2 * caprecs : 1024;
		union rec *p = realloc(recs, cap * sizeof(*p));
		if (!p) {
			walk_errors++;
			return;
		}
		recs = p;
		caprecs = cap;
	}
	memset(&recs[nrecs], 0, sizeof(recs[nrecs]));
	memcpy(&recs[nrecs++], a, n);
}

static void CUPTIAPI completed(CUcontext ctx, uint32_t stream_id, uint8_t *buffer, size_t size,
			       size_t valid)
{
	pthread_mutex_lock(&rec_mu);
	ndelivered++;
	if (ctx || stream_id || valid > size)
		walk_errors++;
	CUpti_Activity *a = NULL;
	for (;;) {
		CUptiResult r = cp.GetNextRecord(buffer, valid, &a);
		if (r == CUPTI_ERROR_MAX_LIMIT_REACHED)
			break;
		if (r != CUPTI_SUCCESS) {
			walk_errors++;
			break;
		}
		if ((uintptr_t)a % 8)
			nmisaligned++;
		if (a->kind == CUPTI_ACTIVITY_KIND_MEMCPY)
			add(a, sizeof(CUpti_ActivityMemcpy6));
		else if (a->kind == CUPTI_ACTIVITY_KIND_MEMCPY2)
			add(a, sizeof(CUpti_ActivityMemcpyPtoP4));
		else
			nother++;
	}
	pthread_mutex_unlock(&rec_mu);
	free(buffer);
}

static void forget(void)
{
	pthread_mutex_lock(&rec_mu);
	nrecs = nother = nrequested = ndelivered = 0;
	pthread_mutex_unlock(&rec_mu);
}

static const union rec *find(CUpti_ActivityKind kind, uint8_t copy_kind, size_t nth)
{
	for (size_t i = 0; i < nrecs; i++)
		if (recs[i].a.kind == kind && recs[i].m.copyKind == copy_kind && nth-- == 0)
			return &recs[i];
	return NULL;
}

/* Copies on different streams complete in any order: other_copies tells them by size. */
static const union rec *find_bytes(CUpti_ActivityKind kind, uint64_t bytes)
{
	for (size_t i = 0; i < nrecs; i++)
		if (recs[i].a.kind == kind && recs[i].m.bytes == bytes)
			return &recs[i];
	return NULL;
}

static uint64_t realtime_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint32_t stream_id(CUcontext ctx, CUstream s, uint8_t per_thread)
{
	uint32_t id = 0;
	if (cp.GetStreamIdEx(ctx, s, per_thread, &id) != CUPTI_SUCCESS)
		return UINT32_MAX;
	return id;
}

static uint32_t context_id(CUcontext ctx)
{
	uint32_t id = 0;
	if (cp.GetContextId(ctx, &id) != CUPTI_SUCCESS)
		return UINT32_MAX;
	return id;
}

/* ---- setup ---- */

static CUcontext ctx0, ctx1;
static CUstream s0, s1;		/* user streams of ctx0 and ctx1 */
static CUdeviceptr a0, a0b, b1; /* device 0, device 0, device 1 */
static void *pinned;

static int setup(void)
{
	int n = 0;
	if (cuInit(0) != CUDA_SUCCESS || cuDeviceGetCount(&n) != CUDA_SUCCESS || n < 2) {
		printf("not ok - two simulated devices\n");
		return -1;
	}
	cuDevicePrimaryCtxRetain(&ctx1, 1);
	cuCtxSetCurrent(ctx1);
	cuMemAlloc(&b1, N);
	cuStreamCreate(&s1, 0);
	cuDevicePrimaryCtxRetain(&ctx0, 0);
	cuCtxSetCurrent(ctx0);
	cuMemAlloc(&a0, N);
	cuMemAlloc(&a0b, N);
	cuMemAllocHost(&pinned, N);
	cuStreamCreate(&s0, 0);
	memset(pinned, 7, N);
	/* Peer copies go over P2P (PTOP records) unless a check turns access off. */
	CUresult e0 = cuCtxEnablePeerAccess(ctx1, 0);
	cuCtxSetCurrent(ctx1);
	CUresult e1 = cuCtxEnablePeerAccess(ctx0, 0);
	cuCtxSetCurrent(ctx0);
	return b1 && a0 && a0b && pinned && s0 && s1 && e0 == CUDA_SUCCESS && e1 == CUDA_SUCCESS
		   ? 0
		   : -1;
}

static void teardown(void)
{
	cuStreamDestroy(s0);
	cuMemFreeHost(pinned);
	cuMemFree(a0);
	cuMemFree(a0b);
	cuCtxSetCurrent(ctx1);
	cuStreamDestroy(s1);
	cuMemFree(b1);
	cuCtxSetCurrent(ctx0);
	cuDevicePrimaryCtxRelease(0);
	cuDevicePrimaryCtxRelease(1);
}

static void sync_all(void)
{
	cuStreamSynchronize(s0);
	cuStreamSynchronize(s1);
	cuCtxSynchronize();
}

/* ---- records mode ---- */

static void basics(void)
{
	uint32_t v = 0;
	check(cp.GetVersion(&v) == CUPTI_SUCCESS && v == CUPTI_API_VERSION,
	      "cuptiGetVersion gives the header's CUPTI_API_VERSION");
	const char *str = NULL;
	check(cp.GetResultString(CUPTI_ERROR_NOT_INITIALIZED, &str) == CUPTI_SUCCESS && str &&
		  strcmp(str, "CUPTI_ERROR_NOT_INITIALIZED") == 0,
	      "cuptiGetResultString names the code");
	check(cp.GetResultString((CUptiResult)12345, &str) == CUPTI_ERROR_INVALID_PARAMETER,
	      "cuptiGetResultString refuses an unknown code");
	check(cp.Enable(CUPTI_ACTIVITY_KIND_KERNEL) == CUPTI_ERROR_NOT_COMPATIBLE,
	      "enabling a kind that is not simulated: CUPTI_ERROR_NOT_COMPATIBLE");
	check(cp.Enable(CUPTI_ACTIVITY_KIND_INVALID) == CUPTI_ERROR_INVALID_KIND &&
		  cp.Enable(CUPTI_ACTIVITY_KIND_COUNT) == CUPTI_ERROR_INVALID_KIND,
	      "enabling no kind at all: CUPTI_ERROR_INVALID_KIND");
	check(cp.Disable(CUPTI_ACTIVITY_KIND_KERNEL) == CUPTI_SUCCESS,
	      "disabling a kind that was not enabled");
	CUpti_Activity *a = NULL;
	uint8_t buf[16];
	check(cp.GetNextRecord(NULL, 16, &a) == CUPTI_ERROR_INVALID_PARAMETER,
	      "cuptiActivityGetNextRecord(NULL buffer): CUPTI_ERROR_INVALID_PARAMETER");
	check(cp.GetNextRecord(buf, 0, &a) == CUPTI_ERROR_MAX_LIMIT_REACHED,
	      "cuptiActivityGetNextRecord of an empty buffer: CUPTI_ERROR_MAX_LIMIT_REACHED");
	check(cp.RegisterCallbacks(NULL, completed) == CUPTI_ERROR_INVALID_PARAMETER,
	      "cuptiActivityRegisterCallbacks(NULL, ...): CUPTI_ERROR_INVALID_PARAMETER");

	uint32_t c0 = context_id(ctx0), c1 = context_id(ctx1);
	check(c0 != UINT32_MAX && c1 != UINT32_MAX && c0 != c1, "contexts have distinct IDs");
	uint32_t id;
	check(cp.GetContextId(NULL, &id) == CUPTI_ERROR_INVALID_CONTEXT,
	      "cuptiGetContextId(NULL): CUPTI_ERROR_INVALID_CONTEXT");
	uint32_t legacy = stream_id(ctx0, NULL, 0), pt = stream_id(ctx0, NULL, 1);
	check(legacy != UINT32_MAX && pt != UINT32_MAX && legacy != pt &&
		  stream_id(ctx0, CU_STREAM_LEGACY, 1) == legacy &&
		  stream_id(ctx0, CU_STREAM_PER_THREAD, 0) == pt,
	      "legacy and per-thread default streams have their own IDs");
	check(cp.GetStreamIdEx(NULL, NULL, 0, &id) == CUPTI_ERROR_INVALID_STREAM,
	      "a default stream without its context: CUPTI_ERROR_INVALID_STREAM");
	check(stream_id(NULL, s0, 0) != legacy && stream_id(NULL, s0, 0) != pt &&
		  stream_id(ctx0, s0, 0) == stream_id(NULL, s0, 1),
	      "a user stream has its own ID, whatever perThreadStream says");
	check(cp.GetStreamIdEx(ctx0, s1, 0, &id) == CUPTI_ERROR_INVALID_STREAM,
	      "cuptiGetStreamIdEx of another context's stream: CUPTI_ERROR_INVALID_STREAM");
	check(stream_id(ctx1, NULL, 0) != UINT32_MAX,
	      "cuptiGetStreamIdEx(ctx1, NULL) names ctx1's");
}

/* Before any callbacks: records are dropped, and flushing has nothing to hand over to. */
static void unregistered(void)
{
	size_t dropped = 99;
	cp.GetNumDroppedRecords(NULL, 0, &dropped);
	check(cp.Enable(CUPTI_ACTIVITY_KIND_MEMCPY) == CUPTI_SUCCESS,
	      "MEMCPY can be enabled before callbacks are registered");
	cuMemcpyHtoD(a0, pinned, 64);
	check(cp.GetNumDroppedRecords(NULL, 0, &dropped) == CUPTI_SUCCESS && dropped == 1,
	      "without callbacks the copy's record is dropped and counted");
	check(cp.GetNumDroppedRecords(NULL, 0, &dropped) == CUPTI_SUCCESS && dropped == 0,
	      "reading the dropped count resets it");
	check(cp.FlushAll(0) == CUPTI_ERROR_INVALID_OPERATION,
	      "cuptiActivityFlushAll without callbacks: CUPTI_ERROR_INVALID_OPERATION");
	cp.Disable(CUPTI_ACTIVITY_KIND_MEMCPY);
}

static void memcpy2_alone(void)
{
	forget();
	check(cp.Enable(CUPTI_ACTIVITY_KIND_MEMCPY2) == CUPTI_SUCCESS, "enable MEMCPY2 alone");
	cuMemcpyPeerAsync(b1, ctx1, a0, ctx0, N, s0);
	cuMemcpyHtoDAsync(a0, pinned, N, s0);
	cuMemcpyPeer(b1, ctx1, a0, ctx0, N);
	sync_all();
	check(cp.FlushAll(0) == CUPTI_SUCCESS, "flush");
	check(nrecs == 0 && nother == 0, "MEMCPY2 alone: no record at all (peer copies included)");
}

static void peer_and_h2d(void)
{
	forget();
	check(cp.Enable(CUPTI_ACTIVITY_KIND_MEMCPY) == CUPTI_SUCCESS, "enable MEMCPY too");
	uint64_t t0 = realtime_ns();
	check(cuMemcpyPeerAsync(b1, ctx1, a0, ctx0, N, s0) == CUDA_SUCCESS &&
		  cuMemcpyHtoDAsync(a0, pinned, N / 2, s0) == CUDA_SUCCESS,
	      "peer copy 0 -> 1 and H2D on a stream of device 0");
	cuStreamSynchronize(s0);
	uint64_t t1 = realtime_ns();
	cp.FlushAll(0);
	check(nrecs == 2 && nother == 0 && walk_errors == 0 && nmisaligned == 0,
	      "two records, 8-byte aligned");
	const union rec *p = find(CUPTI_ACTIVITY_KIND_MEMCPY2, CUPTI_ACTIVITY_MEMCPY_KIND_PTOP, 0);
	const union rec *h = find(CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, 0);
	check(p != NULL, "one CUpti_ActivityMemcpyPtoP4 record (MEMCPY2, PTOP)");
	check(h != NULL, "one CUpti_ActivityMemcpy6 record (MEMCPY, HTOD)");
	if (!p || !h)
		return;
	uint32_t c0 = context_id(ctx0), c1 = context_id(ctx1), sid = stream_id(NULL, s0, 0);
	check(p->p.bytes == N && p->p.srcDeviceId == 0 && p->p.dstDeviceId == 1 &&
		  p->p.deviceId == 0 && p->p.srcKind == CUPTI_ACTIVITY_MEMORY_KIND_DEVICE &&
		  p->p.dstKind == CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
	      "PtoP: bytes, devices, memory kinds");
	check(p->p.start >= t0 && p->p.start <= p->p.end && p->p.end <= t1,
	      "PtoP: CLOCK_REALTIME start <= end, within the call and the synchronize");
	check(p->p.streamId == sid && p->p.contextId == c0,
	      "PtoP: streamId and contextId as cuptiGetStreamIdEx and cuptiGetContextId give them");
	check(p->p.srcContextId == c0 && p->p.dstContextId == c1, "PtoP: source and destination "
								  "contexts");
	check(p->p.flags == CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC && p->p.graphId == 0 &&
		  p->p.graphNodeId == 0 && p->p.correlationId != 0,
	      "PtoP: async flag, no graph, a correlation ID");
	check(h->m.bytes == N / 2 && h->m.deviceId == 0 && h->m.streamId == sid &&
		  h->m.contextId == c0 && h->m.srcKind == CUPTI_ACTIVITY_MEMORY_KIND_PINNED &&
		  h->m.dstKind == CUPTI_ACTIVITY_MEMORY_KIND_DEVICE &&
		  h->m.flags == CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC && h->m.copyCount == 1,
	      "H2D: bytes, device, stream, context, memory kinds, flags");
	check(h->m.correlationId > p->p.correlationId && h->m.start >= p->p.end,
	      "H2D after the peer copy: later correlation ID, ran after it");
}

/* Without peer access the driver stages a peer copy through the host, and CUPTI reports the two
 * halves (as seen on the H200): DTOH on the source, HTOD on the destination, one correlation ID. */
static void staged_by_driver(void)
{
	forget();
	cuCtxDisablePeerAccess(ctx1);
	cuCtxSetCurrent(ctx1);
	cuCtxDisablePeerAccess(ctx0);
	cuCtxSetCurrent(ctx0);
	cuMemcpyPeerAsync(b1, ctx1, a0, ctx0, N, s0);
	sync_all();
	cp.FlushAll(0);
	const union rec *d = find(CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_MEMCPY_KIND_DTOH, 0);
	const union rec *h = find(CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, 0);
	check(nrecs == 2 && d && h, "no peer access: two MEMCPY records, DTOH and HTOD");
	if (d && h) {
		check(d->m.correlationId == h->m.correlationId && d->m.deviceId == 0 &&
			  h->m.deviceId == 1 && d->m.streamId == stream_id(NULL, s0, 0) &&
			  d->m.srcKind == CUPTI_ACTIVITY_MEMORY_KIND_DEVICE &&
			  d->m.dstKind == CUPTI_ACTIVITY_MEMORY_KIND_DEVICE &&
			  h->m.srcKind == CUPTI_ACTIVITY_MEMORY_KIND_DEVICE && d->m.bytes == N &&
			  h->m.bytes == N && d->m.end <= h->m.start,
		      "one call's halves: the caller's stream on the source, then the destination");
	}
	cuCtxEnablePeerAccess(ctx1, 0);
	cuCtxSetCurrent(ctx1);
	cuCtxEnablePeerAccess(ctx0, 0);
	cuCtxSetCurrent(ctx0);
}

static void other_copies(void)
{
	forget();
	void *pageable = malloc(N);
	uint32_t c0 = context_id(ctx0), c1 = context_id(ctx1);
	/* Copies on different streams run concurrently: each has its own bytes. */
	check(cuMemcpyPeer(b1, ctx1, a0, ctx0, N) == CUDA_SUCCESS &&
		  cuMemcpyDtoDAsync(a0 + 1024, b1 + 1024, 100, s0) == CUDA_SUCCESS &&
		  cuMemcpyAsync(b1 + 2048, a0 + 2048, 200, CU_STREAM_PER_THREAD) == CUDA_SUCCESS &&
		  cuMemcpyPeerAsync(a0 + 3072, ctx0, b1 + 3072, ctx1, 300, s1) == CUDA_SUCCESS &&
		  cuMemcpyDtoD(a0b, a0, 400) == CUDA_SUCCESS &&
		  cuMemcpyDtoH(pageable, a0, 500) == CUDA_SUCCESS,
	      "cuMemcpyPeer, cuMemcpyDtoDAsync and cuMemcpyAsync across devices, peer on device 1, "
	      "DtoD and DtoH");
	sync_all();
	cp.FlushAll(0);
	free(pageable);
	check(nrecs == 6, "six records");
	const union rec *r;
	r = find_bytes(CUPTI_ACTIVITY_KIND_MEMCPY2, N);
	check(r && r->p.copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_PTOP && r->p.flags == 0 &&
		  r->p.streamId == stream_id(ctx0, NULL, 0),
	      "cuMemcpyPeer: PtoP, not async, on the legacy default stream");
	r = find_bytes(CUPTI_ACTIVITY_KIND_MEMCPY2, 100);
	check(r && r->p.copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_PTOP && r->p.srcDeviceId == 1 &&
		  r->p.dstDeviceId == 0 && r->p.deviceId == 0 && r->p.srcContextId == c1 &&
		  r->p.dstContextId == c0,
	      "cuMemcpyDtoDAsync from device 1 to device 0: PtoP");
	r = find_bytes(CUPTI_ACTIVITY_KIND_MEMCPY2, 200);
	check(r && r->p.copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_PTOP &&
		  r->p.streamId == stream_id(ctx0, NULL, 1) &&
		  r->p.streamId != stream_id(ctx0, NULL, 0),
	      "cuMemcpyAsync on CU_STREAM_PER_THREAD: PtoP on the per-thread stream's ID");
	r = find_bytes(CUPTI_ACTIVITY_KIND_MEMCPY2, 300);
	check(r && r->p.copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_PTOP && r->p.deviceId == 1 &&
		  r->p.contextId == c1 && r->p.streamId == stream_id(ctx1, s1, 0),
	      "peer copy on a stream of device 1: its device, context and stream");
	r = find_bytes(CUPTI_ACTIVITY_KIND_MEMCPY, 400);
	check(r && r->m.copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_DTOD && r->m.flags == 0,
	      "DtoD within device 0: MEMCPY, DTOD");
	r = find_bytes(CUPTI_ACTIVITY_KIND_MEMCPY, 500);
	check(r && r->m.copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_DTOH &&
		  r->m.dstKind == CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE,
	      "DtoH to malloc memory: MEMCPY, DTOH, pageable destination");

	/* Not measured; the simulation's assumption (cupti.c). */
	forget();
	cp.Disable(CUPTI_ACTIVITY_KIND_MEMCPY2);
	cuMemcpyPeer(b1, ctx1, a0, ctx0, 64);
	cp.FlushAll(0);
	r = find(CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_MEMCPY_KIND_PTOP, 0);
	check(nrecs == 1 && r && r->m.bytes == 64,
	      "MEMCPY without MEMCPY2: a peer copy gives a MEMCPY record of copyKind PTOP");
	cp.Enable(CUPTI_ACTIVITY_KIND_MEMCPY2);
}

static void graph(void)
{
	forget();
	CUgraph g = NULL;
	CUgraphExec x = NULL;
	check(cuStreamBeginCapture(s0, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS &&
		  cuMemcpyPeerAsync(b1, ctx1, a0, ctx0, 128, s0) == CUDA_SUCCESS &&
		  cuMemcpyHtoDAsync(a0, pinned, 64, s0) == CUDA_SUCCESS &&
		  cuStreamEndCapture(s0, &g) == CUDA_SUCCESS &&
		  cuGraphInstantiateWithFlags(&x, g, 0) == CUDA_SUCCESS,
	      "capture a peer copy and an H2D, instantiate");
	cuStreamSynchronize(s0);
	cp.FlushAll(0);
	check(nrecs == 0, "capturing runs no copy: no record");
	check(cuGraphLaunch(x, s0) == CUDA_SUCCESS && cuGraphLaunch(x, s0) == CUDA_SUCCESS,
	      "launch it twice");
	cuStreamSynchronize(s0);
	cp.FlushAll(0);
	const union rec *p1 = find(CUPTI_ACTIVITY_KIND_MEMCPY2, CUPTI_ACTIVITY_MEMCPY_KIND_PTOP, 0);
	const union rec *p2 = find(CUPTI_ACTIVITY_KIND_MEMCPY2, CUPTI_ACTIVITY_MEMCPY_KIND_PTOP, 1);
	const union rec *h1 = find(CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, 0);
	check(nrecs == 4 && p1 && p2 && h1, "four records: two PtoP, two HTOD");
	if (p1 && p2 && h1)
		check(p1->p.graphId != 0 && p1->p.graphId == p2->p.graphId &&
			  p1->p.graphNodeId != 0 && p1->p.graphNodeId == p2->p.graphNodeId &&
			  h1->m.graphId == p1->p.graphId &&
			  h1->m.graphNodeId != p1->p.graphNodeId &&
			  p2->p.correlationId > p1->p.correlationId &&
			  p1->p.flags == CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC,
		      "graph copies: the graph's ID, a node ID each, a correlation ID per launch");
	cuGraphExecDestroy(x);
	cuGraphDestroy(g);
}

/* ---- many copies from two threads and streams, flushed concurrently ---- */

struct enqueuer {
	CUcontext ctx;
	bool peer;
	unsigned n;
	CUresult r;
};

static void *enqueue_many(void *arg)
{
	struct enqueuer *e = arg;
	cuCtxSetCurrent(e->ctx);
	e->r = CUDA_SUCCESS;
	for (unsigned i = 0; i < e->n && e->r == CUDA_SUCCESS; i++)
		e->r = e->peer ? cuMemcpyPeerAsync(b1 + i % 64, ctx1, a0, ctx0, 8 + i % 64, s0)
			       : cuMemcpyHtoDAsync(b1 + 2048, pinned, 16, s1);
	return NULL;
}

static volatile int stop_flusher;

static void *flusher(void *arg)
{
	(void)arg;
	while (!__atomic_load_n(&stop_flusher, __ATOMIC_ACQUIRE)) {
		cp.FlushAll(0);
		struct timespec ts = {0, 200000};
		nanosleep(&ts, NULL);
	}
	return NULL;
}

static void many(void)
{
	forget();
	size_t dropped = 0;
	cp.GetNumDroppedRecords(NULL, 0, &dropped);
	struct enqueuer e[2] = {{ctx0, true, MANY / 2, 0}, {ctx1, false, MANY / 2, 0}};
	pthread_t t[2], f;
	stop_flusher = 0;
	pthread_create(&f, NULL, flusher, NULL);
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, enqueue_many, &e[i]);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	check(e[0].r == CUDA_SUCCESS && e[1].r == CUDA_SUCCESS,
	      "10000 copies enqueued from two threads on two devices' streams");
	sync_all();
	__atomic_store_n(&stop_flusher, 1, __ATOMIC_RELEASE);
	pthread_join(f, NULL);
	cp.FlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	cp.GetNumDroppedRecords(NULL, 0, &dropped);
	size_t np = 0, nh = 0;
	uint32_t sp = stream_id(ctx0, s0, 0), sh = stream_id(ctx1, s1, 0);
	uint32_t c0 = context_id(ctx0), c1 = context_id(ctx1);
	uint32_t last_p = 0, last_h = 0;
	int ordered = 1, attributed = 1;
	uint64_t bytes = 0;
	for (size_t i = 0; i < nrecs; i++) {
		const union rec *r = &recs[i];
		if (r->a.kind == CUPTI_ACTIVITY_KIND_MEMCPY2) {
			np++;
			bytes += r->p.bytes;
			attributed &= r->p.streamId == sp && r->p.contextId == c0;
			ordered &= r->p.correlationId > last_p;
			last_p = r->p.correlationId;
		} else {
			nh++;
			attributed &= r->m.streamId == sh && r->m.contextId == c1 &&
				      r->m.copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
			ordered &= r->m.correlationId > last_h;
			last_h = r->m.correlationId;
		}
	}
	uint64_t want_bytes = 0;
	for (unsigned i = 0; i < MANY / 2; i++)
		want_bytes += 8 + i % 64;
	char what[160];
	snprintf(what, sizeof(what), "all arrive: %zu PtoP and %zu MEMCPY records, %zu dropped", np,
		 nh, dropped);
	check(np == MANY / 2 && nh == MANY / 2 && dropped == 0 && walk_errors == 0, what);
	check(bytes == want_bytes, "the PtoP records' bytes add up");
	snprintf(what, sizeof(what), "more than one 64 KiB buffer: %zu requested, %zu delivered",
		 nrequested, ndelivered);
	check(nrequested > 1 && ndelivered == nrequested, what);
	check(attributed, "each record names its own stream and context");
	check(ordered, "each stream's records arrive in stream order (increasing correlation IDs)");
	printf("# stream IDs: s0 %u (context %u), s1 %u (context %u)\n", sp, c0, sh, c1);
}

static void buffers(void)
{
	/* At most one record per buffer. */
	forget();
	request_mode = 1;
	for (int i = 0; i < 3; i++)
		cuMemcpyHtoDAsync(a0, pinned, 32, s0);
	cuStreamSynchronize(s0);
	cp.FlushAll(0);
	check(nrecs == 3 && ndelivered == 3, "maxNumRecords 1: three buffers of one record");

	/* The client declines: records are dropped and counted. */
	request_mode = 2;
	size_t dropped = 0;
	forget();
	cp.GetNumDroppedRecords(NULL, 0, &dropped);
	for (int i = 0; i < 3; i++)
		cuMemcpyHtoDAsync(a0, pinned, 32, s0);
	cuStreamSynchronize(s0);
	cp.FlushAll(0);
	cp.GetNumDroppedRecords(NULL, 0, &dropped);
	check(nrecs == 0 && dropped == 3, "no buffer given: three records dropped");
	request_mode = 0;

	/* Disabled: nothing more. */
	forget();
	cp.Disable(CUPTI_ACTIVITY_KIND_MEMCPY);
	cp.Disable(CUPTI_ACTIVITY_KIND_MEMCPY2);
	cuMemcpyPeerAsync(b1, ctx1, a0, ctx0, N, s0);
	cuMemcpyHtoDAsync(a0, pinned, N, s0);
	cuStreamSynchronize(s0);
	cp.FlushAll(0);
	check(nrecs == 0, "both kinds disabled: no record");
	check(cp.Enable(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) == CUPTI_SUCCESS &&
		  cp.Disable(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) == CUPTI_SUCCESS,
	      "EXTERNAL_CORRELATION can be enabled (it yields no record: API kinds are not "
	      "simulated)");
}

static void mode_records(void)
{
	basics();
	unregistered();
	check(cp.RegisterCallbacks(requested, completed) == CUPTI_SUCCESS, "register callbacks");
	memcpy2_alone();
	peer_and_h2d();
	other_copies();
	staged_by_driver();
	graph();
	many();
	buffers();
}

static void mode_fail(void)
{
	check(cp.RegisterCallbacks(requested, completed) == CUPTI_SUCCESS, "register callbacks");
	check(cp.Enable(CUPTI_ACTIVITY_KIND_MEMCPY) == CUPTI_ERROR_NOT_INITIALIZED &&
		  cp.Enable(CUPTI_ACTIVITY_KIND_MEMCPY2) == CUPTI_ERROR_NOT_INITIALIZED,
	      "SIMCUDA_CUPTI_FAIL=1: cuptiActivityEnable gives CUPTI_ERROR_NOT_INITIALIZED");
	cuMemcpyPeerAsync(b1, ctx1, a0, ctx0, N, s0);
	cuStreamSynchronize(s0);
	check(cp.FlushAll(0) == CUPTI_SUCCESS && nrecs == 0, "and no record comes");
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	if (setup() != 0 || load_cupti() != 0)
		return 1;
	if (strcmp(mode, "records") == 0) {
		mode_records();
	} else if (strcmp(mode, "fail") == 0) {
		mode_fail();
	} else {
		fprintf(stderr, "usage: simcuda-cupti-selftest records|fail\n");
		return 2;
	}
	teardown();
	free(recs);
	printf("%s\n", failed ? "FAILED" : "PASSED");
	return failed ? 1 : 0;
}
