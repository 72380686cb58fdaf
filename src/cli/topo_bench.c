/* SPDX-License-Identifier: MIT */
/*
 * topo's measurements beyond the probe, as nvbandwidth's copy-engine tests make them: both
 * directions at once (two streams, one in each device's context, their events timing each), the
 * latency of a small copy, and bandwidth by size. Copy-engine copies only (cuMemcpyPeerAsync):
 * the guard carries no kernel, so nvbandwidth's SM-copy tests have no counterpart here.
 *
 * Runs in topo's child process for the pair, after the probe found the pair healthy; a copy that
 * does not finish leaves the child to topo's deadline, which kills it.
 */
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "driver.h"
#include "report_format.h"
#include "topo.h"

#define REPEATS	       5   /* copies per timed batch */
#define LATENCY_COPIES 101 /* small copies whose median is the latency */
#define LATENCY_BYTES  8

struct side {
	CUcontext ctx;
	CUstream stream;
	CUevent start, end;
	CUdeviceptr buf_out, buf_in; /* what this side sends, and receives */
};

static CUresult open_side(struct side *s, int ordinal, size_t bytes)
{
	CUdevice dev;
	CUresult rc = p2pg_drv.cuDeviceGet(&dev, ordinal);
	if (rc == CUDA_SUCCESS)
		rc = p2pg_drv.cuDevicePrimaryCtxRetain(&s->ctx, dev);
	if (rc == CUDA_SUCCESS)
		rc = p2pg_drv.cuCtxSetCurrent(s->ctx);
	if (rc == CUDA_SUCCESS)
		rc = p2pg_drv.cuStreamCreate(&s->stream, CU_STREAM_NON_BLOCKING);
	if (rc == CUDA_SUCCESS)
		rc = p2pg_drv.cuEventCreate(&s->start, CU_EVENT_DEFAULT);
	if (rc == CUDA_SUCCESS)
		rc = p2pg_drv.cuEventCreate(&s->end, CU_EVENT_DEFAULT);
	if (rc == CUDA_SUCCESS)
		rc = p2pg_drv.cuMemAlloc(&s->buf_out, bytes);
	if (rc == CUDA_SUCCESS)
		rc = p2pg_drv.cuMemAlloc(&s->buf_in, bytes);
	if (rc == CUDA_SUCCESS)
		rc = p2pg_drv.cuMemsetD8(s->buf_out, 0x5a, bytes);
	return rc;
}

/* `REPEATS` copies of `bytes` from `from` to `to` on from's stream, between from's events. */
static CUresult enqueue(struct side *from, struct side *to, size_t bytes)
{
	CUresult rc = p2pg_drv.cuCtxSetCurrent(from->ctx);
	if (rc == CUDA_SUCCESS)
		rc = p2pg_drv.cuEventRecord(from->start, from->stream);
	for (int k = 0; rc == CUDA_SUCCESS && k < REPEATS; k++)
		rc = p2pg_drv.cuMemcpyPeerAsync(to->buf_in, to->ctx, from->buf_out, from->ctx,
						bytes, from->stream);
	if (rc == CUDA_SUCCESS)
		rc = p2pg_drv.cuEventRecord(from->end, from->stream);
	return rc;
}

static CUresult elapsed_ms(struct side *s, float *ms)
{
	CUresult rc = p2pg_drv.cuEventSynchronize(s->end);
	return rc == CUDA_SUCCESS ? p2pg_drv.cuEventElapsedTime(ms, s->start, s->end) : rc;
}

/* GB/s of one direction at `bytes`: the best of three batches. */
static CUresult one_way(struct side *a, struct side *b, size_t bytes, double *gbps)
{
	*gbps = 0;
	for (int t = 0; t < 3; t++) {
		float ms = 0;
		CUresult rc = enqueue(a, b, bytes);
		if (rc == CUDA_SUCCESS)
			rc = elapsed_ms(a, &ms);
		if (rc != CUDA_SUCCESS)
			return rc;
		double g = ms > 0 ? (double)bytes * REPEATS / (ms * 1e6) : 0;
		*gbps = g > *gbps ? g : *gbps;
	}
	return CUDA_SUCCESS;
}

static int cmp_double(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;
	return (a > b) - (a < b);
}

int topo_bench_pair(const struct topo_bench_job *job, struct topo_measure *m)
{
	struct side a = {0}, b = {0};
	memset(m, 0, sizeof(*m));
	m->p2p = job->can;
	CUresult rc = open_side(&a, job->src, job->bytes);
	if (rc == CUDA_SUCCESS)
		rc = open_side(&b, job->dst, job->bytes);
	if (rc == CUDA_SUCCESS && job->can) {
		/* Peer access both ways (704: already on). */
		CUresult e = p2pg_drv.cuCtxSetCurrent(a.ctx);
		if (e == CUDA_SUCCESS)
			e = p2pg_drv.cuCtxEnablePeerAccess(b.ctx, 0);
		CUresult f = p2pg_drv.cuCtxSetCurrent(b.ctx);
		if (f == CUDA_SUCCESS)
			f = p2pg_drv.cuCtxEnablePeerAccess(a.ctx, 0);
		if ((e != CUDA_SUCCESS && e != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) ||
		    (f != CUDA_SUCCESS && f != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED))
			m->p2p = false;
	}
	/* Both directions at once: each side's events time its own copies; the pair moved both
	 * batches in the longer of the two times. */
	for (int t = 0; rc == CUDA_SUCCESS && t < 3; t++) {
		float ms_a = 0, ms_b = 0;
		rc = enqueue(&a, &b, job->bytes);
		if (rc == CUDA_SUCCESS)
			rc = enqueue(&b, &a, job->bytes);
		if (rc == CUDA_SUCCESS)
			rc = elapsed_ms(&a, &ms_a);
		if (rc == CUDA_SUCCESS)
			rc = elapsed_ms(&b, &ms_b);
		float ms = ms_a > ms_b ? ms_a : ms_b;
		double g = ms > 0 ? 2.0 * (double)job->bytes * REPEATS / (ms * 1e6) : 0;
		if (rc == CUDA_SUCCESS && g > m->bidir_gbps)
			m->bidir_gbps = g;
	}
	/* A small copy from enqueue to completion, as a program waiting on it sees it. */
	double lat[LATENCY_COPIES];
	int nlat = 0;
	if (rc == CUDA_SUCCESS)
		rc = p2pg_drv.cuCtxSetCurrent(a.ctx);
	for (; rc == CUDA_SUCCESS && nlat < LATENCY_COPIES; nlat++) {
		uint64_t t0 = p2pg_now_ns();
		rc = p2pg_drv.cuMemcpyPeerAsync(b.buf_in, b.ctx, a.buf_out, a.ctx, LATENCY_BYTES,
						a.stream);
		if (rc == CUDA_SUCCESS)
			rc = p2pg_drv.cuStreamSynchronize(a.stream);
		lat[nlat] = (double)(p2pg_now_ns() - t0) / 1e3;
	}
	if (rc == CUDA_SUCCESS) {
		sort_n(lat, (size_t)nlat, sizeof(double), cmp_double);
		m->latency_us = lat[nlat / 2];
	}
	/* Bandwidth by size, from 4 KiB by factors of 4 up to the probe's size. */
	for (size_t size = 4096;
	     job->sweep && rc == CUDA_SUCCESS && size <= job->bytes && m->sweep_n < TOPO_SWEEP_MAX;
	     size *= 4) {
		double g;
		rc = one_way(&a, &b, size, &g);
		if (rc == CUDA_SUCCESS) {
			m->sweep_bytes[m->sweep_n] = size;
			m->sweep_gbps[m->sweep_n++] = g;
		}
	}
	return (int)rc;
}
