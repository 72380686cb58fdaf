/* SPDX-License-Identifier: MIT */
/*
 * A driver-API program that links no CUDA library: it loads libcuda.so.1 with dlopen and finds
 * every function either the way a static CUDA runtime does (dlsym for cuGetProcAddress_v2 only,
 * then cuGetProcAddress for cuGetProcAddress itself and everything else) or with plain dlsym.
 *
 *   drv_peer procaddr|dlsym basic    peer access and copies, legacy and per-thread stream forms
 *   drv_peer procaddr|dlsym errors   217 (own device), 704, 705, invalid flags at driver level
 *   drv_peer procaddr|dlsym ctx-reuse
 *        a context created on device 0 takes part in peer copies (one synchronous, one async on
 *        a stream of its own) and is destroyed; a context then created on device 1 (the driver
 *        may hand the same handle out again) takes part in two more: the guard must record
 *        device 1 for them, and time the async one with events of the new context. Each context
 *        lives a second after its copies, so the drainer reads their GPU times while it exists.
 *        Prints the handles' reuse.
 *   drv_peer procaddr|dlsym bench-ab N SIZE peer|local
 *        the guard's cost per call measured inside one process: batches of 256 async copies
 *        (cuMemcpyPeerAsync 0 -> 1 with peer access on, or cuMemcpyAsync within device 0) through
 *        the function the program found (the guard's, when it is preloaded) alternate with
 *        batches through libcuda's own function, found with glibc's dlsym itself (the guard
 *        interposes dlsym; dlvsym reaches glibc's). Without the guard both are one function,
 *        which shows the method's own noise. Prints medians of the batches' ns per call and the
 *        median (and quartiles) of the paired differences.
 *   drv_peer procaddr|dlsym bench-pointer N
 *        what the guard asks the driver for each generic copy: N cuPointerGetAttribute(
 *        DEVICE_ORDINAL) through libcuda's own function, on the two pointers of bench-ab's local
 *        copy in turn, in batches of 256; prints the median batch's ns per call.
 *   drv_peer procaddr|dlsym bench-ab N SIZE peer untraced-own
 *        the same, with CUPTI's copy tracing switched off around libcuda's own batches (the guard
 *        switched it on: P2PGUARD_GPU_TIMING=cupti), so that the difference is the whole of that
 *        mode's cost to a copy, CUPTI's tracing included, and not the guard's share alone. Read
 *        it as an upper bound: switching tracing back on with contexts alive may itself cost the
 *        batch that follows (bench_cupti_start saw a stall when CUPTI was enabled late).
 */
#include <cuda.h>
#include <cupti_activity.h>
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef CUresult(CUDAAPI *proc_v2_fn)(const char *, void **, int, cuuint64_t,
				      CUdriverProcAddressQueryResult *);

static void *lib;
static proc_v2_fn get_proc;
static int use_dlsym;

/* name: the base name for cuGetProcAddress, at version; abi: the exported name dlsym needs. */
static void *find_at(const char *name, const char *abi, int per_thread, int version)
{
	void *fn = NULL;
	if (use_dlsym) {
		fn = dlsym(lib, abi);
	} else {
		CUdriverProcAddressQueryResult st;
		get_proc(name, &fn, version,
			 per_thread ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
				    : CU_GET_PROC_ADDRESS_LEGACY_STREAM,
			 &st);
	}
	if (!fn) {
		fprintf(stderr, "drv_peer: cannot find %s\n", abi);
		exit(1);
	}
	return fn;
}

/* 12000: the ABIs this file declares (13.0 changed cuCtxSynchronize's). */
static void *find(const char *name, const char *abi, int per_thread)
{
	return find_at(name, abi, per_thread, 12000);
}

#define CHECK(call)                                                                               \
	do {                                                                                      \
		CUresult _e = (call);                                                             \
		if (_e != CUDA_SUCCESS) {                                                         \
			fprintf(stderr, "%s:%d: %s -> %d\n", __FILE__, __LINE__, #call, (int)_e); \
			exit(1);                                                                  \
		}                                                                                 \
	} while (0)

static struct {
	CUresult(CUDAAPI *Init)(unsigned);
	CUresult(CUDAAPI *DeviceGetCount)(int *);
	CUresult(CUDAAPI *DeviceGet)(CUdevice *, int);
	CUresult(CUDAAPI *PrimaryCtxRetain)(CUcontext *, CUdevice);
	CUresult(CUDAAPI *CtxSetCurrent)(CUcontext);
	CUresult(CUDAAPI *MemAlloc)(CUdeviceptr *, size_t);
	CUresult(CUDAAPI *MemcpyHtoD)(CUdeviceptr, const void *, size_t);
	CUresult(CUDAAPI *MemcpyDtoH)(void *, CUdeviceptr, size_t);
	CUresult(CUDAAPI *StreamCreate)(CUstream *, unsigned);
	CUresult(CUDAAPI *StreamSynchronize)(CUstream);
	CUresult(CUDAAPI *CtxSynchronize)(void);
	CUresult(CUDAAPI *CanAccessPeer)(int *, CUdevice, CUdevice);
	CUresult(CUDAAPI *CtxEnablePeerAccess)(CUcontext, unsigned);
	CUresult(CUDAAPI *CtxDisablePeerAccess)(CUcontext);
	CUresult(CUDAAPI *MemcpyPeer)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t);
	CUresult(CUDAAPI *MemcpyPeerAsync)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t,
					   CUstream);
	CUresult(CUDAAPI *MemcpyPeerAsyncPtsz)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext,
					       size_t, CUstream);
	CUresult(CUDAAPI *Memcpy)(CUdeviceptr, CUdeviceptr, size_t);
	CUresult(CUDAAPI *MemcpyAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
	CUresult(CUDAAPI *MemcpyDtoD)(CUdeviceptr, CUdeviceptr, size_t);
	CUresult(CUDAAPI *MemcpyDtoDAsyncPtsz)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
	CUresult(CUDAAPI *CtxCreate)(CUcontext *, CUctxCreateParams *, unsigned, CUdevice);
	CUresult(CUDAAPI *CtxDestroy)(CUcontext);
} cu;

static void load(void)
{
	lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		fprintf(stderr, "drv_peer: %s\n", dlerror());
		exit(1);
	}
	if (!use_dlsym) {
		proc_v2_fn boot = (proc_v2_fn)dlsym(lib, "cuGetProcAddress_v2");
		CUdriverProcAddressQueryResult st;
		void *self = NULL;
		if (!boot || boot("cuGetProcAddress", &self, 12000, 0, &st) != CUDA_SUCCESS ||
		    !self) {
			fprintf(stderr, "drv_peer: no cuGetProcAddress\n");
			exit(1);
		}
		get_proc = (proc_v2_fn)self;
	}
#define F(member, name, abi, ptds) *(void **)&cu.member = find(name, abi, ptds)
	F(Init, "cuInit", "cuInit", 0);
	F(DeviceGetCount, "cuDeviceGetCount", "cuDeviceGetCount", 0);
	F(DeviceGet, "cuDeviceGet", "cuDeviceGet", 0);
	F(PrimaryCtxRetain, "cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRetain", 0);
	F(CtxSetCurrent, "cuCtxSetCurrent", "cuCtxSetCurrent", 0);
	F(MemAlloc, "cuMemAlloc", "cuMemAlloc_v2", 0);
	F(MemcpyHtoD, "cuMemcpyHtoD", "cuMemcpyHtoD_v2", 0);
	F(MemcpyDtoH, "cuMemcpyDtoH", "cuMemcpyDtoH_v2", 0);
	F(StreamCreate, "cuStreamCreate", "cuStreamCreate", 0);
	F(StreamSynchronize, "cuStreamSynchronize", "cuStreamSynchronize", 0);
	F(CtxSynchronize, "cuCtxSynchronize", "cuCtxSynchronize", 0);
	F(CanAccessPeer, "cuDeviceCanAccessPeer", "cuDeviceCanAccessPeer", 0);
	F(CtxEnablePeerAccess, "cuCtxEnablePeerAccess", "cuCtxEnablePeerAccess", 0);
	F(CtxDisablePeerAccess, "cuCtxDisablePeerAccess", "cuCtxDisablePeerAccess", 0);
	F(MemcpyPeer, "cuMemcpyPeer", "cuMemcpyPeer", 0);
	F(MemcpyPeerAsync, "cuMemcpyPeerAsync", "cuMemcpyPeerAsync", 0);
	F(MemcpyPeerAsyncPtsz, "cuMemcpyPeerAsync", "cuMemcpyPeerAsync_ptsz", 1);
	F(Memcpy, "cuMemcpy", "cuMemcpy", 0);
	F(MemcpyAsync, "cuMemcpyAsync", "cuMemcpyAsync", 0);
	F(MemcpyDtoD, "cuMemcpyDtoD", "cuMemcpyDtoD_v2", 0);
	F(MemcpyDtoDAsyncPtsz, "cuMemcpyDtoDAsync", "cuMemcpyDtoDAsync_v2_ptsz", 1);
	F(CtxDestroy, "cuCtxDestroy", "cuCtxDestroy_v2", 0);
#undef F
	*(void **)&cu.CtxCreate = find_at("cuCtxCreate", "cuCtxCreate_v4", 0, 12050);
}

static CUcontext ctx[2];
static CUdeviceptr a0, b1;

/* Both devices' contexts and buffers; with one_device, device 0's alone (a mode that never
 * touches device 1). */
static void setup_devices(bool one_device)
{
	CHECK(cu.Init(0));
	int n = 0;
	CHECK(cu.DeviceGetCount(&n));
	int need = one_device ? 1 : 2;
	if (n < need) {
		fprintf(stderr, "drv_peer: needs %d devices\n", need);
		exit(77);
	}
	for (int d = 0; d < need; d++) {
		CUdevice dev;
		CHECK(cu.DeviceGet(&dev, d));
		CHECK(cu.PrimaryCtxRetain(&ctx[d], dev));
	}
	if (!one_device) {
		CHECK(cu.CtxSetCurrent(ctx[1]));
		CHECK(cu.MemAlloc(&b1, 1 << 20));
	}
	CHECK(cu.CtxSetCurrent(ctx[0]));
	CHECK(cu.MemAlloc(&a0, 1 << 20));
}

static void setup(void)
{
	setup_devices(false);
}

static int mode_basic(void)
{
	setup();
	unsigned char *h = malloc(1 << 20), *back = malloc(1 << 20);
	for (int k = 0; k < 1 << 20; k++)
		h[k] = (unsigned char)(k * 7 + 3);
	CHECK(cu.MemcpyHtoD(a0, h, 1 << 20));
	CUstream s;
	CHECK(cu.StreamCreate(&s, 0));
	long transfers = 0, bytes = 0, peer = 0;
	int can = 0;
	CHECK(cu.CanAccessPeer(&can, 0, 1));
	peer++;
	if (can) {
		CHECK(cu.CtxEnablePeerAccess(ctx[1], 0));
		peer++;
	}
	CHECK(cu.MemcpyPeer(b1, ctx[1], a0, ctx[0], 1 << 20));
	transfers++, bytes += 1 << 20;
	CHECK(cu.MemcpyPeerAsync(b1, ctx[1], a0, ctx[0], 8192, s));
	transfers++, bytes += 8192;
	/* The per-thread default stream is not ordered after s: unsynchronised, the two copies
	 * would write b1 at the same time (a race of this program's, which ThreadSanitizer found in
	 * the simulation). */
	CHECK(cu.StreamSynchronize(s));
	CHECK(cu.MemcpyPeerAsyncPtsz(b1, ctx[1], a0, ctx[0], 4096, 0));
	transfers++, bytes += 4096;
	CHECK(cu.Memcpy(b1, a0, 2048));
	transfers++, bytes += 2048;
	CHECK(cu.MemcpyAsync(b1, a0, 1024, s));
	transfers++, bytes += 1024;
	CHECK(cu.MemcpyDtoD(b1, a0, 512));
	transfers++, bytes += 512;
	CHECK(cu.MemcpyDtoDAsyncPtsz(b1, a0, 256, 0));
	transfers++, bytes += 256;
	CHECK(cu.MemcpyDtoD(a0 + 4096, a0, 128)); /* same device: not recorded */
	CHECK(cu.CtxSynchronize());
	CHECK(cu.StreamSynchronize(s));
	if (can) {
		CHECK(cu.CtxDisablePeerAccess(ctx[1]));
		peer++;
	}
	CHECK(cu.MemcpyPeer(b1, ctx[1], a0, ctx[0], 1 << 20));
	transfers++, bytes += 1 << 20;
	CHECK(cu.CtxSetCurrent(ctx[1]));
	CHECK(cu.MemcpyDtoH(back, b1, 1 << 20));
	int same = memcmp(h, back, 1 << 20) == 0;
	free(h);
	free(back);
	if (!same) {
		fprintf(stderr, "drv_peer: data mismatch\n");
		return 1;
	}
	printf("EXPECT transfers=%ld bytes=%ld peer_access=%ld failures=0 p2p=%d\n", transfers,
	       bytes, peer, can);
	return 0;
}

__attribute__((noinline)) static CUresult drv_induce_own_device(void)
{
	CHECK(cu.CtxSetCurrent(ctx[0]));
	return cu.CtxEnablePeerAccess(ctx[0], 0);
}

__attribute__((noinline)) static CUresult drv_induce_already_enabled(void)
{
	CHECK(cu.CtxSetCurrent(ctx[0]));
	cu.CtxEnablePeerAccess(ctx[1], 0);
	return cu.CtxEnablePeerAccess(ctx[1], 0);
}

__attribute__((noinline)) static CUresult drv_induce_not_enabled(void)
{
	CHECK(cu.CtxSetCurrent(ctx[1]));
	return cu.CtxDisablePeerAccess(ctx[0]);
}

__attribute__((noinline)) static CUresult drv_induce_bad_flags(void)
{
	CHECK(cu.CtxSetCurrent(ctx[1]));
	return cu.CtxEnablePeerAccess(ctx[0], 3);
}

static int mode_errors(void)
{
	setup();
	int can = 0;
	CHECK(cu.CanAccessPeer(&can, 0, 1));
	int failures = 0;
	CUresult e;
#define RUN(fn)                                     \
	e = fn();                                   \
	printf("CASE %s status=%d\n", #fn, (int)e); \
	failures += e != CUDA_SUCCESS;
	RUN(drv_induce_own_device);
	if (can) {
		RUN(drv_induce_already_enabled);
	}
	RUN(drv_induce_not_enabled);
	RUN(drv_induce_bad_flags);
#undef RUN
	printf("EXPECT failures=%d\n", failures);
	return 0;
}

/* A context created on ordinal, two copies from its memory to dst (one synchronous of sync_bytes,
 * one async of async_bytes on a stream of its own), alive a second, destroyed. Returns its
 * handle. GPU times are read while the context lives: the second is for a loaded drainer. */
static CUcontext copies_from_new_context(int ordinal, CUdeviceptr dst, CUcontext dst_ctx,
					 size_t sync_bytes, size_t async_bytes)
{
	CUdevice dev;
	CUcontext c;
	CUdeviceptr m;
	CUstream s;
	CHECK(cu.DeviceGet(&dev, ordinal));
	CHECK(cu.CtxCreate(&c, NULL, 0, dev));
	CHECK(cu.MemAlloc(&m, 4096));
	CHECK(cu.MemcpyPeer(dst, dst_ctx, m, c, sync_bytes));
	CHECK(cu.StreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CHECK(cu.MemcpyPeerAsync(dst, dst_ctx, m, c, async_bytes, s));
	CHECK(cu.StreamSynchronize(s));
	usleep(1000000);
	CHECK(cu.CtxDestroy(c));
	return c;
}

static int mode_ctx_reuse(void)
{
	setup();
	CUcontext first = copies_from_new_context(0, b1, ctx[1], 4096, 1024);
	CUcontext second = copies_from_new_context(1, a0, ctx[0], 2048, 512);
	printf("EXPECT transfers=4 first=0->1 second=1->0 handle_reused=%d\n", first == second);
	return 0;
}

typedef void *(*dlsym_fn)(void *, const char *);

/* libcuda's own function, past any interposed dlsym. */
static void *own_function(const char *name)
{
	dlsym_fn glibc_dlsym = (dlsym_fn)dlvsym(RTLD_DEFAULT, "dlsym", "GLIBC_2.34");
	if (!glibc_dlsym) /* glibc before 2.34: x86-64's and aarch64's first versions */
		glibc_dlsym = (dlsym_fn)dlvsym(RTLD_DEFAULT, "dlsym", "GLIBC_2.2.5");
	if (!glibc_dlsym)
		glibc_dlsym = (dlsym_fn)dlvsym(RTLD_DEFAULT, "dlsym", "GLIBC_2.17");
	void *fn = glibc_dlsym ? glibc_dlsym(lib, name) : NULL;
	if (!fn) {
		fprintf(stderr, "drv_peer: libcuda's own %s not found\n", name);
		exit(1);
	}
	return fn;
}

#define AB_BATCH 256

struct ab {
	bool peer;
	size_t size;
	CUstream stream;
	CUdeviceptr local_dst;
	CUresult(CUDAAPI *own_peer)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t,
				    CUstream);
	CUresult(CUDAAPI *own_local)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
	/* Set with untraced-own: CUPTI's, from the copy the guard loaded. */
	CUptiResult(CUPTIAPI *cupti_enable)(CUpti_ActivityKind);
	CUptiResult(CUPTIAPI *cupti_disable)(CUpti_ActivityKind);
};

static void own_tracing(const struct ab *b, bool on)
{
	if (!b->cupti_enable)
		return;
	CUptiResult(CUPTIAPI * set)(CUpti_ActivityKind) = on ? b->cupti_enable : b->cupti_disable;
	if (set(CUPTI_ACTIVITY_KIND_MEMCPY) != CUPTI_SUCCESS ||
	    set(CUPTI_ACTIVITY_KIND_MEMCPY2) != CUPTI_SUCCESS) {
		fprintf(stderr, "drv_peer: cannot switch CUPTI's copy tracing %s\n",
			on ? "on" : "off");
		exit(1);
	}
}

static double ab_batch(const struct ab *b, bool own)
{
	struct timespec t0, t1;
	if (own)
		own_tracing(b, false);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int k = 0; k < AB_BATCH; k++) {
		if (b->peer)
			CHECK((own ? b->own_peer : cu.MemcpyPeerAsync)(b1, ctx[1], a0, ctx[0],
								       b->size, b->stream));
		else
			CHECK((own ? b->own_local : cu.MemcpyAsync)(b->local_dst, a0, b->size,
								    b->stream));
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	CHECK(cu.StreamSynchronize(b->stream));
	if (own)
		own_tracing(b, true);
	return ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) /
	       AB_BATCH;
}

static int compare_double(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;
	return (a > b) - (a < b);
}

static int mode_bench_ab(long n, size_t size, bool peer, bool untraced_own)
{
	setup_devices(!peer);
	if (size > 1 << 20)
		size = 1 << 20;
	struct ab b = {.peer = peer, .size = size};
	b.own_peer = own_function("cuMemcpyPeerAsync");
	b.own_local = own_function("cuMemcpyAsync");
	CHECK(cu.StreamCreate(&b.stream, 0));
	CHECK(cu.MemAlloc(&b.local_dst, 1 << 20));
	if (peer) {
		int can = 0;
		CUdevice d0, d1;
		CHECK(cu.DeviceGet(&d0, 0));
		CHECK(cu.DeviceGet(&d1, 1));
		CHECK(cu.CanAccessPeer(&can, d0, d1));
		if (can)
			CHECK(cu.CtxEnablePeerAccess(ctx[1], 0));
	}
	long pairs = n / AB_BATCH / 2 > 0 ? n / AB_BATCH / 2 : 1;
	double *guard = calloc((size_t)pairs, sizeof(double));
	double *own = calloc((size_t)pairs, sizeof(double));
	double *diff = calloc((size_t)pairs, sizeof(double));
	if (!guard || !own || !diff)
		return 1;
	ab_batch(&b, false);
	ab_batch(&b, true);
	if (untraced_own) {
		const char *path = getenv("P2PGUARD_CUPTI");
		void *cupti =
		    dlopen(path && *path ? path : "libcupti.so.13", RTLD_NOW | RTLD_NOLOAD);
		if (cupti) {
			b.cupti_enable = (CUptiResult(CUPTIAPI *)(CUpti_ActivityKind))dlsym(
			    cupti, "cuptiActivityEnable");
			b.cupti_disable = (CUptiResult(CUPTIAPI *)(CUpti_ActivityKind))dlsym(
			    cupti, "cuptiActivityDisable");
		}
		if (!b.cupti_enable || !b.cupti_disable) {
			fprintf(stderr, "drv_peer: untraced-own needs the guard's CUPTI "
					"(P2PGUARD_GPU_TIMING=cupti)\n");
			return 1;
		}
	}
	for (long k = 0; k < pairs; k++) {
		/* Which goes first alternates: neither always follows the other's synchronise. */
		if (k & 1)
			own[k] = ab_batch(&b, true);
		guard[k] = ab_batch(&b, false);
		if (!(k & 1))
			own[k] = ab_batch(&b, true);
		diff[k] = guard[k] - own[k];
	}
	qsort(guard, (size_t)pairs, sizeof(double), compare_double);
	qsort(own, (size_t)pairs, sizeof(double), compare_double);
	qsort(diff, (size_t)pairs, sizeof(double), compare_double);
	printf("BENCHAB calls=%ld bytes=%zu %s found_ns=%.1f own_ns=%.1f diff_ns=%.1f "
	       "diff_p25_ns=%.1f diff_p75_ns=%.1f\n",
	       pairs * 2 * AB_BATCH, size, peer ? "peer" : "local", guard[pairs / 2],
	       own[pairs / 2], diff[pairs / 2], diff[pairs / 4], diff[pairs * 3 / 4]);
	free(guard);
	free(own);
	free(diff);
	return 0;
}

static int mode_bench_pointer(long n)
{
	setup_devices(true);
	CUresult(CUDAAPI * own_query)(void *, CUpointer_attribute, CUdeviceptr) =
	    own_function("cuPointerGetAttribute");
	CUdeviceptr other;
	CHECK(cu.MemAlloc(&other, 1 << 20));
	long batches = n / AB_BATCH > 0 ? n / AB_BATCH : 1;
	double *ns = calloc((size_t)batches, sizeof(double));
	if (!ns)
		return 1;
	for (long k = 0; k < batches; k++) {
		struct timespec t0, t1;
		int ordinal = -1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		for (int j = 0; j < AB_BATCH; j++)
			CHECK(own_query(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
					j & 1 ? other : a0));
		clock_gettime(CLOCK_MONOTONIC, &t1);
		ns[k] =
		    ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) /
		    AB_BATCH;
	}
	qsort(ns, (size_t)batches, sizeof(double), compare_double);
	printf("BENCHPOINTER calls=%ld ns_per_call=%.1f p25=%.1f p75=%.1f\n", batches * AB_BATCH,
	       ns[batches / 2], ns[batches / 4], ns[batches * 3 / 4]);
	free(ns);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 3 || (strcmp(argv[1], "procaddr") != 0 && strcmp(argv[1], "dlsym") != 0)) {
		fprintf(stderr, "usage: drv_peer procaddr|dlsym "
				"basic|errors|ctx-reuse|bench-pointer [N]|bench-ab [N "
				"SIZE peer|local [untraced-own]]\n");
		return 2;
	}
	use_dlsym = strcmp(argv[1], "dlsym") == 0;
	load();
	if (strcmp(argv[2], "basic") == 0)
		return mode_basic();
	if (strcmp(argv[2], "errors") == 0)
		return mode_errors();
	if (strcmp(argv[2], "ctx-reuse") == 0)
		return mode_ctx_reuse();
	if (strcmp(argv[2], "bench-pointer") == 0)
		return mode_bench_pointer(argc > 3 ? atol(argv[3]) : 100000);
	if (strcmp(argv[2], "bench-ab") == 0)
		return mode_bench_ab(argc > 3 ? atol(argv[3]) : 20000,
				     argc > 4 ? (size_t)atol(argv[4]) : 256,
				     !(argc > 5 && strcmp(argv[5], "local") == 0),
				     argc > 6 && strcmp(argv[6], "untraced-own") == 0);
	return 2;
}
