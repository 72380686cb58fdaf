/* SPDX-License-Identifier: MIT */
#include "cupti_timing.h"

#include <cupti.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "driver.h"

/* Activity buffers: a few reused, more allocated only while CUPTI holds them all. Allocated with
 * aligned_alloc, so that a profiler that takes CUPTI over and is handed one of ours may free it. */
#define BUFFER_BYTES ((size_t)1 << 20)
#define POOL_BUFFERS 8
/* Halves of driver-staged copies waiting for their other half. */
#define HALVES 256

struct half {
	bool used, dtoh;
	uint32_t correlation, context_id, stream_id, device;
	uint64_t bytes, start, end;
};

bool p2pg_cupti_on;

static struct {
	void *lib;
	__typeof__(cuptiActivityRegisterCallbacks) *RegisterCallbacks;
	__typeof__(cuptiActivityEnable) *Enable;
	__typeof__(cuptiActivityDisable) *Disable;
	__typeof__(cuptiActivityFlushAll) *FlushAll;
	__typeof__(cuptiActivityGetNextRecord) *GetNextRecord;
	__typeof__(cuptiGetStreamIdEx) *GetStreamIdEx;
	__typeof__(cuptiGetContextId) *GetContextId;
	__typeof__(cuptiGetResultString) *GetResultString;

	pthread_mutex_t lock; /* the pool and the parsed copies */
	uint8_t *pool[POOL_BUFFERS];
	unsigned npool;
	struct p2pg_gpu_copy *copies; /* parsed, not yet collected */
	size_t ncopies, cap;
	struct half halves[HALVES];
	unsigned next_half;
	uint64_t now_ns; /* when the buffer being parsed came: records without time are seen then */
} cu = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
	pthread_mutex_lock(&cu.lock);
	uint8_t *b = cu.npool ? cu.pool[--cu.npool] : NULL;
	pthread_mutex_unlock(&cu.lock);
	if (!b)
		b = aligned_alloc(8, BUFFER_BYTES);
	*buffer = b;
	*size = b ? BUFFER_BYTES : 0;
	*max_records = 0;
}

/* With cu.lock held. */
static void keep(const struct p2pg_gpu_copy *c)
{
	if (cu.ncopies == cu.cap) {
		size_t cap = cu.cap ? cu.cap * 2 : 1024;
		struct p2pg_gpu_copy *grown = realloc(cu.copies, cap * sizeof(*grown));
		if (!grown)
			return; /* out of memory: its row keeps no time */
		cu.copies = grown;
		cu.cap = cap;
	}
	cu.copies[cu.ncopies++] = *c;
}

/* A stream is known to CUPTI by its context's ID and its own, unique only within the context. */
static struct p2pg_gpu_copy copy_of(uint64_t start, uint64_t end, uint64_t bytes,
				    uint32_t context_id, uint32_t stream_id, uint32_t src,
				    uint32_t dst)
{
	bool has_time = start && end && end >= start;
	return (struct p2pg_gpu_copy){
	    .start_ns = has_time ? start : cu.now_ns,
	    .end_ns = has_time ? end : cu.now_ns,
	    .bytes = bytes,
	    .context_id = context_id,
	    .stream_id = stream_id,
	    .src_device = (int16_t)src,
	    .dst_device = (int16_t)dst,
	    .has_time = has_time,
	};
}

/* With cu.lock held. A peer copy over P2P: one record. */
static void keep_peer(const CUpti_ActivityMemcpyPtoP4 *m)
{
	if (m->copyKind != CUPTI_ACTIVITY_MEMCPY_KIND_PTOP || m->graphId != 0)
		return; /* a graph's node runs at launch, where the guard saw no call */
	struct p2pg_gpu_copy c = copy_of(m->start, m->end, m->bytes, m->contextId, m->streamId,
					 m->srcDeviceId, m->dstDeviceId);
	keep(&c);
}

/*
 * With cu.lock held. A peer copy without peer access, which the driver stages through the host,
 * comes as two MEMCPY records of one correlation ID (seen on the H200): a DTOH on the source
 * device and an HTOD on the destination, both between memory of kind DEVICE. One of them ran on
 * the caller's stream, the other on a stream of the driver's; which one depends on the caller's
 * stream's device, so the whole copy is queued under both halves' streams and the driver stream's
 * entry finds no row and ages out.
 */
static void keep_half(const CUpti_ActivityMemcpy6 *m)
{
	bool dtoh = m->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
	if ((!dtoh && m->copyKind != CUPTI_ACTIVITY_MEMCPY_KIND_HTOD) ||
	    m->srcKind != CUPTI_ACTIVITY_MEMORY_KIND_DEVICE ||
	    m->dstKind != CUPTI_ACTIVITY_MEMORY_KIND_DEVICE || m->graphId != 0 ||
	    m->correlationId == 0)
		return;
	for (unsigned k = 0; k < HALVES; k++) {
		struct half *h = &cu.halves[k];
		if (!h->used || h->correlation != m->correlationId || h->dtoh == dtoh ||
		    h->bytes != m->bytes)
			continue;
		h->used = false;
		/* From the DTOH's start on the source to the HTOD's end on the destination. */
		uint64_t start = dtoh ? m->start : h->start, end = dtoh ? h->end : m->end;
		uint32_t src = dtoh ? m->deviceId : h->device, dst = dtoh ? h->device : m->deviceId;
		struct p2pg_gpu_copy a =
		    copy_of(start, end, m->bytes, h->context_id, h->stream_id, src, dst);
		struct p2pg_gpu_copy b =
		    copy_of(start, end, m->bytes, m->contextId, m->streamId, src, dst);
		keep(&a);
		keep(&b);
		return;
	}
	struct half *slot = &cu.halves[cu.next_half++ % HALVES]; /* the oldest goes */
	*slot = (struct half){.used = true,
			      .dtoh = dtoh,
			      .correlation = m->correlationId,
			      .context_id = m->contextId,
			      .stream_id = m->streamId,
			      .device = m->deviceId,
			      .bytes = m->bytes,
			      .start = m->start,
			      .end = m->end};
}

/* P2PGUARD_TEST=local-copies: a copy within one device counts as a peer copy (set once, before
 * CUPTI starts). */
static bool time_local_copies;

void p2pg_cupti_time_local_copies(bool on)
{
	time_local_copies = on;
}

/* With cu.lock held. A copy between two buffers of one device (only for the test hook above). */
static void keep_local(const CUpti_ActivityMemcpy6 *m)
{
	if (m->copyKind != CUPTI_ACTIVITY_MEMCPY_KIND_DTOD || m->graphId != 0)
		return;
	struct p2pg_gpu_copy c = copy_of(m->start, m->end, m->bytes, m->contextId, m->streamId,
					 m->deviceId, m->deviceId);
	keep(&c);
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream_id, uint8_t *buffer,
				      size_t size, size_t valid)
{
	(void)ctx;
	(void)stream_id;
	(void)size;
	bool parse = p2pg_cupti_active(); /* a forked child collects nothing */
	uint64_t now = p2pg_realtime_ns();
	pthread_mutex_lock(&cu.lock);
	cu.now_ns = now;
	CUpti_Activity *rec = NULL;
	while (parse && buffer && valid && cu.GetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
		if (rec->kind == CUPTI_ACTIVITY_KIND_MEMCPY2)
			keep_peer((const CUpti_ActivityMemcpyPtoP4 *)rec);
		else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMCPY && time_local_copies &&
			 ((const CUpti_ActivityMemcpy6 *)rec)->copyKind ==
			     CUPTI_ACTIVITY_MEMCPY_KIND_DTOD)
			keep_local((const CUpti_ActivityMemcpy6 *)rec);
		else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMCPY)
			keep_half((const CUpti_ActivityMemcpy6 *)rec);
	}
	if (buffer && cu.npool < POOL_BUFFERS) {
		cu.pool[cu.npool++] = buffer;
		buffer = NULL;
	}
	pthread_mutex_unlock(&cu.lock);
	free(buffer);
}

static const char *result_name(CUptiResult r)
{
	const char *s = NULL;
	if (!cu.GetResultString || cu.GetResultString(r, &s) != CUPTI_SUCCESS || !s)
		return "unknown CUPTI status";
	return s;
}

static bool load(char *why, size_t why_len)
{
	const char *const candidates[] = {
	    getenv("P2PGUARD_CUPTI"),
	    "libcupti.so.13",
	    "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13",
	    "/usr/local/cuda/lib64/libcupti.so.13",
	};
	for (size_t k = 0; k < sizeof(candidates) / sizeof(candidates[0]) && !cu.lib; k++)
		if (candidates[k] && *candidates[k])
			cu.lib = dlopen(candidates[k], RTLD_NOW | RTLD_LOCAL);
	if (!cu.lib) {
		snprintf(why, why_len, "no libcupti.so.13 (set P2PGUARD_CUPTI to its path)");
		return false;
	}
#define RESOLVE(field, name)                                                      \
	do {                                                                      \
		cu.field = (__typeof__(cu.field))p2pg_real_dlsym(cu.lib, name);   \
		if (!cu.field) {                                                  \
			snprintf(why, why_len, "libcupti.so.13 has no %s", name); \
			return false;                                             \
		}                                                                 \
	} while (0)
	RESOLVE(RegisterCallbacks, "cuptiActivityRegisterCallbacks");
	RESOLVE(Enable, "cuptiActivityEnable");
	RESOLVE(FlushAll, "cuptiActivityFlushAll");
	RESOLVE(GetNextRecord, "cuptiActivityGetNextRecord");
	RESOLVE(GetStreamIdEx, "cuptiGetStreamIdEx");
	RESOLVE(GetContextId, "cuptiGetContextId");
	RESOLVE(Disable, "cuptiActivityDisable");
	RESOLVE(GetResultString, "cuptiGetResultString");
#undef RESOLVE
	return true;
}

bool p2pg_cupti_start(char *why, size_t why_len)
{
	const char *injected = getenv("CUDA_INJECTION64_PATH");
	if (injected && *injected) {
		snprintf(why, why_len, "a profiler owns CUPTI (CUDA_INJECTION64_PATH=%s)",
			 injected);
		return false;
	}
	if (!load(why, why_len))
		return false;
	CUptiResult r = cu.RegisterCallbacks(buffer_requested, buffer_completed);
	/* Peer copies come as MEMCPY2 records, but only while MEMCPY itself is on (measured on
	 * the H200: MEMCPY2 alone records nothing). */
	if (r == CUPTI_SUCCESS)
		r = cu.Enable(CUPTI_ACTIVITY_KIND_MEMCPY);
	if (r == CUPTI_SUCCESS) {
		r = cu.Enable(CUPTI_ACTIVITY_KIND_MEMCPY2);
		if (r != CUPTI_SUCCESS) /* no half-started tracing that nobody reads */
			cu.Disable(CUPTI_ACTIVITY_KIND_MEMCPY);
	}
	if (r != CUPTI_SUCCESS) {
		snprintf(why, why_len, "CUPTI refused: %s (%d)", result_name(r), (int)r);
		return false;
	}
	__atomic_store_n(&p2pg_cupti_on, true, __ATOMIC_RELEASE);
	return true;
}

/*
 * cuptiGetStreamIdEx cost 0.15-0.45 us per copy on the H200 (the guard's share in cupti mode,
 * against its share without timing), so each thread keeps the answers for its last few streams.
 * A stream or context handle can come back for a new one, so an entry is only trusted while the
 * driver's own never-reused ID of the stream (cuStreamGetId) or context (cuCtxGetId) still matches.
 */
#define STREAM_CACHE 8

struct stream_entry {
	uintptr_t handle; /* the stream, or for a default stream its context */
	unsigned long long driver_id;
	uint32_t cupti_context, cupti_stream;
	uint8_t kind; /* 1 created stream, 2 legacy default, 3 per-thread default */
};

static __thread struct stream_entry stream_cache[STREAM_CACHE]
    __attribute__((tls_model("initial-exec")));

/* CUPTI's IDs of a stream and of its context, asked of CUPTI. */
static bool ask(CUcontext ctx, CUstream stream, bool per_thread, uint32_t *ret_context,
		uint32_t *ret_stream)
{
	if (!ctx && p2pg_drv.cuStreamGetCtx(stream, &ctx) != CUDA_SUCCESS)
		return false;
	return cu.GetContextId(ctx, ret_context) == CUPTI_SUCCESS &&
	       cu.GetStreamIdEx(ctx, stream, per_thread ? 1 : 0, ret_stream) == CUPTI_SUCCESS;
}

bool p2pg_cupti_stream_id(CUstream stream, bool per_thread, uint32_t *ret_context,
			  uint32_t *ret_stream)
{
	bool dflt = !stream || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD;
	CUcontext ctx = NULL;
	uintptr_t handle = (uintptr_t)stream;
	unsigned long long driver_id = 0;
	uint8_t kind = 1;
	if (dflt) {
		/* One per context (CUPTI gives no ID without it): the call just made the right
		 * context current. */
		if (p2pg_drv.cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || !ctx)
			return false;
		handle = (uintptr_t)ctx;
		driver_id = p2pg_context_key(ctx);
		kind = (stream == CU_STREAM_PER_THREAD || (!stream && per_thread)) ? 3 : 2;
	} else if (!p2pg_drv.cuStreamGetId ||
		   p2pg_drv.cuStreamGetId(stream, &driver_id) != CUDA_SUCCESS) {
		return ask(NULL, stream, per_thread, ret_context, ret_stream);
	}
	struct stream_entry *e =
	    &stream_cache[((handle >> 4) ^ (handle >> 12) ^ kind) % STREAM_CACHE];
	if (e->handle == handle && e->kind == kind && e->driver_id == driver_id) {
		*ret_context = e->cupti_context;
		*ret_stream = e->cupti_stream;
		return true;
	}
	if (!ask(ctx, stream, per_thread, ret_context, ret_stream))
		return false;
	*e = (struct stream_entry){handle, driver_id, *ret_context, *ret_stream, kind};
	return true;
}

static size_t take(struct p2pg_gpu_match *m)
{
	pthread_mutex_lock(&cu.lock);
	size_t n = cu.ncopies;
	for (size_t k = 0; k < n; k++)
		p2pg_gpu_match_copy(m, &cu.copies[k]); /* out of memory: its row keeps no time */
	cu.ncopies = 0;
	pthread_mutex_unlock(&cu.lock);
	return n;
}

/*
 * A default flush hands over every buffer whose records all have their times (a buffer holding a
 * copy still queued behind a long kernel waits for it); a forced one would hand over copies in
 * flight without times, so it is never used.
 */
size_t p2pg_cupti_collect(struct p2pg_gpu_match *m, bool flush)
{
	if (!p2pg_cupti_active())
		return 0;
	if (flush)
		cu.FlushAll(0);
	return take(m);
}

void p2pg_cupti_give_up(void)
{
	/* Its kinds stay as they are: they may be the profiler's now. */
	__atomic_store_n(&p2pg_cupti_on, false, __ATOMIC_RELEASE);
}

void p2pg_cupti_after_fork_child(void)
{
	/* CUPTI's state does not survive fork(); the child times with events. */
	__atomic_store_n(&p2pg_cupti_on, false, __ATOMIC_RELEASE);
	pthread_mutex_init(&cu.lock, NULL);
}
