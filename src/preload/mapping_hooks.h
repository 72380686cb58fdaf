/* SPDX-License-Identifier: MIT */
/* The cross-process and VMM mapping functions the guard exports (driver and runtime), and the slots
 * holding the real functions behind them. */
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#define P2PG_MAPPING_DRIVER_HOOKS(X)          \
	X(cuIpcGetMemHandle)                  \
	X(cuIpcOpenMemHandle_v1)              \
	X(cuIpcOpenMemHandle_v2)              \
	X(cuIpcCloseMemHandle)                \
	X(cuMemExportToShareableHandle)       \
	X(cuMemImportFromShareableHandle)     \
	X(cuMemMap)                           \
	X(cuMemUnmap)                         \
	X(cuMemSetAccess)                     \
	X(cuMemRelease)                       \
	X(cuMemRetainAllocationHandle)        \
	X(cuMemPoolExportToShareableHandle)   \
	X(cuMemPoolImportFromShareableHandle) \
	X(cuMemPoolExportPointer)             \
	X(cuMemPoolImportPointer)             \
	X(cuMemPoolSetAccess)

#define P2PG_MAPPING_RUNTIME_HOOKS(X)           \
	X(cudaIpcGetMemHandle)                  \
	X(cudaIpcOpenMemHandle)                 \
	X(cudaIpcCloseMemHandle)                \
	X(cudaMemPoolExportToShareableHandle)   \
	X(cudaMemPoolImportFromShareableHandle) \
	X(cudaMemPoolExportPointer)             \
	X(cudaMemPoolImportPointer)             \
	X(cudaMemPoolSetAccess)

#define P2PG_DECLARE_MAPPING_SLOT(name) extern void *_Atomic p2pg_real_##name;
P2PG_MAPPING_DRIVER_HOOKS(P2PG_DECLARE_MAPPING_SLOT)
P2PG_MAPPING_RUNTIME_HOOKS(P2PG_DECLARE_MAPPING_SLOT)

/* The CUDA 4.1 ABI of cuIpcOpenMemHandle, exported under its plain name (cuda.h maps that name
 * to the CUDA 11.0 one, cuIpcOpenMemHandle_v2). */
CUresult CUDAAPI cuIpcOpenMemHandle_v1(CUdeviceptr *pdptr, CUipcMemHandle handle,
				       unsigned int Flags) __asm__("cuIpcOpenMemHandle");
