/* SPDX-License-Identifier: MIT */
/*
 * The staged copy engine.
 *
 * Shape. Every destination device owns one ring of pinned host slots (cuMemAllocHost: portable
 * under unified addressing, so any device can DMA into it). Every (source, destination) pair owns
 * two non-blocking engine streams, one on the source device for device-to-host copies and one on
 * the destination device for host-to-device copies, and a "landed" event. A chunk is: make sure the
 * slot's previous H2D has run (a GPU-side wait), D2H into the slot, record "landed", make the H2D
 * stream wait for it, H2D out of the slot, record the slot's "drained" event. The host never waits
 * on the GPU in the asynchronous path; all ordering is between streams, on the GPU.
 *
 * Three ways through, chosen per copy:
 *  - one chunk, caller's stream in the source device's primary context (cudaMemcpyPeerAsync on the
 *    source device, PyTorch's cross-device copy): the D2H goes on the caller's stream itself, which
 *    orders it after earlier work for free; the H2D on the pair's H2D stream; the caller's stream
 *    then waits for the slot's drained event. Two cross-device hops, six enqueueing calls.
 *  - one chunk, caller's stream in the destination's primary context: the H2D goes on the caller's
 *    stream; the D2H on the engine's stream after an event recorded on the caller's stream.
 *  - anything else (several chunks, other contexts): an event recorded on the caller's stream, the
 *    engine's D2H stream waits for it, the chunks go through the engine's streams and the caller's
 *    stream waits for the last chunk's drained event.
 *
 * Why one ring per destination and not per pair: a slot's drained event must live in the context
 * of the stream it is recorded on (the destination's), so a ring shared by every pair into one
 * destination keeps each slot to one event, bounds the number of rings by the number of devices
 * (the budget is simply split between them), and pairs into one destination share its
 * host-to-device link anyway.
 *
 * Why events can be reused: cuStreamWaitEvent waits for the record that was current when it was
 * called, so an event recorded and waited for under the ring lock can be recorded again at once;
 * only the slots' drained events are waited for later, and each slot has its own.
 *
 * Skipping the slot wait: a cross-device cuStreamWaitEvent costs about 1.4 us to enqueue on the
 * H200 pair, a quarter of a small copy's host cost. When the stream about to run the D2H is
 * already ordered after the slot's last H2D the wait is left out: either that H2D ran on the
 * caller's stream itself, or the caller's stream waited (at the end of an earlier copy) for a
 * drained event recorded on the pair's H2D stream at or after it. Streams are told apart by
 * cuStreamGetId, which is never reused in a process.
 *
 * Locking: a global mutex for creating devices, rings and pairs (slow path, once); afterwards the
 * pair is found with one atomic load, and each ring's mutex covers the enqueue of one copy, so the
 * slot rotation and the pair's events stay consistent when many threads copy at once. Copies of
 * one pair share its two engine streams, so an engine stream waiting for one caller's earlier
 * work also holds back other callers' later copies on that pair (never a deadlock: each wait is
 * for work enqueued before it).
 *
 * This file is the copy; what it runs on (the devices' contexts, the rings, the pairs, the budget
 * and tuning they are made by, and the measurements behind the chunking) is made in
 * staged_setup.c.
 */
#include "staged.h"

#include <pthread.h>
#include <stdint.h>

#include "driver.h"
#include "staged-private.h"

/* One call of p2pg_staged_copy. */
struct call {
	const struct p2pg_staged_copy *c;
	struct pair *p;
	CUcontext saved, cur; /* the caller's current context; the one set now */
	CUstream cstream;     /* the caller's stream, special handles resolved */
	CUcontext cctx;	      /* its context */
	bool ordered;	      /* there is a caller's stream to order against */
	bool have_sid;
	unsigned long long sid; /* cuStreamGetId of cstream */
	const struct cover *cover;
};

/* Switches the current context only when needed; the caller's is restored at the end. */
static inline CUresult use_ctx(struct call *k, CUcontext ctx)
{
	if (k->cur == ctx)
		return CUDA_SUCCESS;
	CUresult r = p2pg_drv.cuCtxSetCurrent(ctx);
	if (r == CUDA_SUCCESS)
		k->cur = ctx;
	return r;
}

static inline bool is_default_stream(CUstream s)
{
	return s == NULL || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD;
}

/*
 * Whether a D2H into sl may skip waiting for the slot's last H2D: the stream running it must
 * already be ordered after the caller's stream as it is now (true on every path), and the caller's
 * stream after that H2D.
 */
static inline bool slot_is_free(const struct call *k, const struct slot *sl)
{
	if (!sl->pending)
		return true;
	if (!k->have_sid)
		return false;
	if (sl->caller)
		return sl->last_stream == k->sid;
	return k->cover && sl->last_pair == k->p && sl->last_seq <= k->cover->seq;
}

static const struct cover *cover_find(const struct pair *p, unsigned long long sid)
{
	for (unsigned k = 0; k < p->ncover; k++)
		if (p->cover[k].stream == sid)
			return &p->cover[k];
	return NULL;
}

/* The caller's stream (sid) has just been made to wait for the pair's H2Ds up to seq. */
static void cover_note(struct pair *p, unsigned long long sid, uint64_t seq)
{
	struct cover *c = (struct cover *)cover_find(p, sid);
	if (!c) {
		if (p->ncover < COVER_CACHE) {
			c = &p->cover[p->ncover++];
		} else {
			c = &p->cover[p->cover_next];
			p->cover_next = (p->cover_next + 1) % COVER_CACHE;
		}
		c->stream = sid;
	}
	c->seq = seq;
}

/*
 * The pair's event for a caller context (that context is current). Ring lock held. *ret_temp is
 * set when the event is a one-off the caller must destroy after waiting for it.
 */
static CUresult start_event(struct pair *p, CUcontext ctx, bool fresh, CUevent *ret, bool *ret_temp)
{
	unsigned k;
	for (k = 0; k < p->nstart; k++)
		if (p->start[k].ctx == ctx)
			break;
	if (k < p->nstart && !fresh) {
		*ret = p->start[k].event;
		*ret_temp = false;
		return CUDA_SUCCESS;
	}
	CUevent ev;
	CUresult r = p2pg_drv.cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING);
	if (r != CUDA_SUCCESS)
		return r;
	if (k < p->nstart) {
		/* A stale entry (its context was destroyed, the handle came back): its event is
		 * unusable and destroying it would fail the same way, so it is dropped. */
		p->start[k].event = ev;
		*ret_temp = false;
	} else if (p->nstart < START_CACHE) {
		p->start[p->nstart].ctx = ctx;
		p->start[p->nstart].event = ev;
		p->nstart++;
		*ret_temp = false;
	} else {
		*ret_temp = true;
	}
	*ret = ev;
	return CUDA_SUCCESS;
}

/* Records an event on the caller's stream and makes the pair's D2H stream wait for it. Ring lock
 * held. */
static CUresult after_caller(struct call *k)
{
	struct pair *p = k->p;
	CUresult r = use_ctx(k, k->cctx);
	if (r != CUDA_SUCCESS)
		return r;
	CUevent ev;
	bool temp;
	if ((r = start_event(p, k->cctx, false, &ev, &temp)) != CUDA_SUCCESS)
		return r;
	r = p2pg_drv.cuEventRecord(ev, k->cstream);
	if ((r == CUDA_ERROR_INVALID_HANDLE || r == CUDA_ERROR_CONTEXT_IS_DESTROYED) && !temp) {
		/* The cached event may belong to a destroyed context whose handle was reused. */
		if ((r = start_event(p, k->cctx, true, &ev, &temp)) != CUDA_SUCCESS)
			return r;
		r = p2pg_drv.cuEventRecord(ev, k->cstream);
	}
	if (r == CUDA_SUCCESS)
		r = p2pg_drv.cuStreamWaitEvent(p->d2h, ev, 0);
	if (temp)
		p2pg_drv.cuEventDestroy(ev);
	return r;
}

/*
 * One chunk through the next slot: D2H on d2h (a stream of the source's primary context), H2D on
 * h2d (of the destination's), which is the caller's stream when caller is set. Ring lock held.
 * *ret_slot is the slot used.
 */
static CUresult chunk(struct call *k, CUstream d2h, CUstream h2d, bool caller, size_t off,
		      size_t len, struct slot **ret_slot)
{
	struct pair *p = k->p;
	struct ring *ring = p->ring;
	unsigned idx = ring->next;
	struct slot *sl = &ring->slots[idx];
	unsigned char *host = ring->host + (size_t)idx * ring->slot_bytes;
	CUresult r;

	if ((r = use_ctx(k, p->src_ctx)) != CUDA_SUCCESS)
		return r;
	if (!slot_is_free(k, sl) && (r = p2pg_drv.cuStreamWaitEvent(d2h, sl->drained, 0)))
		return r;
	if ((r = p2pg_drv.cuMemcpyDtoHAsync(host, k->c->src + off, len, d2h)) ||
	    (r = p2pg_drv.cuEventRecord(p->landed, d2h)))
		return r;
	if ((r = use_ctx(k, p->dst_ctx)) != CUDA_SUCCESS)
		return r;
	if ((r = p2pg_drv.cuStreamWaitEvent(h2d, p->landed, 0)) ||
	    (r = p2pg_drv.cuMemcpyHtoDAsync(k->c->dst + off, host, len, h2d)) ||
	    (r = p2pg_drv.cuEventRecord(sl->drained, h2d)))
		return r;
	sl->pending = true;
	sl->caller = caller;
	sl->last_pair = p;
	sl->last_stream = caller ? k->sid : 0;
	sl->last_seq = ++ring->seq;
	ring->next = idx + 1 == ring->nslots ? 0 : idx + 1;
	*ret_slot = sl;
	return CUDA_SUCCESS;
}

/* Ring lock held, destination context current. */
static CUresult sync_event_take(struct pair *p, CUevent *ret)
{
	if (p->nsync_free) {
		*ret = p->sync_free[--p->nsync_free];
		return CUDA_SUCCESS;
	}
	return p2pg_drv.cuEventCreate(ret, CU_EVENT_DISABLE_TIMING);
}

static void sync_event_give(struct call *k, CUevent ev)
{
	struct pair *p = k->p;
	pthread_mutex_lock(&p->ring->lock);
	if (p->nsync_free < SYNC_CACHE) {
		p->sync_free[p->nsync_free++] = ev;
		ev = NULL;
	}
	pthread_mutex_unlock(&p->ring->lock);
	if (ev && use_ctx(k, p->dst_ctx) == CUDA_SUCCESS)
		p2pg_drv.cuEventDestroy(ev);
}

/* Records a fresh event on stream (destination context) for a synchronous copy to wait for. */
static CUresult sync_mark(struct call *k, CUstream stream, CUevent *ret)
{
	CUresult r = use_ctx(k, k->p->dst_ctx);
	CUevent ev = NULL;
	if (r == CUDA_SUCCESS)
		r = sync_event_take(k->p, &ev);
	if (r == CUDA_SUCCESS && (r = p2pg_drv.cuEventRecord(ev, stream)) != CUDA_SUCCESS)
		p2pg_drv.cuEventDestroy(ev);
	if (r == CUDA_SUCCESS)
		*ret = ev;
	return r;
}

/* One chunk, D2H on the caller's stream (a stream of the source's primary context). */
static CUresult copy_from_caller(struct call *k, CUevent *ret_sync)
{
	struct pair *p = k->p;
	struct slot *sl;
	CUresult r = chunk(k, k->cstream, p->h2d, false, 0, k->c->bytes, &sl);
	if (r != CUDA_SUCCESS)
		return r;
	if (!k->c->async)
		return sync_mark(k, p->h2d, ret_sync);
	if ((r = use_ctx(k, k->cctx)) != CUDA_SUCCESS ||
	    (r = p2pg_drv.cuStreamWaitEvent(k->cstream, sl->drained, 0)) != CUDA_SUCCESS)
		return r;
	if (k->have_sid)
		cover_note(p, k->sid, sl->last_seq);
	return CUDA_SUCCESS;
}

/* One chunk, H2D on the caller's stream (a stream of the destination's primary context): later
 * work on it follows without a wait. */
static CUresult copy_into_caller(struct call *k, CUevent *ret_sync)
{
	struct pair *p = k->p;
	struct slot *sl;
	CUresult r = after_caller(k);
	if (r == CUDA_SUCCESS)
		r = chunk(k, p->d2h, k->cstream, true, 0, k->c->bytes, &sl);
	if (r == CUDA_SUCCESS && !k->c->async)
		r = sync_mark(k, k->cstream, ret_sync);
	return r;
}

static size_t isqrt(size_t v)
{
	size_t r = 0;
	for (size_t bit = (size_t)1 << (sizeof(size_t) * 8 - 2); bit; bit >>= 2) {
		if (v >= r + bit) {
			v -= r + bit;
			r = (r >> 1) + bit;
		} else {
			r >>= 1;
		}
	}
	return r;
}

/* Chunk length for a copy of n bytes through slots of slot_bytes (why: staged_setup.c, above
 * the defaults). */
static size_t chunk_bytes(size_t n, size_t slot_bytes, const struct p2pg_staged_tuning *t)
{
	if (n <= t->min_chunk && n <= slot_bytes)
		return n;
	size_t count = isqrt(n / t->chunk_cost);
	if (count < 1)
		count = 1;
	size_t c = n / count + (n % count != 0);
	if (c < t->min_chunk)
		c = t->min_chunk;
	if (c > slot_bytes)
		c = slot_bytes;
	/* Equal chunks: the largest one sets the pipeline's fill and drain time. */
	count = n / c + (n % c != 0);
	c = n / count + (n % count != 0);
	c = (c + CHUNK_ALIGN - 1) / CHUNK_ALIGN * CHUNK_ALIGN;
	return c < slot_bytes ? c : slot_bytes;
}

/* Chunks through the pair's engine streams, after the caller's stream and before its later work. */
static CUresult copy_chunked(struct call *k, size_t chunk_len, CUevent *ret_sync)
{
	struct pair *p = k->p;
	size_t n = k->c->bytes;
	struct slot *last = NULL;
	CUresult r;
	if (k->ordered && (r = after_caller(k)) != CUDA_SUCCESS)
		return r;
	for (size_t off = 0; off < n;) {
		size_t len = n - off < chunk_len ? n - off : chunk_len;
		if ((r = chunk(k, p->d2h, p->h2d, false, off, len, &last)) != CUDA_SUCCESS)
			return r;
		off += len;
	}
	if (!k->c->async)
		return sync_mark(k, p->h2d, ret_sync);
	if ((r = use_ctx(k, k->cctx)) != CUDA_SUCCESS ||
	    (r = p2pg_drv.cuStreamWaitEvent(k->cstream, last->drained, 0)) != CUDA_SUCCESS)
		return r;
	if (k->have_sid)
		cover_note(p, k->sid, last->last_seq);
	return CUDA_SUCCESS;
}

/* Finds the caller's stream and its context; false with *ret_status when the copy must fail. */
static bool caller_stream(struct call *k, CUresult *ret_status)
{
	const struct p2pg_staged_copy *c = k->c;
	k->cstream = c->stream;
	if (is_default_stream(k->cstream))
		k->cstream = c->per_thread_stream ? CU_STREAM_PER_THREAD : CU_STREAM_LEGACY;
	k->ordered = true;
	CUresult r;
	if (k->cstream == CU_STREAM_LEGACY || k->cstream == CU_STREAM_PER_THREAD) {
		k->cctx = k->saved;
		if (!k->cctx) {
			/* No context, so no default stream: an async copy fails as the driver
			 * would; a synchronous one has nothing to be ordered after. */
			if (c->async) {
				*ret_status = CUDA_ERROR_INVALID_CONTEXT;
				return false;
			}
			k->ordered = false;
			return true;
		}
	} else if ((r = p2pg_staged_eng.stream_get_ctx(k->cstream, &k->cctx)) != CUDA_SUCCESS) {
		*ret_status = r;
		return false;
	}
	if (p2pg_drv.cuStreamIsCapturing && !c->not_capturing) {
		/* The engine's streams and slots cannot become part of a graph: a capturing
		 * caller must get the driver's own copy (the guard falls back on this status). */
		CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
		if ((r = p2pg_drv.cuStreamIsCapturing(k->cstream, &capture)) != CUDA_SUCCESS) {
			*ret_status = r;
			return false;
		}
		if (capture != CU_STREAM_CAPTURE_STATUS_NONE) {
			*ret_status = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
			return false;
		}
	}
	k->have_sid =
	    p2pg_drv.cuStreamGetId && p2pg_drv.cuStreamGetId(k->cstream, &k->sid) == CUDA_SUCCESS;
	return true;
}

CUresult p2pg_staged_copy(const struct p2pg_staged_copy *c)
{
	if (!c)
		return CUDA_ERROR_INVALID_VALUE;
	if (c->bytes == 0)
		return CUDA_SUCCESS;
	pthread_once(&p2pg_staged_eng.once, p2pg_staged_engine_init);
	if (p2pg_staged_eng.init_status != CUDA_SUCCESS)
		return p2pg_staged_eng.init_status;
	if (c->src_device < 0 || c->src_device >= p2pg_staged_eng.ndev || c->dst_device < 0 ||
	    c->dst_device >= p2pg_staged_eng.ndev)
		return CUDA_ERROR_INVALID_DEVICE;

	CUresult r = CUDA_SUCCESS;
	struct call k = {.c = c};
	if (!(k.p = pair_get(c->src_device, c->dst_device, &r)))
		return r;
	if ((r = p2pg_drv.cuCtxGetCurrent(&k.saved)) != CUDA_SUCCESS)
		return r;
	k.cur = k.saved;
	if (!caller_stream(&k, &r))
		return r;

	/* Frozen since the pair was published (acquire above), so read without the lock. */
	size_t chunk_len = chunk_bytes(c->bytes, k.p->ring->slot_bytes, &p2pg_staged_eng.tuning);
	bool one = chunk_len >= c->bytes;
	CUevent sync_ev = NULL;

	pthread_mutex_lock(&k.p->ring->lock);
	if (k.have_sid)
		k.cover = cover_find(k.p, k.sid);
	if (one && k.ordered && k.cctx == k.p->src_ctx)
		r = copy_from_caller(&k, &sync_ev);
	else if (one && k.ordered && k.cctx == k.p->dst_ctx)
		r = copy_into_caller(&k, &sync_ev);
	else
		r = copy_chunked(&k, chunk_len, &sync_ev);
	pthread_mutex_unlock(&k.p->ring->lock);

	if (sync_ev) {
		r = p2pg_drv.cuEventSynchronize(sync_ev);
		sync_event_give(&k, sync_ev);
	}
	if (k.cur != k.saved) {
		CUresult rr = p2pg_drv.cuCtxSetCurrent(k.saved);
		if (r == CUDA_SUCCESS)
			r = rr;
	}
	return r;
}
