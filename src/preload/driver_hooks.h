/* SPDX-License-Identifier: MIT */
/* The driver functions the guard exports, by C name (the ABI name, except where noted in
 * hooks.c), and the slots holding the real functions behind them. */
#pragma once

#include <cuda.h>

#define P2PG_DRIVER_HOOKS(X)          \
	X(cuInit)                     \
	X(cuDeviceCanAccessPeer)      \
	X(cuDeviceGetP2PAttribute)    \
	X(cuCtxEnablePeerAccess)      \
	X(cuCtxDisablePeerAccess)     \
	X(cuMemcpyPeer)               \
	X(cuMemcpyPeer_ptds)          \
	X(cuMemcpyPeerAsync)          \
	X(cuMemcpyPeerAsync_ptsz)     \
	X(cuMemcpy3DPeer)             \
	X(cuMemcpy3DPeer_ptds)        \
	X(cuMemcpy3DPeerAsync)        \
	X(cuMemcpy3DPeerAsync_ptsz)   \
	X(cuMemcpy)                   \
	X(cuMemcpy_ptds)              \
	X(cuMemcpyAsync)              \
	X(cuMemcpyAsync_ptsz)         \
	X(cuMemcpyDtoD_v2)            \
	X(cuMemcpyDtoD_v2_ptds)       \
	X(cuMemcpyDtoDAsync_v2)       \
	X(cuMemcpyDtoDAsync_v2_ptsz)  \
	X(cuMemcpyBatchAsync_v2)      \
	X(cuMemcpyBatchAsync_v2_ptsz) \
	X(cuMemcpyBatchAsync_v1)      \
	X(cuMemcpyBatchAsync_ptsz)    \
	X(cuGetProcAddress_v1)        \
	X(cuGetProcAddress_v2)

#define P2PG_DECLARE_REAL_SLOT(name) extern void *_Atomic p2pg_real_##name;
P2PG_DRIVER_HOOKS(P2PG_DECLARE_REAL_SLOT)

/* The exported wrappers whose prototypes cuda.h does not declare in this configuration. */
CUresult CUDAAPI cuMemcpyPeer_ptds(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t);
CUresult CUDAAPI cuMemcpyPeerAsync_ptsz(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t,
					CUstream);
CUresult CUDAAPI cuMemcpy3DPeer_ptds(const CUDA_MEMCPY3D_PEER *);
CUresult CUDAAPI cuMemcpy3DPeerAsync_ptsz(const CUDA_MEMCPY3D_PEER *, CUstream);
CUresult CUDAAPI cuMemcpy_ptds(CUdeviceptr, CUdeviceptr, size_t);
CUresult CUDAAPI cuMemcpyAsync_ptsz(CUdeviceptr, CUdeviceptr, size_t, CUstream);
CUresult CUDAAPI cuMemcpyDtoD_v2_ptds(CUdeviceptr, CUdeviceptr, size_t);
CUresult CUDAAPI cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr, CUdeviceptr, size_t, CUstream);
CUresult CUDAAPI cuMemcpyBatchAsync_v2_ptsz(CUdeviceptr *, CUdeviceptr *, size_t *, size_t,
					    CUmemcpyAttributes *, size_t *, size_t, CUstream);
CUresult CUDAAPI cuMemcpyBatchAsync_ptsz(CUdeviceptr *, CUdeviceptr *, size_t *, size_t,
					 CUmemcpyAttributes *, size_t *, size_t, size_t *,
					 CUstream);
/* The CUDA 12.8 ABI of cuMemcpyBatchAsync and the CUDA 11.3 one of cuGetProcAddress: exported
 * under their plain names, which cuda.h maps to the newer functions. */
CUresult CUDAAPI cuMemcpyBatchAsync_v1(CUdeviceptr *, CUdeviceptr *, size_t *, size_t,
				       CUmemcpyAttributes *, size_t *, size_t, size_t *,
				       CUstream) __asm__("cuMemcpyBatchAsync");
CUresult CUDAAPI cuGetProcAddress_v1(const char *symbol, void **pfn, int cudaVersion,
				     cuuint64_t flags) __asm__("cuGetProcAddress");
