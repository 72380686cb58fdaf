/* SPDX-License-Identifier: MIT */
/*
 * The shortest life of a CUDA process: the runtime initialises the driver and makes the primary
 * context (cudaFree(0)), then the process exits. scripts/bench-idle.sh times it bare and guarded.
 */
#include <cuda_runtime_api.h>
#include <stdio.h>

int main(void)
{
	cudaError_t rc = cudaFree(0);
	if (rc != cudaSuccess) {
		fprintf(stderr, "cuda_start: cudaFree(0): %s\n", cudaGetErrorString(rc));
		return 1;
	}
	return 0;
}
