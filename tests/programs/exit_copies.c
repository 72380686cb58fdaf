/* SPDX-License-Identifier: MIT */
/*
 * A short-lived program: asynchronous copies, then straight out of main. What the guard knows of
 * their GPU time it must learn on the way out, before the runtime's exit handler destroys the
 * contexts (and with them the timing events). Built here against the simulated runtime and, by
 * scripts/gpu-parts/truth.sh, by nvcc on a GPU machine (with its default static runtime and with
 * -cudart shared). Plain C: nvcc compiles it as C++, gcc as C.
 *
 *   exit_copies peer N      N cudaMemcpyPeerAsync of 1 MiB from device 0 to 1 on a stream,
 *                           cudaStreamSynchronize, return from main
 *   exit_copies local N     the same as cudaMemcpyAsync device to device within device 0 (one
 *                           GPU: a peer copy only to the guard's P2PGUARD_TEST=local-copies)
 *   exit_copies MODE N local   exit, nosync or crash with those copies within device 0
 *   exit_copies nosync N    as peer, but returning at once without a synchronize: copies may
 *                           still run while the process ends (the exit must not wait for them)
 *   exit_copies exit N      as peer, leaving through exit(0) from a function instead of main's
 *                           return
 *   exit_copies crash N     as peer, then a SIGSEGV (a store through a null pointer)
 *   exit_copies hang N      peer access enabled from device 0 to 1, then as nosync (under
 *                           SIMCUDA_P2P_HANG=0-1 the first copy never completes)
 *
 * With EXIT_COPIES_PAUSE set, it prints "READY" once CUDA is initialised and reads a line from
 * stdin before the copies (a test locks the database the guard has opened meanwhile); with
 * EXIT_COPIES_PAUSE=after it does so after enqueueing the copies, before it waits for them.
 *
 * Prints "EXPECT transfers=N" on success.
 */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIB (1 << 20)

static int *volatile nowhere; /* the crash's target: the compiler cannot prove it null */

/* A real SIGSEGV, also in a build with UndefinedBehaviorSanitizer (which would report the null
 * store itself and exit otherwise). */
__attribute__((noinline, no_sanitize("null"))) static void crash_here(volatile int *p)
{
	*p = 1;
}

static int fail(const char *what, cudaError_t e)
{
	fprintf(stderr, "exit_copies: %s: %d %s\n", what, (int)e, cudaGetErrorName(e));
	return 1;
}

static int wait_for_go(void)
{
	char line[16];
	printf("READY\n");
	fflush(stdout);
	return fgets(line, sizeof(line), stdin) != NULL;
}

static int copies(const char *mode, int n, int local)
{
	int hang = strcmp(mode, "hang") == 0;
	int devices = 0;
	cudaError_t e = cudaGetDeviceCount(&devices);
	if (e != cudaSuccess)
		return fail("cudaGetDeviceCount", e);
	const char *pause = getenv("EXIT_COPIES_PAUSE");
	if (pause && strcmp(pause, "after") != 0 && !wait_for_go())
		return fail("reading the go-ahead from stdin", cudaSuccess);
	if (!local && devices < 2) {
		fprintf(stderr, "exit_copies: %s needs two devices\n", mode);
		return 1;
	}
	int dst_device = local ? 0 : 1;
	void *src = NULL, *dst = NULL;
	cudaStream_t stream;
	if ((e = cudaSetDevice(dst_device)) != cudaSuccess ||
	    (e = cudaMalloc(&dst, MIB)) != cudaSuccess)
		return fail("cudaMalloc on the destination", e);
	if ((e = cudaSetDevice(0)) != cudaSuccess || (e = cudaMalloc(&src, MIB)) != cudaSuccess ||
	    (e = cudaStreamCreate(&stream)) != cudaSuccess)
		return fail("cudaMalloc/cudaStreamCreate on device 0", e);
	if (hang && (e = cudaDeviceEnablePeerAccess(1, 0)) != cudaSuccess)
		return fail("cudaDeviceEnablePeerAccess", e);
	for (int k = 0; k < n; k++) {
		e = local ? cudaMemcpyAsync(dst, src, MIB, cudaMemcpyDeviceToDevice, stream)
			  : cudaMemcpyPeerAsync(dst, dst_device, src, 0, MIB, stream);
		if (e != cudaSuccess)
			return fail("copy", e);
	}
	if (pause && strcmp(pause, "after") == 0 && !wait_for_go())
		return fail("reading the go-ahead from stdin", cudaSuccess);
	if (strcmp(mode, "nosync") != 0 && !hang &&
	    (e = cudaStreamSynchronize(stream)) != cudaSuccess)
		return fail("cudaStreamSynchronize", e);
	printf("EXPECT transfers=%d\n", n);
	fflush(stdout);
	return 0;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "peer";
	int n = argc > 2 ? atoi(argv[2]) : 50;
	int leave = strcmp(mode, "exit") == 0, crash = strcmp(mode, "crash") == 0;
	if (strcmp(mode, "peer") && strcmp(mode, "local") && strcmp(mode, "nosync") && !leave &&
	    !crash && strcmp(mode, "hang")) {
		fprintf(stderr,
			"usage: exit_copies peer|local|nosync|exit|crash|hang [N [local]]\n");
		return 2;
	}
	int local = strcmp(mode, "local") == 0 || (argc > 3 && strcmp(argv[3], "local") == 0);
	int rc = copies(mode, n, local);
	if (leave)
		exit(rc);
	if (crash && rc == 0)
		crash_here(nowhere);
	return rc;
}
