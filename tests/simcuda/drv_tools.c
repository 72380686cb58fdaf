/* Simulated driver: the interface of the simulated CUPTI (simcuda_tools.h). Not CUDA API: these
 * exports are outside the cuGetProcAddress table.
 *
 * Tool IDs: a context's is its cuCtxGetId value (process-unique); a stream's is counted per
 * context, so streams of different contexts share numbers and none needs to equal cuStreamGetId.
 * A tool must ask (cuptiGetContextId, cuptiGetStreamIdEx), as with the real CUPTI. */
#include "sim.h"

static simcuda_copy_observer_fn observer;
static uint32_t last_correlation_id;

uint32_t sim_next_correlation_id(void)
{
	uint32_t id = __atomic_add_fetch(&last_correlation_id, 1, __ATOMIC_RELAXED);
	if (id == 0) /* after 2^32 calls: 0 stays "none" */
		id = __atomic_add_fetch(&last_correlation_id, 1, __ATOMIC_RELAXED);
	return id;
}

uint64_t sim_realtime_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

simcuda_copy_observer_fn sim_copy_observer(void)
{
	return __atomic_load_n(&observer, __ATOMIC_ACQUIRE);
}

static uint32_t owner_ctx_id(uintptr_t p, int region)
{
	if (region < 0)
		return 0;
	struct sim_alloc *a = sim_mem_find(p);
	return a && a->ctx ? (uint32_t)a->ctx->id : 0;
}

void sim_tool_submitted(struct sim_stream *s, struct sim_op *op)
{
	op->tool.dev = s->ctx->dev;
	op->tool.ctx_id = (uint32_t)s->ctx->id;
	op->tool.stream_id = s->tool_id;
	if (op->type == SIM_OP_COPY) {
		op->tool.src_ctx_id =
		    owner_ctx_id((uintptr_t)op->u.copy.src, op->u.copy.src_region);
		op->tool.dst_ctx_id =
		    owner_ctx_id((uintptr_t)op->u.copy.dst, op->u.copy.dst_region);
	} else if (op->type == SIM_OP_COPY3D) {
		op->tool.src_ctx_id = owner_ctx_id(op->u.c3.p.src, op->u.c3.src_region);
		op->tool.dst_ctx_id = owner_ctx_id(op->u.c3.p.dst, op->u.c3.dst_region);
	}
}

void sim_copy_finished(simcuda_copy_observer_fn fn, const struct sim_op *op, uint64_t start_ns)
{
	struct simcuda_copy_info info = {
	    .start_ns = start_ns,
	    .graph_node_id = op->tool.graph_node_id,
	    .graph_id = op->tool.graph_id,
	    .correlation_id = op->tool.correlation_id,
	    .context_id = op->tool.ctx_id,
	    .stream_id = op->tool.stream_id,
	    .device = op->tool.dev,
	    .src_context_id = op->tool.src_ctx_id,
	    .dst_context_id = op->tool.dst_ctx_id,
	    .async = op->tool.async,
	};
	if (op->type == SIM_OP_COPY) {
		info.bytes = op->u.copy.n;
		info.src_device = op->u.copy.src_region;
		info.dst_device = op->u.copy.dst_region;
	} else {
		const struct sim_3d *p = &op->u.c3.p;
		info.bytes = (uint64_t)p->width * p->height * p->depth;
		info.src_device = op->u.c3.src_region;
		info.dst_device = op->u.c3.dst_region;
	}
	info.end_ns = sim_realtime_ns();
	info.staged_by_driver = info.src_device >= 0 && info.dst_device >= 0 &&
				info.src_device != info.dst_device &&
				!sim_p2p_active(info.src_device, info.dst_device);
	/* Removed meanwhile: the caller's snapshot would call a tool that asked not to be. */
	if (sim_copy_observer() == fn)
		fn(&info);
}

SIM_API void simcuda_set_copy_observer(simcuda_copy_observer_fn fn)
{
	__atomic_store_n(&observer, fn, __ATOMIC_RELEASE);
}

SIM_API CUresult simcuda_context_tool_id(CUcontext ctx, uint32_t *id)
{
	struct sim_ctx *c;
	CUresult r = sim_ctx_check(ctx, &c);
	if (r != CUDA_SUCCESS)
		return r;
	if (!id)
		return CUDA_ERROR_INVALID_VALUE;
	*id = (uint32_t)c->id;
	return CUDA_SUCCESS;
}

SIM_API CUresult simcuda_stream_tool_id(CUcontext ctx, CUstream stream, int per_thread,
					uint32_t *id)
{
	if (!id)
		return CUDA_ERROR_INVALID_VALUE;
	struct sim_ctx *c = NULL;
	CUresult r = ctx ? sim_ctx_check(ctx, &c) : sim_ready();
	if (r != CUDA_SUCCESS)
		return r;
	bool dflt = stream == NULL || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD;
	pthread_mutex_lock(&sim_mu);
	struct sim_stream *s = NULL;
	if (dflt && c) {
		bool pts = stream == CU_STREAM_PER_THREAD || (stream == NULL && per_thread);
		s = sim_stream_default(c, pts);
		if (!s)
			r = CUDA_ERROR_OUT_OF_MEMORY;
	} else {
		r = sim_stream_resolve(stream, per_thread != 0, &s);
		if (r == CUDA_SUCCESS && c && s->ctx != c)
			r = CUDA_ERROR_INVALID_HANDLE;
	}
	if (r == CUDA_SUCCESS)
		*id = s->tool_id;
	pthread_mutex_unlock(&sim_mu);
	return r;
}
