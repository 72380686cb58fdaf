/* SPDX-License-Identifier: MIT */
/*
 * The health probe: does P2P between two devices deliver the right bytes, and is it faster than
 * staging through the host? cudaDeviceCanAccessPeer == 1 proves neither: behind some IOMMU/ACS
 * settings, in VMs and on some consumer boards P2P copies return zeros or garbage, or crawl.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

struct p2pg_probe_result {
	int status;	  /* 0, or the first driver error met (the probe then says nothing) */
	bool p2p_correct; /* the canary arrived intact over P2P */
	bool staged_correct;
	double p2p_gbps; /* best of the timed runs, GB/s (1e9 bytes per second) */
	double staged_gbps;
	double elapsed_ms; /* what the probe cost */
	/* "ok", "wrong_data", "slow" (P2P below 80% of staging), "hang" (a P2P copy unfinished
	 * timeout_ms after it was waited for), "error" */
	const char *verdict;
};

/*
 * Copies a canary pattern of `bytes` from src to dst over P2P (peer access must already be
 * enabled in one direction, or `enable` lets the probe enable and afterwards disable it) and
 * through the staged engine, compares both with the pattern, and times each `repeats` times. Makes
 * its own allocations and leaves the caller's current context as it found it.
 */
/*
 * Never waits by a blocking synchronise: every copy is polled until it finishes or timeout_ms has
 * passed since it was waited for (a deadline per copy, so that a slow machine's healthy probe is
 * not judged by the sum of its copies). A P2P copy unfinished then is the verdict "hang"; its
 * buffers and streams are then left allocated for good (a stuck copy may still use them) and the
 * peer mapping as it was. A staged copy unfinished then is "error": the device, not the path.
 */
void p2pg_probe_pair(int src, int dst, size_t bytes, int repeats, bool enable, unsigned timeout_ms,
		     struct p2pg_probe_result *out);
