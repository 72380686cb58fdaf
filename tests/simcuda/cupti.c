/* Simulated CUPTI (libcupti.so.13): the activity API for memory copies, fed by the simulated
 * driver's copy observer (simcuda_tools.h), with the real library's record layouts
 * (cupti_activity.h of the toolkit this is built against).
 *
 * As measured with CUPTI 13 on H200s: a copy between device memory of two devices (whatever API
 * made it) gives a CUpti_ActivityMemcpyPtoP4 record (kind MEMCPY2, copyKind PTOP) only while the
 * MEMCPY kind is enabled; MEMCPY2 alone gives no record at all; with MEMCPY on, every other copy
 * gives a CUpti_ActivityMemcpy6 record. Not measured, assumed here: MEMCPY without MEMCPY2 gives
 * peer copies as CUpti_ActivityMemcpy6 records of copyKind PTOP. EXTERNAL_CORRELATION can be
 * enabled and ids pushed and popped, but no record comes of it: those records accompany API
 * records (DRIVER, RUNTIME kinds), which are not simulated, and none arrived on the H200s either.
 *
 * Records are appended when a copy has finished executing (the real ones carry its end time), to
 * the buffer last handed over by the client's bufferRequested callback, which is called on the
 * thread that needs a buffer (a stream's worker) without any lock held. Buffers go back to the
 * client only inside cuptiActivityFlushAll, on its caller's thread: every full buffer, then the
 * partially filled one if it holds a record, in the order they were filled; a forced flush returns
 * the empty ones too. With no callbacks
 * registered, or no buffer given, records are dropped and counted. SIMCUDA_CUPTI_FAIL=1 makes
 * cuptiActivityEnable fail with CUPTI_ERROR_NOT_INITIALIZED. */
#include "simcuda_tools.h"

#include <cupti_activity.h>
#include <cupti_result.h>
#include <cupti_version.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define API	  __attribute__((visibility("default")))
#define EXT_DEPTH 64

/* ---- the driver's hooks, and the settings ---- */

static pthread_once_t hooks_once = PTHREAD_ONCE_INIT;
static simcuda_set_copy_observer_t *set_copy_observer;
static simcuda_context_tool_id_t *context_tool_id;
static simcuda_stream_tool_id_t *stream_tool_id;
static bool fail_enable; /* SIMCUDA_CUPTI_FAIL=1 */

static void hooks_init(void)
{
	const char *v = getenv("SIMCUDA_CUPTI_FAIL");
	if (v && strcmp(v, "1") == 0)
		fail_enable = true;
	else if (v && strcmp(v, "0") != 0 && strcmp(v, "") != 0)
		fprintf(stderr,
			"simcuda: ignoring SIMCUDA_CUPTI_FAIL=\"%s\" (malformed); using 0\n", v);

	/* The driver the program uses: the one loaded already, else the one it would load. The
	 * handle stays open, so the driver stays while the observer may be called. */
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return;
	set_copy_observer = (simcuda_set_copy_observer_t *)dlsym(h, "simcuda_set_copy_observer");
	context_tool_id = (simcuda_context_tool_id_t *)dlsym(h, "simcuda_context_tool_id");
	stream_tool_id = (simcuda_stream_tool_id_t *)dlsym(h, "simcuda_stream_tool_id");
	if (!set_copy_observer || !context_tool_id || !stream_tool_id) {
		/* Not the simulated driver: CUPTI cannot trace anything. */
		set_copy_observer = NULL;
		context_tool_id = NULL;
		stream_tool_id = NULL;
		dlclose(h);
	}
}

static bool hooks(void)
{
	pthread_once(&hooks_once, hooks_init);
	return set_copy_observer != NULL;
}

/* ---- buffers ---- */

struct buf {
	struct buf *next;
	uint8_t *p;
	size_t size;
	size_t used; /* offset after the last record */
	size_t nrec, max;
};

/* mu guards what follows; it is never held while a client callback runs. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static CUpti_BuffersCallbackRequestFunc buffer_requested;
static CUpti_BuffersCallbackCompleteFunc buffer_completed;
static struct buf *cur;	  /* being filled */
static struct buf *spare; /* handed over while another was installed */
static struct buf *full_head, **full_tail = &full_head; /* to be delivered, in order */
static size_t dropped;

/* Serialises deliveries, so that buffers reach the client in the order they were filled. */
static pthread_mutex_t flush_mu = PTHREAD_MUTEX_INITIALIZER;
static __thread bool in_flush;

/* Enabled kinds: read without mu by the observer. */
static bool on_memcpy, on_memcpy2, on_ext;
static bool observing;

static size_t align8(size_t x)
{
	return (x + 7) & ~(size_t)7;
}

/* Where a record of n bytes would go in b, or SIZE_MAX if it does not fit. */
static size_t slot(const struct buf *b, size_t n)
{
	if (b->max && b->nrec >= b->max)
		return SIZE_MAX;
	uintptr_t base = (uintptr_t)b->p;
	size_t off = align8(base + b->used) - base;
	return off <= b->size && b->size - off >= n ? off : SIZE_MAX;
}

static void queue_full(struct buf *b)
{
	b->next = NULL;
	*full_tail = b;
	full_tail = &b->next;
}

static void append(const void *rec, size_t n)
{
	pthread_mutex_lock(&mu);
	for (;;) {
		if (!buffer_requested)
			break;
		size_t off = cur ? slot(cur, n) : SIZE_MAX;
		if (off != SIZE_MAX) {
			memcpy(cur->p + off, rec, n);
			cur->used = off + n;
			cur->nrec++;
			pthread_mutex_unlock(&mu);
			return;
		}
		if (cur) {
			queue_full(cur); /* a buffer too small for any record goes back empty */
			cur = NULL;
		}
		if (spare) {
			cur = spare;
			spare = spare->next;
			cur->next = NULL;
			continue;
		}
		CUpti_BuffersCallbackRequestFunc req = buffer_requested;
		pthread_mutex_unlock(&mu);
		struct buf *b = calloc(1, sizeof(*b));
		uint8_t *p = NULL;
		size_t size = 0, max = 0;
		if (b)
			req(&p, &size, &max);
		pthread_mutex_lock(&mu);
		if (!b || !p) {
			free(b);
			break;
		}
		b->p = p;
		b->size = size;
		b->max = max;
		if (slot(b, n) == SIZE_MAX) {
			queue_full(b);
			break;
		}
		if (cur) {
			b->next = spare;
			spare = b;
		} else {
			cur = b;
		}
	}
	dropped++;
	pthread_mutex_unlock(&mu);
}

/* ---- records ---- */

static uint8_t memory_kind(int where)
{
	return where >= 0		     ? CUPTI_ACTIVITY_MEMORY_KIND_DEVICE
	       : where == SIMCUDA_MEM_PINNED ? CUPTI_ACTIVITY_MEMORY_KIND_PINNED
					     : CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
}

static uint8_t copy_kind(const struct simcuda_copy_info *c)
{
	bool sd = c->src_device >= 0, dd = c->dst_device >= 0;
	if (sd && dd)
		return c->src_device == c->dst_device ? CUPTI_ACTIVITY_MEMCPY_KIND_DTOD
						      : CUPTI_ACTIVITY_MEMCPY_KIND_PTOP;
	if (dd)
		return CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
	if (sd)
		return CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
	return CUPTI_ACTIVITY_MEMCPY_KIND_HTOH;
}

/* Stream IDs of the driver's own streams, which the caller never sees. */
#define DRIVER_STREAM_ID(device) (0x7fff0000u + (uint32_t)(device))

/*
 * A peer copy the driver stages through the host, as the H200's CUPTI reports it: two MEMCPY
 * records with the call's correlation ID, a DTOH on the source device and an HTOD on the
 * destination, both with source and destination kind DEVICE; the half on the caller's stream's
 * device carries that stream's ID, the other a driver stream's.
 */
static void staged_halves(const struct simcuda_copy_info *c, uint8_t flags)
{
	uint64_t mid = c->start_ns + (c->end_ns - c->start_ns) / 2;
	for (int half = 0; half < 2; half++) {
		int dev = half == 0 ? c->src_device : c->dst_device;
		CUpti_ActivityMemcpy6 r;
		memset(&r, 0, sizeof(r));
		r.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
		r.copyKind =
		    half == 0 ? CUPTI_ACTIVITY_MEMCPY_KIND_DTOH : CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
		r.srcKind = r.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
		r.flags = flags;
		r.bytes = c->bytes;
		r.start = half == 0 ? c->start_ns : mid;
		r.end = half == 0 ? mid : c->end_ns;
		r.deviceId = (uint32_t)dev;
		r.contextId = half == 0 ? c->src_context_id : c->dst_context_id;
		r.streamId = dev == c->device ? c->stream_id : DRIVER_STREAM_ID(dev);
		r.correlationId = c->correlation_id;
		r.graphNodeId = c->graph_node_id;
		r.graphId = c->graph_id;
		r.channelType = CUPTI_CHANNEL_TYPE_INVALID;
		r.copyCount = 1;
		append(&r, sizeof(r));
	}
}

static void on_copy(const struct simcuda_copy_info *c)
{
	if (!__atomic_load_n(&on_memcpy, __ATOMIC_ACQUIRE))
		return;
	uint8_t ck = copy_kind(c);
	uint8_t flags = c->async ? CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC : 0;
	if (ck == CUPTI_ACTIVITY_MEMCPY_KIND_PTOP && c->staged_by_driver) {
		staged_halves(c, flags);
		return;
	}
/* The fields the two record layouts share, from the copy as the driver ran it. */
#define FILL_COPY(r, record_kind, c, ck, flags)               \
	do {                                                  \
		memset(&(r), 0, sizeof(r));                   \
		(r).kind = (record_kind);                     \
		(r).copyKind = (ck);                          \
		(r).srcKind = memory_kind((c)->src_device);   \
		(r).dstKind = memory_kind((c)->dst_device);   \
		(r).flags = (flags);                          \
		(r).bytes = (c)->bytes;                       \
		(r).start = (c)->start_ns;                    \
		(r).end = (c)->end_ns;                        \
		(r).deviceId = (uint32_t)(c)->device;         \
		(r).contextId = (c)->context_id;              \
		(r).streamId = (c)->stream_id;                \
		(r).correlationId = (c)->correlation_id;      \
		(r).graphNodeId = (c)->graph_node_id;         \
		(r).graphId = (c)->graph_id;                  \
		(r).channelType = CUPTI_CHANNEL_TYPE_INVALID; \
	} while (0)
	if (ck == CUPTI_ACTIVITY_MEMCPY_KIND_PTOP &&
	    __atomic_load_n(&on_memcpy2, __ATOMIC_ACQUIRE)) {
		CUpti_ActivityMemcpyPtoP4 r;
		FILL_COPY(r, CUPTI_ACTIVITY_KIND_MEMCPY2, c, ck, flags);
		r.srcDeviceId = (uint32_t)c->src_device;
		r.srcContextId = c->src_context_id;
		r.dstDeviceId = (uint32_t)c->dst_device;
		r.dstContextId = c->dst_context_id;
		append(&r, sizeof(r));
		return;
	}
	CUpti_ActivityMemcpy6 r;
	FILL_COPY(r, CUPTI_ACTIVITY_KIND_MEMCPY, c, ck, flags);
	r.copyCount = 1;
	append(&r, sizeof(r));
#undef FILL_COPY
}

static size_t record_size(CUpti_ActivityKind kind)
{
	switch (kind) {
	case CUPTI_ACTIVITY_KIND_MEMCPY:
		return sizeof(CUpti_ActivityMemcpy6);
	case CUPTI_ACTIVITY_KIND_MEMCPY2:
		return sizeof(CUpti_ActivityMemcpyPtoP4);
	default:
		return 0;
	}
}

/* ---- API ---- */

API CUptiResult CUPTIAPI cuptiGetVersion(uint32_t *version)
{
	if (!version)
		return CUPTI_ERROR_INVALID_PARAMETER;
	*version = CUPTI_API_VERSION;
	return CUPTI_SUCCESS;
}

API CUptiResult CUPTIAPI cuptiGetResultString(CUptiResult result, const char **str)
{
#define R(name) [name] = #name
	static const char *const names[] = {
	    R(CUPTI_SUCCESS),
	    R(CUPTI_ERROR_INVALID_PARAMETER),
	    R(CUPTI_ERROR_INVALID_DEVICE),
	    R(CUPTI_ERROR_INVALID_CONTEXT),
	    R(CUPTI_ERROR_INVALID_EVENT_DOMAIN_ID),
	    R(CUPTI_ERROR_INVALID_EVENT_ID),
	    R(CUPTI_ERROR_INVALID_EVENT_NAME),
	    R(CUPTI_ERROR_INVALID_OPERATION),
	    R(CUPTI_ERROR_OUT_OF_MEMORY),
	    R(CUPTI_ERROR_HARDWARE),
	    R(CUPTI_ERROR_PARAMETER_SIZE_NOT_SUFFICIENT),
	    R(CUPTI_ERROR_API_NOT_IMPLEMENTED),
	    R(CUPTI_ERROR_MAX_LIMIT_REACHED),
	    R(CUPTI_ERROR_NOT_READY),
	    R(CUPTI_ERROR_NOT_COMPATIBLE),
	    R(CUPTI_ERROR_NOT_INITIALIZED),
	    R(CUPTI_ERROR_INVALID_METRIC_ID),
	    R(CUPTI_ERROR_INVALID_METRIC_NAME),
	    R(CUPTI_ERROR_QUEUE_EMPTY),
	    R(CUPTI_ERROR_INVALID_HANDLE),
	    R(CUPTI_ERROR_INVALID_STREAM),
	    R(CUPTI_ERROR_INVALID_KIND),
	    R(CUPTI_ERROR_INVALID_EVENT_VALUE),
	    R(CUPTI_ERROR_DISABLED),
	    R(CUPTI_ERROR_INVALID_MODULE),
	    R(CUPTI_ERROR_INVALID_METRIC_VALUE),
	    R(CUPTI_ERROR_HARDWARE_BUSY),
	    R(CUPTI_ERROR_NOT_SUPPORTED),
	    R(CUPTI_ERROR_UM_PROFILING_NOT_SUPPORTED),
	    R(CUPTI_ERROR_UM_PROFILING_NOT_SUPPORTED_ON_DEVICE),
	    R(CUPTI_ERROR_UM_PROFILING_NOT_SUPPORTED_ON_NON_P2P_DEVICES),
	    R(CUPTI_ERROR_UM_PROFILING_NOT_SUPPORTED_WITH_MPS),
	    R(CUPTI_ERROR_CDP_TRACING_NOT_SUPPORTED),
	    R(CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED),
	    R(CUPTI_ERROR_CUDA_COMPILER_NOT_COMPATIBLE),
	    R(CUPTI_ERROR_INSUFFICIENT_PRIVILEGES),
	    R(CUPTI_ERROR_OLD_PROFILER_API_INITIALIZED),
	    R(CUPTI_ERROR_OPENACC_UNDEFINED_ROUTINE),
	    R(CUPTI_ERROR_LEGACY_PROFILER_NOT_SUPPORTED),
	    R(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED),
	    R(CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES),
	    R(CUPTI_ERROR_CONFIDENTIAL_COMPUTING_NOT_SUPPORTED),
	    R(CUPTI_ERROR_CMP_DEVICE_NOT_SUPPORTED),
	    R(CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED),
	    R(CUPTI_ERROR_SLI_DEVICE_NOT_SUPPORTED),
	    R(CUPTI_ERROR_WSL_DEVICE_NOT_SUPPORTED),
	    R(CUPTI_ERROR_INVALID_CHIP_NAME),
	};
#undef R
	const char *s = NULL;
	if (result == CUPTI_ERROR_UNKNOWN)
		s = "CUPTI_ERROR_UNKNOWN";
	else if ((unsigned)result < sizeof(names) / sizeof(names[0]))
		s = names[result];
	if (!str || !s)
		return CUPTI_ERROR_INVALID_PARAMETER;
	*str = s;
	return CUPTI_SUCCESS;
}

API CUptiResult CUPTIAPI cuptiGetTimestamp(uint64_t *timestamp)
{
	if (!timestamp)
		return CUPTI_ERROR_INVALID_PARAMETER;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	*timestamp = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	return CUPTI_SUCCESS;
}

static CUptiResult from_cu(CUresult r, CUptiResult invalid_handle)
{
	switch (r) {
	case CUDA_SUCCESS:
		return CUPTI_SUCCESS;
	case CUDA_ERROR_INVALID_VALUE:
		return CUPTI_ERROR_INVALID_PARAMETER;
	case CUDA_ERROR_NOT_INITIALIZED:
	case CUDA_ERROR_NO_DEVICE:
		return CUPTI_ERROR_NOT_INITIALIZED;
	case CUDA_ERROR_INVALID_CONTEXT:
	case CUDA_ERROR_CONTEXT_IS_DESTROYED:
		return CUPTI_ERROR_INVALID_CONTEXT;
	case CUDA_ERROR_OUT_OF_MEMORY:
		return CUPTI_ERROR_OUT_OF_MEMORY;
	default:
		return invalid_handle;
	}
}

API CUptiResult CUPTIAPI cuptiGetContextId(CUcontext context, uint32_t *contextId)
{
	if (!contextId)
		return CUPTI_ERROR_INVALID_PARAMETER;
	if (!context)
		return CUPTI_ERROR_INVALID_CONTEXT;
	if (!hooks())
		return CUPTI_ERROR_NOT_INITIALIZED;
	return from_cu(context_tool_id(context, contextId), CUPTI_ERROR_INVALID_CONTEXT);
}

API CUptiResult CUPTIAPI cuptiGetStreamIdEx(CUcontext context, CUstream stream,
					    uint8_t perThreadStream, uint32_t *streamId)
{
	if (!streamId)
		return CUPTI_ERROR_INVALID_PARAMETER;
	if (!hooks())
		return CUPTI_ERROR_NOT_INITIALIZED;
	/* A default stream is one per context: without the context the real CUPTI gave no ID on
	 * the H200 (the guard's copies on PyTorch's default stream went untimed until it passed
	 * the current context). */
	if (!context && (!stream || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD))
		return CUPTI_ERROR_INVALID_STREAM;
	return from_cu(stream_tool_id(context, stream, perThreadStream != 0, streamId),
		       CUPTI_ERROR_INVALID_STREAM);
}

API CUptiResult CUPTIAPI
cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc funcBufferRequested,
			       CUpti_BuffersCallbackCompleteFunc funcBufferCompleted)
{
	if (!funcBufferRequested || !funcBufferCompleted)
		return CUPTI_ERROR_INVALID_PARAMETER;
	pthread_mutex_lock(&mu);
	buffer_requested = funcBufferRequested;
	buffer_completed = funcBufferCompleted;
	pthread_mutex_unlock(&mu);
	return CUPTI_SUCCESS;
}

static bool valid_kind(CUpti_ActivityKind kind)
{
	return kind > CUPTI_ACTIVITY_KIND_INVALID && kind < CUPTI_ACTIVITY_KIND_COUNT;
}

API CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind kind)
{
	bool have = hooks();
	if (fail_enable)
		return CUPTI_ERROR_NOT_INITIALIZED;
	if (!valid_kind(kind))
		return CUPTI_ERROR_INVALID_KIND;
	bool *flag;
	switch (kind) {
	case CUPTI_ACTIVITY_KIND_MEMCPY:
		flag = &on_memcpy;
		break;
	case CUPTI_ACTIVITY_KIND_MEMCPY2:
		flag = &on_memcpy2;
		break;
	case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION:
		flag = &on_ext;
		break;
	default:
		return CUPTI_ERROR_NOT_COMPATIBLE;
	}
	if (!have)
		return CUPTI_ERROR_NOT_INITIALIZED;
	pthread_mutex_lock(&mu);
	if (!observing) {
		set_copy_observer(on_copy);
		observing = true;
	}
	__atomic_store_n(flag, true, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&mu);
	return CUPTI_SUCCESS;
}

API CUptiResult CUPTIAPI cuptiActivityDisable(CUpti_ActivityKind kind)
{
	if (!valid_kind(kind))
		return CUPTI_ERROR_INVALID_KIND;
	if (kind == CUPTI_ACTIVITY_KIND_MEMCPY)
		__atomic_store_n(&on_memcpy, false, __ATOMIC_RELEASE);
	else if (kind == CUPTI_ACTIVITY_KIND_MEMCPY2)
		__atomic_store_n(&on_memcpy2, false, __ATOMIC_RELEASE);
	else if (kind == CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION)
		__atomic_store_n(&on_ext, false, __ATOMIC_RELEASE);
	return CUPTI_SUCCESS;
}

API CUptiResult CUPTIAPI cuptiActivityFlushAll(uint32_t flag)
{
	/* Forced or not, every record here is complete. A forced flush also returns the buffers
	 * that hold none (the one being filled, and spares that two threads requested at once), as
	 * the real one returns every buffer it holds: the client gets back all it handed over. */
	bool forced = flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED;
	if (in_flush)
		return CUPTI_SUCCESS; /* called from bufferCompleted: the outer flush delivers */
	pthread_mutex_lock(&flush_mu);
	in_flush = true;
	pthread_mutex_lock(&mu);
	CUpti_BuffersCallbackCompleteFunc done = buffer_completed;
	if (!done) {
		pthread_mutex_unlock(&mu);
		in_flush = false;
		pthread_mutex_unlock(&flush_mu);
		return CUPTI_ERROR_INVALID_OPERATION;
	}
	if (cur && (cur->nrec || forced)) {
		queue_full(cur);
		cur = NULL;
	}
	while (forced && spare) {
		struct buf *b = spare;
		spare = b->next;
		queue_full(b);
	}
	struct buf *list = full_head;
	full_head = NULL;
	full_tail = &full_head;
	pthread_mutex_unlock(&mu);
	while (list) {
		struct buf *next = list->next;
		done(NULL, 0, list->p, list->size, list->nrec ? list->used : 0);
		free(list);
		list = next;
	}
	in_flush = false;
	pthread_mutex_unlock(&flush_mu);
	return CUPTI_SUCCESS;
}

API CUptiResult CUPTIAPI cuptiActivityGetNextRecord(uint8_t *buffer, size_t validBufferSizeBytes,
						    CUpti_Activity **record)
{
	if (!buffer || !record)
		return CUPTI_ERROR_INVALID_PARAMETER;
	uintptr_t base = (uintptr_t)buffer, end = base + validBufferSizeBytes, pos;
	if (!*record) {
		pos = align8(base);
	} else {
		size_t n = record_size((*record)->kind);
		if (!n)
			return CUPTI_ERROR_INVALID_KIND;
		pos = align8((uintptr_t)*record + n);
	}
	if (pos >= end)
		return CUPTI_ERROR_MAX_LIMIT_REACHED;
	CUpti_ActivityKind kind;
	if (end - pos < sizeof(kind))
		return CUPTI_ERROR_INVALID_KIND;
	memcpy(&kind, (const void *)pos, sizeof(kind));
	size_t n = record_size(kind);
	if (!n || end - pos < n)
		return CUPTI_ERROR_INVALID_KIND;
	*record = (CUpti_Activity *)pos;
	return CUPTI_SUCCESS;
}

/* One global queue: the count is the same whatever context and stream are named. */
API CUptiResult CUPTIAPI cuptiActivityGetNumDroppedRecords(CUcontext context, uint32_t streamId,
							   size_t *dropped_out)
{
	(void)context;
	(void)streamId;
	if (!dropped_out)
		return CUPTI_ERROR_INVALID_PARAMETER;
	pthread_mutex_lock(&mu);
	*dropped_out = dropped;
	dropped = 0;
	pthread_mutex_unlock(&mu);
	return CUPTI_SUCCESS;
}

/* External correlation: per-thread stacks, one per kind. */
static __thread uint64_t ext_ids[CUPTI_EXTERNAL_CORRELATION_KIND_SIZE][EXT_DEPTH];
static __thread unsigned ext_depth[CUPTI_EXTERNAL_CORRELATION_KIND_SIZE];

static bool valid_ext_kind(CUpti_ExternalCorrelationKind kind)
{
	return kind > CUPTI_EXTERNAL_CORRELATION_KIND_INVALID &&
	       kind < CUPTI_EXTERNAL_CORRELATION_KIND_SIZE;
}

API CUptiResult CUPTIAPI cuptiActivityPushExternalCorrelationId(CUpti_ExternalCorrelationKind kind,
								uint64_t id)
{
	if (!valid_ext_kind(kind))
		return CUPTI_ERROR_INVALID_PARAMETER;
	if (ext_depth[kind] == EXT_DEPTH)
		return CUPTI_ERROR_MAX_LIMIT_REACHED;
	ext_ids[kind][ext_depth[kind]++] = id;
	return CUPTI_SUCCESS;
}

API CUptiResult CUPTIAPI cuptiActivityPopExternalCorrelationId(CUpti_ExternalCorrelationKind kind,
							       uint64_t *lastId)
{
	if (!valid_ext_kind(kind))
		return CUPTI_ERROR_INVALID_PARAMETER;
	if (ext_depth[kind] == 0)
		return CUPTI_ERROR_QUEUE_EMPTY;
	uint64_t id = ext_ids[kind][--ext_depth[kind]];
	if (lastId)
		*lastId = id;
	return CUPTI_SUCCESS;
}

/* ---- process life ---- */

/* A fork while a worker held mu must not leave the child's flush hanging. mu is held only for
 * short bookkeeping, so fork waits for it; flush_mu may be held across a client callback, so the
 * child gets a fresh one (only the forking thread exists there). */
static void atfork_prepare(void)
{
	pthread_mutex_lock(&mu);
}

static void atfork_parent(void)
{
	pthread_mutex_unlock(&mu);
}

static void atfork_child(void)
{
	pthread_mutex_unlock(&mu);
	pthread_mutex_init(&flush_mu, NULL);
	in_flush = false;
}

__attribute__((constructor)) static void cupti_init(void)
{
	pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

/* Copies still running at exit are not traced: the client's callbacks may be gone. */
__attribute__((destructor)) static void cupti_fini(void)
{
	if (observing)
		set_copy_observer(NULL);
}
