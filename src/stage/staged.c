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
 */
#include "staged.h"

#include "driver.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

/*
 * Chunking, from the pipeline's timing and measurements on the H200 pair (bench_staged, and
 * pipelines timed by hand, 2026-11-22).
 *  - With D2H and H2D at the same rate, a copy cut into chunks t_1..t_n ends at sum(t) + max(t):
 *    the largest chunk's D2H cannot overlap its own H2D, whatever the order. So chunks are equal.
 *  - Each DMA costs about 3 us of engine time beyond its bytes: 64 MiB of pinned D2H alone runs at
 *    54.0 GB/s in 8 pieces, 53.0 in 16, 51.2 in 32, 47.4 in 64. Two engine streams per direction
 *    (tried: alternating chunks, staggered or not) do not hide it, nor do fewer events: recording
 *    "drained" only once per copy, or never waiting for a slot, changed nothing measurable.
 *  - So a copy of T seconds in N chunks takes about T + N*g + T/N + a few us of event hops, which
 *    is smallest at N = sqrt(T/g), i.e. N = sqrt(bytes / (g * rate)) with g * rate = 3 us * 55 GB/s
 *    = about 160 KiB: DEFAULT_CHUNK_COST. 64 MiB goes as 20 chunks of 3.2 MiB (48.5-49.0 GB/s; no
 *    chunking does better: fill plus per-DMA costs are 150 us of its 1.22 ms); pinned D2H or H2D
 *    alone runs at 55.0-55.4.
 *  - The ring must stay small. Both directions at once (two rings in use) ran at 63-80 GB/s with
 *    64 MiB rings, 67-85 with 32 MiB and 77-88 with 12-16 MiB ones, three runs each; one direction
 *    lost nothing. Likely the host's cache: DMA writes land in the last-level cache, and a small
 *    ring is read back from there. Too shallow hurts too: two 8 MiB slots cost 64 MiB copies 6%.
 *    Three slots of 5 MiB per destination: 1 GiB at 52.6 GB/s one way (205 chunks; 8 MiB chunks
 *    would reach 53.2 but need a larger ring), 256 MiB at 51.5, both ways 79-88.
 *  - Copies up to 512 KiB go in one piece: below that the per-DMA and per-chunk host costs (about
 *    6 us to enqueue a chunk) outweigh the overlap.
 *  - The budget (256 MiB by default) is split evenly between possible destinations; 15 MiB rings
 *    fit it up to 17 devices, beyond that the rings get fewer or smaller slots (ring_geometry).
 */
#define DEFAULT_SLOT_BYTES ((size_t)5 << 20)
#define DEFAULT_SLOTS	   3u
#define DEFAULT_MIN_CHUNK  ((size_t)512 << 10)
#define DEFAULT_CHUNK_COST ((size_t)160 << 10)
#define DEFAULT_BUDGET	   ((size_t)256 << 20)

/* A ring never gets less than two slots of this size, whatever the budget. */
#define MIN_SLOT_BYTES ((size_t)4 << 10)
#define MIN_RING_SLOTS 2u
/* Ring depth when the budget forces smaller slots: three keep both legs busy. */
#define SMALL_RING_SLOTS 3u
#define CHUNK_ALIGN	 ((size_t)4 << 10)

/* Caller contexts whose start event a pair keeps; rarer ones get a temporary event. */
#define START_CACHE 4
/* Events kept for synchronous copies per pair (more concurrent ones create and destroy). */
#define SYNC_CACHE 4
/* Caller streams per pair whose last wait is remembered (see "Skipping the slot wait"). */
#define COVER_CACHE 4

struct pair;

struct slot {
	CUevent drained; /* destination context; recorded after the H2D out of this slot */
	bool pending;	 /* drained has been recorded at least once */
	/* Where the H2D that last read the slot ran: the H2D stream of last_pair, or (caller set)
	 * the caller's stream last_stream. */
	bool caller;
	struct pair *last_pair;
	unsigned long long last_stream;
	uint64_t last_seq;
};

struct ring {
	pthread_mutex_t lock;
	unsigned char *host;
	size_t slot_bytes;
	unsigned nslots;
	unsigned next;
	uint64_t seq; /* H2Ds enqueued out of this ring */
	struct slot *slots;
};

struct start_event {
	CUcontext ctx;
	CUevent event;
};

struct cover {
	unsigned long long stream;
	uint64_t seq; /* the stream waited for the pair's H2Ds up to this ring sequence number */
};

struct pair {
	CUcontext src_ctx, dst_ctx;
	struct ring *ring; /* the destination's; its lock covers everything below */
	CUstream d2h;	   /* on the source device */
	CUstream h2d;	   /* on the destination device */
	CUevent landed;	   /* source context; recorded after each D2H */
	struct start_event start[START_CACHE];
	unsigned nstart;
	CUevent sync_free[SYNC_CACHE]; /* destination context */
	unsigned nsync_free;
	struct cover cover[COVER_CACHE];
	unsigned ncover, cover_next;
};

typedef CUresult(CUDAAPI *stream_get_ctx_fn)(CUstream stream, CUcontext *ctx);

static struct {
	pthread_once_t once;
	CUresult init_status;
	pthread_mutex_t lock; /* creation of everything below */
	int ndev;
	CUcontext *ctx;	     /* retained primary contexts, NULL until first use */
	struct ring **rings; /* per destination device */
	struct pair **pairs; /* [src * ndev + dst], published with release stores */
	size_t budget;
	size_t pinned; /* bytes of rings allocated */
	struct p2pg_staged_tuning tuning;
	bool frozen; /* a pair exists: tuning can no longer change */
	stream_get_ctx_fn stream_get_ctx;
} eng = {
    .once = PTHREAD_ONCE_INIT,
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .budget = DEFAULT_BUDGET,
    .tuning = {DEFAULT_SLOT_BYTES, DEFAULT_SLOTS, DEFAULT_MIN_CHUNK, DEFAULT_CHUNK_COST},
};

void p2pg_staged_set_budget(size_t bytes)
{
	pthread_mutex_lock(&eng.lock);
	eng.budget = bytes;
	pthread_mutex_unlock(&eng.lock);
}

void p2pg_staged_get_tuning(struct p2pg_staged_tuning *ret)
{
	pthread_mutex_lock(&eng.lock);
	*ret = eng.tuning;
	pthread_mutex_unlock(&eng.lock);
}

int p2pg_staged_set_tuning(const struct p2pg_staged_tuning *t)
{
	if (!t || t->slot_bytes < CHUNK_ALIGN || !t->slots || !t->min_chunk || !t->chunk_cost)
		return -EINVAL;
	int r = 0;
	pthread_mutex_lock(&eng.lock);
	if (eng.frozen)
		r = -EBUSY;
	else
		eng.tuning = *t;
	pthread_mutex_unlock(&eng.lock);
	return r;
}

size_t p2pg_staged_pinned_bytes(void)
{
	pthread_mutex_lock(&eng.lock);
	size_t n = eng.pinned;
	pthread_mutex_unlock(&eng.lock);
	return n;
}

/*
 * cuStreamGetCtx with its original ABI. The driver table resolves every entry at the headers'
 * CUDA_VERSION, and from CUDA 12.5 on that name resolves to cuStreamGetCtx_v2, which takes a third
 * (green context) out-argument: called through the two-argument prototype it writes through a
 * garbage pointer. Asking for the 9.2 ABI gives the function the prototype describes.
 */
static stream_get_ctx_fn resolve_stream_get_ctx(void)
{
	void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	if (!lib)
		return NULL;
	typedef CUresult(CUDAAPI * proc_fn)(const char *, void **, int, cuuint64_t,
					    CUdriverProcAddressQueryResult *);
	proc_fn get_proc = (proc_fn)p2pg_real_dlsym(lib, "cuGetProcAddress_v2");
	void *fn = NULL;
	CUdriverProcAddressQueryResult found;
	if (get_proc && get_proc("cuStreamGetCtx", &fn, 9020, CU_GET_PROC_ADDRESS_LEGACY_STREAM,
				 &found) != CUDA_SUCCESS)
		fn = NULL;
	/* The handle only took a reference: the driver stays loaded for the process anyway. */
	dlclose(lib);
	return (stream_get_ctx_fn)fn;
}

static bool driver_complete(void)
{
	/* What the engine calls; cuStreamIsCapturing and cuStreamGetId are optional. */
	return p2pg_drv.cuInit && p2pg_drv.cuDeviceGetCount && p2pg_drv.cuDeviceGet &&
	       p2pg_drv.cuDevicePrimaryCtxRetain && p2pg_drv.cuCtxGetCurrent &&
	       p2pg_drv.cuCtxSetCurrent && p2pg_drv.cuCtxPushCurrent && p2pg_drv.cuCtxPopCurrent &&
	       p2pg_drv.cuStreamCreate && p2pg_drv.cuStreamWaitEvent && p2pg_drv.cuEventCreate &&
	       p2pg_drv.cuEventDestroy && p2pg_drv.cuEventRecord && p2pg_drv.cuEventSynchronize &&
	       p2pg_drv.cuMemAllocHost && p2pg_drv.cuMemFreeHost && p2pg_drv.cuMemcpyDtoHAsync &&
	       p2pg_drv.cuMemcpyHtoDAsync;
}

static void engine_init(void)
{
	if (p2pg_driver_load() < 0) {
		eng.init_status = CUDA_ERROR_NOT_INITIALIZED;
		return;
	}
	eng.stream_get_ctx = resolve_stream_get_ctx();
	if (!driver_complete() || !eng.stream_get_ctx) {
		eng.init_status = CUDA_ERROR_NOT_SUPPORTED;
		return;
	}
	/* Idempotent; a program that copies between devices has initialised the driver already. */
	CUresult r = p2pg_drv.cuInit(0);
	int n = 0;
	if (r == CUDA_SUCCESS)
		r = p2pg_drv.cuDeviceGetCount(&n);
	if (r != CUDA_SUCCESS) {
		eng.init_status = r;
		return;
	}
	if (n <= 0) {
		eng.init_status = CUDA_ERROR_NO_DEVICE;
		return;
	}
	eng.ctx = calloc((size_t)n, sizeof(*eng.ctx));
	eng.rings = calloc((size_t)n, sizeof(*eng.rings));
	eng.pairs = calloc((size_t)n * (size_t)n, sizeof(*eng.pairs));
	if (!eng.ctx || !eng.rings || !eng.pairs) {
		free(eng.ctx);
		free(eng.rings);
		free(eng.pairs);
		eng.init_status = CUDA_ERROR_OUT_OF_MEMORY;
		return;
	}
	eng.ndev = n;
	eng.init_status = CUDA_SUCCESS;
}

/* Called with eng.lock held. */
static CUresult device_ctx(int ordinal, CUcontext *ret)
{
	if (eng.ctx[ordinal]) {
		*ret = eng.ctx[ordinal];
		return CUDA_SUCCESS;
	}
	CUdevice dev;
	CUcontext ctx;
	CUresult r = p2pg_drv.cuDeviceGet(&dev, ordinal);
	if (r == CUDA_SUCCESS)
		r = p2pg_drv.cuDevicePrimaryCtxRetain(&ctx, dev);
	if (r != CUDA_SUCCESS)
		return r;
	/* Kept for the life of the process: the engine's streams and rings live in it. */
	eng.ctx[ordinal] = ctx;
	*ret = ctx;
	return CUDA_SUCCESS;
}

/*
 * Slot count and size for a ring of at most cap bytes: the configured geometry when it fits,
 * otherwise fewer slots first (down to SMALL_RING_SLOTS), then smaller slots, never under two of
 * MIN_SLOT_BYTES.
 */
static void ring_geometry(size_t cap, size_t *ret_slot_bytes, unsigned *ret_slots)
{
	const struct p2pg_staged_tuning *t = &eng.tuning;
	size_t slot = t->slot_bytes - t->slot_bytes % CHUNK_ALIGN;
	unsigned n = t->slots;
	if (cap / n < slot) {
		size_t fit = cap / slot;
		unsigned small = t->slots < SMALL_RING_SLOTS ? t->slots : SMALL_RING_SLOTS;
		n = fit >= small ? (unsigned)fit : small;
		slot = cap / n;
		slot -= slot % CHUNK_ALIGN;
		if (slot < MIN_SLOT_BYTES) {
			slot = MIN_SLOT_BYTES;
			n = (unsigned)(cap / slot);
			if (n < MIN_RING_SLOTS)
				n = MIN_RING_SLOTS;
		}
	}
	*ret_slot_bytes = slot;
	*ret_slots = n;
}

static void ring_free(struct ring *ring)
{
	if (!ring)
		return;
	if (ring->slots)
		for (unsigned k = 0; k < ring->nslots; k++)
			if (ring->slots[k].drained)
				p2pg_drv.cuEventDestroy(ring->slots[k].drained);
	if (ring->host)
		p2pg_drv.cuMemFreeHost(ring->host);
	free(ring->slots);
	free(ring);
}

/* Called with eng.lock held and the destination's context current. */
static CUresult ring_create(struct ring **ret)
{
	/* The budget is split evenly between the devices that may ever be destinations, so a later
	 * destination always finds its share. */
	size_t cap = eng.budget / (size_t)eng.ndev;
	size_t left = eng.budget > eng.pinned ? eng.budget - eng.pinned : 0;
	if (cap > left)
		cap = left;
	size_t slot_bytes;
	unsigned nslots;
	ring_geometry(cap, &slot_bytes, &nslots);

	struct ring *ring = calloc(1, sizeof(*ring));
	if (!ring)
		return CUDA_ERROR_OUT_OF_MEMORY;
	ring->slot_bytes = slot_bytes;
	ring->nslots = nslots;
	ring->slots = calloc(nslots, sizeof(*ring->slots));
	if (!ring->slots) {
		ring_free(ring);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	void *host = NULL;
	CUresult r = p2pg_drv.cuMemAllocHost(&host, slot_bytes * nslots);
	if (r != CUDA_SUCCESS) {
		ring_free(ring);
		return r;
	}
	ring->host = host;
	for (unsigned k = 0; k < nslots; k++) {
		r = p2pg_drv.cuEventCreate(&ring->slots[k].drained, CU_EVENT_DISABLE_TIMING);
		if (r != CUDA_SUCCESS) {
			ring->slots[k].drained = NULL;
			ring_free(ring);
			return r;
		}
	}
	pthread_mutex_init(&ring->lock, NULL);
	eng.pinned += slot_bytes * nslots;
	*ret = ring;
	return CUDA_SUCCESS;
}

static CUresult with_ctx(CUcontext ctx, CUresult (*fn)(void *), void *arg)
{
	CUresult r = p2pg_drv.cuCtxPushCurrent(ctx);
	if (r != CUDA_SUCCESS)
		return r;
	r = fn(arg);
	CUcontext popped;
	CUresult p = p2pg_drv.cuCtxPopCurrent(&popped);
	return r != CUDA_SUCCESS ? r : p;
}

static CUresult make_ring_fn(void *arg)
{
	return ring_create(arg);
}

static CUresult make_src_fn(void *arg)
{
	struct pair *p = arg;
	CUresult r = p2pg_drv.cuStreamCreate(&p->d2h, CU_STREAM_NON_BLOCKING);
	if (r == CUDA_SUCCESS)
		r = p2pg_drv.cuEventCreate(&p->landed, CU_EVENT_DISABLE_TIMING);
	return r;
}

static CUresult make_dst_fn(void *arg)
{
	struct pair *p = arg;
	return p2pg_drv.cuStreamCreate(&p->h2d, CU_STREAM_NON_BLOCKING);
}

static CUresult free_src_fn(void *arg)
{
	struct pair *p = arg;
	if (p->landed)
		p2pg_drv.cuEventDestroy(p->landed);
	if (p->d2h)
		p2pg_drv.cuStreamDestroy(p->d2h);
	p->landed = NULL;
	p->d2h = NULL;
	return CUDA_SUCCESS;
}

static CUresult free_dst_fn(void *arg)
{
	struct pair *p = arg;
	if (p->h2d)
		p2pg_drv.cuStreamDestroy(p->h2d);
	p->h2d = NULL;
	return CUDA_SUCCESS;
}

static struct pair *pair_slow(int src, int dst, CUresult *ret_status)
{
	struct pair *p = NULL;
	CUresult r;
	pthread_mutex_lock(&eng.lock);
	size_t idx = (size_t)src * (size_t)eng.ndev + (size_t)dst;
	p = eng.pairs[idx];
	if (p)
		goto out;
	eng.frozen = true;
	CUcontext sctx, dctx;
	r = device_ctx(src, &sctx);
	if (r == CUDA_SUCCESS)
		r = device_ctx(dst, &dctx);
	if (r != CUDA_SUCCESS)
		goto fail;
	if (!eng.rings[dst]) {
		struct ring *ring = NULL;
		r = with_ctx(dctx, make_ring_fn, &ring);
		if (r != CUDA_SUCCESS) {
			/* Made, but the context could not be restored after: given back. */
			if (ring) {
				eng.pinned -= ring->slot_bytes * ring->nslots;
				ring_free(ring);
			}
			goto fail;
		}
		eng.rings[dst] = ring;
	}
	struct pair *np = calloc(1, sizeof(*np));
	if (!np) {
		r = CUDA_ERROR_OUT_OF_MEMORY;
		goto fail;
	}
	np->src_ctx = sctx;
	np->dst_ctx = dctx;
	np->ring = eng.rings[dst];
	r = with_ctx(sctx, make_src_fn, np);
	if (r == CUDA_SUCCESS)
		r = with_ctx(dctx, make_dst_fn, np);
	if (r != CUDA_SUCCESS) {
		/* A half-built pair gives back what it got, each in its own context. */
		with_ctx(sctx, free_src_fn, np);
		with_ctx(dctx, free_dst_fn, np);
		free(np);
		goto fail;
	}
	p = np;
	__atomic_store_n(&eng.pairs[idx], p, __ATOMIC_RELEASE);
out:
	pthread_mutex_unlock(&eng.lock);
	return p;
fail:
	pthread_mutex_unlock(&eng.lock);
	*ret_status = r;
	return NULL;
}

static inline struct pair *pair_get(int src, int dst, CUresult *ret_status)
{
	struct pair *p = __atomic_load_n(&eng.pairs[(size_t)src * (size_t)eng.ndev + (size_t)dst],
					 __ATOMIC_ACQUIRE);
	return p ? p : pair_slow(src, dst, ret_status);
}

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

/* Chunk length for a copy of n bytes through slots of slot_bytes (see the top of the file). */
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
	} else if ((r = eng.stream_get_ctx(k->cstream, &k->cctx)) != CUDA_SUCCESS) {
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

CUresult p2pg_staged_prepare(int src_device, int dst_device)
{
	pthread_once(&eng.once, engine_init);
	if (eng.init_status != CUDA_SUCCESS)
		return eng.init_status;
	if (src_device < 0 || src_device >= eng.ndev || dst_device < 0 || dst_device >= eng.ndev)
		return CUDA_ERROR_INVALID_DEVICE;
	CUresult r = CUDA_SUCCESS;
	return pair_get(src_device, dst_device, &r) ? CUDA_SUCCESS : r;
}

CUresult p2pg_staged_copy(const struct p2pg_staged_copy *c)
{
	if (!c)
		return CUDA_ERROR_INVALID_VALUE;
	if (c->bytes == 0)
		return CUDA_SUCCESS;
	pthread_once(&eng.once, engine_init);
	if (eng.init_status != CUDA_SUCCESS)
		return eng.init_status;
	if (c->src_device < 0 || c->src_device >= eng.ndev || c->dst_device < 0 ||
	    c->dst_device >= eng.ndev)
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
	size_t chunk_len = chunk_bytes(c->bytes, k.p->ring->slot_bytes, &eng.tuning);
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
