/* SPDX-License-Identifier: MIT */
/*
 * Does a "synchronous" copy between device memory wait for the copy? CUDA's documentation says
 * cudaMemcpyPeer is "asynchronous with respect to the host" and that cudaMemcpy from device to
 * device performs "no host-side synchronization"; the guard takes a synchronous call's duration as
 * its copy time only where that is so. For each size and call, the median over REPS of the call's
 * duration on the host against the GPU time of the copy (two events around it on the legacy
 * stream), and the time the host then waits in cudaDeviceSynchronize. Built here against the
 * simulated runtime and by scripts/gpu-parts/sync-copy.sh with nvcc on a GPU machine.
 *
 *   sync_copy_time [DEVICE_SRC DEVICE_DST]     default 0 0 (within one GPU: no peer needed)
 *
 * One line a size and call: "call bytes host_us gpu_us wait_us".
 */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define REPS 9

static double now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(double *v)
{
	qsort(v, REPS, sizeof(*v), cmp);
	return v[REPS / 2];
}

static int check(cudaError_t e, const char *what)
{
	if (e != cudaSuccess) {
		fprintf(stderr, "sync_copy_time: %s: %s\n", what, cudaGetErrorString(e));
		exit(1);
	}
	return 0;
}

int main(int argc, char **argv)
{
	int src_dev = argc > 2 ? atoi(argv[1]) : 0, dst_dev = argc > 2 ? atoi(argv[2]) : 0;
	size_t big = (size_t)1 << 30;
	void *src, *dst;
	check(cudaSetDevice(dst_dev), "cudaSetDevice");
	check(cudaMalloc(&dst, big), "cudaMalloc dst");
	check(cudaSetDevice(src_dev), "cudaSetDevice");
	check(cudaMalloc(&src, big), "cudaMalloc src");
	check(cudaMemset(src, 1, big), "cudaMemset");
	if (src_dev != dst_dev) {
		cudaError_t e = cudaDeviceEnablePeerAccess(dst_dev, 0);
		if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled)
			check(e, "cudaDeviceEnablePeerAccess");
	}
	check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
	cudaEvent_t a, b;
	check(cudaEventCreate(&a), "cudaEventCreate");
	check(cudaEventCreate(&b), "cudaEventCreate");
	static const size_t sizes[] = {4096, 1 << 20, 64 << 20, (size_t)1 << 30};
	for (int call = 0; call < 2; call++) {
		const char *name = call == 0 ? "cudaMemcpyPeer" : "cudaMemcpy";
		for (unsigned s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
			double host[REPS], gpu[REPS], wait[REPS];
			for (int r = 0; r < REPS; r++) {
				check(cudaEventRecord(a, 0), "cudaEventRecord");
				double t0 = now_us();
				if (call == 0)
					check(cudaMemcpyPeer(dst, dst_dev, src, src_dev, sizes[s]),
					      name);
				else
					check(cudaMemcpy(dst, src, sizes[s],
							 cudaMemcpyDeviceToDevice),
					      name);
				double t1 = now_us();
				check(cudaEventRecord(b, 0), "cudaEventRecord");
				check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
				double t2 = now_us();
				float ms = 0;
				check(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
				host[r] = t1 - t0;
				gpu[r] = ms * 1e3;
				wait[r] = t2 - t1;
			}
			printf("%s %zu %.1f %.1f %.1f\n", name, sizes[s], median(host), median(gpu),
			       median(wait));
		}
	}
	return 0;
}
