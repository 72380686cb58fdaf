/* SPDX-License-Identifier: MIT */
/* The runtime functions the guard exports, and the slots for the real ones behind them. */
#pragma once

#include <cuda_runtime_api.h>

#define P2PG_RUNTIME_HOOKS(X)               \
	X(cudaDeviceCanAccessPeer)          \
	X(cudaDeviceGetP2PAttribute)        \
	X(cudaDeviceEnablePeerAccess)       \
	X(cudaDeviceDisablePeerAccess)      \
	X(cudaMemcpyPeer)                   \
	X(cudaMemcpyPeerAsync)              \
	X(cudaMemcpy3DPeer)                 \
	X(cudaMemcpy3DPeer_ptds)            \
	X(cudaMemcpy3DPeerAsync)            \
	X(cudaMemcpy3DPeerAsync_ptsz)       \
	X(cudaMemcpy)                       \
	X(cudaMemcpy_ptds)                  \
	X(cudaMemcpyAsync)                  \
	X(cudaMemcpyAsync_ptsz)             \
	X(cudaGetDriverEntryPoint)          \
	X(cudaGetDriverEntryPoint_ptsz)     \
	X(cudaGetDriverEntryPointByVersion) \
	X(cudaGetDriverEntryPointByVersion_ptsz)

#define P2PG_DECLARE_RUNTIME_SLOT(name) extern void *_Atomic p2pg_real_##name;
P2PG_RUNTIME_HOOKS(P2PG_DECLARE_RUNTIME_SLOT)
extern void *_Atomic p2pg_real_cudaGetDevice;
extern void *_Atomic p2pg_real_cudaGetLastError;

cudaError_t cudaMemcpy3DPeer_ptds(const struct cudaMemcpy3DPeerParms *p);
cudaError_t cudaMemcpy3DPeerAsync_ptsz(const struct cudaMemcpy3DPeerParms *p, cudaStream_t stream);
cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
				 cudaStream_t stream);
cudaError_t cudaGetDriverEntryPoint_ptsz(const char *symbol, void **funcPtr,
					 unsigned long long flags,
					 enum cudaDriverEntryPointQueryResult *driverStatus);
cudaError_t
cudaGetDriverEntryPointByVersion_ptsz(const char *symbol, void **funcPtr, unsigned int cudaVersion,
				      unsigned long long flags,
				      enum cudaDriverEntryPointQueryResult *driverStatus);
