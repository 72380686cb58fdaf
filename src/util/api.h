/* SPDX-License-Identifier: MIT */
/* The calls the guard records, by the name the program called them (the driver's ABI name for
 * driver functions, so a _ptds/_ptsz or _v2 form is visible in the log). */
#pragma once

/* Cross-process and VMM mappings (IPC, cuMem export/import/map/access). */
#define P2PG_MAPPING_APIS(X)                    \
	X(cudaIpcGetMemHandle)                  \
	X(cudaIpcOpenMemHandle)                 \
	X(cudaIpcCloseMemHandle)                \
	X(cuIpcGetMemHandle)                    \
	X(cuIpcOpenMemHandle)                   \
	X(cuIpcOpenMemHandle_v2)                \
	X(cuIpcCloseMemHandle)                  \
	X(cuMemExportToShareableHandle)         \
	X(cuMemImportFromShareableHandle)       \
	X(cuMemMap)                             \
	X(cuMemUnmap)                           \
	X(cuMemSetAccess)                       \
	X(cuMemRelease)                         \
	X(cuMemPoolExportToShareableHandle)     \
	X(cuMemPoolImportFromShareableHandle)   \
	X(cuMemPoolExportPointer)               \
	X(cuMemPoolImportPointer)               \
	X(cuMemPoolSetAccess)                   \
	X(cudaMemPoolExportToShareableHandle)   \
	X(cudaMemPoolImportFromShareableHandle) \
	X(cudaMemPoolExportPointer)             \
	X(cudaMemPoolImportPointer)             \
	X(cudaMemPoolSetAccess)

#define P2PG_APIS(X)                   \
	X(cudaDeviceCanAccessPeer)     \
	X(cudaDeviceEnablePeerAccess)  \
	X(cudaDeviceDisablePeerAccess) \
	X(cudaDeviceGetP2PAttribute)   \
	X(cudaMemcpyPeer)              \
	X(cudaMemcpyPeerAsync)         \
	X(cudaMemcpy3DPeer)            \
	X(cudaMemcpy3DPeer_ptds)       \
	X(cudaMemcpy3DPeerAsync)       \
	X(cudaMemcpy3DPeerAsync_ptsz)  \
	X(cudaMemcpy)                  \
	X(cudaMemcpy_ptds)             \
	X(cudaMemcpyAsync)             \
	X(cudaMemcpyAsync_ptsz)        \
	X(cuDeviceCanAccessPeer)       \
	X(cuDeviceGetP2PAttribute)     \
	X(cuCtxEnablePeerAccess)       \
	X(cuCtxDisablePeerAccess)      \
	X(cuMemcpyPeer)                \
	X(cuMemcpyPeer_ptds)           \
	X(cuMemcpyPeerAsync)           \
	X(cuMemcpyPeerAsync_ptsz)      \
	X(cuMemcpy3DPeer)              \
	X(cuMemcpy3DPeer_ptds)         \
	X(cuMemcpy3DPeerAsync)         \
	X(cuMemcpy3DPeerAsync_ptsz)    \
	X(cuMemcpy)                    \
	X(cuMemcpy_ptds)               \
	X(cuMemcpyAsync)               \
	X(cuMemcpyAsync_ptsz)          \
	X(cuMemcpyDtoD_v2)             \
	X(cuMemcpyDtoD_v2_ptds)        \
	X(cuMemcpyDtoDAsync_v2)        \
	X(cuMemcpyDtoDAsync_v2_ptsz)   \
	X(cuMemcpyBatchAsync)          \
	X(cuMemcpyBatchAsync_ptsz)     \
	X(cuMemcpyBatchAsync_v2)       \
	X(cuMemcpyBatchAsync_v2_ptsz)  \
	P2PG_MAPPING_APIS(X)           \
	X(p2pguard_probe)

enum p2pg_api {
#define P2PG_API_ENUM(name) P2PG_API_##name,
	P2PG_APIS(P2PG_API_ENUM)
#undef P2PG_API_ENUM
	    P2PG_API_COUNT
};

const char *p2pg_api_name(unsigned api);

/* What the guard did with a call: the records' action column. */
enum p2pg_action {
	P2PG_ACTION_PASSED = 0,	  /* the caller got the real status */
	P2PG_ACTION_ABSORBED = 1, /* the caller got success; the pair's copies are staged */
	P2PG_ACTION_STAGED =
	    2, /* the guard answered for a staged pair without calling the driver */
	P2PG_ACTION_REPORTED =
	    3, /* the guard changed the answer (can-access 0 for a staged pair) */
};

const char *p2pg_action_name(unsigned action);
