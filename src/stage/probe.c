/* SPDX-License-Identifier: MIT */
#include "probe.h"

#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "driver.h"
#include "staged.h"

static double now_ms(void)
{
	return (double)p2pg_now_ns() / 1e6;
}

/* A pattern no zero-filled or stale buffer matches by accident. Eight bytes a step: byte by byte,
 * 4 MiB took milliseconds of the probe's budget. */
static void canary(unsigned char *p, size_t n, unsigned seed)
{
	uint64_t x = 0x9e3779b97f4a7c15ull ^ seed;
	for (size_t k = 0; k < n; k += sizeof(x)) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		size_t left = n - k < sizeof(x) ? n - k : sizeof(x);
		memcpy(p + k, &x, left);
	}
}

struct probe_state {
	CUcontext ctx_src, ctx_dst, saved;
	CUstream stream_src, stream_dst; /* the probe's own, non-blocking: no program work waits */
	/* Timing events around each copy, on the stream that carries it: the copy's time does not
	 * depend on how soon the polling notices it finished. */
	CUevent ev_src[2], ev_dst[2];
	CUdeviceptr src, dst;
	unsigned char *expect, *back;
	size_t bytes;
	double timeout_ms; /* how long one copy may take before the probe calls it stuck */
	bool hung;	   /* a copy did not finish in time */
};

static CUresult on(CUcontext ctx)
{
	return p2pg_drv.cuCtxSetCurrent(ctx);
}

/*
 * Waits for the stream's work by asking, never by a blocking synchronise: a P2P copy whose
 * transactions an IOMMU swallows never completes, and cuCtxSynchronize would then never return.
 * For the first 10 ms it asks again at once, yielding the CPU in between (as cuCtxSynchronize
 * spins by default: a probe is short, and sleeping made it cost three times as much on a loaded
 * machine), then every millisecond until the deadline. The copies are timed by events, so how
 * soon the asking notices does not change the bandwidth figures.
 */
static CUresult wait_done(struct probe_state *st, CUstream stream)
{
	double start = now_ms();
	for (;;) {
		CUresult rc = p2pg_drv.cuStreamQuery(stream);
		if (rc != CUDA_ERROR_NOT_READY)
			return rc;
		double now = now_ms();
		if (now - start >= st->timeout_ms) {
			st->hung = true;
			return CUDA_ERROR_NOT_READY;
		}
		if (now - start < 10)
			sched_yield();
		else
			nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
	}
}

static CUresult clear_dst(struct probe_state *st)
{
	CUresult rc;
	if ((rc = on(st->ctx_dst)) != CUDA_SUCCESS ||
	    (rc = p2pg_drv.cuMemsetD8Async(st->dst, 0, st->bytes, st->stream_dst)) != CUDA_SUCCESS)
		return rc;
	return wait_done(st, st->stream_dst);
}

/* Times one way of copying; checks the result against the canary. Returns the best GB/s. */
static CUresult measure(struct probe_state *st, bool p2p, int repeats, double *ret_gbps,
			bool *ret_correct)
{
	double best = 0;
	CUresult rc;
	for (int k = 0; k < repeats; k++) {
		if ((rc = clear_dst(st)) != CUDA_SUCCESS)
			return rc;
		CUstream waited = p2p ? st->stream_src : st->stream_dst;
		CUevent *ev = p2p ? st->ev_src : st->ev_dst;
		on(p2p ? st->ctx_src : st->ctx_dst);
		if ((rc = p2pg_drv.cuEventRecord(ev[0], waited)) != CUDA_SUCCESS)
			return rc;
		if (p2p) {
			rc = p2pg_drv.cuMemcpyPeerAsync(st->dst, st->ctx_dst, st->src, st->ctx_src,
							st->bytes, st->stream_src);
		} else {
			struct p2pg_staged_copy c = {.dst = st->dst,
						     .src = st->src,
						     .dst_device = -1,
						     .src_device = -1,
						     .bytes = st->bytes,
						     .stream = st->stream_dst,
						     .async = true};
			CUdevice d;
			on(st->ctx_src);
			p2pg_drv.cuCtxGetDevice(&d);
			c.src_device = d;
			on(st->ctx_dst);
			p2pg_drv.cuCtxGetDevice(&d);
			c.dst_device = d;
			rc = p2pg_staged_copy(&c);
			on(st->ctx_dst);
		}
		if (rc == CUDA_SUCCESS)
			rc = p2pg_drv.cuEventRecord(ev[1], waited);
		if (rc == CUDA_SUCCESS)
			rc = wait_done(st, waited);
		float ms = 0;
		if (rc == CUDA_SUCCESS)
			rc = p2pg_drv.cuEventElapsedTime(&ms, ev[0], ev[1]);
		if (rc != CUDA_SUCCESS)
			return rc;
		double gbps = ms > 0 ? (double)st->bytes / ((double)ms * 1e6) : 0;
		if (gbps > best)
			best = gbps;
	}
	if ((rc = on(st->ctx_dst)) != CUDA_SUCCESS ||
	    (rc = p2pg_drv.cuMemcpyDtoHAsync(st->back, st->dst, st->bytes, st->stream_dst)) !=
		CUDA_SUCCESS ||
	    (rc = wait_done(st, st->stream_dst)) != CUDA_SUCCESS)
		return rc;
	*ret_correct = memcmp(st->back, st->expect, st->bytes) == 0;
	*ret_gbps = best;
	return CUDA_SUCCESS;
}

void p2pg_probe_pair(int src, int dst, size_t bytes, int repeats, bool enable, unsigned timeout_ms,
		     struct p2pg_probe_result *out)
{
	memset(out, 0, sizeof(*out));
	out->verdict = "error";
	double t0 = now_ms();
	if (p2pg_driver_load() < 0 || src == dst || bytes == 0) {
		out->status = CUDA_ERROR_INVALID_VALUE;
		return;
	}
	struct probe_state st = {.bytes = bytes, .timeout_ms = (double)timeout_ms};
	CUdevice dev_src, dev_dst;
	bool enabled_here = false;
	CUresult rc = p2pg_drv.cuCtxGetCurrent(&st.saved);
	if (rc == CUDA_SUCCESS)
		rc = p2pg_drv.cuDeviceGet(&dev_src, src);
	if (rc == CUDA_SUCCESS)
		rc = p2pg_drv.cuDeviceGet(&dev_dst, dst);
	if (rc == CUDA_SUCCESS)
		rc = p2pg_drv.cuDevicePrimaryCtxRetain(&st.ctx_src, dev_src);
	if (rc == CUDA_SUCCESS)
		rc = p2pg_drv.cuDevicePrimaryCtxRetain(&st.ctx_dst, dev_dst);
	if (rc != CUDA_SUCCESS)
		goto done;
	st.expect = malloc(bytes);
	st.back = malloc(bytes);
	if (!st.expect || !st.back) {
		rc = CUDA_ERROR_OUT_OF_MEMORY;
		goto done;
	}
	canary(st.expect, bytes, (unsigned)(src * 31 + dst));
	if ((rc = on(st.ctx_src)) != CUDA_SUCCESS ||
	    (rc = p2pg_drv.cuMemAlloc(&st.src, bytes)) != CUDA_SUCCESS ||
	    (rc = p2pg_drv.cuMemcpyHtoD(st.src, st.expect, bytes)) != CUDA_SUCCESS)
		goto done;
	if ((rc = p2pg_drv.cuStreamCreate(&st.stream_src, CU_STREAM_NON_BLOCKING)) !=
		CUDA_SUCCESS ||
	    (rc = p2pg_drv.cuEventCreate(&st.ev_src[0], CU_EVENT_DEFAULT)) != CUDA_SUCCESS ||
	    (rc = p2pg_drv.cuEventCreate(&st.ev_src[1], CU_EVENT_DEFAULT)) != CUDA_SUCCESS)
		goto done;
	if ((rc = on(st.ctx_dst)) != CUDA_SUCCESS ||
	    (rc = p2pg_drv.cuMemAlloc(&st.dst, bytes)) != CUDA_SUCCESS ||
	    (rc = p2pg_drv.cuStreamCreate(&st.stream_dst, CU_STREAM_NON_BLOCKING)) !=
		CUDA_SUCCESS ||
	    (rc = p2pg_drv.cuEventCreate(&st.ev_dst[0], CU_EVENT_DEFAULT)) != CUDA_SUCCESS ||
	    (rc = p2pg_drv.cuEventCreate(&st.ev_dst[1], CU_EVENT_DEFAULT)) != CUDA_SUCCESS)
		goto done;
	if (enable) {
		on(st.ctx_src);
		CUresult e = p2pg_drv.cuCtxEnablePeerAccess(st.ctx_dst, 0);
		if (e == CUDA_SUCCESS)
			enabled_here = true;
		else if (e != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) {
			rc = e;
			goto done;
		}
	}
	rc = measure(&st, true, repeats, &out->p2p_gbps, &out->p2p_correct);
	if (st.hung) {
		/* Only the P2P path can leave a copy unfinished for good; staging is not measured
		 * (it would queue behind nothing, but the pair's verdict is already known). */
		out->verdict = "hang";
		rc = CUDA_SUCCESS;
		goto done;
	}
	if (rc != CUDA_SUCCESS || (rc = measure(&st, false, repeats, &out->staged_gbps,
						&out->staged_correct)) != CUDA_SUCCESS)
		goto done;
	if (!out->p2p_correct && out->staged_correct)
		out->verdict = "wrong_data";
	else if (!out->p2p_correct)
		out->verdict = "error"; /* both wrong: the devices, not the path */
	/* "Slower than staging" needs a clear margin: two healthy paths of similar speed must not
	 * be judged differently from one run to the next. */
	else if (out->p2p_gbps < 0.8 * out->staged_gbps)
		out->verdict = "slow";
	else
		out->verdict = "ok";

done:
	if (st.hung) {
		/*
		 * The stuck copy may still read src and write dst whenever its transactions come
		 * back, and freeing either, destroying a stream or disabling the mapping under it
		 * would wait for it (cuMemFree synchronises) or pull memory from under a DMA. So
		 * they are leaked on purpose: two buffers of `bytes`, two streams and their four
		 * events, once per hung pair (the guard probes a pair once). The host buffers were
		 * never the copy's.
		 */
		free(st.expect);
		free(st.back);
		p2pg_drv.cuCtxSetCurrent(st.saved);
		out->status = rc;
		out->elapsed_ms = now_ms() - t0;
		return;
	}
	if (enabled_here) {
		on(st.ctx_src);
		p2pg_drv.cuCtxDisablePeerAccess(st.ctx_dst);
	}
	if (st.src) {
		on(st.ctx_src);
		p2pg_drv.cuMemFree(st.src);
	}
	if (st.dst) {
		on(st.ctx_dst);
		p2pg_drv.cuMemFree(st.dst);
	}
	on(st.ctx_src);
	for (int k = 0; k < 2; k++)
		if (st.ev_src[k])
			p2pg_drv.cuEventDestroy(st.ev_src[k]);
	if (st.stream_src)
		p2pg_drv.cuStreamDestroy(st.stream_src);
	on(st.ctx_dst);
	for (int k = 0; k < 2; k++)
		if (st.ev_dst[k])
			p2pg_drv.cuEventDestroy(st.ev_dst[k]);
	if (st.stream_dst)
		p2pg_drv.cuStreamDestroy(st.stream_dst);
	free(st.expect);
	free(st.back);
	p2pg_drv.cuCtxSetCurrent(st.saved);
	out->status = rc;
	out->elapsed_ms = now_ms() - t0;
}
