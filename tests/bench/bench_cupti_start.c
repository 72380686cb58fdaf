/* SPDX-License-Identifier: MIT */
/*
 * bench_cupti_start: what starting CUPTI's copy tracing costs, and when, in a process that already
 * uses both devices (the guard starts it on its drainer at the program's first peer activity).
 *
 * Steps, each timed: dlopen(libcupti), cuptiActivityRegisterCallbacks, cuptiActivityEnable(MEMCPY),
 * cuptiActivityEnable(MEMCPY2). Meanwhile (--busy) a second thread enqueues 256 B
 * cuMemcpyPeerAsync in batches of 64 on a stream of device 0 and notes, per 5 ms window, the median
 * per-call time of its batches: whether the start stalls the program's calls, and how the cost
 * settles after it. Windows run from 50 ms before the start to --after ms after it.
 *
 * --register-early: dlopen and RegisterCallbacks before the driver is initialised, only the
 * Enables at the start; --early: all of it before the driver is initialised (the windows then show
 * the steady cost of tracing that was on from the process's beginning).
 *
 *   bench_cupti_start [--after MS] [--cupti PATH] [--no-busy] [--register-early|--early]
 *
 * On real GPUs: `build/tests/bench/bench_cupti_start`. With the simulated CUDA:
 * `LD_LIBRARY_PATH=build/tests/simcuda build/tests/bench/bench_cupti_start`.
 */
#include "bench_devices.h"

#include <cupti.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define WINDOW_NS   5000000.0
#define MAX_WINDOWS 400
#define BATCH	    64
#define MAX_BATCHES 64 /* per window */

static struct bench_devices dev;
static CUdeviceptr src, dst;
static CUstream stream;
static _Atomic bool stop;
static double t_origin; /* when the start began, ns */
static _Atomic bool started;

/* Batches' per-call ns, by window since 50 ms before the start. */
static double samples[MAX_WINDOWS][MAX_BATCHES];
static unsigned nsamples[MAX_WINDOWS];

static double now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static void *copier(void *arg)
{
	(void)arg;
	p2pg_drv.cuCtxSetCurrent(dev.ctx0);
	while (!atomic_load(&stop)) {
		double t0 = now_ns();
		for (int k = 0; k < BATCH; k++)
			if (p2pg_drv.cuMemcpyPeerAsync(dst, dev.ctx1, src, dev.ctx0, 256, stream) !=
			    CUDA_SUCCESS)
				return NULL;
		double t1 = now_ns();
		p2pg_drv.cuStreamSynchronize(stream);
		if (!atomic_load(&started))
			continue;
		double since = t0 - (t_origin - 50e6);
		if (since < 0)
			continue;
		unsigned w = (unsigned)(since / WINDOW_NS);
		if (w < MAX_WINDOWS && nsamples[w] < MAX_BATCHES)
			samples[w][nsamples[w]++] = (t1 - t0) / BATCH;
	}
	return NULL;
}

static void CUPTIAPI requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
	*size = 8 << 20;
	*buffer = aligned_alloc(8, *size);
	*max_records = 0;
}

static void CUPTIAPI completed(CUcontext ctx, uint32_t stream_id, uint8_t *buffer, size_t size,
			       size_t valid)
{
	(void)ctx, (void)stream_id, (void)size, (void)valid;
	free(buffer);
}

static __typeof__(cuptiActivityEnable) *enable;

static int load_and_register(const char *path, double *t, CUptiResult *r)
{
	t[0] = now_ns();
	void *lib = dlopen(path ? path : "libcupti.so.13", RTLD_NOW | RTLD_LOCAL);
	t[1] = now_ns();
	if (!lib) {
		fprintf(stderr, "bench_cupti_start: %s\n", dlerror());
		return -1;
	}
	__typeof__(cuptiActivityRegisterCallbacks) *reg =
	    (__typeof__(reg))dlsym(lib, "cuptiActivityRegisterCallbacks");
	enable = (__typeof__(enable))dlsym(lib, "cuptiActivityEnable");
	if (!reg || !enable)
		return -1;
	*r = reg(requested, completed);
	t[2] = now_ns();
	return 0;
}

/* The Enables' times go after the registration's in t, wherever they happen. */
static int enable_both(double *t, CUptiResult *r_memcpy, CUptiResult *r_memcpy2)
{
	double t0 = now_ns();
	*r_memcpy = enable(CUPTI_ACTIVITY_KIND_MEMCPY);
	double t1 = now_ns();
	*r_memcpy2 = enable(CUPTI_ACTIVITY_KIND_MEMCPY2);
	double t2 = now_ns();
	t[3] = t[2] + (t1 - t0);
	t[4] = t[2] + (t2 - t0);
	return 0;
}

#define CHECK(x)                                                               \
	do {                                                                   \
		if ((x) != CUDA_SUCCESS) {                                     \
			fprintf(stderr, "bench_cupti_start: %s failed\n", #x); \
			return 1;                                              \
		}                                                              \
	} while (0)

int main(int argc, char **argv)
{
	const char *path = NULL;
	unsigned after_ms = 200;
	bool busy = true, register_early = false, early = false;
	for (int k = 1; k < argc; k++) {
		if (strcmp(argv[k], "--after") == 0 && k + 1 < argc)
			after_ms = (unsigned)atoi(argv[++k]);
		else if (strcmp(argv[k], "--cupti") == 0 && k + 1 < argc)
			path = argv[++k];
		else if (strcmp(argv[k], "--no-busy") == 0)
			busy = false;
		else if (strcmp(argv[k], "--register-early") == 0)
			register_early = true;
		else if (strcmp(argv[k], "--early") == 0)
			early = register_early = true;
		else {
			fprintf(stderr, "usage: bench_cupti_start [--after MS] [--cupti PATH] "
					"[--no-busy] [--register-early|--early]\n");
			return 2;
		}
	}
	if (after_ms > (MAX_WINDOWS - 10) * 5)
		after_ms = (MAX_WINDOWS - 10) * 5;
	double t[5] = {0};
	CUptiResult r1 = CUPTI_SUCCESS, r2 = CUPTI_SUCCESS, r3 = CUPTI_SUCCESS;
	if (register_early &&
	    (load_and_register(path, t, &r1) < 0 || (early && enable_both(t, &r2, &r3) < 0)))
		return 1;
	if (bench_devices_open("bench_cupti_start", &dev) < 0)
		return 1;
	CHECK(p2pg_drv.cuCtxSetCurrent(dev.ctx1));
	CHECK(p2pg_drv.cuMemAlloc(&dst, 256));
	CHECK(p2pg_drv.cuCtxSetCurrent(dev.ctx0));
	CHECK(p2pg_drv.cuMemAlloc(&src, 256));
	CHECK(p2pg_drv.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
	int can = 0;
	CHECK(p2pg_drv.cuDeviceCanAccessPeer(&can, dev.d0, dev.d1));
	if (can)
		CHECK(p2pg_drv.cuCtxEnablePeerAccess(dev.ctx1, 0));

	pthread_t th;
	t_origin = now_ns() + 100e6;
	if (busy && pthread_create(&th, NULL, copier, NULL) != 0)
		return 1;
	atomic_store(&started, true);
	while (now_ns() < t_origin)
		usleep(1000);

	if ((!register_early && load_and_register(path, t, &r1) < 0) ||
	    (!early && enable_both(t, &r2, &r3) < 0))
		return 1;
	usleep(after_ms * 1000);
	atomic_store(&stop, true);
	if (busy)
		pthread_join(th, NULL);

	printf("bench_cupti_start: %s; ", early ? "everything before cuInit"
					  : register_early
					      ? "dlopen and RegisterCallbacks before cuInit"
					      : "everything at the start");
	printf("P2P %s; dlopen %.2f ms, RegisterCallbacks %.2f ms (%d), "
	       "Enable(MEMCPY) %.2f ms (%d), Enable(MEMCPY2) %.2f ms (%d); start in all %.2f ms\n",
	       can ? "on" : "off", (t[1] - t[0]) / 1e6, (t[2] - t[1]) / 1e6, (int)r1,
	       (t[3] - t[2]) / 1e6, (int)r2, (t[4] - t[3]) / 1e6, (int)r3, (t[4] - t[0]) / 1e6);
	if (!busy)
		return 0;
	printf("window (ms from the start)  batches  median ns per call  max\n");
	for (unsigned w = 0; w < MAX_WINDOWS && w * 5 < 50 + after_ms; w++) {
		if (!nsamples[w])
			continue;
		qsort(samples[w], nsamples[w], sizeof(double), cmp_double);
		printf("%+5d .. %+5d  %7u  %18.0f  %.0f\n", (int)w * 5 - 50, (int)w * 5 - 45,
		       nsamples[w], samples[w][nsamples[w] / 2], samples[w][nsamples[w] - 1]);
	}
	return 0;
}
