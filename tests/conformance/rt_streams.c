/* Conformance: stream ordering, the legacy default stream's implicit synchronisation, events
 * (query, timing, the DisableTiming rule, the same-context rule), cross-device stream waits and
 * stream capture. Asynchrony is made observable without timing assumptions: a host function
 * that waits for a gate holds its stream until the test opens the gate. */
#include <cuda_runtime_api.h>

#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"

#define N ((size_t)1 << 20)

static atomic_int gate;

static void CUDART_CB hold(void *arg)
{
	(void)arg;
	while (!atomic_load(&gate))
		sched_yield();
}

static void fill(unsigned char *p, size_t n, unsigned salt)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)(i * 7u + salt);
}

static int equal_pattern(const unsigned char *p, size_t n, unsigned salt)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != (unsigned char)(i * 7u + salt))
			return 0;
	return 1;
}

/* Ten H2D -> D2D -> D2H rounds on one stream, each reusing the same device buffers: only
 * in-order execution gives every round its own bytes. */
static void ordering(void)
{
	enum { ROUNDS = 10 };
	const size_t n = 256 * 1024;
	unsigned char *in, *out;
	void *d1, *d2;
	cudaStream_t s;
	cudaSetDevice(0);
	cudaMallocHost((void **)&in, ROUNDS * n);
	cudaMallocHost((void **)&out, ROUNDS * n);
	cudaMalloc(&d1, n);
	cudaMalloc(&d2, n);
	cudaStreamCreate(&s);
	for (int r = 0; r < ROUNDS; r++)
		fill(in + r * n, n, (unsigned)r * 13u);
	memset(out, 0, ROUNDS * n);
	cudaEvent_t start, stop;
	check_code(cudaEventCreate(&start), cudaSuccess, "cudaEventCreate");
	check_code(cudaEventCreate(&stop), cudaSuccess, "cudaEventCreate");
	check_code(cudaEventRecord(start, s), cudaSuccess, "record start");
	int ok = 1;
	for (int r = 0; r < ROUNDS; r++) {
		ok &= cudaMemcpyAsync(d1, in + r * n, n, cudaMemcpyHostToDevice, s) == cudaSuccess;
		ok &= cudaMemcpyAsync(d2, d1, n, cudaMemcpyDeviceToDevice, s) == cudaSuccess;
		ok &= cudaMemcpyAsync(out + r * n, d2, n, cudaMemcpyDeviceToHost, s) == cudaSuccess;
	}
	check(ok, "enqueue %d rounds of three copies", ROUNDS);
	check_code(cudaEventRecord(stop, s), cudaSuccess, "record stop");
	check_code(cudaEventSynchronize(stop), cudaSuccess, "cudaEventSynchronize(stop)");
	check_code(cudaEventQuery(stop), cudaSuccess, "stop event complete");
	int all = 1;
	for (int r = 0; r < ROUNDS; r++)
		all &= equal_pattern(out + r * n, n, (unsigned)r * 13u);
	check(all, "every round delivered its own bytes (stream order)");
	float ms = -1;
	check_code(cudaEventElapsedTime(&ms, start, stop), cudaSuccess, "cudaEventElapsedTime");
	check(ms >= 0, "elapsed time %.3f ms >= 0", (double)ms);

	cudaEvent_t nt;
	cudaEventCreateWithFlags(&nt, cudaEventDisableTiming);
	cudaEventRecord(nt, s);
	cudaStreamSynchronize(s);
	check_code(cudaEventElapsedTime(&ms, start, nt), cudaErrorInvalidResourceHandle,
		   "elapsed time with a DisableTiming event");
	check_code(cudaGetLastError(), cudaErrorInvalidResourceHandle, "last error after it");

	cudaEvent_t fresh;
	cudaEventCreate(&fresh);
	check_code(cudaEventQuery(fresh), cudaSuccess, "a never-recorded event is complete");
	check_code(cudaEventElapsedTime(&ms, fresh, stop), cudaErrorInvalidResourceHandle,
		   "elapsed time with a never-recorded event");
	cudaGetLastError();

	cudaEventDestroy(start);
	cudaEventDestroy(stop);
	cudaEventDestroy(nt);
	cudaEventDestroy(fresh);
	cudaStreamDestroy(s);
	cudaFree(d1);
	cudaFree(d2);
	cudaFreeHost(in);
	cudaFreeHost(out);
}

/* Work queued behind a held host function has not run; a non-blocking stream is not held; the
 * legacy default stream waits for the blocking stream. */
static void held_stream(void)
{
	unsigned char *h_old, *h_new, *h_check;
	void *src, *dst;
	cudaStream_t s, nb;
	cudaEvent_t before, after;
	cudaSetDevice(0);
	cudaMallocHost((void **)&h_old, N);
	cudaMallocHost((void **)&h_new, N);
	cudaMallocHost((void **)&h_check, N);
	cudaMalloc(&src, N);
	cudaMalloc(&dst, N);
	fill(h_old, N, 1);
	fill(h_new, N, 2);
	cudaMemcpy(dst, h_old, N, cudaMemcpyHostToDevice);
	cudaMemcpy(src, h_new, N, cudaMemcpyHostToDevice);
	cudaStreamCreate(&s);
	cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking);
	cudaEventCreate(&before);
	cudaEventCreate(&after);

	atomic_store(&gate, 0);
	check_code(cudaEventRecord(before, s), cudaSuccess, "record before the held function");
	check_code(cudaLaunchHostFunc(s, hold, NULL), cudaSuccess, "cudaLaunchHostFunc");
	check_code(cudaMemcpyAsync(dst, src, N, cudaMemcpyDeviceToDevice, s), cudaSuccess,
		   "enqueue a copy behind it");
	check_code(cudaEventRecord(after, s), cudaSuccess, "record after the copy");
	check_code(cudaStreamQuery(s), cudaErrorNotReady, "held stream is not ready");
	check_code(cudaStreamQuery(0), cudaErrorNotReady,
		   "the legacy stream, with nothing of its own, is not ready either");
	check_code(cudaGetLastError(), cudaSuccess, "cudaErrorNotReady leaves no last error");
	check_code(cudaEventQuery(after), cudaErrorNotReady, "event behind it is not ready");
	check_code(cudaPeekAtLastError(), cudaSuccess, "nor does the event query");

	check_code(cudaMemcpyAsync(h_check, dst, N, cudaMemcpyDeviceToHost, nb), cudaSuccess,
		   "read the destination on a non-blocking stream");
	check_code(cudaStreamSynchronize(nb), cudaSuccess,
		   "the non-blocking stream completes while the other is held");
	check(memcmp(h_check, h_old, N) == 0, "the queued copy has not run yet");

	check_code(cudaMemsetAsync(src, 0, 16, 0), cudaSuccess, "enqueue on the legacy stream");
	check_code(cudaStreamQuery(0), cudaErrorNotReady,
		   "the legacy stream waits for the held blocking stream");
	cudaGetLastError();

	atomic_store(&gate, 1);
	check_code(cudaStreamSynchronize(s), cudaSuccess, "synchronize after opening the gate");
	check_code(cudaEventQuery(after), cudaSuccess, "event complete");
	check_code(cudaStreamSynchronize(0), cudaSuccess, "synchronize the legacy stream");
	cudaMemcpy(h_check, dst, N, cudaMemcpyDeviceToHost);
	check(memcmp(h_check, h_new, N) == 0, "the queued copy ran, in order");
	float ms = -1;
	check_code(cudaEventElapsedTime(&ms, before, after), cudaSuccess, "elapsed time");
	check(ms >= 0, "elapsed %.3f ms >= 0", (double)ms);

	cudaEventDestroy(before);
	cudaEventDestroy(after);
	cudaStreamDestroy(s);
	cudaStreamDestroy(nb);
	cudaFree(src);
	cudaFree(dst);
	cudaFreeHost(h_old);
	cudaFreeHost(h_new);
	cudaFreeHost(h_check);
}

/* An event recorded on device 0 holds a stream of device 1 through cudaStreamWaitEvent; an
 * event cannot be recorded on a stream of another device. */
static void cross_device(int n)
{
	if (n < 2) {
		skip("cross-device stream waits: needs two devices");
		return;
	}
	cudaStream_t s0, s1;
	cudaEvent_t e0, e1;
	void *a, *b;
	unsigned char *h;
	cudaMallocHost((void **)&h, N);
	cudaSetDevice(0);
	cudaStreamCreate(&s0);
	cudaEventCreateWithFlags(&e0, cudaEventDisableTiming);
	cudaMalloc(&a, N);
	cudaSetDevice(1);
	cudaStreamCreate(&s1);
	cudaEventCreate(&e1);
	cudaMalloc(&b, N);
	fill(h, N, 5);
	cudaMemcpy(b, h, N, cudaMemcpyHostToDevice);

	check_code(cudaEventRecord(e0, s1), cudaErrorInvalidResourceHandle,
		   "record a device-0 event on a device-1 stream");
	cudaGetLastError();

	atomic_store(&gate, 0);
	cudaSetDevice(0);
	cudaLaunchHostFunc(s0, hold, NULL);
	check_code(cudaEventRecord(e0, s0), cudaSuccess, "record on device 0 behind the gate");
	cudaSetDevice(1);
	check_code(cudaStreamWaitEvent(s1, e0, 0), cudaSuccess,
		   "device-1 stream waits for the device-0 event");
	check_code(cudaMemcpyAsync(a, b, N, cudaMemcpyDefault, s1), cudaSuccess,
		   "copy 1 -> 0 behind the wait");
	check_code(cudaStreamQuery(s1), cudaErrorNotReady, "device-1 stream is held");
	cudaGetLastError();
	atomic_store(&gate, 1);
	check_code(cudaStreamSynchronize(s1), cudaSuccess, "device-1 stream completes");
	memset(h, 0, N);
	cudaMemcpy(h, a, N, cudaMemcpyDeviceToHost);
	check(equal_pattern(h, N, 5), "the copy behind the cross-device wait is byte-exact");

	cudaStreamDestroy(s1);
	cudaEventDestroy(e1);
	cudaFree(b);
	cudaSetDevice(0);
	cudaStreamSynchronize(s0);
	cudaStreamDestroy(s0);
	cudaEventDestroy(e0);
	cudaFree(a);
	cudaFreeHost(h);
}

/* A copy captured into a graph moves nothing until the graph is launched, and moves the
 * source's bytes of launch time at each launch. */
static void capture(int other, bool invalidation)
{
	unsigned char *h;
	void *src, *dst;
	cudaStream_t s;
	cudaMallocHost((void **)&h, N);
	cudaSetDevice(0);
	cudaMalloc(&src, N);
	cudaSetDevice(other);
	cudaMalloc(&dst, N);
	cudaSetDevice(0);
	cudaStreamCreate(&s);
	fill(h, N, 9);
	cudaMemcpy(src, h, N, cudaMemcpyHostToDevice);
	fill(h, N, 10);
	cudaMemcpy(dst, h, N, cudaMemcpyHostToDevice);

	enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusInvalidated;
	check_code(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess,
		   "cudaStreamBeginCapture");
	cudaStreamIsCapturing(s, &st);
	check_code(st, cudaStreamCaptureStatusActive, "the stream is capturing");
	check_code(cudaMemcpyAsync(dst, src, N, cudaMemcpyDefault, s), cudaSuccess,
		   "capture a copy 0 -> %d", other);
	cudaGraph_t g = NULL;
	check_code(cudaStreamEndCapture(s, &g), cudaSuccess, "cudaStreamEndCapture");
	check(g != NULL, "a graph came back");
	cudaStreamIsCapturing(s, &st);
	check_code(st, cudaStreamCaptureStatusNone, "capture ended");
	memset(h, 0, N);
	cudaMemcpy(h, dst, N, cudaMemcpyDeviceToHost);
	check(equal_pattern(h, N, 10), "the captured copy moved no data");

	cudaGraphExec_t x = NULL;
	check_code(cudaGraphInstantiate(&x, g, 0), cudaSuccess, "cudaGraphInstantiate");
	check_code(cudaGraphLaunch(x, s), cudaSuccess, "cudaGraphLaunch");
	check_code(cudaStreamSynchronize(s), cudaSuccess, "synchronize");
	cudaMemcpy(h, dst, N, cudaMemcpyDeviceToHost);
	check(equal_pattern(h, N, 9), "the launched graph copied the bytes");

	fill(h, N, 11);
	cudaMemcpy(src, h, N, cudaMemcpyHostToDevice);
	check_code(cudaGraphLaunch(x, s), cudaSuccess, "cudaGraphLaunch again");
	cudaStreamSynchronize(s);
	memset(h, 0, N);
	cudaMemcpy(h, dst, N, cudaMemcpyDeviceToHost);
	check(equal_pattern(h, N, 11), "a second launch copies the new source bytes");

	check_code(cudaGraphExecDestroy(x), cudaSuccess, "cudaGraphExecDestroy");
	check_code(cudaGraphDestroy(g), cudaSuccess, "cudaGraphDestroy");

	/* Synchronising a capturing stream is refused and ruins the capture. */
	if (invalidation) {
		cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
		check_code(cudaStreamSynchronize(s), cudaErrorStreamCaptureUnsupported,
			   "synchronize a capturing stream");
		g = NULL;
		check_code(cudaStreamEndCapture(s, &g), cudaErrorStreamCaptureInvalidated,
			   "end an invalidated capture");
		check(g == NULL, "no graph from an invalidated capture");
		cudaGetLastError();
	}

	cudaStreamDestroy(s);
	cudaFree(src);
	cudaFree(dst);
	cudaFreeHost(h);
}

int main(void)
{
	int n = 0;
	check_code(cudaGetDeviceCount(&n), cudaSuccess, "cudaGetDeviceCount");
	if (!check(n >= 1, "at least one device (%d)", n))
		return tap_finish();
	ordering();
	held_stream();
	cross_device(n);
	capture(0, true);
	if (n >= 2)
		capture(1, false);
	else
		skip("capture of a cross-device copy: needs two devices");
	check_code(cudaDeviceSynchronize(), cudaSuccess, "cudaDeviceSynchronize");
	check_code(cudaGetLastError(), cudaSuccess, "no error left behind");
	return tap_finish();
}
