/* SPDX-License-Identifier: MIT */
/*
 * The runtime API entry points (libcudart exports), for programs linked with the shared runtime
 * (PyTorch, CuPy, `nvcc -cudart shared`). The driver calls libcudart makes inside them arrive at
 * the driver wrappers as re-entrant calls and go straight through, so each call is recorded once.
 */
#include <cuda_runtime_api.h>

#include "entry.h"
#include "runtime_hooks.h"

#define RUNTIME_REAL(type, name) P2PG_REAL(type, name, P2PG_LIB_RUNTIME)

typedef cudaError_t (*get_device_fn)(int *);
typedef cudaError_t (*get_last_error_fn)(void);
typedef cudaError_t (*can_access_fn)(int *, int, int);
typedef cudaError_t (*enable_fn)(int, unsigned int);
typedef cudaError_t (*disable_fn)(int);
typedef cudaError_t (*p2p_attr_fn)(int *, enum cudaDeviceP2PAttr, int, int);
typedef cudaError_t (*memcpy_peer_fn)(void *, int, const void *, int, size_t);
typedef cudaError_t (*memcpy_peer_async_fn)(void *, int, const void *, int, size_t, cudaStream_t);
typedef cudaError_t (*memcpy_3d_peer_fn)(const struct cudaMemcpy3DPeerParms *);
typedef cudaError_t (*memcpy_3d_peer_async_fn)(const struct cudaMemcpy3DPeerParms *, cudaStream_t);
typedef cudaError_t (*memcpy_fn)(void *, const void *, size_t, enum cudaMemcpyKind);
typedef cudaError_t (*memcpy_async_fn)(void *, const void *, size_t, enum cudaMemcpyKind,
				       cudaStream_t);

#define REAL_SLOT(name) void *_Atomic p2pg_real_##name;
P2PG_RUNTIME_HOOKS(REAL_SLOT)
void *_Atomic p2pg_real_cudaGetDevice;
void *_Atomic p2pg_real_cudaGetLastError;
#undef REAL_SLOT

/* The device the runtime calls current, without touching the runtime's error state on success. */
static int runtime_current_device(void)
{
	get_device_fn get = RUNTIME_REAL(get_device_fn, cudaGetDevice);
	int dev = -1;
	if (!get || get(&dev) != cudaSuccess)
		return -1;
	return dev;
}

/* After an absorbed failure the caller got success: its sticky error must not say otherwise. */
static void clear_runtime_error(const struct p2pg_peer *p)
{
	if (!p->clear_runtime_error)
		return;
	get_last_error_fn clear = RUNTIME_REAL(get_last_error_fn, cudaGetLastError);
	if (clear)
		clear();
}

/* ---- peer access ---- */

P2PG_EXPORT cudaError_t cudaDeviceCanAccessPeer(int *canAccessPeer, int device, int peerDevice)
{
	can_access_fn real = RUNTIME_REAL(can_access_fn, cudaDeviceCanAccessPeer);
	if (!real)
		return cudaErrorInitializationError;
	struct p2pg_scope scope;
	if (!p2pg_enter(&scope))
		return P2PG_PASS_THROUGH(scope, real(canAccessPeer, device, peerDevice));
	struct p2pg_peer p = {.api = P2PG_API_cudaDeviceCanAccessPeer,
			      .kind = P2PG_PEER_CAN_ACCESS,
			      .device = device,
			      .peer = peerDevice,
			      .value = canAccessPeer,
			      .runtime = true};
	cudaError_t rc = P2PG_PEER(scope, p, cudaError_t, real(canAccessPeer, device, peerDevice));
	p2pg_leave(&scope);
	return rc;
}

P2PG_EXPORT cudaError_t cudaDeviceGetP2PAttribute(int *value, enum cudaDeviceP2PAttr attr,
						  int srcDevice, int dstDevice)
{
	p2p_attr_fn real = RUNTIME_REAL(p2p_attr_fn, cudaDeviceGetP2PAttribute);
	if (!real)
		return cudaErrorInitializationError;
	struct p2pg_scope scope;
	if (!p2pg_enter(&scope))
		return P2PG_PASS_THROUGH(scope, real(value, attr, srcDevice, dstDevice));
	/* The runtime's attribute values are the driver's (cudaDevP2PAttr* =
	 * CU_DEVICE_P2P_ATTRIBUTE_*). */
	struct p2pg_peer p = {.api = P2PG_API_cudaDeviceGetP2PAttribute,
			      .kind = P2PG_PEER_ATTRIBUTE,
			      .device = srcDevice,
			      .peer = dstDevice,
			      .attribute = (int)attr,
			      .value = value,
			      .runtime = true};
	cudaError_t rc = P2PG_PEER(scope, p, cudaError_t, real(value, attr, srcDevice, dstDevice));
	p2pg_leave(&scope);
	return rc;
}

P2PG_EXPORT cudaError_t cudaDeviceEnablePeerAccess(int peerDevice, unsigned int flags)
{
	enable_fn real = RUNTIME_REAL(enable_fn, cudaDeviceEnablePeerAccess);
	if (!real)
		return cudaErrorInitializationError;
	struct p2pg_scope scope;
	if (!p2pg_enter(&scope))
		return P2PG_PASS_THROUGH(scope, real(peerDevice, flags));
	struct p2pg_peer p = {.api = P2PG_API_cudaDeviceEnablePeerAccess,
			      .kind = P2PG_PEER_ENABLE,
			      .device = runtime_current_device(),
			      .peer = peerDevice,
			      .flags = flags,
			      .runtime = true};
	cudaError_t rc = P2PG_PEER(scope, p, cudaError_t, real(peerDevice, flags));
	clear_runtime_error(&p);
	p2pg_leave(&scope);
	return rc;
}

P2PG_EXPORT cudaError_t cudaDeviceDisablePeerAccess(int peerDevice)
{
	disable_fn real = RUNTIME_REAL(disable_fn, cudaDeviceDisablePeerAccess);
	if (!real)
		return cudaErrorInitializationError;
	struct p2pg_scope scope;
	if (!p2pg_enter(&scope))
		return P2PG_PASS_THROUGH(scope, real(peerDevice));
	struct p2pg_peer p = {.api = P2PG_API_cudaDeviceDisablePeerAccess,
			      .kind = P2PG_PEER_DISABLE,
			      .device = runtime_current_device(),
			      .peer = peerDevice,
			      .runtime = true};
	cudaError_t rc = P2PG_PEER(scope, p, cudaError_t, real(peerDevice));
	clear_runtime_error(&p);
	p2pg_leave(&scope);
	return rc;
}

/* ---- explicit peer copies ---- */

P2PG_EXPORT cudaError_t cudaMemcpyPeer(void *dst, int dstDevice, const void *src, int srcDevice,
				       size_t count)
{
	memcpy_peer_fn real = RUNTIME_REAL(memcpy_peer_fn, cudaMemcpyPeer);
	if (!real)
		return cudaErrorInitializationError;
	struct p2pg_scope scope;
	if (!p2pg_enter(&scope))
		return P2PG_PASS_THROUGH(scope, real(dst, dstDevice, src, srcDevice, count));
	struct p2pg_copy c = {.api = P2PG_API_cudaMemcpyPeer,
			      .dst = (CUdeviceptr)dst,
			      .src = (CUdeviceptr)src,
			      .dst_device = dstDevice,
			      .src_device = srcDevice,
			      .bytes = count};
	return P2PG_COPY(scope, c, cudaError_t, real(dst, dstDevice, src, srcDevice, count));
}

P2PG_EXPORT cudaError_t cudaMemcpyPeerAsync(void *dst, int dstDevice, const void *src,
					    int srcDevice, size_t count, cudaStream_t stream)
{
	memcpy_peer_async_fn real = RUNTIME_REAL(memcpy_peer_async_fn, cudaMemcpyPeerAsync);
	if (!real)
		return cudaErrorInitializationError;
	struct p2pg_scope scope;
	if (!p2pg_enter(&scope))
		return P2PG_PASS_THROUGH(scope,
					 real(dst, dstDevice, src, srcDevice, count, stream));
	struct p2pg_copy c = {.api = P2PG_API_cudaMemcpyPeerAsync,
			      .dst = (CUdeviceptr)dst,
			      .src = (CUdeviceptr)src,
			      .dst_device = dstDevice,
			      .src_device = srcDevice,
			      .bytes = count,
			      .stream = (CUstream)stream,
			      .async = true};
	return P2PG_COPY(scope, c, cudaError_t,
			 real(dst, dstDevice, src, srcDevice, count, stream));
}

static size_t extent_bytes(const struct cudaMemcpy3DPeerParms *p)
{
	size_t w = p->extent.width, h = p->extent.height ? p->extent.height : 1,
	       d = p->extent.depth ? p->extent.depth : 1;
	/* Without arrays the width is in bytes; with them it is in elements, which the guard cannot
	 * size without the array's format: those copies count their element extent. */
	return w * h * d;
}

static cudaError_t memcpy_3d_peer(unsigned api, memcpy_3d_peer_fn real, bool per_thread,
				  const struct cudaMemcpy3DPeerParms *p)
{
	if (!real)
		return cudaErrorInitializationError;
	struct p2pg_scope scope;
	if (!p2pg_enter(&scope) || !p)
		return P2PG_PASS_THROUGH(scope, real(p));
	struct p2pg_copy c = {.api = api,
			      .dst = (CUdeviceptr)p->dstPtr.ptr,
			      .src = (CUdeviceptr)p->srcPtr.ptr,
			      .dst_device = p->dstDevice,
			      .src_device = p->srcDevice,
			      .bytes = extent_bytes(p),
			      .per_thread = per_thread,
			      .not_stageable = true};
	return P2PG_COPY(scope, c, cudaError_t, real(p));
}

static cudaError_t memcpy_3d_peer_async(unsigned api, memcpy_3d_peer_async_fn real, bool per_thread,
					const struct cudaMemcpy3DPeerParms *p, cudaStream_t stream)
{
	if (!real)
		return cudaErrorInitializationError;
	struct p2pg_scope scope;
	if (!p2pg_enter(&scope) || !p)
		return P2PG_PASS_THROUGH(scope, real(p, stream));
	struct p2pg_copy c = {.api = api,
			      .dst = (CUdeviceptr)p->dstPtr.ptr,
			      .src = (CUdeviceptr)p->srcPtr.ptr,
			      .dst_device = p->dstDevice,
			      .src_device = p->srcDevice,
			      .bytes = extent_bytes(p),
			      .stream = (CUstream)stream,
			      .async = true,
			      .per_thread = per_thread,
			      .not_stageable = true};
	return P2PG_COPY(scope, c, cudaError_t, real(p, stream));
}

P2PG_EXPORT cudaError_t cudaMemcpy3DPeer(const struct cudaMemcpy3DPeerParms *p)
{
	return memcpy_3d_peer(P2PG_API_cudaMemcpy3DPeer,
			      RUNTIME_REAL(memcpy_3d_peer_fn, cudaMemcpy3DPeer), false, p);
}

P2PG_EXPORT cudaError_t cudaMemcpy3DPeer_ptds(const struct cudaMemcpy3DPeerParms *p)
{
	return memcpy_3d_peer(P2PG_API_cudaMemcpy3DPeer_ptds,
			      RUNTIME_REAL(memcpy_3d_peer_fn, cudaMemcpy3DPeer_ptds), true, p);
}

P2PG_EXPORT cudaError_t cudaMemcpy3DPeerAsync(const struct cudaMemcpy3DPeerParms *p,
					      cudaStream_t stream)
{
	return memcpy_3d_peer_async(P2PG_API_cudaMemcpy3DPeerAsync,
				    RUNTIME_REAL(memcpy_3d_peer_async_fn, cudaMemcpy3DPeerAsync),
				    false, p, stream);
}

P2PG_EXPORT cudaError_t cudaMemcpy3DPeerAsync_ptsz(const struct cudaMemcpy3DPeerParms *p,
						   cudaStream_t stream)
{
	return memcpy_3d_peer_async(
	    P2PG_API_cudaMemcpy3DPeerAsync_ptsz,
	    RUNTIME_REAL(memcpy_3d_peer_async_fn, cudaMemcpy3DPeerAsync_ptsz), true, p, stream);
}

/* ---- generic copies: only device-to-device kinds can cross devices ---- */

static bool may_cross(enum cudaMemcpyKind kind)
{
	return kind == cudaMemcpyDeviceToDevice || kind == cudaMemcpyDefault;
}

static cudaError_t memcpy_generic(unsigned api, memcpy_fn real, bool per_thread, void *dst,
				  const void *src, size_t count, enum cudaMemcpyKind kind)
{
	if (!real)
		return cudaErrorInitializationError;
	struct p2pg_scope scope;
	if (!p2pg_enter(&scope))
		return P2PG_PASS_THROUGH(scope, real(dst, src, count, kind));
	if (!may_cross(kind)) {
		/* Held entered, so the driver calls the runtime makes inside go straight through.
		 */
		cudaError_t rc = P2PG_CALL_REAL(scope, real(dst, src, count, kind));
		p2pg_leave(&scope);
		return rc;
	}
	struct p2pg_copy c = {.api = api,
			      .dst = (CUdeviceptr)dst,
			      .src = (CUdeviceptr)src,
			      .dst_device = -1,
			      .src_device = -1,
			      .bytes = count,
			      .per_thread = per_thread,
			      .device_pointers = kind == cudaMemcpyDeviceToDevice};
	return P2PG_COPY(scope, c, cudaError_t, real(dst, src, count, kind));
}

static cudaError_t memcpy_generic_async(unsigned api, memcpy_async_fn real, bool per_thread,
					void *dst, const void *src, size_t count,
					enum cudaMemcpyKind kind, cudaStream_t stream)
{
	if (!real)
		return cudaErrorInitializationError;
	struct p2pg_scope scope;
	if (!p2pg_enter(&scope))
		return P2PG_PASS_THROUGH(scope, real(dst, src, count, kind, stream));
	if (!may_cross(kind)) {
		cudaError_t rc = P2PG_CALL_REAL(scope, real(dst, src, count, kind, stream));
		p2pg_leave(&scope);
		return rc;
	}
	struct p2pg_copy c = {.api = api,
			      .dst = (CUdeviceptr)dst,
			      .src = (CUdeviceptr)src,
			      .dst_device = -1,
			      .src_device = -1,
			      .bytes = count,
			      .stream = (CUstream)stream,
			      .async = true,
			      .per_thread = per_thread,
			      .device_pointers = kind == cudaMemcpyDeviceToDevice};
	return P2PG_COPY(scope, c, cudaError_t, real(dst, src, count, kind, stream));
}

P2PG_EXPORT cudaError_t cudaMemcpy(void *dst, const void *src, size_t count,
				   enum cudaMemcpyKind kind)
{
	return memcpy_generic(P2PG_API_cudaMemcpy, RUNTIME_REAL(memcpy_fn, cudaMemcpy), false, dst,
			      src, count, kind);
}

P2PG_EXPORT cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t count,
					enum cudaMemcpyKind kind)
{
	return memcpy_generic(P2PG_API_cudaMemcpy_ptds, RUNTIME_REAL(memcpy_fn, cudaMemcpy_ptds),
			      true, dst, src, count, kind);
}

P2PG_EXPORT cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count,
					enum cudaMemcpyKind kind, cudaStream_t stream)
{
	return memcpy_generic_async(P2PG_API_cudaMemcpyAsync,
				    RUNTIME_REAL(memcpy_async_fn, cudaMemcpyAsync), false, dst, src,
				    count, kind, stream);
}

P2PG_EXPORT cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t count,
					     enum cudaMemcpyKind kind, cudaStream_t stream)
{
	return memcpy_generic_async(P2PG_API_cudaMemcpyAsync_ptsz,
				    RUNTIME_REAL(memcpy_async_fn, cudaMemcpyAsync_ptsz), true, dst,
				    src, count, kind, stream);
}
