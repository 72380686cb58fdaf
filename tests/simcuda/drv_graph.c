/* Simulated driver: stream capture and graphs, minimal. A captured graph is the linear list of
 * the copies, memsets and host functions enqueued while capturing; launching it submits them
 * again, in order, to the launch stream. Cross-stream capture (fork/join through events) is not
 * simulated. */
#include "sim.h"

#include <stdlib.h>
#include <string.h>

static unsigned long long next_capture_id = 1;

bool sim_graph_append(struct sim_graph *g, const struct sim_op *op)
{
	if (g->n == g->cap) {
		size_t cap = g->cap ? 2 * g->cap : 8;
		struct sim_op *nodes = realloc(g->nodes, cap * sizeof(*nodes));
		if (!nodes)
			return false;
		g->nodes = nodes;
		g->cap = cap;
	}
	g->nodes[g->n] = *op;
	g->nodes[g->n].next = NULL;
	g->nodes[g->n].seq = 0;
	g->n++;
	return true;
}

/* Graphs the application never destroys must not read as leaks of the simulation. */
static pthread_mutex_t graphs_mu = PTHREAD_MUTEX_INITIALIZER;
static struct sim_graph *graphs;
static uint32_t last_graph_id;

static struct sim_graph *graph_new(uint32_t magic)
{
	struct sim_graph *g = calloc(1, sizeof(*g));
	if (!g)
		return NULL;
	g->magic = magic;
	pthread_mutex_lock(&graphs_mu);
	g->id = ++last_graph_id;
	g->next = graphs;
	if (graphs)
		graphs->prev = g;
	graphs = g;
	pthread_mutex_unlock(&graphs_mu);
	return g;
}

void sim_graph_free(struct sim_graph *g)
{
	pthread_mutex_lock(&graphs_mu);
	if (g->prev)
		g->prev->next = g->next;
	else
		graphs = g->next;
	if (g->next)
		g->next->prev = g->prev;
	pthread_mutex_unlock(&graphs_mu);
	g->magic = 0;
	free(g->nodes);
	free(g);
}

static CUresult begin_capture(CUstream h, bool pt, CUstreamCaptureMode mode)
{
	if (mode != CU_STREAM_CAPTURE_MODE_GLOBAL && mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
	    mode != CU_STREAM_CAPTURE_MODE_RELAXED)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_mu);
	struct sim_stream *s;
	CUresult r = sim_stream_resolve(h, pt, &s);
	if (r != CUDA_SUCCESS)
		goto out;
	if (s->kind == SIM_STREAM_LEGACY) {
		r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
		goto out;
	}
	if (s->capture != CU_STREAM_CAPTURE_STATUS_NONE) {
		r = CUDA_ERROR_ILLEGAL_STATE;
		goto out;
	}
	s->capture_graph = graph_new(SIM_GRAPH_MAGIC);
	if (!s->capture_graph) {
		r = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	s->capture = CU_STREAM_CAPTURE_STATUS_ACTIVE;
	s->capture_mode = mode;
	s->capture_thread = pthread_self();
	s->capture_id = next_capture_id++;
out:
	pthread_mutex_unlock(&sim_mu);
	return r;
}

SIM_API CUresult cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode)
{
	SIM_FAULT();
	return begin_capture(hStream, false, mode);
}

SIM_API CUresult cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode)
{
	SIM_FAULT();
	return begin_capture(hStream, true, mode);
}

SIM_API CUresult cuStreamBeginCapture(CUstream hStream)
{
	SIM_FAULT();
	return begin_capture(hStream, false, CU_STREAM_CAPTURE_MODE_GLOBAL);
}

SIM_API CUresult cuStreamBeginCapture_ptsz(CUstream hStream)
{
	SIM_FAULT();
	return begin_capture(hStream, true, CU_STREAM_CAPTURE_MODE_GLOBAL);
}

static CUresult end_capture(CUstream h, bool pt, CUgraph *phGraph)
{
	if (!phGraph)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_mu);
	struct sim_stream *s;
	CUresult r = sim_stream_resolve(h, pt, &s);
	if (r != CUDA_SUCCESS)
		goto out;
	if (s->capture == CU_STREAM_CAPTURE_STATUS_NONE) {
		r = CUDA_ERROR_ILLEGAL_STATE;
		goto out;
	}
	if (s->capture == CU_STREAM_CAPTURE_STATUS_INVALIDATED) {
		sim_graph_free(s->capture_graph);
		*phGraph = NULL;
		r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
	} else {
		*phGraph = (CUgraph)s->capture_graph;
	}
	s->capture_graph = NULL;
	s->capture = CU_STREAM_CAPTURE_STATUS_NONE;
out:
	pthread_mutex_unlock(&sim_mu);
	return r;
}

SIM_API CUresult cuStreamEndCapture(CUstream hStream, CUgraph *phGraph)
{
	SIM_FAULT();
	return end_capture(hStream, false, phGraph);
}

SIM_API CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph)
{
	SIM_FAULT();
	return end_capture(hStream, true, phGraph);
}

static CUresult capture_info(CUstream h, bool pt, CUstreamCaptureStatus *status, cuuint64_t *id,
			     CUgraph *graph, const CUgraphNode **deps,
			     const CUgraphEdgeData **edges, size_t *ndeps)
{
	if (!status)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_mu);
	struct sim_stream *s;
	CUresult r = sim_stream_resolve(h, pt, &s);
	if (r == CUDA_SUCCESS) {
		*status = s->capture;
		bool active = s->capture == CU_STREAM_CAPTURE_STATUS_ACTIVE;
		if (id && s->capture != CU_STREAM_CAPTURE_STATUS_NONE)
			*id = s->capture_id;
		if (graph)
			*graph = active ? (CUgraph)s->capture_graph : NULL;
		if (deps)
			*deps = NULL;
		if (edges)
			*edges = NULL;
		if (ndeps)
			*ndeps = 0;
	}
	pthread_mutex_unlock(&sim_mu);
	return r;
}

SIM_API CUresult cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
	SIM_FAULT();
	return capture_info(hStream, false, captureStatus, NULL, NULL, NULL, NULL, NULL);
}

SIM_API CUresult cuStreamIsCapturing_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
	SIM_FAULT();
	return capture_info(hStream, true, captureStatus, NULL, NULL, NULL, NULL, NULL);
}

SIM_API CUresult cuStreamGetCaptureInfo(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
					cuuint64_t *id_out)
{
	SIM_FAULT();
	return capture_info(hStream, false, captureStatus_out, id_out, NULL, NULL, NULL, NULL);
}

SIM_API CUresult cuStreamGetCaptureInfo_ptsz(CUstream hStream,
					     CUstreamCaptureStatus *captureStatus_out,
					     cuuint64_t *id_out)
{
	SIM_FAULT();
	return capture_info(hStream, true, captureStatus_out, id_out, NULL, NULL, NULL, NULL);
}

SIM_API CUresult cuStreamGetCaptureInfo_v2(CUstream hStream,
					   CUstreamCaptureStatus *captureStatus_out,
					   cuuint64_t *id_out, CUgraph *graph_out,
					   const CUgraphNode **dependencies_out,
					   size_t *numDependencies_out)
{
	SIM_FAULT();
	return capture_info(hStream, false, captureStatus_out, id_out, graph_out, dependencies_out,
			    NULL, numDependencies_out);
}

SIM_API CUresult cuStreamGetCaptureInfo_v2_ptsz(CUstream hStream,
						CUstreamCaptureStatus *captureStatus_out,
						cuuint64_t *id_out, CUgraph *graph_out,
						const CUgraphNode **dependencies_out,
						size_t *numDependencies_out)
{
	SIM_FAULT();
	return capture_info(hStream, true, captureStatus_out, id_out, graph_out, dependencies_out,
			    NULL, numDependencies_out);
}

SIM_API CUresult cuStreamGetCaptureInfo_v3(CUstream hStream,
					   CUstreamCaptureStatus *captureStatus_out,
					   cuuint64_t *id_out, CUgraph *graph_out,
					   const CUgraphNode **dependencies_out,
					   const CUgraphEdgeData **edgeData_out,
					   size_t *numDependencies_out)
{
	SIM_FAULT();
	return capture_info(hStream, false, captureStatus_out, id_out, graph_out, dependencies_out,
			    edgeData_out, numDependencies_out);
}

SIM_API CUresult cuStreamGetCaptureInfo_v3_ptsz(CUstream hStream,
						CUstreamCaptureStatus *captureStatus_out,
						cuuint64_t *id_out, CUgraph *graph_out,
						const CUgraphNode **dependencies_out,
						const CUgraphEdgeData **edgeData_out,
						size_t *numDependencies_out)
{
	SIM_FAULT();
	return capture_info(hStream, true, captureStatus_out, id_out, graph_out, dependencies_out,
			    edgeData_out, numDependencies_out);
}

/* ---- graphs ---- */

static CUresult check_graph(void *h, uint32_t magic, struct sim_graph **out)
{
	CUresult r = sim_ready();
	if (r != CUDA_SUCCESS)
		return r;
	struct sim_graph *g = h;
	if (!g || g->magic != magic)
		return CUDA_ERROR_INVALID_VALUE;
	*out = g;
	return CUDA_SUCCESS;
}

static CUresult instantiate(CUgraphExec *phGraphExec, CUgraph hGraph)
{
	struct sim_graph *g;
	CUresult r = check_graph(hGraph, SIM_GRAPH_MAGIC, &g);
	if (r != CUDA_SUCCESS)
		return r;
	if (!phGraphExec)
		return CUDA_ERROR_INVALID_VALUE;
	struct sim_graph *x = graph_new(SIM_EXEC_MAGIC);
	if (!x)
		return CUDA_ERROR_OUT_OF_MEMORY;
	pthread_mutex_lock(&sim_mu);
	for (size_t i = 0; i < g->n; i++)
		if (!sim_graph_append(x, &g->nodes[i])) {
			pthread_mutex_unlock(&sim_mu);
			sim_graph_free(x);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
	pthread_mutex_unlock(&sim_mu);
	*phGraphExec = (CUgraphExec)x;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph,
					     unsigned long long flags)
{
	SIM_FAULT();
	if (flags & ~(unsigned long long)(CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH |
					  CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD |
					  CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH |
					  CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY))
		return CUDA_ERROR_INVALID_VALUE;
	return instantiate(phGraphExec, hGraph);
}

SIM_API CUresult cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph,
				    CUgraphNode *phErrorNode, char *logBuffer, size_t bufferSize)
{
	SIM_FAULT();
	if (phErrorNode)
		*phErrorNode = NULL;
	if (logBuffer && bufferSize)
		logBuffer[0] = '\0';
	return instantiate(phGraphExec, hGraph);
}

SIM_API CUresult cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph,
				       CUgraphNode *phErrorNode, char *logBuffer, size_t bufferSize)
{
	SIM_FAULT();
	return cuGraphInstantiate(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);
}

static CUresult launch(CUgraphExec hExec, CUstream h, bool pt)
{
	struct sim_graph *x;
	CUresult r = check_graph(hExec, SIM_EXEC_MAGIC, &x);
	if (r != CUDA_SUCCESS)
		return r;
	pthread_mutex_lock(&sim_mu);
	uint32_t correlation_id = sim_next_correlation_id();
	struct sim_stream *s;
	r = sim_stream_resolve(h, pt, &s);
	for (size_t i = 0; r == CUDA_SUCCESS && i < x->n; i++) {
		struct sim_op *op = malloc(sizeof(*op));
		if (!op) {
			r = CUDA_ERROR_OUT_OF_MEMORY;
			break;
		}
		*op = x->nodes[i];
		op->tool.correlation_id = correlation_id;
		op->tool.async = true;
		op->tool.graph_id = x->id;
		op->tool.graph_node_id = (uint64_t)x->id << 32 | (uint64_t)(i + 1);
		r = sim_submit(s, op);
	}
	pthread_mutex_unlock(&sim_mu);
	return r;
}

SIM_API CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
	SIM_FAULT();
	return launch(hGraphExec, hStream, false);
}

SIM_API CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
	SIM_FAULT();
	return launch(hGraphExec, hStream, true);
}

SIM_API CUresult cuGraphDestroy(CUgraph hGraph)
{
	SIM_FAULT();
	struct sim_graph *g;
	CUresult r = check_graph(hGraph, SIM_GRAPH_MAGIC, &g);
	if (r == CUDA_SUCCESS)
		sim_graph_free(g);
	return r;
}

SIM_API CUresult cuGraphExecDestroy(CUgraphExec hGraphExec)
{
	SIM_FAULT();
	struct sim_graph *g;
	CUresult r = check_graph(hGraphExec, SIM_EXEC_MAGIC, &g);
	if (r == CUDA_SUCCESS)
		sim_graph_free(g);
	return r;
}
