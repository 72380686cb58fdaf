/* SPDX-License-Identifier: MIT */
#include "bench_devices.h"

#include <stdio.h>

CUresult bench_devices_describe(const struct bench_devices *dev, struct bench_devices_names *ret)
{
	CUresult r = p2pg_drv.cuDeviceGetName(ret->d0, sizeof(ret->d0), dev->d0);
	if (r == CUDA_SUCCESS)
		r = p2pg_drv.cuDeviceGetName(ret->d1, sizeof(ret->d1), dev->d1);
	if (r == CUDA_SUCCESS)
		r = p2pg_drv.cuDriverGetVersion(&ret->driver_version);
	return r;
}

int bench_devices_open(const char *program, struct bench_devices *ret)
{
	if (p2pg_driver_load() < 0) {
		fprintf(stderr, "%s: no usable libcuda.so.1\n", program);
		return -1;
	}
	int n = 0;
	CUresult r = p2pg_drv.cuInit(0);
	if (r == CUDA_SUCCESS)
		r = p2pg_drv.cuDeviceGetCount(&n);
	if (r == CUDA_SUCCESS && n < 2) {
		fprintf(stderr, "%s: needs two devices, found %d\n", program, n);
		return -1;
	}
	if (r == CUDA_SUCCESS)
		r = p2pg_drv.cuDeviceGet(&ret->d0, 0);
	if (r == CUDA_SUCCESS)
		r = p2pg_drv.cuDeviceGet(&ret->d1, 1);
	if (r == CUDA_SUCCESS)
		r = p2pg_drv.cuDevicePrimaryCtxRetain(&ret->ctx0, ret->d0);
	if (r == CUDA_SUCCESS)
		r = p2pg_drv.cuDevicePrimaryCtxRetain(&ret->ctx1, ret->d1);
	if (r != CUDA_SUCCESS) {
		fprintf(stderr, "%s: setting up devices 0 and 1 failed: %s (%d)\n", program,
			p2pg_cu_error_name(r), (int)r);
		return -1;
	}
	return 0;
}
