/* Self-test of what only the simulation has: its settings, the corrupting P2P pairs, the
 * artificial copy delay, memory limits and a clean exit with work still queued. The real peer
 * semantics are checked by tests/conformance, which also runs on real GPUs.
 *
 * Usage: simcuda-selftest MODE, with the SIMCUDA_* settings the mode expects in the environment
 * (see meson.build). */
#include <cuda.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int failed;

static void check(int ok, const char *what)
{
	printf("%s - %s\n", ok ? "ok" : "not ok", what);
	if (!ok)
		failed++;
}

static CUcontext ctx[16];

static int setup(int want_devices)
{
	int n = 0;
	check(cuInit(0) == CUDA_SUCCESS, "cuInit");
	cuDeviceGetCount(&n);
	check(n == want_devices, "device count as configured");
	for (int d = 0; d < n && d < 16; d++)
		cuDevicePrimaryCtxRetain(&ctx[d], d);
	cuCtxSetCurrent(ctx[0]);
	return n;
}

static CUdeviceptr alloc_on(int dev, size_t n)
{
	CUdeviceptr p = 0;
	cuCtxSetCurrent(ctx[dev]);
	cuMemAlloc(&p, n);
	cuCtxSetCurrent(ctx[0]);
	return p;
}

/* 0: byte-exact, 1: every byte flipped, -1: something else. */
static int delivered(CUdeviceptr dst, const unsigned char *want, size_t n)
{
	unsigned char *got = malloc(n);
	cuMemcpyDtoH(got, dst, n);
	int exact = 1, flipped = 1;
	for (size_t i = 0; i < n; i++) {
		exact &= got[i] == want[i];
		flipped &= got[i] == (unsigned char)~want[i];
	}
	free(got);
	return exact ? 0 : flipped ? 1 : -1;
}

static void mode_corrupt(void)
{
	const size_t n = 4099;
	setup(3);
	unsigned char *h = malloc(n);
	for (size_t i = 0; i < n; i++)
		h[i] = (unsigned char)(i * 5 + 1);
	CUdeviceptr a = alloc_on(0, n), b = alloc_on(1, n), c = alloc_on(2, n);
	cuMemcpyHtoD(a, h, n);

	check(cuMemcpyPeer(b, ctx[1], a, ctx[0], n) == CUDA_SUCCESS && delivered(b, h, n) == 0,
	      "corrupt pair without peer access: exact");
	cuCtxSetCurrent(ctx[1]);
	check(cuCtxEnablePeerAccess(ctx[0], 0) == CUDA_SUCCESS, "enable 1 -> 0");
	cuCtxSetCurrent(ctx[0]);
	check(cuMemcpyPeer(b, ctx[1], a, ctx[0], n) == CUDA_SUCCESS && delivered(b, h, n) == 1,
	      "peer access 1 -> 0 enabled: a 0 -> 1 copy is flipped");
	check(cuMemcpyDtoD(b, a, n) == CUDA_SUCCESS && delivered(b, h, n) == 1,
	      "cuMemcpyDtoD across the pair is flipped too");
	CUstream s;
	cuStreamCreate(&s, 0);
	cuMemcpyAsync(b, a, n, s);
	cuStreamSynchronize(s);
	check(delivered(b, h, n) == 1, "cuMemcpyAsync across the pair is flipped");
	check(cuMemcpyPeer(c, ctx[2], a, ctx[0], n) == CUDA_SUCCESS && delivered(c, h, n) == 0,
	      "a pair not listed stays exact");
	unsigned char *staged = malloc(n);
	cuMemcpyDtoH(staged, a, n);
	cuMemcpyHtoD(b, staged, n);
	check(delivered(b, h, n) == 0, "through host memory: exact");
	cuCtxSetCurrent(ctx[1]);
	cuCtxDisablePeerAccess(ctx[0]);
	cuCtxSetCurrent(ctx[0]);
	check(cuMemcpyPeer(b, ctx[1], a, ctx[0], n) == CUDA_SUCCESS && delivered(b, h, n) == 0,
	      "peer access disabled again: exact");
	cuStreamDestroy(s);
	free(h);
	free(staged);
}

static void mode_pairs(void)
{
	setup(3);
	int c01 = -1, c10 = -1, c02 = -1, c21 = -1;
	cuDeviceCanAccessPeer(&c01, 0, 1);
	cuDeviceCanAccessPeer(&c10, 1, 0);
	cuDeviceCanAccessPeer(&c02, 0, 2);
	cuDeviceCanAccessPeer(&c21, 2, 1);
	check(c01 == 1 && c10 == 1, "listed pair 0-1 works both ways");
	check(c02 == 0 && c21 == 0, "unlisted pairs do not");
	cuCtxSetCurrent(ctx[0]);
	check(cuCtxEnablePeerAccess(ctx[2], 0) == CUDA_ERROR_PEER_ACCESS_UNSUPPORTED,
	      "enable on an unlisted pair: 217");
	char name[64], bus[32];
	cuDeviceGetName(name, sizeof(name), 2);
	cuDeviceGetPCIBusId(bus, sizeof(bus), 2);
	check(strcmp(name, "SimCUDA H200 sim #2") == 0, "device name");
	check(strcmp(bus, "0000:12:00.0") == 0, "PCI bus id");
	CUdevice d = -1;
	check(cuDeviceGetByPCIBusId(&d, bus) == CUDA_SUCCESS && d == 2, "device by PCI bus id");
}

/* Malformed settings fall back to the defaults: two devices, P2P everywhere. */
static void mode_malformed(void)
{
	setup(2);
	int c = -1;
	cuDeviceCanAccessPeer(&c, 0, 1);
	check(c == 1, "malformed SIMCUDA_P2P means all");
}

static void mode_memory(void)
{
	setup(2);
	CUdeviceptr p = 0, q[64];
	size_t freeb = 0, total = 0;
	check(cuMemAlloc(&p, (size_t)100 << 20) == CUDA_ERROR_OUT_OF_MEMORY,
	      "100 MiB on a 64 MiB device: out of memory");
	cuMemGetInfo(&freeb, &total);
	check(total == (size_t)64 << 20, "total memory as configured");
	int ok = 1;
	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < 64; i++)
			ok &= cuMemAlloc(&q[i], 1000 * (size_t)(i + 1)) == CUDA_SUCCESS;
		for (int i = 0; i < 64; i += 2)
			ok &= cuMemFree(q[i]) == CUDA_SUCCESS;
		for (int i = 1; i < 64; i += 2)
			ok &= cuMemFree(q[i]) == CUDA_SUCCESS;
	}
	check(ok, "allocate and free in mixed order, three rounds");
	size_t after = 0;
	cuMemGetInfo(&after, &total);
	check(after == freeb, "everything freed comes back");
	check(cuMemAlloc(&p, (size_t)60 << 20) == CUDA_SUCCESS, "60 MiB fits again");
	check(cuMemFree(p) == CUDA_SUCCESS, "free it");
	check(cuMemFree(p) == CUDA_ERROR_INVALID_VALUE, "double free: invalid value");
}

static double monotonic_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* With a copy delay, an async copy is still running when the call returns; a copy to
 * pageable memory is complete when it returns. */
static void mode_slow(void)
{
	const size_t n = 64 * 1024; /* ~6.5 ms at 100 ns/byte */
	setup(2);
	CUdeviceptr a = alloc_on(0, n), b = alloc_on(1, n);
	CUstream s;
	cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
	cuMemsetD8(a, 0x5a, n);
	/* Timed, so that a test preempted for longer than the copy takes still means something. */
	double t0 = monotonic_ms();
	check(cuMemcpyAsync(b, a, n, s) == CUDA_SUCCESS, "enqueue a slow copy");
	CUresult running = cuStreamQuery(s);
	double asked = monotonic_ms() - t0;
	char what[80];
	snprintf(what, sizeof(what), "it is still running (asked after %.1f ms)", asked);
	check(running == CUDA_ERROR_NOT_READY || (running == CUDA_SUCCESS && asked >= 6.5), what);
	check(cuStreamSynchronize(s) == CUDA_SUCCESS && cuStreamQuery(s) == CUDA_SUCCESS,
	      "then it is done");
	check(monotonic_ms() - t0 >= 6.5, "not before its 6.5 ms have passed");
	unsigned char *h = calloc(1, n);
	check(cuMemcpyDtoHAsync(h, b, n, s) == CUDA_SUCCESS, "async copy to pageable memory");
	check(h[0] == 0x5a && h[n - 1] == 0x5a, "is complete when the call returns");
	free(h);
	cuStreamDestroy(s);
}

static void *thread_body(void *arg)
{
	CUdeviceptr a = *(CUdeviceptr *)arg;
	cuCtxSetCurrent(ctx[0]);
	cuMemsetD32Async(a, 7, 1024, CU_STREAM_PER_THREAD);
	cuStreamSynchronize(CU_STREAM_PER_THREAD);
	/* Stream 0 in a _ptsz form is the per-thread stream. */
	CUresult (*memset_ptsz)(CUdeviceptr, unsigned char, size_t, CUstream) = NULL;
	cuGetProcAddress("cuMemsetD8Async", (void **)&memset_ptsz, 7000,
			 CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, NULL);
	check(memset_ptsz && memset_ptsz(a, 1, 16, NULL) == CUDA_SUCCESS,
	      "per-thread memset on stream 0");
	return NULL;
}

/* Per-thread streams of exiting threads and streams with queued work at exit are cleaned up;
 * under ASan this checks for leaks and for workers outliving the library. */
static void mode_exit(void)
{
	setup(2);
	CUdeviceptr a = alloc_on(0, 1 << 20);
	for (int i = 0; i < 4; i++) {
		pthread_t t;
		pthread_create(&t, NULL, thread_body, &a);
		pthread_join(t, NULL);
	}
	CUstream s;
	cuStreamCreate(&s, 0);
	for (int i = 0; i < 100; i++)
		cuMemsetD8Async(a, (unsigned char)i, 1 << 20, s);
	CUevent e;
	cuEventCreate(&e, 0);
	cuEventRecord(e, s);
	check(1, "leave work queued and exit");
}

/* A child forked after initialisation is refused service (it has no workers) and exits
 * cleanly; the parent goes on. */
static void mode_fork(void)
{
	setup(2);
	CUdeviceptr a = alloc_on(0, 4096);
	CUstream s;
	cuStreamCreate(&s, 0);
	cuMemsetD8Async(a, 1, 4096, s);
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		CUdeviceptr p;
		int refused = cuMemAlloc(&p, 16) == CUDA_ERROR_NOT_INITIALIZED &&
			      cuMemsetD8(a, 2, 16) == CUDA_ERROR_NOT_INITIALIZED;
		_exit(refused ? 0 : 1);
	}
	int status = -1;
	waitpid(pid, &status, 0);
	check(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child is refused and exits");
	check(cuStreamSynchronize(s) == CUDA_SUCCESS && cuMemsetD8(a, 3, 4096) == CUDA_SUCCESS,
	      "the parent goes on");
	cuStreamDestroy(s);
}

struct blocked_sync {
	CUcontext ctx;
	CUstream s;
	volatile int returned;
};

static void *sync_thread(void *arg)
{
	struct blocked_sync *b = arg;
	cuCtxSetCurrent(b->ctx);
	cuStreamSynchronize(b->s);
	b->returned = 1;
	return NULL;
}

/* SIMCUDA_P2P_HANG=0-1 with 3 devices: a copy over the pair's P2P path is enqueued with success
 * and then never completes; the same copy through host memory, and other pairs, finish. */
static void mode_hang(void)
{
	const size_t n = 4096;
	setup(3);
	unsigned char *h = calloc(1, n);
	CUdeviceptr a = alloc_on(0, n), b = alloc_on(1, n), c = alloc_on(2, n);
	check(cuMemcpyPeer(b, ctx[1], a, ctx[0], n) == CUDA_SUCCESS,
	      "hung pair without peer access: the copy finishes");
	check(cuCtxEnablePeerAccess(ctx[1], 0) == CUDA_SUCCESS, "enable 0 -> 1");
	check(cuMemcpyPeer(c, ctx[2], a, ctx[0], n) == CUDA_SUCCESS && delivered(c, h, n) == 0,
	      "a pair not listed finishes");
	CUstream s;
	CUevent done;
	cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
	cuEventCreate(&done, CU_EVENT_DEFAULT);
	check(cuMemcpyPeerAsync(b, ctx[1], a, ctx[0], n, s) == CUDA_SUCCESS,
	      "the hung copy is enqueued with success");
	check(cuEventRecord(done, s) == CUDA_SUCCESS, "an event after it is recorded");
	usleep(200 * 1000);
	check(cuStreamQuery(s) == CUDA_ERROR_NOT_READY, "200 ms later the stream is not ready");
	check(cuEventQuery(done) == CUDA_ERROR_NOT_READY, "nor is the event after the copy");
	struct blocked_sync bs = {ctx[0], s, 0};
	pthread_t t;
	pthread_create(&t, NULL, sync_thread, &bs);
	usleep(300 * 1000);
	check(!bs.returned, "cuStreamSynchronize on the stream is still waiting after 300 ms");
	pthread_detach(t);
	check(cuMemcpyHtoD(a, h, n) == CUDA_SUCCESS,
	      "the legacy stream does not wait for a non-blocking stream's stuck copy");
	free(h);
	/* The process exits with the stream stuck: exit does not wait for it (the test's time
	 * says so). */
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	if (strcmp(mode, "corrupt") == 0)
		mode_corrupt();
	else if (strcmp(mode, "hang") == 0)
		mode_hang();
	else if (strcmp(mode, "pairs") == 0)
		mode_pairs();
	else if (strcmp(mode, "malformed") == 0)
		mode_malformed();
	else if (strcmp(mode, "memory") == 0)
		mode_memory();
	else if (strcmp(mode, "slow") == 0)
		mode_slow();
	else if (strcmp(mode, "exit") == 0)
		mode_exit();
	else if (strcmp(mode, "fork") == 0)
		mode_fork();
	else
		check(0, "known mode");
	return failed ? 1 : 0;
}
