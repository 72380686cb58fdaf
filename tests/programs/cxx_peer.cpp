// SPDX-License-Identifier: MIT
/*
 * A C++ program whose failing peer call is made from a C++ function (a mangled symbol,
 * _Z12enable_peersi): the failure row's backtrace must show it as enable_peers(int).
 *
 *   cxx_peer          enable_peers(0): peer access to the device itself, which fails (217)
 *   cxx_peer crash    a null write in crash_in_cxx(int), after the driver is initialised
 */
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstring>
#include <string>

namespace
{
volatile int *volatile nowhere = nullptr;
}

__attribute__((noinline)) int enable_peers(int device)
{
	if (cudaSetDevice(device) != cudaSuccess)
		return -1;
	int rc = cudaDeviceEnablePeerAccess(device, 0); // the failing call
	cudaGetLastError();
	return rc;
}

/* UBSan would stop at the null store itself: the guard's handler is what is under test. */
__attribute__((noinline, no_sanitize("null"))) void crash_in_cxx(int value)
{
	*nowhere = value;
}

int main(int argc, char **argv)
{
	int count = 0;
	if (cudaGetDeviceCount(&count) != cudaSuccess || count < 1)
		return 77;
	if (argc > 1 && std::string(argv[1]) == "crash") {
		cudaSetDevice(0);
		crash_in_cxx(argc);
		return 1;
	}
	int status = enable_peers(0);
	std::printf("EXPECT failures=1 status=%d\n", status);
	return 0;
}
