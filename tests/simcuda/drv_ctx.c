/* Simulated driver: contexts (primary and created), the per-thread context stack, peer access. */
#include "sim.h"

#include <stdlib.h>
#include <string.h>

#define STACK_MAX 64

static struct sim_ctx primaries[SIM_MAX_DEVICES];
static struct sim_ctx
    *created; /* destroyed ones stay, marked dead, until cuCtxCreate reuses them */
static unsigned long long next_ctx_id = 1;
/* peer_count[a][b]: enabled mappings from a context of device a to one of device b. */
static int peer_count[SIM_MAX_DEVICES][SIM_MAX_DEVICES];

static __thread struct sim_ctx *stack[STACK_MAX];
static __thread int depth;

CUresult sim_ctx_check(CUcontext h, struct sim_ctx **out)
{
	CUresult r = sim_ready();
	if (r != CUDA_SUCCESS)
		return r;
	struct sim_ctx *c = (struct sim_ctx *)h;
	if (!c || c->magic != SIM_CTX_MAGIC)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (!__atomic_load_n(&c->alive, __ATOMIC_ACQUIRE))
		return CUDA_ERROR_CONTEXT_IS_DESTROYED;
	*out = c;
	return CUDA_SUCCESS;
}

struct sim_ctx *sim_ctx_top(void)
{
	return depth ? stack[depth - 1] : NULL;
}

/* A released primary context can still be made current (measured); using it gives
 * CUDA_ERROR_CONTEXT_IS_DESTROYED. */
CUresult sim_ctx_current(struct sim_ctx **out)
{
	CUresult r = sim_ready();
	if (r != CUDA_SUCCESS)
		return r;
	struct sim_ctx *c = sim_ctx_top();
	if (!c)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (!__atomic_load_n(&c->alive, __ATOMIC_ACQUIRE))
		return CUDA_ERROR_CONTEXT_IS_DESTROYED;
	*out = c;
	return CUDA_SUCCESS;
}

/* For cuCtxSetCurrent and cuCtxPushCurrent: any primary context handle will do. */
static CUresult settable(CUcontext h, struct sim_ctx **out)
{
	CUresult r = sim_ready();
	if (r != CUDA_SUCCESS)
		return r;
	struct sim_ctx *c = (struct sim_ctx *)h;
	if (c && c->magic == SIM_CTX_MAGIC && c->primary) {
		*out = c;
		return CUDA_SUCCESS;
	}
	return sim_ctx_check(h, out);
}

bool sim_p2p_active(int a, int b)
{
	return __atomic_load_n(&peer_count[a][b], __ATOMIC_ACQUIRE) +
		   __atomic_load_n(&peer_count[b][a], __ATOMIC_ACQUIRE) >
	       0;
}

static bool enabled_towards(const struct sim_ctx *c, int dev)
{
	for (int i = 0; i < c->npeers; i++)
		if (c->peers[i]->dev == dev)
			return true;
	return false;
}

/* Peer slots in use: enabled peers, and devices reached only through IPC mappings. */
static int slots_used(const struct sim_ctx *c)
{
	int n = c->npeers;
	for (int d = 0; d < SIM_MAX_DEVICES; d++)
		n += c->ipc_peer_refs[d] > 0 && !enabled_towards(c, d);
	return n;
}

CUresult sim_ctx_ipc_peer_get(struct sim_ctx *c, int dev)
{
	if (dev == c->dev)
		return CUDA_SUCCESS;
	if (!sim_cfg.p2p[c->dev][dev])
		return CUDA_ERROR_PEER_ACCESS_UNSUPPORTED;
	CUresult r = CUDA_SUCCESS;
	pthread_mutex_lock(&sim_mu);
	if (c->ipc_peer_refs[dev] == 0 && !enabled_towards(c, dev) &&
	    slots_used(c) >= SIM_MAX_PEERS)
		r = CUDA_ERROR_TOO_MANY_PEERS;
	else if (c->ipc_peer_refs[dev]++ == 0)
		__atomic_add_fetch(&peer_count[c->dev][dev], 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&sim_mu);
	return r;
}

void sim_ctx_ipc_peer_put(struct sim_ctx *c, int dev)
{
	if (dev == c->dev)
		return;
	pthread_mutex_lock(&sim_mu);
	if (c->ipc_peer_refs[dev] > 0 && --c->ipc_peer_refs[dev] == 0)
		__atomic_sub_fetch(&peer_count[c->dev][dev], 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&sim_mu);
}

static void ctx_init(struct sim_ctx *c, int dev, bool primary)
{
	c->magic = SIM_CTX_MAGIC;
	c->dev = dev;
	c->primary = primary;
	c->id = next_ctx_id++;
	__atomic_store_n(&c->alive, true, __ATOMIC_RELEASE);
}

/* Removes the mapping from -> to; sim_mu held. */
static void unmap_peer(struct sim_ctx *from, int i)
{
	__atomic_sub_fetch(&peer_count[from->dev][from->peers[i]->dev], 1, __ATOMIC_RELEASE);
	from->peers[i] = from->peers[--from->npeers];
}

static void unmap_all_towards(struct sim_ctx *dead, struct sim_ctx *c)
{
	for (int i = 0; i < c->npeers;)
		if (c->peers[i] == dead)
			unmap_peer(c, i);
		else
			i++;
}

/* Everything a context holds goes: queued work that can finish finishes first, then streams,
 * peer mappings in both directions and memory. The handle itself stays valid (primary contexts are
 * reused), but what comes after is a new context: a new ID, so that the old one's events are
 * invalid (CUDA_ERROR_CONTEXT_IS_DESTROYED), as the driver's are once their context is gone. */
static void ctx_teardown(struct sim_ctx *c)
{
	pthread_mutex_lock(&sim_mu);
	sim_ctx_quiesce_locked(c);
	c->id = next_ctx_id++;
	while (c->npeers)
		unmap_peer(c, 0);
	for (int d = 0; d < SIM_MAX_DEVICES; d++)
		if (primaries[d].magic)
			unmap_all_towards(c, &primaries[d]);
	for (struct sim_ctx *o = created; o; o = o->next_created)
		unmap_all_towards(c, o);
	sim_ctx_drop_streams(c);
	pthread_mutex_unlock(&sim_mu);
	sim_mem_free_ctx(c);
}

/* ---- primary contexts ---- */

static CUresult check_dev(CUdevice dev)
{
	CUresult r = sim_ready();
	if (r != CUDA_SUCCESS)
		return r;
	return dev < 0 || dev >= sim_cfg.ndev ? CUDA_ERROR_INVALID_DEVICE : CUDA_SUCCESS;
}

SIM_API CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
	SIM_FAULT();
	CUresult r = check_dev(dev);
	if (r != CUDA_SUCCESS)
		return r;
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_mu);
	struct sim_ctx *c = &primaries[dev];
	if (!c->magic)
		ctx_init(c, dev, true);
	if (c->refs++ == 0)
		__atomic_store_n(&c->alive, true, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&sim_mu);
	*pctx = (CUcontext)c;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
	SIM_FAULT();
	CUresult r = check_dev(dev);
	if (r != CUDA_SUCCESS)
		return r;
	struct sim_ctx *c = &primaries[dev];
	pthread_mutex_lock(&sim_mu);
	if (c->refs == 0) {
		pthread_mutex_unlock(&sim_mu);
		return CUDA_ERROR_INVALID_CONTEXT;
	}
	bool last = --c->refs == 0;
	pthread_mutex_unlock(&sim_mu);
	if (last) {
		ctx_teardown(c);
		pthread_mutex_lock(&sim_mu);
		if (c->refs == 0)
			__atomic_store_n(&c->alive, false, __ATOMIC_RELEASE);
		pthread_mutex_unlock(&sim_mu);
	}
	return CUDA_SUCCESS;
}

SIM_API CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
	SIM_FAULT();
	CUresult r = check_dev(dev);
	if (r != CUDA_SUCCESS)
		return r;
	struct sim_ctx *c = &primaries[dev];
	pthread_mutex_lock(&sim_mu);
	bool active = c->magic && c->refs > 0;
	pthread_mutex_unlock(&sim_mu);
	if (active)
		ctx_teardown(c);
	return CUDA_SUCCESS;
}

SIM_API CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
	SIM_FAULT();
	CUresult r = check_dev(dev);
	if (r != CUDA_SUCCESS)
		return r;
	if (!flags || !active)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_mu);
	*flags = primaries[dev].flags;
	*active = primaries[dev].refs > 0;
	pthread_mutex_unlock(&sim_mu);
	return CUDA_SUCCESS;
}

SIM_API CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags)
{
	SIM_FAULT();
	CUresult r = check_dev(dev);
	if (r != CUDA_SUCCESS)
		return r;
	if (flags & ~(unsigned)(CU_CTX_SCHED_MASK | CU_CTX_LMEM_RESIZE_TO_MAX | CU_CTX_MAP_HOST |
				CU_CTX_SYNC_MEMOPS))
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_mu);
	primaries[dev].flags = flags;
	pthread_mutex_unlock(&sim_mu);
	return CUDA_SUCCESS;
}

/* ---- created contexts ---- */

SIM_API CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams,
				unsigned int flags, CUdevice dev)
{
	SIM_FAULT();
	CUresult r = check_dev(dev);
	if (r != CUDA_SUCCESS)
		return r;
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	if (ctxCreateParams &&
	    (ctxCreateParams->numExecAffinityParams || ctxCreateParams->cigParams))
		return CUDA_ERROR_NOT_SUPPORTED;
	if (depth == STACK_MAX)
		return CUDA_ERROR_INVALID_VALUE;
	/* A destroyed context's handle comes back for the next one, whatever its device: the driver
	 * promises unique context IDs (cuCtxGetId), not unique handles, and a tool that keys on the
	 * handle must meet that here rather than in production. */
	pthread_mutex_lock(&sim_mu);
	struct sim_ctx *c = created;
	while (c && __atomic_load_n(&c->alive, __ATOMIC_ACQUIRE))
		c = c->next_created;
	if (!c) {
		c = calloc(1, sizeof(*c));
		if (!c) {
			pthread_mutex_unlock(&sim_mu);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
		c->next_created = created;
		created = c;
	}
	ctx_init(c, dev, false);
	c->flags = flags;
	pthread_mutex_unlock(&sim_mu);
	stack[depth++] = c;
	*pctx = (CUcontext)c;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuCtxDestroy_v2(CUcontext ctx)
{
	SIM_FAULT();
	struct sim_ctx *c;
	CUresult r = sim_ctx_check(ctx, &c);
	if (r != CUDA_SUCCESS)
		return r;
	if (c->primary)
		return CUDA_ERROR_INVALID_CONTEXT;
	ctx_teardown(c);
	__atomic_store_n(&c->alive, false, __ATOMIC_RELEASE);
	int w = 0;
	for (int i = 0; i < depth; i++)
		if (stack[i] != c)
			stack[w++] = stack[i];
	depth = w;
	return CUDA_SUCCESS;
}

/* ---- the current context ---- */

SIM_API CUresult cuCtxGetCurrent(CUcontext *pctx)
{
	SIM_FAULT();
	CUresult r = sim_ready();
	if (r != CUDA_SUCCESS)
		return r;
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	*pctx = (CUcontext)(depth ? stack[depth - 1] : NULL);
	return CUDA_SUCCESS;
}

SIM_API CUresult cuCtxSetCurrent(CUcontext ctx)
{
	SIM_FAULT();
	CUresult r = sim_ready();
	if (r != CUDA_SUCCESS)
		return r;
	if (!ctx) {
		if (depth)
			depth--;
		return CUDA_SUCCESS;
	}
	struct sim_ctx *c;
	r = settable(ctx, &c);
	if (r != CUDA_SUCCESS)
		return r;
	if (depth)
		stack[depth - 1] = c;
	else
		stack[depth++] = c;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
	SIM_FAULT();
	struct sim_ctx *c;
	CUresult r = settable(ctx, &c);
	if (r != CUDA_SUCCESS)
		return r;
	if (depth == STACK_MAX)
		return CUDA_ERROR_INVALID_VALUE;
	stack[depth++] = c;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuCtxPopCurrent_v2(CUcontext *pctx)
{
	SIM_FAULT();
	CUresult r = sim_ready();
	if (r != CUDA_SUCCESS)
		return r;
	if (depth == 0)
		return CUDA_ERROR_INVALID_CONTEXT;
	struct sim_ctx *c = stack[--depth];
	if (pctx)
		*pctx = (CUcontext)c;
	return CUDA_SUCCESS;
}

static CUresult ctx_or_current(CUcontext ctx, struct sim_ctx **out)
{
	return ctx ? sim_ctx_check(ctx, out) : sim_ctx_current(out);
}

SIM_API CUresult cuCtxGetDevice(CUdevice *device)
{
	SIM_FAULT();
	struct sim_ctx *c;
	CUresult r = sim_ctx_current(&c);
	if (r != CUDA_SUCCESS)
		return r;
	if (!device)
		return CUDA_ERROR_INVALID_VALUE;
	*device = c->dev;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuCtxGetDevice_v2(CUdevice *device, CUcontext ctx)
{
	SIM_FAULT();
	struct sim_ctx *c;
	CUresult r = ctx_or_current(ctx, &c);
	if (r != CUDA_SUCCESS)
		return r;
	if (!device)
		return CUDA_ERROR_INVALID_VALUE;
	*device = c->dev;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuCtxGetFlags(unsigned int *flags)
{
	SIM_FAULT();
	struct sim_ctx *c;
	CUresult r = sim_ctx_current(&c);
	if (r != CUDA_SUCCESS)
		return r;
	if (!flags)
		return CUDA_ERROR_INVALID_VALUE;
	*flags = c->flags;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuCtxGetId(CUcontext ctx, unsigned long long *ctxId)
{
	SIM_FAULT();
	struct sim_ctx *c;
	CUresult r = ctx_or_current(ctx, &c);
	if (r != CUDA_SUCCESS)
		return r;
	if (!ctxId)
		return CUDA_ERROR_INVALID_VALUE;
	*ctxId = c->id;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuCtxGetStreamPriorityRange(int *leastPriority, int *greatestPriority)
{
	SIM_FAULT();
	struct sim_ctx *c;
	CUresult r = sim_ctx_current(&c);
	if (r != CUDA_SUCCESS)
		return r;
	if (leastPriority)
		*leastPriority = 0;
	if (greatestPriority)
		*greatestPriority = -5;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuCtxSynchronize(void)
{
	SIM_FAULT();
	struct sim_ctx *c;
	CUresult r = sim_ctx_current(&c);
	if (r != CUDA_SUCCESS)
		return r;
	pthread_mutex_lock(&sim_mu);
	sim_ctx_sync_locked(c);
	pthread_mutex_unlock(&sim_mu);
	return CUDA_SUCCESS;
}

SIM_API CUresult cuCtxSynchronize_v2(CUcontext ctx)
{
	SIM_FAULT();
	struct sim_ctx *c;
	CUresult r = ctx_or_current(ctx, &c);
	if (r != CUDA_SUCCESS)
		return r;
	pthread_mutex_lock(&sim_mu);
	sim_ctx_sync_locked(c);
	pthread_mutex_unlock(&sim_mu);
	return CUDA_SUCCESS;
}

/* ---- peer access ---- */

SIM_API CUresult cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int Flags)
{
	SIM_FAULT();
	struct sim_ctx *cur, *peer;
	CUresult r = sim_ctx_current(&cur);
	if (r != CUDA_SUCCESS)
		return r;
	if (Flags != 0)
		return CUDA_ERROR_INVALID_VALUE;
	r = sim_ctx_check(peerContext, &peer);
	if (r != CUDA_SUCCESS)
		return r;
	if (peer->dev == cur->dev || !sim_cfg.p2p[cur->dev][peer->dev])
		return CUDA_ERROR_PEER_ACCESS_UNSUPPORTED;
	pthread_mutex_lock(&sim_mu);
	for (int i = 0; i < cur->npeers; i++)
		if (cur->peers[i] == peer) {
			r = CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
			goto out;
		}
	if (slots_used(cur) >= SIM_MAX_PEERS && cur->ipc_peer_refs[peer->dev] == 0) {
		r = CUDA_ERROR_TOO_MANY_PEERS;
		goto out;
	}
	cur->peers[cur->npeers++] = peer;
	__atomic_add_fetch(&peer_count[cur->dev][peer->dev], 1, __ATOMIC_RELEASE);
out:
	pthread_mutex_unlock(&sim_mu);
	return r;
}

SIM_API CUresult cuCtxDisablePeerAccess(CUcontext peerContext)
{
	SIM_FAULT();
	struct sim_ctx *cur, *peer;
	CUresult r = sim_ctx_current(&cur);
	if (r != CUDA_SUCCESS)
		return r;
	r = sim_ctx_check(peerContext, &peer);
	if (r != CUDA_SUCCESS)
		return r;
	r = CUDA_ERROR_PEER_ACCESS_NOT_ENABLED;
	pthread_mutex_lock(&sim_mu);
	for (int i = 0; i < cur->npeers; i++)
		if (cur->peers[i] == peer) {
			unmap_peer(cur, i);
			r = CUDA_SUCCESS;
			break;
		}
	pthread_mutex_unlock(&sim_mu);
	return r;
}
