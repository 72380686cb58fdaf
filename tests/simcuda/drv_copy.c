/* Simulated driver: copies and memsets, synchronous and asynchronous, legacy and per-thread
 * default stream forms.
 *
 * Synchronous calls enqueue on the default stream of the current context (legacy, or the
 * per-thread stream for _ptds forms) and wait, so they order after earlier work exactly as the
 * real driver's do. Asynchronous copies follow the real rules for pageable host memory: a
 * pageable source is read before the call returns, a pageable destination makes the call
 * synchronous. */
#include "sim.h"

#include <stdlib.h>
#include <string.h>

enum mode { SYNC, ASYNC };

/* Picks the stream: a sync call uses the default stream of the current context (peer copies
 * too: with none current they fail, measured); an async call resolves its handle. sim_mu held. */
static CUresult pick_stream(enum mode m, CUstream h, bool pt, struct sim_stream **out)
{
	if (m == ASYNC)
		return sim_stream_resolve(h, pt, out);
	struct sim_ctx *ctx;
	CUresult r = sim_ctx_current(&ctx);
	if (r != CUDA_SUCCESS)
		return r;
	struct sim_stream *s = sim_stream_default(ctx, pt);
	if (!s)
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (s->capture != CU_STREAM_CAPTURE_STATUS_NONE) {
		s->capture = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	}
	*out = s;
	return CUDA_SUCCESS;
}

/* Submits op and, when wait is set, returns once it has run. Takes ownership of op. */
static CUresult run(struct sim_op *op, enum mode m, CUstream h, bool pt, bool wait)
{
	pthread_mutex_lock(&sim_mu);
	/* Taken under sim_mu: a stream's copies have increasing correlation IDs. */
	if (op->type == SIM_OP_COPY || op->type == SIM_OP_COPY3D) {
		op->tool.correlation_id = sim_next_correlation_id();
		op->tool.async = m == ASYNC;
	}
	struct sim_stream *s;
	CUresult r = pick_stream(m, h, pt, &s);
	if (r == CUDA_SUCCESS && op->type == SIM_OP_COPY &&
	    (!sim_va_accessible_from((uintptr_t)op->u.copy.src, op->u.copy.n, s->ctx->dev) ||
	     !sim_va_accessible_from((uintptr_t)op->u.copy.dst, op->u.copy.n, s->ctx->dev)))
		r = CUDA_ERROR_INVALID_VALUE;
	if (r != CUDA_SUCCESS) {
		sim_op_free(op);
	} else {
		r = sim_submit(s, op);
		if (r == CUDA_SUCCESS && (m == SYNC || wait) &&
		    s->capture == CU_STREAM_CAPTURE_STATUS_NONE)
			sim_wait_seq(s, s->submitted);
	}
	pthread_mutex_unlock(&sim_mu);
	return r;
}

/* A call with nothing to copy still needs what it would have needed to run. */
static CUresult nothing_to_do(enum mode m, CUstream h, bool pt)
{
	pthread_mutex_lock(&sim_mu);
	struct sim_stream *s;
	CUresult r = pick_stream(m, h, pt, &s);
	pthread_mutex_unlock(&sim_mu);
	return r;
}

static CUresult copy_linear(uintptr_t dst, uintptr_t src, size_t n, enum sim_ep_req dreq,
			    enum sim_ep_req sreq, enum mode m, CUstream h, bool pt)
{
	CUresult r = sim_ready();
	if (r != CUDA_SUCCESS)
		return r;
	if (n == 0)
		return nothing_to_do(m, h, pt);
	int dreg, sreg;
	r = sim_check_ep(dst, n, dreq, &dreg);
	if (r == CUDA_SUCCESS)
		r = sim_check_ep(src, n, sreq, &sreg);
	if (r != CUDA_SUCCESS)
		return r;
	struct sim_op *op = calloc(1, sizeof(*op));
	if (!op)
		return CUDA_ERROR_OUT_OF_MEMORY;
	op->type = SIM_OP_COPY;
	op->u.copy.dst = (void *)dst;
	op->u.copy.src = (const void *)src;
	op->u.copy.n = n;
	op->u.copy.dst_region = dreg;
	op->u.copy.src_region = sreg;
	bool host_to_host = dreg < 0 && sreg < 0;
	bool wait = dreg == SIM_REGION_PAGEABLE || host_to_host;
	if (m == ASYNC && !wait && sreg == SIM_REGION_PAGEABLE) {
		op->u.copy.staging = malloc(n);
		if (!op->u.copy.staging) {
			free(op);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
		memcpy(op->u.copy.staging, (const void *)src, n);
	}
	return run(op, m, h, pt, wait);
}

/* ---- generic, typed and peer linear copies ---- */

#define U(p) ((uintptr_t)(p))

SIM_API CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
	SIM_FAULT();
	return copy_linear(dst, src, ByteCount, SIM_EP_ANY, SIM_EP_ANY, SYNC, NULL, false);
}

SIM_API CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
	SIM_FAULT();
	return copy_linear(dst, src, ByteCount, SIM_EP_ANY, SIM_EP_ANY, SYNC, NULL, true);
}

SIM_API CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream)
{
	SIM_FAULT();
	return copy_linear(dst, src, ByteCount, SIM_EP_ANY, SIM_EP_ANY, ASYNC, hStream, false);
}

SIM_API CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount,
				    CUstream hStream)
{
	SIM_FAULT();
	return copy_linear(dst, src, ByteCount, SIM_EP_ANY, SIM_EP_ANY, ASYNC, hStream, true);
}

SIM_API CUresult cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
	SIM_FAULT();
	return copy_linear(dstDevice, U(srcHost), ByteCount, SIM_EP_DEVICE, SIM_EP_ANY, SYNC, NULL,
			   false);
}

SIM_API CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
	SIM_FAULT();
	return copy_linear(dstDevice, U(srcHost), ByteCount, SIM_EP_DEVICE, SIM_EP_ANY, SYNC, NULL,
			   true);
}

SIM_API CUresult cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
	SIM_FAULT();
	return copy_linear(U(dstHost), srcDevice, ByteCount, SIM_EP_ANY, SIM_EP_DEVICE, SYNC, NULL,
			   false);
}

SIM_API CUresult cuMemcpyDtoH_v2_ptds(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
	SIM_FAULT();
	return copy_linear(U(dstHost), srcDevice, ByteCount, SIM_EP_ANY, SIM_EP_DEVICE, SYNC, NULL,
			   true);
}

SIM_API CUresult cuMemcpyDtoD_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
{
	SIM_FAULT();
	return copy_linear(dstDevice, srcDevice, ByteCount, SIM_EP_DEVICE, SIM_EP_DEVICE, SYNC,
			   NULL, false);
}

SIM_API CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
				      size_t ByteCount)
{
	SIM_FAULT();
	return copy_linear(dstDevice, srcDevice, ByteCount, SIM_EP_DEVICE, SIM_EP_DEVICE, SYNC,
			   NULL, true);
}

SIM_API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount,
				      CUstream hStream)
{
	SIM_FAULT();
	return copy_linear(dstDevice, U(srcHost), ByteCount, SIM_EP_DEVICE, SIM_EP_ANY, ASYNC,
			   hStream, false);
}

SIM_API CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dstDevice, const void *srcHost,
					   size_t ByteCount, CUstream hStream)
{
	SIM_FAULT();
	return copy_linear(dstDevice, U(srcHost), ByteCount, SIM_EP_DEVICE, SIM_EP_ANY, ASYNC,
			   hStream, true);
}

SIM_API CUresult cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
				      CUstream hStream)
{
	SIM_FAULT();
	return copy_linear(U(dstHost), srcDevice, ByteCount, SIM_EP_ANY, SIM_EP_DEVICE, ASYNC,
			   hStream, false);
}

SIM_API CUresult cuMemcpyDtoHAsync_v2_ptsz(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
					   CUstream hStream)
{
	SIM_FAULT();
	return copy_linear(U(dstHost), srcDevice, ByteCount, SIM_EP_ANY, SIM_EP_DEVICE, ASYNC,
			   hStream, true);
}

SIM_API CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
				      size_t ByteCount, CUstream hStream)
{
	SIM_FAULT();
	return copy_linear(dstDevice, srcDevice, ByteCount, SIM_EP_DEVICE, SIM_EP_DEVICE, ASYNC,
			   hStream, false);
}

SIM_API CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
					   size_t ByteCount, CUstream hStream)
{
	SIM_FAULT();
	return copy_linear(dstDevice, srcDevice, ByteCount, SIM_EP_DEVICE, SIM_EP_DEVICE, ASYNC,
			   hStream, true);
}

static CUresult peer(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx, size_t n,
		     enum mode m, CUstream h, bool pt)
{
	struct sim_ctx *d, *s;
	CUresult r = sim_ctx_check(dctx, &d);
	if (r == CUDA_SUCCESS)
		r = sim_ctx_check(sctx, &s);
	if (r != CUDA_SUCCESS)
		return r;
	return copy_linear(dst, src, n, SIM_EP_DEVICE, SIM_EP_DEVICE, m, h, pt);
}

SIM_API CUresult cuMemcpyPeer(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
			      CUcontext srcContext, size_t ByteCount)
{
	SIM_FAULT();
	return peer(dstDevice, dstContext, srcDevice, srcContext, ByteCount, SYNC, NULL, false);
}

SIM_API CUresult cuMemcpyPeer_ptds(CUdeviceptr dstDevice, CUcontext dstContext,
				   CUdeviceptr srcDevice, CUcontext srcContext, size_t ByteCount)
{
	SIM_FAULT();
	return peer(dstDevice, dstContext, srcDevice, srcContext, ByteCount, SYNC, NULL, true);
}

SIM_API CUresult cuMemcpyPeerAsync(CUdeviceptr dstDevice, CUcontext dstContext,
				   CUdeviceptr srcDevice, CUcontext srcContext, size_t ByteCount,
				   CUstream hStream)
{
	SIM_FAULT();
	return peer(dstDevice, dstContext, srcDevice, srcContext, ByteCount, ASYNC, hStream, false);
}

SIM_API CUresult cuMemcpyPeerAsync_ptsz(CUdeviceptr dstDevice, CUcontext dstContext,
					CUdeviceptr srcDevice, CUcontext srcContext,
					size_t ByteCount, CUstream hStream)
{
	SIM_FAULT();
	return peer(dstDevice, dstContext, srcDevice, srcContext, ByteCount, ASYNC, hStream, true);
}

/* ---- pitched copies (2D, 3D, 3D peer): linear memory only ---- */

struct side {
	CUmemorytype type;
	uintptr_t host, dev;
	CUarray array;
	CUcontext ctx;
	size_t x, y, z, pitch, height;
};

struct desc {
	struct side src, dst;
	size_t width, height, depth;
};

static CUresult resolve_side(const struct side *sd, const struct desc *d, uintptr_t *start,
			     size_t *pitch, size_t *slice, int *region)
{
	uintptr_t p;
	enum sim_ep_req req;
	switch (sd->type) {
	case CU_MEMORYTYPE_HOST:
		p = sd->host;
		req = SIM_EP_ANY;
		break;
	case CU_MEMORYTYPE_DEVICE:
		p = sd->dev;
		req = SIM_EP_DEVICE;
		break;
	case CU_MEMORYTYPE_UNIFIED:
		p = sd->dev;
		req = SIM_EP_ANY;
		break;
	case CU_MEMORYTYPE_ARRAY:
		return CUDA_ERROR_NOT_SUPPORTED;
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
	if (sd->ctx) {
		struct sim_ctx *c;
		CUresult r = sim_ctx_check(sd->ctx, &c);
		if (r != CUDA_SUCCESS)
			return r;
	}
	size_t pt = sd->pitch ? sd->pitch : sd->x + d->width;
	size_t ht = sd->height ? sd->height : sd->y + d->height;
	if ((d->height > 1 || d->depth > 1) && pt < sd->x + d->width)
		return CUDA_ERROR_INVALID_VALUE;
	if (d->depth > 1 && ht < sd->y + d->height)
		return CUDA_ERROR_INVALID_VALUE;
	size_t sl = pt * ht;
	uintptr_t first = p + sd->z * sl + sd->y * pt + sd->x;
	size_t span = (d->depth - 1) * sl + (d->height - 1) * pt + d->width;
	CUresult r = sim_check_ep(first, span, req, region);
	if (r != CUDA_SUCCESS)
		return r;
	*start = first;
	*pitch = pt;
	*slice = sl;
	return CUDA_SUCCESS;
}

static CUresult copy_pitched(const struct desc *d, enum mode m, CUstream h, bool pt)
{
	CUresult r = sim_ready();
	if (r != CUDA_SUCCESS)
		return r;
	if (d->width == 0 || d->height == 0 || d->depth == 0)
		return nothing_to_do(m, h, pt);
	struct sim_op *op = calloc(1, sizeof(*op));
	if (!op)
		return CUDA_ERROR_OUT_OF_MEMORY;
	op->type = SIM_OP_COPY3D;
	struct sim_3d *p = &op->u.c3.p;
	r = resolve_side(&d->src, d, &p->src, &p->src_pitch, &p->src_slice, &op->u.c3.src_region);
	if (r == CUDA_SUCCESS)
		r = resolve_side(&d->dst, d, &p->dst, &p->dst_pitch, &p->dst_slice,
				 &op->u.c3.dst_region);
	if (r != CUDA_SUCCESS) {
		free(op);
		return r;
	}
	p->width = d->width;
	p->height = d->height;
	p->depth = d->depth;
	/* Pageable memory on either side: the copy completes before the call returns. */
	bool wait = op->u.c3.src_region == SIM_REGION_PAGEABLE ||
		    op->u.c3.dst_region == SIM_REGION_PAGEABLE;
	return run(op, m, h, pt, wait);
}

static void from_2d(const CUDA_MEMCPY2D *c, struct desc *d)
{
	memset(d, 0, sizeof(*d));
	d->src = (struct side){c->srcMemoryType,
			       U(c->srcHost),
			       c->srcDevice,
			       c->srcArray,
			       NULL,
			       c->srcXInBytes,
			       c->srcY,
			       0,
			       c->srcPitch,
			       0};
	d->dst = (struct side){c->dstMemoryType,
			       U(c->dstHost),
			       c->dstDevice,
			       c->dstArray,
			       NULL,
			       c->dstXInBytes,
			       c->dstY,
			       0,
			       c->dstPitch,
			       0};
	d->width = c->WidthInBytes;
	d->height = c->Height;
	d->depth = 1;
}

static void from_3d(const CUDA_MEMCPY3D *c, struct desc *d)
{
	memset(d, 0, sizeof(*d));
	d->src =
	    (struct side){c->srcMemoryType, U(c->srcHost), c->srcDevice, c->srcArray, NULL,
			  c->srcXInBytes,   c->srcY,	   c->srcZ,	 c->srcPitch, c->srcHeight};
	d->dst =
	    (struct side){c->dstMemoryType, U(c->dstHost), c->dstDevice, c->dstArray, NULL,
			  c->dstXInBytes,   c->dstY,	   c->dstZ,	 c->dstPitch, c->dstHeight};
	d->width = c->WidthInBytes;
	d->height = c->Height;
	d->depth = c->Depth;
}

static void from_3d_peer(const CUDA_MEMCPY3D_PEER *c, struct desc *d)
{
	memset(d, 0, sizeof(*d));
	d->src =
	    (struct side){c->srcMemoryType, U(c->srcHost), c->srcDevice, c->srcArray, c->srcContext,
			  c->srcXInBytes,   c->srcY,	   c->srcZ,	 c->srcPitch, c->srcHeight};
	d->dst =
	    (struct side){c->dstMemoryType, U(c->dstHost), c->dstDevice, c->dstArray, c->dstContext,
			  c->dstXInBytes,   c->dstY,	   c->dstZ,	 c->dstPitch, c->dstHeight};
	d->width = c->WidthInBytes;
	d->height = c->Height;
	d->depth = c->Depth;
}

SIM_API CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D *pCopy)
{
	SIM_FAULT();
	if (!pCopy)
		return CUDA_ERROR_INVALID_VALUE;
	struct desc d;
	from_2d(pCopy, &d);
	return copy_pitched(&d, SYNC, NULL, false);
}

SIM_API CUresult cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D *pCopy)
{
	SIM_FAULT();
	if (!pCopy)
		return CUDA_ERROR_INVALID_VALUE;
	struct desc d;
	from_2d(pCopy, &d);
	return copy_pitched(&d, SYNC, NULL, true);
}

SIM_API CUresult cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D *pCopy)
{
	SIM_FAULT();
	if (!pCopy)
		return CUDA_ERROR_INVALID_VALUE;
	struct desc d;
	from_2d(pCopy, &d);
	return copy_pitched(&d, SYNC, NULL, false);
}

SIM_API CUresult cuMemcpy2DUnaligned_v2_ptds(const CUDA_MEMCPY2D *pCopy)
{
	SIM_FAULT();
	if (!pCopy)
		return CUDA_ERROR_INVALID_VALUE;
	struct desc d;
	from_2d(pCopy, &d);
	return copy_pitched(&d, SYNC, NULL, true);
}

SIM_API CUresult cuMemcpy3D_v2(const CUDA_MEMCPY3D *pCopy)
{
	SIM_FAULT();
	if (!pCopy)
		return CUDA_ERROR_INVALID_VALUE;
	struct desc d;
	from_3d(pCopy, &d);
	return copy_pitched(&d, SYNC, NULL, false);
}

SIM_API CUresult cuMemcpy3D_v2_ptds(const CUDA_MEMCPY3D *pCopy)
{
	SIM_FAULT();
	if (!pCopy)
		return CUDA_ERROR_INVALID_VALUE;
	struct desc d;
	from_3d(pCopy, &d);
	return copy_pitched(&d, SYNC, NULL, true);
}

SIM_API CUresult cuMemcpy3DPeer(const CUDA_MEMCPY3D_PEER *pCopy)
{
	SIM_FAULT();
	if (!pCopy)
		return CUDA_ERROR_INVALID_VALUE;
	struct desc d;
	from_3d_peer(pCopy, &d);
	return copy_pitched(&d, SYNC, NULL, false);
}

SIM_API CUresult cuMemcpy3DPeer_ptds(const CUDA_MEMCPY3D_PEER *pCopy)
{
	SIM_FAULT();
	if (!pCopy)
		return CUDA_ERROR_INVALID_VALUE;
	struct desc d;
	from_3d_peer(pCopy, &d);
	return copy_pitched(&d, SYNC, NULL, true);
}

SIM_API CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *pCopy, CUstream hStream)
{
	SIM_FAULT();
	if (!pCopy)
		return CUDA_ERROR_INVALID_VALUE;
	struct desc d;
	from_2d(pCopy, &d);
	return copy_pitched(&d, ASYNC, hStream, false);
}

SIM_API CUresult cuMemcpy2DAsync_v2_ptsz(const CUDA_MEMCPY2D *pCopy, CUstream hStream)
{
	SIM_FAULT();
	if (!pCopy)
		return CUDA_ERROR_INVALID_VALUE;
	struct desc d;
	from_2d(pCopy, &d);
	return copy_pitched(&d, ASYNC, hStream, true);
}

SIM_API CUresult cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D *pCopy, CUstream hStream)
{
	SIM_FAULT();
	if (!pCopy)
		return CUDA_ERROR_INVALID_VALUE;
	struct desc d;
	from_3d(pCopy, &d);
	return copy_pitched(&d, ASYNC, hStream, false);
}

SIM_API CUresult cuMemcpy3DAsync_v2_ptsz(const CUDA_MEMCPY3D *pCopy, CUstream hStream)
{
	SIM_FAULT();
	if (!pCopy)
		return CUDA_ERROR_INVALID_VALUE;
	struct desc d;
	from_3d(pCopy, &d);
	return copy_pitched(&d, ASYNC, hStream, true);
}

SIM_API CUresult cuMemcpy3DPeerAsync(const CUDA_MEMCPY3D_PEER *pCopy, CUstream hStream)
{
	SIM_FAULT();
	if (!pCopy)
		return CUDA_ERROR_INVALID_VALUE;
	struct desc d;
	from_3d_peer(pCopy, &d);
	return copy_pitched(&d, ASYNC, hStream, false);
}

SIM_API CUresult cuMemcpy3DPeerAsync_ptsz(const CUDA_MEMCPY3D_PEER *pCopy, CUstream hStream)
{
	SIM_FAULT();
	if (!pCopy)
		return CUDA_ERROR_INVALID_VALUE;
	struct desc d;
	from_3d_peer(pCopy, &d);
	return copy_pitched(&d, ASYNC, hStream, true);
}

/* ---- batches ---- */

static CUresult batch(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
		      CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs,
		      size_t *failIdx, CUstream h, bool pt)
{
	if (failIdx)
		*failIdx = SIZE_MAX;
	CUresult r = sim_ready();
	if (r != CUDA_SUCCESS)
		return r;
	/* The batch API refuses the legacy default stream. */
	if (h == CU_STREAM_LEGACY || (h == NULL && !pt))
		return CUDA_ERROR_INVALID_VALUE;
	if (!dsts || !srcs || !sizes || count == 0 || !attrs || !attrsIdxs || numAttrs == 0 ||
	    numAttrs > count || attrsIdxs[0] != 0)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t k = 0; k < numAttrs; k++) {
		if (attrs[k].srcAccessOrder < CU_MEMCPY_SRC_ACCESS_ORDER_STREAM ||
		    attrs[k].srcAccessOrder > CU_MEMCPY_SRC_ACCESS_ORDER_ANY)
			return CUDA_ERROR_INVALID_VALUE;
		if (k > 0 && attrsIdxs[k] <= attrsIdxs[k - 1])
			return CUDA_ERROR_INVALID_VALUE;
		if (attrsIdxs[k] >= count)
			return CUDA_ERROR_INVALID_VALUE;
	}
	struct sim_op **ops = calloc(count, sizeof(*ops));
	if (!ops)
		return CUDA_ERROR_OUT_OF_MEMORY;
	size_t k = 0;
	bool wait = false;
	for (size_t i = 0; i < count && r == CUDA_SUCCESS; i++) {
		while (k + 1 < numAttrs && attrsIdxs[k + 1] <= i)
			k++;
		int dreg, sreg;
		if (sizes[i] == 0)
			continue;
		r = sim_check_ep(dsts[i], sizes[i], SIM_EP_ANY, &dreg);
		if (r == CUDA_SUCCESS)
			r = sim_check_ep(srcs[i], sizes[i], SIM_EP_ANY, &sreg);
		if (r != CUDA_SUCCESS) {
			if (failIdx)
				*failIdx = i;
			break;
		}
		struct sim_op *op = ops[i] = calloc(1, sizeof(*op));
		if (!op) {
			r = CUDA_ERROR_OUT_OF_MEMORY;
			break;
		}
		op->type = SIM_OP_COPY;
		op->u.copy.dst = (void *)(uintptr_t)dsts[i];
		op->u.copy.src = (const void *)(uintptr_t)srcs[i];
		op->u.copy.n = sizes[i];
		op->u.copy.dst_region = dreg;
		op->u.copy.src_region = sreg;
		if (dreg == SIM_REGION_PAGEABLE || (dreg < 0 && sreg < 0))
			wait = true;
		else if (sreg == SIM_REGION_PAGEABLE ||
			 attrs[k].srcAccessOrder == CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL) {
			op->u.copy.staging = malloc(sizes[i]);
			if (!op->u.copy.staging) {
				r = CUDA_ERROR_OUT_OF_MEMORY;
				break;
			}
			memcpy(op->u.copy.staging, op->u.copy.src, sizes[i]);
		}
	}
	pthread_mutex_lock(&sim_mu);
	/* One call, one correlation ID for all its copies. */
	uint32_t correlation_id = sim_next_correlation_id();
	struct sim_stream *s = NULL;
	if (r == CUDA_SUCCESS)
		r = sim_stream_resolve(h, pt, &s);
	for (size_t i = 0; i < count; i++) {
		if (!ops[i])
			continue;
		ops[i]->tool.correlation_id = correlation_id;
		ops[i]->tool.async = true;
		if (r == CUDA_SUCCESS)
			r = sim_submit(s, ops[i]);
		else
			sim_op_free(ops[i]);
	}
	if (r == CUDA_SUCCESS && wait && s->capture == CU_STREAM_CAPTURE_STATUS_NONE)
		sim_wait_seq(s, s->submitted);
	pthread_mutex_unlock(&sim_mu);
	free(ops);
	return r;
}

SIM_API CUresult cuMemcpyBatchAsync(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes,
				    size_t count, CUmemcpyAttributes *attrs, size_t *attrsIdxs,
				    size_t numAttrs, size_t *failIdx, CUstream hStream)
{
	SIM_FAULT();
	return batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, failIdx, hStream, false);
}

SIM_API CUresult cuMemcpyBatchAsync_ptsz(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes,
					 size_t count, CUmemcpyAttributes *attrs, size_t *attrsIdxs,
					 size_t numAttrs, size_t *failIdx, CUstream hStream)
{
	SIM_FAULT();
	return batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, failIdx, hStream, true);
}

SIM_API CUresult cuMemcpyBatchAsync_v2(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes,
				       size_t count, CUmemcpyAttributes *attrs, size_t *attrsIdxs,
				       size_t numAttrs, CUstream hStream)
{
	SIM_FAULT();
	return batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, NULL, hStream, false);
}

SIM_API CUresult cuMemcpyBatchAsync_v2_ptsz(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes,
					    size_t count, CUmemcpyAttributes *attrs,
					    size_t *attrsIdxs, size_t numAttrs, CUstream hStream)
{
	SIM_FAULT();
	return batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, NULL, hStream, true);
}

/* ---- memsets ---- */

static CUresult memset_op(CUdeviceptr dst, uint32_t value, unsigned elem, size_t n, enum mode m,
			  CUstream h, bool pt)
{
	CUresult r = sim_ready();
	if (r != CUDA_SUCCESS)
		return r;
	if (n == 0)
		return nothing_to_do(m, h, pt);
	int reg;
	if (dst % elem != 0 || n > SIZE_MAX / elem)
		return CUDA_ERROR_INVALID_VALUE;
	r = sim_check_ep(dst, n * elem, SIM_EP_DEVICE, &reg);
	if (r != CUDA_SUCCESS)
		return r;
	struct sim_op *op = calloc(1, sizeof(*op));
	if (!op)
		return CUDA_ERROR_OUT_OF_MEMORY;
	op->type = SIM_OP_MEMSET;
	op->u.set.dst = (void *)(uintptr_t)dst;
	op->u.set.value = value;
	op->u.set.elem = elem;
	op->u.set.count = n;
	return run(op, m, h, pt, false);
}

SIM_API CUresult cuMemsetD8_v2(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{
	SIM_FAULT();
	return memset_op(dstDevice, uc, 1, N, SYNC, NULL, false);
}

SIM_API CUresult cuMemsetD8_v2_ptds(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{
	SIM_FAULT();
	return memset_op(dstDevice, uc, 1, N, SYNC, NULL, true);
}

SIM_API CUresult cuMemsetD16_v2(CUdeviceptr dstDevice, unsigned short us, size_t N)
{
	SIM_FAULT();
	return memset_op(dstDevice, us, 2, N, SYNC, NULL, false);
}

SIM_API CUresult cuMemsetD16_v2_ptds(CUdeviceptr dstDevice, unsigned short us, size_t N)
{
	SIM_FAULT();
	return memset_op(dstDevice, us, 2, N, SYNC, NULL, true);
}

SIM_API CUresult cuMemsetD32_v2(CUdeviceptr dstDevice, unsigned int ui, size_t N)
{
	SIM_FAULT();
	return memset_op(dstDevice, ui, 4, N, SYNC, NULL, false);
}

SIM_API CUresult cuMemsetD32_v2_ptds(CUdeviceptr dstDevice, unsigned int ui, size_t N)
{
	SIM_FAULT();
	return memset_op(dstDevice, ui, 4, N, SYNC, NULL, true);
}

SIM_API CUresult cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N,
				 CUstream hStream)
{
	SIM_FAULT();
	return memset_op(dstDevice, uc, 1, N, ASYNC, hStream, false);
}

SIM_API CUresult cuMemsetD8Async_ptsz(CUdeviceptr dstDevice, unsigned char uc, size_t N,
				      CUstream hStream)
{
	SIM_FAULT();
	return memset_op(dstDevice, uc, 1, N, ASYNC, hStream, true);
}

SIM_API CUresult cuMemsetD16Async(CUdeviceptr dstDevice, unsigned short us, size_t N,
				  CUstream hStream)
{
	SIM_FAULT();
	return memset_op(dstDevice, us, 2, N, ASYNC, hStream, false);
}

SIM_API CUresult cuMemsetD16Async_ptsz(CUdeviceptr dstDevice, unsigned short us, size_t N,
				       CUstream hStream)
{
	SIM_FAULT();
	return memset_op(dstDevice, us, 2, N, ASYNC, hStream, true);
}

SIM_API CUresult cuMemsetD32Async(CUdeviceptr dstDevice, unsigned int ui, size_t N,
				  CUstream hStream)
{
	SIM_FAULT();
	return memset_op(dstDevice, ui, 4, N, ASYNC, hStream, false);
}

SIM_API CUresult cuMemsetD32Async_ptsz(CUdeviceptr dstDevice, unsigned int ui, size_t N,
				       CUstream hStream)
{
	SIM_FAULT();
	return memset_op(dstDevice, ui, 4, N, ASYNC, hStream, true);
}
