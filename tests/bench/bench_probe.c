/* SPDX-License-Identifier: MIT */
/*
 * bench_probe: what the health probe costs a program in fallback mode (issue: <= 50 ms per pair).
 *
 * The guard probes a pair right after the program's first successful enable, with the same call
 * this program makes: p2pg_probe_pair(src, dst, 4 MiB, 2 repeats, enable). So the program's state
 * is set up first as it would be there: every device's primary context in use (an allocation in
 * each) and peer access enabled where the driver allows it. The first probe of a process also pays
 * for the staged engine's set-up (pinned ring, engine streams), so it is the figure that counts;
 * later probes show the steady cost. Every ordered pair of devices 0..N-1 is probed --rounds
 * times, one line per probe: elapsed ms, verdict, both bandwidths.
 *
 *   bench_probe [--rounds N] [--bytes N]
 *
 * On real GPUs run it with the real driver first in the library path; against the simulated CUDA,
 * LD_LIBRARY_PATH=build/tests/simcuda.
 */
#include "driver.h"
#include "probe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
	int rounds = 3;
	size_t bytes = (size_t)4 << 20;
	for (int k = 1; k < argc; k++) {
		if (!strcmp(argv[k], "--rounds") && k + 1 < argc)
			rounds = atoi(argv[++k]);
		else if (!strcmp(argv[k], "--bytes") && k + 1 < argc)
			bytes = strtoull(argv[++k], NULL, 0);
		else {
			fprintf(stderr, "usage: bench_probe [--rounds N] [--bytes N]\n");
			return 2;
		}
	}
	if (p2pg_driver_load() < 0 || p2pg_drv.cuInit(0) != CUDA_SUCCESS) {
		fprintf(stderr, "bench_probe: no usable CUDA driver\n");
		return 1;
	}
	int n = 0;
	if (p2pg_drv.cuDeviceGetCount(&n) != CUDA_SUCCESS || n < 2) {
		fprintf(stderr, "bench_probe: needs two devices, found %d\n", n);
		return 1;
	}
	if (n > 16)
		n = 16;
	CUcontext ctx[16];
	for (int d = 0; d < n; d++) {
		CUdevice dev;
		CUdeviceptr mem;
		if (p2pg_drv.cuDeviceGet(&dev, d) != CUDA_SUCCESS ||
		    p2pg_drv.cuDevicePrimaryCtxRetain(&ctx[d], dev) != CUDA_SUCCESS ||
		    p2pg_drv.cuCtxSetCurrent(ctx[d]) != CUDA_SUCCESS ||
		    p2pg_drv.cuMemAlloc(&mem, 1 << 20) != CUDA_SUCCESS) {
			fprintf(stderr, "bench_probe: no context on device %d\n", d);
			return 1;
		}
	}
	for (int s = 0; s < n; s++)
		for (int d = 0; d < n; d++) {
			int can = 0;
			if (s == d || p2pg_drv.cuDeviceCanAccessPeer(&can, s, d) != CUDA_SUCCESS ||
			    !can)
				continue;
			p2pg_drv.cuCtxSetCurrent(ctx[s]);
			CUresult e = p2pg_drv.cuCtxEnablePeerAccess(ctx[d], 0);
			if (e != CUDA_SUCCESS && e != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) {
				fprintf(stderr, "bench_probe: enabling peer access %d->%d: %s\n", s,
					d, p2pg_cu_error_name(e));
				return 1;
			}
		}
	p2pg_drv.cuCtxSetCurrent(ctx[0]);
	printf(
	    "bench_probe: %d devices, %zu KiB canary, 2 repeats per path (as in fallback mode)\n",
	    n, bytes >> 10);
	printf("%-6s %-9s %10s %-11s %9s %9s\n", "round", "pair", "ms", "verdict", "p2p GB/s",
	       "stg GB/s");
	int failed = 0;
	for (int r = 1; r <= rounds; r++)
		for (int s = 0; s < n; s++)
			for (int d = 0; d < n; d++) {
				if (s == d)
					continue;
				int can = 0;
				p2pg_drv.cuDeviceCanAccessPeer(&can, s, d);
				struct p2pg_probe_result res;
				p2pg_probe_pair(s, d, bytes, 2, can != 0, 5000, &res);
				char pair[32];
				snprintf(pair, sizeof(pair), "%d->%d", s, d);
				printf("%-6d %-9s %10.2f %-11s %9.1f %9.1f\n", r, pair,
				       res.elapsed_ms, res.verdict, res.p2p_gbps, res.staged_gbps);
				failed |= res.status != 0;
			}
	return failed;
}
