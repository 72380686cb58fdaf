/* SPDX-License-Identifier: MIT */
/*
 * Helpers shared by the staged-engine tests: the driver table, two devices' primary contexts,
 * pattern fill and verification. The tests drive everything through p2pg_drv, so the same programs
 * run against the simulated CUDA (the suite) and against a real driver (by hand on a GPU machine).
 */
#pragma once

#include "driver.h"
#include "staged.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int t_failures;

#define T_MIB ((size_t)1 << 20)
#define T_KIB ((size_t)1 << 10)

/* Set-up failures end the program: there is nothing meaningful left to test. */
#define T_CU(call)                                                                         \
	do {                                                                               \
		CUresult r_ = (call);                                                      \
		if (r_ != CUDA_SUCCESS) {                                                  \
			fprintf(stderr, "%s:%d: %s: %s (%d)\n", __FILE__, __LINE__, #call, \
				p2pg_cu_error_name(r_), (int)r_);                          \
			exit(1);                                                           \
		}                                                                          \
	} while (0)

#define T_EXPECT(cond, ...)                                                                 \
	do {                                                                                \
		if (!(cond)) {                                                              \
			fprintf(stderr, "%s:%d: expected %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                                       \
			fputc('\n', stderr);                                                \
			__atomic_add_fetch(&t_failures, 1, __ATOMIC_RELAXED);               \
		}                                                                           \
	} while (0)

struct t_env {
	int ndev;
	CUcontext ctx[2];
};

static inline void t_setup(struct t_env *e)
{
	if (p2pg_driver_load() < 0) {
		fprintf(stderr, "no usable libcuda.so.1\n");
		exit(1);
	}
	T_CU(p2pg_drv.cuInit(0));
	T_CU(p2pg_drv.cuDeviceGetCount(&e->ndev));
	if (e->ndev < 2) {
		fprintf(stderr, "needs two devices, found %d\n", e->ndev);
		exit(77);
	}
	for (int d = 0; d < 2; d++) {
		CUdevice dev;
		T_CU(p2pg_drv.cuDeviceGet(&dev, d));
		T_CU(p2pg_drv.cuDevicePrimaryCtxRetain(&e->ctx[d], dev));
	}
	T_CU(p2pg_drv.cuCtxSetCurrent(e->ctx[0]));
}

static inline uint32_t t_rand(uint32_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 17;
	*s ^= *s << 5;
	return *s;
}

static inline void t_pattern(unsigned char *p, size_t n, uint32_t seed)
{
	uint32_t s = seed * 2654435761u + 0x9e3779b9u;
	if (!s)
		s = 1;
	size_t k = 0;
	for (; k + 4 <= n; k += 4) {
		uint32_t v = t_rand(&s);
		memcpy(p + k, &v, 4);
	}
	for (; k < n; k++)
		p[k] = (unsigned char)t_rand(&s);
}

/* Device memory of ctx; the current context is left as it was. */
static inline CUdeviceptr t_alloc(CUcontext ctx, size_t n)
{
	CUdeviceptr p;
	CUcontext old;
	T_CU(p2pg_drv.cuCtxPushCurrent(ctx));
	T_CU(p2pg_drv.cuMemAlloc(&p, n ? n : 1));
	T_CU(p2pg_drv.cuCtxPopCurrent(&old));
	return p;
}

static inline void t_free(CUcontext ctx, CUdeviceptr p)
{
	CUcontext old;
	T_CU(p2pg_drv.cuCtxPushCurrent(ctx));
	T_CU(p2pg_drv.cuMemFree(p));
	T_CU(p2pg_drv.cuCtxPopCurrent(&old));
}

static inline void *t_alloc_host(size_t n)
{
	void *p;
	T_CU(p2pg_drv.cuMemAllocHost(&p, n ? n : 1));
	return p;
}

static inline void t_upload(CUcontext ctx, CUdeviceptr dst, const void *src, size_t n)
{
	CUcontext old;
	T_CU(p2pg_drv.cuCtxPushCurrent(ctx));
	T_CU(p2pg_drv.cuMemcpyHtoD(dst, src, n));
	T_CU(p2pg_drv.cuCtxPopCurrent(&old));
}

static inline void t_download(CUcontext ctx, void *dst, CUdeviceptr src, size_t n)
{
	CUcontext old;
	T_CU(p2pg_drv.cuCtxPushCurrent(ctx));
	T_CU(p2pg_drv.cuMemcpyDtoH(dst, src, n));
	T_CU(p2pg_drv.cuCtxPopCurrent(&old));
}

static inline CUstream t_stream(CUcontext ctx)
{
	CUstream s;
	CUcontext old;
	T_CU(p2pg_drv.cuCtxPushCurrent(ctx));
	T_CU(p2pg_drv.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	T_CU(p2pg_drv.cuCtxPopCurrent(&old));
	return s;
}

/* First differing offset, or (size_t)-1 when equal. */
static inline size_t t_diff(const unsigned char *a, const unsigned char *b, size_t n)
{
	if (!memcmp(a, b, n))
		return (size_t)-1;
	for (size_t k = 0; k < n; k++)
		if (a[k] != b[k])
			return k;
	return (size_t)-1;
}

static inline double t_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* True when the simulated driver's copies are slowed down (asynchrony is then observable). */
static inline bool t_slow_copies(void)
{
	const char *v = getenv("SIMCUDA_COPY_NS_PER_BYTE");
	return v && atof(v) > 0;
}

static inline int t_result(const char *name)
{
	if (t_failures) {
		fprintf(stderr, "%s: %d failure(s)\n", name, t_failures);
		return 1;
	}
	printf("%s: ok\n", name);
	return 0;
}
