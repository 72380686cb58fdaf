/* Internal interfaces of the simulated CUDA driver (libcuda.so.1). Nothing here is exported. */
#ifndef SIMCUDA_SIM_H
#define SIMCUDA_SIM_H

/* The driver's own build defines this: cuda.h then declares every ABI name (v1, _v2, _ptds,
 * _ptsz), so the compiler checks each definition here against NVIDIA's prototype. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "errors.h"
#include "simcuda_tools.h"

#define SIM_API		   __attribute__((visibility("default")))
#define SIM_MAX_DEVICES	   16
#define SIM_MAX_PEERS	   8
#define SIM_DRIVER_VERSION 13000

/* Where a pointer lives. Device ordinals are 0..15; the others are negative. */
#define SIM_REGION_HOST	    (-1) /* pinned host memory the driver allocated */
#define SIM_REGION_PAGEABLE (-2) /* anything else: ordinary host memory, unknown to the driver */

struct sim_config {
	int nphys;		   /* SIMCUDA_DEVICES: the machine's devices */
	int ndev;		   /* those CUDA_VISIBLE_DEVICES lets the process see */
	int phys[SIM_MAX_DEVICES]; /* ordinal -> physical index */
	unsigned char p2p_phys[SIM_MAX_DEVICES][SIM_MAX_DEVICES]; /* by physical index */
	/* by ordinal: */
	unsigned char p2p[SIM_MAX_DEVICES][SIM_MAX_DEVICES];
	unsigned char corrupt[SIM_MAX_DEVICES][SIM_MAX_DEVICES];
	unsigned char hang[SIM_MAX_DEVICES][SIM_MAX_DEVICES];
	size_t dev_mem;
	double ns_per_byte;
};

extern struct sim_config sim_cfg;
/* The ordinal this process gives physical device phys (-1: a device it does not see). */
int sim_ordinal_of(int phys);
/* The UUID of the simulated machine's device phys (cuDeviceGetUuid's bytes). */
void sim_device_uuid(int phys, unsigned char out[16]);
/* 0: cuInit not called, 1: ready, 2: failed (no device), 3: a child forked after cuInit */
extern int sim_init_state;

/* One lock for all bookkeeping of contexts, streams, events and graphs: the simulation needs
 * correctness, not scalability, and copies themselves run outside it. */
extern pthread_mutex_t sim_mu;
extern pthread_cond_t sim_progress; /* broadcast whenever any stream completes an operation */

/* ---- fault injection and leak accounting (drv_faults.c) ---- */
int sim_fault_enter(void);
void sim_fault_leave(int *depth);
CUresult sim_fault_check(const char *func);
extern _Atomic long sim_live_events, sim_live_streams;

/* First statement of every driver entry point: fails the call as SIMCUDA_FAIL says, counting only
 * the outermost entry point of a call (cuMemAllocHost_v2 calls cuMemHostAlloc inside). */
#define SIM_FAULT()                                                                         \
	int sim_fault_depth_ __attribute__((cleanup(sim_fault_leave))) = sim_fault_enter(); \
	if (sim_fault_depth_ == 0) {                                                        \
		CUresult sim_fault_ = sim_fault_check(__func__);                            \
		if (sim_fault_ != CUDA_SUCCESS)                                             \
			return sim_fault_;                                                  \
	}

static inline CUresult sim_ready(void)
{
	int s = __atomic_load_n(&sim_init_state, __ATOMIC_ACQUIRE);
	if (s == 1)
		return CUDA_SUCCESS;
	return s == 2 ? CUDA_ERROR_NO_DEVICE : CUDA_ERROR_NOT_INITIALIZED;
}

/* ---- memory ---- */
struct sim_ctx;
struct sim_phys;
struct sim_pool;

#define SIM_PAGE_SHIFT	    12
#define SIM_REGION_UNMAPPED (-3) /* reserved virtual memory with nothing mapped there */
/* The granularity of virtual memory management (cuMemGetAllocationGranularity), as on the H100. */
#define SIM_VMM_GRANULARITY ((size_t)2 << 20)

enum sim_alloc_kind {
	SIM_ALLOC_PLAIN, /* cuMemAlloc */
	SIM_ALLOC_HOST,	 /* pinned host memory */
	SIM_ALLOC_ASYNC, /* cuMemAllocAsync: a memory pool's */
	SIM_ALLOC_IPC,	 /* another process's memory, opened with cuIpcOpenMemHandle */
	SIM_ALLOC_VMM,	 /* a cuMemMap mapping in a reserved range */
};

struct sim_alloc {
	uintptr_t base;
	size_t size;
	size_t npages;
	struct sim_ctx *ctx;
	int region; /* where the memory lives: a device ordinal, or SIM_REGION_HOST */
	int dev;    /* for pinned host memory: the device of the allocating context */
	enum sim_alloc_kind kind;
	unsigned flags;
	bool live;
	unsigned long long id;
	struct sim_phys *phys; /* VMM: the allocation mapped here */
	struct sim_pool
	    *pool; /* a pool's allocation, or a pointer imported from one (drv_pool.c) */
	unsigned
	    access;  /* VMM: the devices (bit per ordinal) it is accessible from; __atomic_* only */
	int ipc_dev; /* IPC: the peer device whose slot the mapping holds, or -1 */
	_Atomic int ipc_export_fd;   /* IPC: 1 + the descriptor that says it is exported, or 0 */
	struct sim_alloc *next_all;  /* every record ever made: keeps them reachable */
	struct sim_alloc *next_free; /* records not in use */
};

bool sim_mem_setup(void);
struct sim_alloc *sim_mem_find(uintptr_t p);
int sim_mem_region_of(uintptr_t p); /* SIM_REGION_* or device ordinal, from the address alone */
CUresult sim_mem_alloc(struct sim_ctx *ctx, int region, enum sim_alloc_kind kind, size_t size,
		       unsigned flags, uintptr_t *out);
CUresult sim_mem_free(int want_region, uintptr_t p); /* cuMemAlloc'd and pinned memory */
void sim_mem_free_ctx(struct sim_ctx *ctx);
/* Bytes sim_mem_free_ctx released with their context (device memory, pinned host memory). */
extern size_t sim_released_device_bytes, sim_released_host_bytes;
size_t sim_mem_used(int region);
/* Device memory held outside the device's range (VMM allocations): counted in cuMemGetInfo. */
bool sim_mem_charge(int region, size_t bytes);
void sim_mem_uncharge(int region, size_t bytes);

/* Legacy IPC (drv_ipc.c): the file behind a device range and p's offset in it (-1: none), and
 * another process's memory mapped into this process's range of device region. */
int sim_mem_device_file(int region, uintptr_t p, off_t *ret_offset);
CUresult sim_mem_map_ipc(struct sim_ctx *ctx, int region, int fd, off_t offset, size_t size,
			 struct sim_alloc **ret);
CUresult sim_mem_close_ipc(struct sim_alloc *a);
void sim_ipc_unmapped(struct sim_alloc *a); /* drv_ipc.c: its peer slot goes back */

/* Virtual memory management (drv_vmm.c): reservations, and allocations mapped into them. */
CUresult sim_va_reserve(size_t size, size_t align, uintptr_t *out);
CUresult sim_va_free(uintptr_t p, size_t size);
CUresult sim_va_map(uintptr_t p, size_t size, struct sim_phys *phys, int fd, int region);
CUresult sim_va_unmap(uintptr_t p, size_t size);
/* grant/revoke: device bits; allowed(owner, grant) refuses (INVALID_DEVICE) what the pair cannot
 * reach. */
/* Whether [p, p + n) is usable by device dev's copy engine: memory outside the VMM range always;
 * a mapped range only where cuMemSetAccess granted dev (a copy run in a context of another device
 * fails with CUDA_ERROR_INVALID_VALUE: measured on two H200s, a staged copy that read device 1's
 * mapping of device 0's memory on device 0's stream). */
bool sim_va_accessible_from(uintptr_t p, size_t n, int dev);
CUresult sim_va_set_access(uintptr_t p, size_t size, unsigned grant, unsigned revoke,
			   bool (*allowed)(int owner, unsigned grant));
void sim_vmm_unmapped(struct sim_phys *phys); /* drv_vmm.c: one mapping of phys fewer */
unsigned long long sim_vmm_handle_types(const struct sim_phys *phys);

/* Endpoint requirements for copies. */
enum sim_ep_req {
	SIM_EP_DEVICE, /* must be memory the driver knows (device or pinned host) */
	SIM_EP_ANY,    /* unified addressing: unknown memory is pageable host memory */
};
CUresult sim_check_ep(uintptr_t p, size_t n, enum sim_ep_req req, int *region);

/* ---- contexts ---- */
struct sim_stream;

struct sim_ctx {
	uint32_t magic;
	int dev;
	bool primary;
	bool alive;
	int refs; /* primary: retain count */
	unsigned flags;
	unsigned long long id;
	struct sim_ctx *peers[SIM_MAX_PEERS];
	int npeers;
	/* IPC mappings of each device's memory opened with lazy peer access: a device with any
	 * holds one of the SIM_MAX_PEERS peer slots, as an enabled peer does. Under sim_mu. */
	int ipc_peer_refs[SIM_MAX_DEVICES];
	struct sim_stream *legacy;
	struct sim_stream *streams;   /* every live stream of the context, legacy included */
	uint32_t last_stream_tool_id; /* streams' tool IDs count up per context, never reused */
	struct sim_ctx *next_created;
};

#define SIM_CTX_MAGIC 0x43545853u

CUresult sim_ctx_current(struct sim_ctx **out); /* INVALID_CONTEXT when none */
struct sim_ctx *sim_ctx_top(void);		/* the current context, alive or not, or NULL */
CUresult sim_ctx_check(CUcontext h, struct sim_ctx **out);
bool sim_p2p_active(int a, int b); /* peer access enabled between devices a and b, any way */
/* An IPC mapping in c of device dev's memory takes (or shares) a peer slot: 217 when the pair
 * cannot do P2P, 711 when the slots are all taken. */
CUresult sim_ctx_ipc_peer_get(struct sim_ctx *c, int dev);
void sim_ctx_ipc_peer_put(struct sim_ctx *c, int dev);

/* ---- streams, events, graphs ---- */
enum sim_op_type {
	SIM_OP_COPY,
	SIM_OP_COPY3D,
	SIM_OP_MEMSET,
	SIM_OP_WAIT,
	SIM_OP_EVENT,
	SIM_OP_HOSTFN,
	SIM_OP_CALLBACK,
};

struct sim_3d {
	uintptr_t dst, src; /* first byte of the copy */
	size_t dst_pitch, src_pitch;
	size_t dst_slice, src_slice; /* bytes between z planes */
	size_t width, height, depth;
};

struct sim_event;

struct sim_op {
	struct sim_op *next;
	enum sim_op_type type;
	uint64_t seq;
	union {
		struct {
			void *dst;
			const void *src;
			size_t n;
			int dst_region, src_region;
			void *staging; /* owned copy of a pageable source */
		} copy;
		struct {
			struct sim_3d p;
			int dst_region, src_region;
		} c3;
		struct {
			void *dst;
			uint32_t value;
			unsigned elem;
			size_t count;
		} set;
		struct {
			struct sim_stream *s;
			uint64_t seq;
		} wait;
		struct {
			struct sim_event *ev;
			uint64_t gen;
		} event;
		struct {
			CUhostFn fn;
			void *data;
		} host;
		struct {
			CUstreamCallback fn;
			void *data;
			CUstream handle;
		} cb;
	} u;
	bool xor_data; /* resolved at submission: does this copy deliver corrupted bytes */
	bool hangs;    /* resolved at submission: this copy never completes (SIMCUDA_P2P_HANG) */
	/* Copies: what the copy observer is told (simcuda_tools.h). The caller sets the call's part
	 * (correlation, async, graph); sim_submit the stream's and the memory's. */
	struct {
		uint32_t correlation_id, graph_id;
		uint64_t graph_node_id;
		bool async;
		int dev;
		uint32_t ctx_id, stream_id, src_ctx_id, dst_ctx_id;
	} tool;
};

struct sim_graph;

enum sim_stream_kind { SIM_STREAM_USER, SIM_STREAM_LEGACY, SIM_STREAM_PER_THREAD };

struct sim_stream {
	uint32_t magic;
	struct sim_ctx *ctx;
	enum sim_stream_kind kind;
	unsigned flags;
	int priority;
	unsigned long long id;
	uint32_t tool_id; /* CUPTI's stream ID: counted per context, unlike id */
	int refs;
	uint64_t submitted, completed;
	struct sim_op *head, *tail;
	pthread_cond_t wake;
	pthread_t thread;
	bool has_thread, closing, finished, joined, dead;
	bool stuck; /* its worker sits in a copy that never completes: exit does not wait for it */
	CUstreamCaptureStatus capture;
	CUstreamCaptureMode capture_mode;
	pthread_t capture_thread;
	struct sim_graph *capture_graph;
	unsigned long long capture_id;
	struct sim_stream *ctx_next;
	struct sim_stream *all_next;
};

#define SIM_STREAM_MAGIC 0x4d525453u

struct sim_event {
	uint32_t magic;
	struct sim_event *prev, *next; /* all events: user-leaked ones stay reachable */
	struct sim_ctx *ctx;
	unsigned long long
	    ctx_id; /* ctx->id at creation: the handle may since serve a new context */
	unsigned flags;
	int refs;
	bool recorded;
	struct sim_stream *s; /* stream of the latest record (holds a reference) */
	uint64_t seq;
	uint64_t gen;
	uint64_t ts_gen;
	struct timespec ts;
};

#define SIM_EVENT_MAGIC 0x544e5645u

struct sim_graph {
	uint32_t magic;
	struct sim_graph *prev, *next; /* all graphs: user-leaked ones stay reachable */
	struct sim_op *nodes;
	size_t n, cap;
	uint32_t id; /* process-unique, nonzero: a launched copy's graph ID */
};

#define SIM_GRAPH_MAGIC 0x48505247u
#define SIM_EXEC_MAGIC	0x43455847u

/* Called with sim_mu held. */
CUresult sim_stream_resolve(CUstream h, bool per_thread, struct sim_stream **out);
struct sim_stream *sim_stream_default(struct sim_ctx *ctx, bool per_thread);
CUresult sim_submit(struct sim_stream *s, struct sim_op *op);
void sim_wait_seq(struct sim_stream *s, uint64_t seq);
void sim_ctx_sync_locked(struct sim_ctx *ctx);
/* A context's teardown: waits for the queued work of its streams that can still finish; a stream
 * stuck in a copy that never completes (SIMCUDA_P2P_HANG), or waiting for one, is abandoned, as a
 * context's destruction takes the GPU's channels away whatever they were doing. */
void sim_ctx_quiesce_locked(struct sim_ctx *ctx);
void sim_ctx_drop_streams(struct sim_ctx *ctx);
CUresult sim_capture_forbids_unsafe(void); /* takes sim_mu */
void sim_stream_ref(struct sim_stream *s);
void sim_stream_put(struct sim_stream *s);
bool sim_copy_corrupts(int dst_region, int src_region);
bool sim_copy_hangs(int dst_region, int src_region);
bool sim_graph_append(struct sim_graph *g, const struct sim_op *op);
void sim_graph_free(struct sim_graph *g);
void sim_op_free(struct sim_op *op);

/* ---- tools (drv_tools.c) ---- */
/* Exported for the simulated CUPTI (simcuda_tools.h). */
simcuda_set_copy_observer_t simcuda_set_copy_observer;
simcuda_context_tool_id_t simcuda_context_tool_id;
simcuda_stream_tool_id_t simcuda_stream_tool_id;
/* A new API call's correlation ID. Taken under sim_mu, they increase along each stream. */
uint32_t sim_next_correlation_id(void);
/* Fills the stream's and the memory's part of op->tool; sim_mu held. */
void sim_tool_submitted(struct sim_stream *s, struct sim_op *op);
/* The copy observer, or NULL; read once before and once after running a copy. */
simcuda_copy_observer_fn sim_copy_observer(void);
uint64_t sim_realtime_ns(void);
/* Tells the observer about copy op, run from start_ns until now. */
void sim_copy_finished(simcuda_copy_observer_fn fn, const struct sim_op *op, uint64_t start_ns);

#endif
