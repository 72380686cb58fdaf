/* SPDX-License-Identifier: MIT */
/*
 * What staged copies run on, made once and kept for the process: the driver's entries the engine
 * needs, the devices' primary contexts, each destination's ring of pinned slots and each pair's
 * streams and events; and the budget and tuning they are made by, with the measurements behind the
 * defaults. Kept apart from the copies themselves (staged.c), which only find what is made here.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "driver.h"
#include "staged-private.h"

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

struct p2pg_staged_engine p2pg_staged_eng = {
    .once = PTHREAD_ONCE_INIT,
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .budget = DEFAULT_BUDGET,
    .tuning = {DEFAULT_SLOT_BYTES, DEFAULT_SLOTS, DEFAULT_MIN_CHUNK, DEFAULT_CHUNK_COST},
};

void p2pg_staged_set_budget(size_t bytes)
{
	pthread_mutex_lock(&p2pg_staged_eng.lock);
	p2pg_staged_eng.budget = bytes;
	pthread_mutex_unlock(&p2pg_staged_eng.lock);
}

void p2pg_staged_get_tuning(struct p2pg_staged_tuning *ret)
{
	pthread_mutex_lock(&p2pg_staged_eng.lock);
	*ret = p2pg_staged_eng.tuning;
	pthread_mutex_unlock(&p2pg_staged_eng.lock);
}

int p2pg_staged_set_tuning(const struct p2pg_staged_tuning *t)
{
	if (!t || t->slot_bytes < CHUNK_ALIGN || !t->slots || !t->min_chunk || !t->chunk_cost)
		return -EINVAL;
	int r = 0;
	pthread_mutex_lock(&p2pg_staged_eng.lock);
	if (p2pg_staged_eng.frozen)
		r = -EBUSY;
	else
		p2pg_staged_eng.tuning = *t;
	pthread_mutex_unlock(&p2pg_staged_eng.lock);
	return r;
}

size_t p2pg_staged_pinned_bytes(void)
{
	pthread_mutex_lock(&p2pg_staged_eng.lock);
	size_t n = p2pg_staged_eng.pinned;
	pthread_mutex_unlock(&p2pg_staged_eng.lock);
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

void p2pg_staged_engine_init(void)
{
	if (p2pg_driver_load() < 0) {
		p2pg_staged_eng.init_status = CUDA_ERROR_NOT_INITIALIZED;
		return;
	}
	p2pg_staged_eng.stream_get_ctx = resolve_stream_get_ctx();
	if (!driver_complete() || !p2pg_staged_eng.stream_get_ctx) {
		p2pg_staged_eng.init_status = CUDA_ERROR_NOT_SUPPORTED;
		return;
	}
	/* Idempotent; a program that copies between devices has initialised the driver already. */
	CUresult r = p2pg_drv.cuInit(0);
	int n = 0;
	if (r == CUDA_SUCCESS)
		r = p2pg_drv.cuDeviceGetCount(&n);
	if (r != CUDA_SUCCESS) {
		p2pg_staged_eng.init_status = r;
		return;
	}
	if (n <= 0) {
		p2pg_staged_eng.init_status = CUDA_ERROR_NO_DEVICE;
		return;
	}
	p2pg_staged_eng.ctx = calloc((size_t)n, sizeof(*p2pg_staged_eng.ctx));
	p2pg_staged_eng.rings = calloc((size_t)n, sizeof(*p2pg_staged_eng.rings));
	p2pg_staged_eng.pairs = calloc((size_t)n * (size_t)n, sizeof(*p2pg_staged_eng.pairs));
	if (!p2pg_staged_eng.ctx || !p2pg_staged_eng.rings || !p2pg_staged_eng.pairs) {
		free(p2pg_staged_eng.ctx);
		free(p2pg_staged_eng.rings);
		free(p2pg_staged_eng.pairs);
		p2pg_staged_eng.init_status = CUDA_ERROR_OUT_OF_MEMORY;
		return;
	}
	p2pg_staged_eng.ndev = n;
	p2pg_staged_eng.init_status = CUDA_SUCCESS;
}

/* Called with p2pg_staged_eng.lock held. */
static CUresult device_ctx(int ordinal, CUcontext *ret)
{
	if (p2pg_staged_eng.ctx[ordinal]) {
		*ret = p2pg_staged_eng.ctx[ordinal];
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
	p2pg_staged_eng.ctx[ordinal] = ctx;
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
	const struct p2pg_staged_tuning *t = &p2pg_staged_eng.tuning;
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

/* Called with p2pg_staged_eng.lock held and the destination's context current. */
static CUresult ring_create(struct ring **ret)
{
	/* The budget is split evenly between the devices that may ever be destinations, so a later
	 * destination always finds its share. */
	size_t cap = p2pg_staged_eng.budget / (size_t)p2pg_staged_eng.ndev;
	size_t left = p2pg_staged_eng.budget > p2pg_staged_eng.pinned
			  ? p2pg_staged_eng.budget - p2pg_staged_eng.pinned
			  : 0;
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
	p2pg_staged_eng.pinned += slot_bytes * nslots;
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

struct pair *p2pg_staged_pair_slow(int src, int dst, CUresult *ret_status)
{
	struct pair *p = NULL;
	CUresult r;
	pthread_mutex_lock(&p2pg_staged_eng.lock);
	size_t idx = (size_t)src * (size_t)p2pg_staged_eng.ndev + (size_t)dst;
	p = p2pg_staged_eng.pairs[idx];
	if (p)
		goto out;
	p2pg_staged_eng.frozen = true;
	CUcontext sctx, dctx;
	r = device_ctx(src, &sctx);
	if (r == CUDA_SUCCESS)
		r = device_ctx(dst, &dctx);
	if (r != CUDA_SUCCESS)
		goto fail;
	if (!p2pg_staged_eng.rings[dst]) {
		struct ring *ring = NULL;
		r = with_ctx(dctx, make_ring_fn, &ring);
		if (r != CUDA_SUCCESS) {
			/* Made, but the context could not be restored after: given back. */
			if (ring) {
				p2pg_staged_eng.pinned -= ring->slot_bytes * ring->nslots;
				ring_free(ring);
			}
			goto fail;
		}
		p2pg_staged_eng.rings[dst] = ring;
	}
	struct pair *np = calloc(1, sizeof(*np));
	if (!np) {
		r = CUDA_ERROR_OUT_OF_MEMORY;
		goto fail;
	}
	np->src_ctx = sctx;
	np->dst_ctx = dctx;
	np->ring = p2pg_staged_eng.rings[dst];
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
	__atomic_store_n(&p2pg_staged_eng.pairs[idx], p, __ATOMIC_RELEASE);
out:
	pthread_mutex_unlock(&p2pg_staged_eng.lock);
	return p;
fail:
	pthread_mutex_unlock(&p2pg_staged_eng.lock);
	*ret_status = r;
	return NULL;
}

CUresult p2pg_staged_prepare(int src_device, int dst_device)
{
	pthread_once(&p2pg_staged_eng.once, p2pg_staged_engine_init);
	if (p2pg_staged_eng.init_status != CUDA_SUCCESS)
		return p2pg_staged_eng.init_status;
	if (src_device < 0 || src_device >= p2pg_staged_eng.ndev || dst_device < 0 ||
	    dst_device >= p2pg_staged_eng.ndev)
		return CUDA_ERROR_INVALID_DEVICE;
	CUresult r = CUDA_SUCCESS;
	return pair_get(src_device, dst_device, &r) ? CUDA_SUCCESS : r;
}
