/* SPDX-License-Identifier: MIT */
/*
 * GPU time of asynchronous copies, from a pair of timing events around the copy in the copy's own
 * stream. Events belong to a context, so the pool keeps a set of event pairs per context. Slots go
 * FREE -> ARMED (hot path, after a CAS) -> PENDING (the record carries the slot to the drainer) ->
 * FREE (drainer, once the end event completed and the elapsed time is read). Nothing here waits:
 * the drainer only ever queries.
 *
 * Why events and why sampled (tests/bench/bench_timing on the H200 pair): two timing events add
 * 1.5-2.4 us to a 256 B peer copy whose own enqueue takes ~2 us, so timing every copy would break
 * the guard's 1 us budget; CUPTI's activity records (+0.3-0.8 us) would take the process's one
 * CUPTI subscription away from profilers. Copies of at least gpu_timing_min_bytes (where the copy
 * dwarfs the cost) are always timed; a thread's smaller ones when it timed none for interval_ns
 * (see sampled()). docs/PERFORMANCE.md has the figures.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "driver.h"
#include "recorder.h"
#include "timing.h"

#define POOL_CONTEXTS 32
/*
 * Copies in flight per context between two drainer passes (every ~5 ms): at the ~2 us a small peer
 * copy takes to enqueue, 4096 cover a pass of back-to-back copies from one thread. The pool grows
 * only when every pair it has is in flight: creating an event costs microseconds (on the H200 a
 * pool walked round-robin through 4096 fresh pairs cost short runs +1.4 us per sampled copy), so
 * pairs are reused first. Pages of slots never grown into stay untouched.
 */
#define POOL_SLOTS 4096

/* SLOT_NEW (zero) is a slot whose events do not exist yet. */
enum slot_state { SLOT_NEW, SLOT_FREE, SLOT_ARMED, SLOT_PENDING };

struct timing_slot {
	_Atomic int state;
	CUevent start, end;
};

/* Pools are found by the context's key (p2pg_context_key), not its handle: a handle that comes back
 * for a new context must not be handed the destroyed context's events. A pool whose context is
 * gone is never found again (its slots are forgotten, not destroyed: their context took them). */
struct context_pool {
	_Atomic unsigned long long key; /* 0: unused */
	CUcontext ctx;
	_Atomic unsigned next;
	_Atomic unsigned grown; /* slots [0, grown) are created or being created */
	struct timing_slot slots[POOL_SLOTS];
};

static struct context_pool pools[POOL_CONTEXTS];
static pthread_mutex_t pools_lock = PTHREAD_MUTEX_INITIALIZER;

static struct p2pg_settings_timing {
	enum p2pg_gpu_timing mode;
	uint64_t interval_ns;
	size_t min_bytes;
} timing_cfg = {P2PG_GPU_TIMING_SAMPLED, 50000, 1 << 20};

/* When this thread last timed a small copy (p2pg_now_ns); 0: never. */
static __thread uint64_t last_sampled_ns __attribute__((tls_model("initial-exec")));

void p2pg_timing_configure(enum p2pg_gpu_timing mode, uint64_t interval_ns, size_t min_bytes)
{
	timing_cfg.mode = mode;
	timing_cfg.interval_ns = interval_ns;
	timing_cfg.min_bytes = min_bytes;
}

static struct context_pool *pool_for(CUcontext ctx)
{
	unsigned long long key = p2pg_context_key(ctx);
	for (int k = 0; k < POOL_CONTEXTS; k++) {
		unsigned long long c = atomic_load_explicit(&pools[k].key, memory_order_acquire);
		if (c == key)
			return &pools[k];
		if (!c)
			break;
	}
	pthread_mutex_lock(&pools_lock);
	struct context_pool *found = NULL;
	for (int k = 0; k < POOL_CONTEXTS && !found; k++) {
		unsigned long long c = atomic_load(&pools[k].key);
		if (c == key) {
			found = &pools[k];
		} else if (!c) {
			pools[k].ctx = ctx;
			atomic_store_explicit(&pools[k].key, key, memory_order_release);
			found = &pools[k];
		}
	}
	pthread_mutex_unlock(&pools_lock);
	return found;
}

static unsigned slot_index(const struct context_pool *pool, const struct timing_slot *slot)
{
	return (unsigned)((pool - pools) * POOL_SLOTS + (slot - pool->slots));
}

static struct timing_slot *slot_at(unsigned index, struct context_pool **ret_pool)
{
	if (index >= POOL_CONTEXTS * POOL_SLOTS)
		return NULL;
	struct context_pool *pool = &pools[index / POOL_SLOTS];
	if (ret_pool)
		*ret_pool = pool;
	return &pool->slots[index % POOL_SLOTS];
}

/*
 * Sampling by time, not by count: a thread's small copy is timed when the thread has timed none for
 * interval_ns. A program whose copies come between kernels, further apart than the interval, gets
 * every copy timed; a burst of back-to-back copies gets one timed per interval, which bounds the
 * events' cost to a fixed share of the thread's time (2.2 us per 50 us by default, and the median
 * copy untimed).
 */
static bool sampled(size_t bytes, uint64_t now_ns)
{
	switch (timing_cfg.mode) {
	case P2PG_GPU_TIMING_OFF:
		return false;
	case P2PG_GPU_TIMING_ALL:
		return true;
	case P2PG_GPU_TIMING_SAMPLED:
	case P2PG_GPU_TIMING_CUPTI: /* what CUPTI does not time is sampled (never configured so) */
		break;
	}
	if (bytes >= timing_cfg.min_bytes)
		return true;
	if (last_sampled_ns && now_ns - last_sampled_ns < timing_cfg.interval_ns)
		return false;
	last_sampled_ns = now_ns ? now_ns : 1;
	return true;
}

/* A free pair among those created, armed for the caller; a few tries, never a wait. */
static struct timing_slot *slot_take(struct context_pool *pool)
{
	unsigned n = atomic_load_explicit(&pool->grown, memory_order_acquire);
	if (n > POOL_SLOTS)
		n = POOL_SLOTS;
	if (!n)
		return NULL;
	for (int tries = 0; tries < 4; tries++) {
		unsigned k = atomic_fetch_add_explicit(&pool->next, 1, memory_order_relaxed) % n;
		struct timing_slot *slot = &pool->slots[k];
		int expected = SLOT_FREE;
		if (atomic_compare_exchange_strong(&slot->state, &expected, SLOT_ARMED))
			return slot;
	}
	return NULL;
}

/* No free pair found among those created (a few probes missed): create the next one, armed for
 * the caller. */
static struct timing_slot *slot_grow(struct context_pool *pool, CUcontext ctx)
{
	/* Checked first so that a full pool's counter stops growing (and never wraps). */
	if (atomic_load_explicit(&pool->grown, memory_order_relaxed) >= POOL_SLOTS)
		return NULL;
	unsigned k = atomic_fetch_add_explicit(&pool->grown, 1, memory_order_acq_rel);
	if (k >= POOL_SLOTS)
		return NULL;
	struct timing_slot *slot = &pool->slots[k];
	/* Events must live in the stream's context: make that context current briefly. */
	CUcontext current = NULL;
	p2pg_drv.cuCtxGetCurrent(&current);
	bool switched = false;
	if (current != ctx) {
		/* Created anywhere else, the events could never be recorded on the stream. */
		if (p2pg_drv.cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
			return NULL;
		switched = true;
	}
	bool ok = p2pg_drv.cuEventCreate(&slot->start, CU_EVENT_DEFAULT) == CUDA_SUCCESS;
	if (ok && p2pg_drv.cuEventCreate(&slot->end, CU_EVENT_DEFAULT) != CUDA_SUCCESS) {
		p2pg_drv.cuEventDestroy(slot->start);
		ok = false;
	}
	if (switched)
		p2pg_drv.cuCtxSetCurrent(current);
	/* A slot whose events could not be made stays SLOT_NEW: nobody can take it. */
	if (!ok)
		return NULL;
	atomic_store_explicit(&slot->state, SLOT_ARMED, memory_order_release);
	return slot;
}

int p2pg_timing_begin(CUstream stream, size_t bytes, uint64_t now_ns, CUevent *ret_end)
{
	if (!sampled(bytes, now_ns) || !p2pg_drv.cuEventRecord || !p2pg_drv.cuEventCreate)
		return -1;
	CUcontext ctx = NULL;
	CUresult rc;
	if (stream == NULL || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD)
		rc = p2pg_drv.cuCtxGetCurrent(&ctx);
	else
		rc = p2pg_drv.cuStreamGetCtx ? p2pg_drv.cuStreamGetCtx(stream, &ctx)
					     : CUDA_ERROR_NOT_SUPPORTED;
	if (rc != CUDA_SUCCESS || !ctx)
		return -1;
	struct context_pool *pool = pool_for(ctx);
	if (!pool)
		return -1;
	struct timing_slot *slot = slot_take(pool);
	if (!slot)
		slot = slot_grow(pool, ctx);
	if (!slot)
		return -1;
	if (p2pg_drv.cuEventRecord(slot->start, stream) != CUDA_SUCCESS) {
		atomic_store(&slot->state, SLOT_FREE);
		return -1;
	}
	*ret_end = slot->end;
	return (int)slot_index(pool, slot);
}

bool p2pg_timing_finish(int index, CUevent end, CUstream stream)
{
	struct timing_slot *slot = slot_at((unsigned)index, NULL);
	if (!slot)
		return false;
	if (p2pg_drv.cuEventRecord(end, stream) != CUDA_SUCCESS) {
		atomic_store(&slot->state, SLOT_FREE);
		return false;
	}
	atomic_store_explicit(&slot->state, SLOT_PENDING, memory_order_release);
	return true;
}

void p2pg_timing_cancel(int index)
{
	struct timing_slot *slot = slot_at((unsigned)index, NULL);
	if (slot)
		atomic_store(&slot->state, SLOT_FREE);
}

enum p2pg_timing_poll p2pg_timing_poll(unsigned index, uint64_t *ret_ns, int *ret_error)
{
	*ret_error = 0;
	struct timing_slot *slot = slot_at(index, NULL);
	if (!slot || atomic_load_explicit(&slot->state, memory_order_acquire) != SLOT_PENDING)
		return P2PG_TIMING_GONE;
	CUresult rc = p2pg_drv.cuEventQuery(slot->end);
	if (rc == CUDA_ERROR_NOT_READY)
		return P2PG_TIMING_NOT_READY;
	float ms = 0;
	enum p2pg_timing_poll result = P2PG_TIMING_GONE;
	if (rc == CUDA_SUCCESS)
		rc = p2pg_drv.cuEventElapsedTime(&ms, slot->start, slot->end);
	if (rc == CUDA_SUCCESS && ms >= 0) {
		*ret_ns = (uint64_t)((double)ms * 1e6 + 0.5);
		if (*ret_ns == 0)
			*ret_ns =
			    1; /* 0 means unknown in the record; the event resolution is ~0.5 us */
		result = P2PG_TIMING_DONE;
	} else {
		*ret_error = (int)rc;
	}
	atomic_store_explicit(&slot->state, SLOT_FREE, memory_order_release);
	return result;
}

void p2pg_timing_reset_after_fork(void)
{
	/* The child cannot use the parent's CUDA state: forget every event without touching it.
	 * Only pools in use are cleared, so the child does not touch pages it never needs. */
	for (int k = 0; k < POOL_CONTEXTS && atomic_load(&pools[k].key); k++)
		memset(&pools[k], 0, sizeof(pools[k]));
	pthread_mutex_init(&pools_lock, NULL); /* another thread may have held it at the fork */
}
