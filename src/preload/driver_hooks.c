/* SPDX-License-Identifier: MIT */
/*
 * The driver API entry points, by their ABI names. The same functions are what dlsym and
 * cuGetProcAddress hand out for these symbols.
 */
#include <cuda.h>
#include <errno.h>

#include "driver_hooks.h"
#include "entry.h"

#define DRIVER_REAL(type, name) P2PG_REAL(type, name, P2PG_LIB_DRIVER)

typedef CUresult(CUDAAPI *init_fn)(unsigned int);
typedef CUresult(CUDAAPI *can_access_fn)(int *, CUdevice, CUdevice);
typedef CUresult(CUDAAPI *p2p_attr_fn)(int *, CUdevice_P2PAttribute, CUdevice, CUdevice);
typedef CUresult(CUDAAPI *ctx_enable_fn)(CUcontext, unsigned int);
typedef CUresult(CUDAAPI *ctx_disable_fn)(CUcontext);
typedef CUresult(CUDAAPI *memcpy_peer_fn)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t);
typedef CUresult(CUDAAPI *memcpy_peer_async_fn)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext,
						size_t, CUstream);
typedef CUresult(CUDAAPI *memcpy_3d_peer_fn)(const CUDA_MEMCPY3D_PEER *);
typedef CUresult(CUDAAPI *memcpy_3d_peer_async_fn)(const CUDA_MEMCPY3D_PEER *, CUstream);
typedef CUresult(CUDAAPI *memcpy_fn)(CUdeviceptr, CUdeviceptr, size_t);
typedef CUresult(CUDAAPI *memcpy_async_fn)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
typedef CUresult(CUDAAPI *batch_v2_fn)(CUdeviceptr *, CUdeviceptr *, size_t *, size_t,
				       CUmemcpyAttributes *, size_t *, size_t, CUstream);
typedef CUresult(CUDAAPI *batch_v1_fn)(CUdeviceptr *, CUdeviceptr *, size_t *, size_t,
				       CUmemcpyAttributes *, size_t *, size_t, size_t *, CUstream);

#define REAL_SLOT(name) void *_Atomic p2pg_real_##name;
P2PG_DRIVER_HOOKS(REAL_SLOT)
#undef REAL_SLOT

/* ---- the driver's initialisation: the guard's moment to start CUPTI, before it ---- */

P2PG_EXPORT CUresult CUDAAPI cuInit(unsigned int Flags)
{
	init_fn real = DRIVER_REAL(init_fn, cuInit);
	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	struct p2pg_scope scope;
	p2pg_enter(&scope); /* the guard's own initialisation, if this is its first call */
	p2pg_core_driver_initialising();
	CUresult status = P2PG_PASS_THROUGH(scope, real(Flags));
	int saved = errno;
	p2pg_core_driver_initialised(status);
	errno = saved;
	return status;
}

/* ---- peer access ---- */

P2PG_EXPORT CUresult CUDAAPI cuDeviceCanAccessPeer(int *canAccessPeer, CUdevice dev,
						   CUdevice peerDev)
{
	can_access_fn real = DRIVER_REAL(can_access_fn, cuDeviceCanAccessPeer);
	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	struct p2pg_scope scope;
	if (!p2pg_enter(&scope))
		return P2PG_PASS_THROUGH(scope, real(canAccessPeer, dev, peerDev));
	struct p2pg_peer p = {.api = P2PG_API_cuDeviceCanAccessPeer,
			      .kind = P2PG_PEER_CAN_ACCESS,
			      .device = dev,
			      .peer = peerDev,
			      .value = canAccessPeer};
	CUresult rc = P2PG_PEER(scope, p, CUresult, real(canAccessPeer, dev, peerDev));
	p2pg_leave(&scope);
	return rc;
}

P2PG_EXPORT CUresult CUDAAPI cuDeviceGetP2PAttribute(int *value, CUdevice_P2PAttribute attrib,
						     CUdevice srcDevice, CUdevice dstDevice)
{
	p2p_attr_fn real = DRIVER_REAL(p2p_attr_fn, cuDeviceGetP2PAttribute);
	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	struct p2pg_scope scope;
	if (!p2pg_enter(&scope))
		return P2PG_PASS_THROUGH(scope, real(value, attrib, srcDevice, dstDevice));
	struct p2pg_peer p = {.api = P2PG_API_cuDeviceGetP2PAttribute,
			      .kind = P2PG_PEER_ATTRIBUTE,
			      .device = srcDevice,
			      .peer = dstDevice,
			      .attribute = (int)attrib,
			      .value = value};
	CUresult rc = P2PG_PEER(scope, p, CUresult, real(value, attrib, srcDevice, dstDevice));
	p2pg_leave(&scope);
	return rc;
}

P2PG_EXPORT CUresult CUDAAPI cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int Flags)
{
	ctx_enable_fn real = DRIVER_REAL(ctx_enable_fn, cuCtxEnablePeerAccess);
	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	struct p2pg_scope scope;
	if (!p2pg_enter(&scope))
		return P2PG_PASS_THROUGH(scope, real(peerContext, Flags));
	struct p2pg_peer p = {.api = P2PG_API_cuCtxEnablePeerAccess,
			      .kind = P2PG_PEER_ENABLE,
			      .device = p2pg_current_device(),
			      .peer = peerContext ? p2pg_context_device(peerContext) : -1,
			      .flags = Flags};
	CUresult rc = P2PG_PEER(scope, p, CUresult, real(peerContext, Flags));
	p2pg_leave(&scope);
	return rc;
}

P2PG_EXPORT CUresult CUDAAPI cuCtxDisablePeerAccess(CUcontext peerContext)
{
	ctx_disable_fn real = DRIVER_REAL(ctx_disable_fn, cuCtxDisablePeerAccess);
	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	struct p2pg_scope scope;
	if (!p2pg_enter(&scope))
		return P2PG_PASS_THROUGH(scope, real(peerContext));
	struct p2pg_peer p = {.api = P2PG_API_cuCtxDisablePeerAccess,
			      .kind = P2PG_PEER_DISABLE,
			      .device = p2pg_current_device(),
			      .peer = peerContext ? p2pg_context_device(peerContext) : -1};
	CUresult rc = P2PG_PEER(scope, p, CUresult, real(peerContext));
	p2pg_leave(&scope);
	return rc;
}

/* ---- explicit peer copies ---- */

static CUresult memcpy_peer(unsigned api, memcpy_peer_fn real, bool per_thread, CUdeviceptr dst,
			    CUcontext dstCtx, CUdeviceptr src, CUcontext srcCtx, size_t n)
{
	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	struct p2pg_scope scope;
	if (!p2pg_enter(&scope))
		return P2PG_PASS_THROUGH(scope, real(dst, dstCtx, src, srcCtx, n));
	struct p2pg_copy c = {.api = api,
			      .dst = dst,
			      .src = src,
			      .dst_device = p2pg_context_device(dstCtx),
			      .src_device = p2pg_context_device(srcCtx),
			      .bytes = n,
			      .per_thread = per_thread};
	return P2PG_COPY(scope, c, CUresult, real(dst, dstCtx, src, srcCtx, n));
}

static CUresult memcpy_peer_async(unsigned api, memcpy_peer_async_fn real, bool per_thread,
				  CUdeviceptr dst, CUcontext dstCtx, CUdeviceptr src,
				  CUcontext srcCtx, size_t n, CUstream stream)
{
	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	struct p2pg_scope scope;
	if (!p2pg_enter(&scope))
		return P2PG_PASS_THROUGH(scope, real(dst, dstCtx, src, srcCtx, n, stream));
	struct p2pg_copy c = {.api = api,
			      .dst = dst,
			      .src = src,
			      .dst_device = p2pg_context_device(dstCtx),
			      .src_device = p2pg_context_device(srcCtx),
			      .bytes = n,
			      .stream = stream,
			      .async = true,
			      .per_thread = per_thread};
	return P2PG_COPY(scope, c, CUresult, real(dst, dstCtx, src, srcCtx, n, stream));
}

P2PG_EXPORT CUresult CUDAAPI cuMemcpyPeer(CUdeviceptr dstDevice, CUcontext dstContext,
					  CUdeviceptr srcDevice, CUcontext srcContext,
					  size_t ByteCount)
{
	return memcpy_peer(P2PG_API_cuMemcpyPeer, DRIVER_REAL(memcpy_peer_fn, cuMemcpyPeer), false,
			   dstDevice, dstContext, srcDevice, srcContext, ByteCount);
}

P2PG_EXPORT CUresult CUDAAPI cuMemcpyPeer_ptds(CUdeviceptr dstDevice, CUcontext dstContext,
					       CUdeviceptr srcDevice, CUcontext srcContext,
					       size_t ByteCount)
{
	return memcpy_peer(P2PG_API_cuMemcpyPeer_ptds,
			   DRIVER_REAL(memcpy_peer_fn, cuMemcpyPeer_ptds), true, dstDevice,
			   dstContext, srcDevice, srcContext, ByteCount);
}

P2PG_EXPORT CUresult CUDAAPI cuMemcpyPeerAsync(CUdeviceptr dstDevice, CUcontext dstContext,
					       CUdeviceptr srcDevice, CUcontext srcContext,
					       size_t ByteCount, CUstream hStream)
{
	return memcpy_peer_async(P2PG_API_cuMemcpyPeerAsync,
				 DRIVER_REAL(memcpy_peer_async_fn, cuMemcpyPeerAsync), false,
				 dstDevice, dstContext, srcDevice, srcContext, ByteCount, hStream);
}

P2PG_EXPORT CUresult CUDAAPI cuMemcpyPeerAsync_ptsz(CUdeviceptr dstDevice, CUcontext dstContext,
						    CUdeviceptr srcDevice, CUcontext srcContext,
						    size_t ByteCount, CUstream hStream)
{
	return memcpy_peer_async(P2PG_API_cuMemcpyPeerAsync_ptsz,
				 DRIVER_REAL(memcpy_peer_async_fn, cuMemcpyPeerAsync_ptsz), true,
				 dstDevice, dstContext, srcDevice, srcContext, ByteCount, hStream);
}

static size_t extent_bytes(const CUDA_MEMCPY3D_PEER *p)
{
	return p->WidthInBytes * (p->Height ? p->Height : 1) * (p->Depth ? p->Depth : 1);
}

static CUresult memcpy_3d_peer(unsigned api, memcpy_3d_peer_fn real, bool per_thread,
			       const CUDA_MEMCPY3D_PEER *p)
{
	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	struct p2pg_scope scope;
	if (!p2pg_enter(&scope) || !p)
		return P2PG_PASS_THROUGH(scope, real(p));
	struct p2pg_copy c = {.api = api,
			      .dst = p->dstDevice,
			      .src = p->srcDevice,
			      .dst_device = p2pg_context_device(p->dstContext),
			      .src_device = p2pg_context_device(p->srcContext),
			      .bytes = extent_bytes(p),
			      .per_thread = per_thread,
			      .not_stageable = true};
	return P2PG_COPY(scope, c, CUresult, real(p));
}

static CUresult memcpy_3d_peer_async(unsigned api, memcpy_3d_peer_async_fn real, bool per_thread,
				     const CUDA_MEMCPY3D_PEER *p, CUstream stream)
{
	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	struct p2pg_scope scope;
	if (!p2pg_enter(&scope) || !p)
		return P2PG_PASS_THROUGH(scope, real(p, stream));
	struct p2pg_copy c = {.api = api,
			      .dst = p->dstDevice,
			      .src = p->srcDevice,
			      .dst_device = p2pg_context_device(p->dstContext),
			      .src_device = p2pg_context_device(p->srcContext),
			      .bytes = extent_bytes(p),
			      .stream = stream,
			      .async = true,
			      .per_thread = per_thread,
			      .not_stageable = true};
	return P2PG_COPY(scope, c, CUresult, real(p, stream));
}

P2PG_EXPORT CUresult CUDAAPI cuMemcpy3DPeer(const CUDA_MEMCPY3D_PEER *pCopy)
{
	return memcpy_3d_peer(P2PG_API_cuMemcpy3DPeer,
			      DRIVER_REAL(memcpy_3d_peer_fn, cuMemcpy3DPeer), false, pCopy);
}

P2PG_EXPORT CUresult CUDAAPI cuMemcpy3DPeer_ptds(const CUDA_MEMCPY3D_PEER *pCopy)
{
	return memcpy_3d_peer(P2PG_API_cuMemcpy3DPeer_ptds,
			      DRIVER_REAL(memcpy_3d_peer_fn, cuMemcpy3DPeer_ptds), true, pCopy);
}

P2PG_EXPORT CUresult CUDAAPI cuMemcpy3DPeerAsync(const CUDA_MEMCPY3D_PEER *pCopy, CUstream hStream)
{
	return memcpy_3d_peer_async(P2PG_API_cuMemcpy3DPeerAsync,
				    DRIVER_REAL(memcpy_3d_peer_async_fn, cuMemcpy3DPeerAsync),
				    false, pCopy, hStream);
}

P2PG_EXPORT CUresult CUDAAPI cuMemcpy3DPeerAsync_ptsz(const CUDA_MEMCPY3D_PEER *pCopy,
						      CUstream hStream)
{
	return memcpy_3d_peer_async(P2PG_API_cuMemcpy3DPeerAsync_ptsz,
				    DRIVER_REAL(memcpy_3d_peer_async_fn, cuMemcpy3DPeerAsync_ptsz),
				    true, pCopy, hStream);
}

/* ---- generic copies: recorded when they cross devices ---- */

static CUresult memcpy_generic(unsigned api, memcpy_fn real, bool per_thread, bool device_pointers,
			       CUdeviceptr dst, CUdeviceptr src, size_t n)
{
	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	struct p2pg_scope scope;
	if (!p2pg_enter(&scope))
		return P2PG_PASS_THROUGH(scope, real(dst, src, n));
	struct p2pg_copy c = {.api = api,
			      .dst = dst,
			      .src = src,
			      .dst_device = -1,
			      .src_device = -1,
			      .bytes = n,
			      .per_thread = per_thread,
			      .device_pointers = device_pointers};
	return P2PG_COPY(scope, c, CUresult, real(dst, src, n));
}

static CUresult memcpy_generic_async(unsigned api, memcpy_async_fn real, bool per_thread,
				     bool device_pointers, CUdeviceptr dst, CUdeviceptr src,
				     size_t n, CUstream stream)
{
	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	struct p2pg_scope scope;
	if (!p2pg_enter(&scope))
		return P2PG_PASS_THROUGH(scope, real(dst, src, n, stream));
	struct p2pg_copy c = {.api = api,
			      .dst = dst,
			      .src = src,
			      .dst_device = -1,
			      .src_device = -1,
			      .bytes = n,
			      .stream = stream,
			      .async = true,
			      .per_thread = per_thread,
			      .device_pointers = device_pointers};
	return P2PG_COPY(scope, c, CUresult, real(dst, src, n, stream));
}

P2PG_EXPORT CUresult CUDAAPI cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
	return memcpy_generic(P2PG_API_cuMemcpy, DRIVER_REAL(memcpy_fn, cuMemcpy), false, false,
			      dst, src, ByteCount);
}

P2PG_EXPORT CUresult CUDAAPI cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
	return memcpy_generic(P2PG_API_cuMemcpy_ptds, DRIVER_REAL(memcpy_fn, cuMemcpy_ptds), true,
			      false, dst, src, ByteCount);
}

P2PG_EXPORT CUresult CUDAAPI cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount,
					   CUstream hStream)
{
	return memcpy_generic_async(P2PG_API_cuMemcpyAsync,
				    DRIVER_REAL(memcpy_async_fn, cuMemcpyAsync), false, false, dst,
				    src, ByteCount, hStream);
}

P2PG_EXPORT CUresult CUDAAPI cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount,
						CUstream hStream)
{
	return memcpy_generic_async(P2PG_API_cuMemcpyAsync_ptsz,
				    DRIVER_REAL(memcpy_async_fn, cuMemcpyAsync_ptsz), true, false,
				    dst, src, ByteCount, hStream);
}

P2PG_EXPORT CUresult CUDAAPI cuMemcpyDtoD_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
					     size_t ByteCount)
{
	return memcpy_generic(P2PG_API_cuMemcpyDtoD_v2, DRIVER_REAL(memcpy_fn, cuMemcpyDtoD_v2),
			      false, true, dstDevice, srcDevice, ByteCount);
}

P2PG_EXPORT CUresult CUDAAPI cuMemcpyDtoD_v2_ptds(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
						  size_t ByteCount)
{
	return memcpy_generic(P2PG_API_cuMemcpyDtoD_v2_ptds,
			      DRIVER_REAL(memcpy_fn, cuMemcpyDtoD_v2_ptds), true, true, dstDevice,
			      srcDevice, ByteCount);
}

P2PG_EXPORT CUresult CUDAAPI cuMemcpyDtoDAsync_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
						  size_t ByteCount, CUstream hStream)
{
	return memcpy_generic_async(P2PG_API_cuMemcpyDtoDAsync_v2,
				    DRIVER_REAL(memcpy_async_fn, cuMemcpyDtoDAsync_v2), false, true,
				    dstDevice, srcDevice, ByteCount, hStream);
}

P2PG_EXPORT CUresult CUDAAPI cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
						       size_t ByteCount, CUstream hStream)
{
	return memcpy_generic_async(P2PG_API_cuMemcpyDtoDAsync_v2_ptsz,
				    DRIVER_REAL(memcpy_async_fn, cuMemcpyDtoDAsync_v2_ptsz), true,
				    true, dstDevice, srcDevice, ByteCount, hStream);
}

/* ---- batches (CUDA 12.8+): recorded element by element, never staged ---- */

static void note_batch(unsigned api, CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes,
		       size_t count, CUstream stream, int status, uint64_t t0)
{
	uint64_t host_ns = p2pg_now_ns() - t0;
	for (size_t k = 0; dsts && srcs && sizes && k < count; k++)
		p2pg_copy_note_batch_element(api, dsts[k], srcs[k], sizes[k], stream, status, t0,
					     host_ns);
}

static CUresult batch_v2(unsigned api, batch_v2_fn real, CUdeviceptr *dsts, CUdeviceptr *srcs,
			 size_t *sizes, size_t count, CUmemcpyAttributes *attrs, size_t *attrsIdxs,
			 size_t numAttrs, CUstream stream)
{
	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	struct p2pg_scope scope;
	if (!p2pg_enter(&scope))
		return P2PG_PASS_THROUGH(
		    scope, real(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, stream));
	uint64_t t0 = p2pg_now_ns();
	CUresult rc = P2PG_CALL_REAL(
	    scope, real(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, stream));
	note_batch(api, dsts, srcs, sizes, count, stream, rc, t0);
	p2pg_leave(&scope);
	return rc;
}

static CUresult batch_v1(unsigned api, batch_v1_fn real, CUdeviceptr *dsts, CUdeviceptr *srcs,
			 size_t *sizes, size_t count, CUmemcpyAttributes *attrs, size_t *attrsIdxs,
			 size_t numAttrs, size_t *failIdx, CUstream stream)
{
	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	struct p2pg_scope scope;
	if (!p2pg_enter(&scope))
		return P2PG_PASS_THROUGH(scope, real(dsts, srcs, sizes, count, attrs, attrsIdxs,
						     numAttrs, failIdx, stream));
	uint64_t t0 = p2pg_now_ns();
	CUresult rc = P2PG_CALL_REAL(
	    scope, real(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, failIdx, stream));
	note_batch(api, dsts, srcs, sizes, count, stream, rc, t0);
	p2pg_leave(&scope);
	return rc;
}

P2PG_EXPORT CUresult CUDAAPI cuMemcpyBatchAsync_v2(CUdeviceptr *dsts, CUdeviceptr *srcs,
						   size_t *sizes, size_t count,
						   CUmemcpyAttributes *attrs, size_t *attrsIdxs,
						   size_t numAttrs, CUstream hStream)
{
	return batch_v2(P2PG_API_cuMemcpyBatchAsync_v2,
			DRIVER_REAL(batch_v2_fn, cuMemcpyBatchAsync_v2), dsts, srcs, sizes, count,
			attrs, attrsIdxs, numAttrs, hStream);
}

P2PG_EXPORT CUresult CUDAAPI cuMemcpyBatchAsync_v2_ptsz(CUdeviceptr *dsts, CUdeviceptr *srcs,
							size_t *sizes, size_t count,
							CUmemcpyAttributes *attrs,
							size_t *attrsIdxs, size_t numAttrs,
							CUstream hStream)
{
	return batch_v2(P2PG_API_cuMemcpyBatchAsync_v2_ptsz,
			DRIVER_REAL(batch_v2_fn, cuMemcpyBatchAsync_v2_ptsz), dsts, srcs, sizes,
			count, attrs, attrsIdxs, numAttrs, hStream);
}

P2PG_EXPORT CUresult CUDAAPI cuMemcpyBatchAsync_v1(CUdeviceptr *dsts, CUdeviceptr *srcs,
						   size_t *sizes, size_t count,
						   CUmemcpyAttributes *attrs, size_t *attrsIdxs,
						   size_t numAttrs, size_t *failIdx,
						   CUstream hStream)
{
	batch_v1_fn real = (batch_v1_fn)p2pg_resolve_real(
	    "cuMemcpyBatchAsync", &p2pg_real_cuMemcpyBatchAsync_v1, P2PG_LIB_DRIVER);
	return batch_v1(P2PG_API_cuMemcpyBatchAsync, real, dsts, srcs, sizes, count, attrs,
			attrsIdxs, numAttrs, failIdx, hStream);
}

P2PG_EXPORT CUresult CUDAAPI cuMemcpyBatchAsync_ptsz(CUdeviceptr *dsts, CUdeviceptr *srcs,
						     size_t *sizes, size_t count,
						     CUmemcpyAttributes *attrs, size_t *attrsIdxs,
						     size_t numAttrs, size_t *failIdx,
						     CUstream hStream)
{
	return batch_v1(P2PG_API_cuMemcpyBatchAsync_ptsz,
			DRIVER_REAL(batch_v1_fn, cuMemcpyBatchAsync_ptsz), dsts, srcs, sizes, count,
			attrs, attrsIdxs, numAttrs, failIdx, hStream);
}
