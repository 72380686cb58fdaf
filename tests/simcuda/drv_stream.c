/* Simulated driver: streams and events.
 *
 * Every stream has a worker thread that runs its queue in order, so asynchronous work really
 * happens later. Ordering between streams is expressed with wait operations on (stream, sequence
 * number) pairs; the legacy default stream's implicit synchronisation is built from the same
 * waits when work is submitted. All bookkeeping is under sim_mu; the bytes move outside it. */
#include "sim.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#define PT_MAX 64

static struct sim_stream *all_streams; /* every stream not yet freed */
static unsigned long long next_stream_id = 1;
static bool shutting_down;

/* Per-thread default streams, one per context this thread used. */
struct pt_entry {
	struct sim_ctx *ctx;
	struct sim_stream *s;
};
static __thread struct pt_entry pt_tab[PT_MAX];
static __thread int pt_count;
static pthread_key_t pt_key;
static pthread_once_t pt_once = PTHREAD_ONCE_INIT;

static void exec_op(struct sim_op *op);
static void event_put(struct sim_event *e);

/* Frees an operation and drops the references it holds; sim_mu held. */
void sim_op_free(struct sim_op *op)
{
	if (op->type == SIM_OP_COPY)
		free(op->u.copy.staging);
	else if (op->type == SIM_OP_WAIT)
		sim_stream_put(op->u.wait.s);
	else if (op->type == SIM_OP_EVENT)
		event_put(op->u.event.ev);
	free(op);
}

void sim_stream_ref(struct sim_stream *s)
{
	s->refs++;
}

static void list_unlink(struct sim_stream **head, struct sim_stream *s, bool ctx_list)
{
	for (struct sim_stream **pp = head; *pp;
	     pp = ctx_list ? &(*pp)->ctx_next : &(*pp)->all_next)
		if (*pp == s) {
			*pp = ctx_list ? s->ctx_next : s->all_next;
			return;
		}
}

void sim_stream_put(struct sim_stream *s)
{
	if (--s->refs > 0)
		return;
	if (s->ctx)
		list_unlink(&s->ctx->streams, s, true);
	list_unlink(&all_streams, s, false);
	pthread_cond_destroy(&s->wake);
	s->magic = 0;
	free(s);
}

/* Joins workers that have finished; sim_mu held. */
static void reap(void)
{
	struct sim_stream *s = all_streams;
	while (s) {
		struct sim_stream *next = s->all_next;
		if (s->has_thread && s->finished && !s->joined) {
			pthread_join(s->thread, NULL);
			s->joined = true;
			s->has_thread = false;
			if (s->ctx && s->dead)
				list_unlink(&s->ctx->streams, s, true);
			sim_stream_put(s); /* the worker's reference */
		}
		s = next;
	}
}

static void complete(struct sim_stream *s, struct sim_op *op)
{
	s->head = op->next;
	if (!s->head)
		s->tail = NULL;
	s->completed = op->seq;
	pthread_cond_broadcast(&sim_progress);
	sim_op_free(op);
}

static void event_done(struct sim_op *op);

static void *worker(void *arg)
{
	struct sim_stream *s = arg;
	pthread_mutex_lock(&sim_mu);
	for (;;) {
		while (!s->head && !s->closing)
			pthread_cond_wait(&s->wake, &sim_mu);
		if (!s->head)
			break;
		struct sim_op *op = s->head;
		if (op->type == SIM_OP_WAIT) {
			while (op->u.wait.s->completed < op->u.wait.seq)
				pthread_cond_wait(&sim_progress, &sim_mu);
		} else if (op->type == SIM_OP_EVENT) {
			event_done(op);
		} else if (op->hangs) {
			/* A P2P copy whose transactions never come back: the stream never moves on
			 * again, queries say not ready and every wait on it waits for ever, as on
			 * a machine whose IOMMU swallows the peer writes. */
			s->stuck = true;
			pthread_cond_broadcast(
			    &sim_progress); /* a teardown waiting for it gives up */
			for (;;)
				pthread_cond_wait(&s->wake, &sim_mu);
		} else {
			pthread_mutex_unlock(&sim_mu);
			exec_op(op);
			pthread_mutex_lock(&sim_mu);
		}
		complete(s, op);
	}
	s->finished = true;
	pthread_cond_broadcast(&sim_progress);
	pthread_mutex_unlock(&sim_mu);
	return NULL;
}

static void pt_cleanup(void *unused);

static void pt_key_init(void)
{
	pthread_key_create(&pt_key, pt_cleanup);
}

static struct sim_stream *stream_new(struct sim_ctx *ctx, enum sim_stream_kind kind, unsigned flags,
				     int prio)
{
	reap();
	struct sim_stream *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->magic = SIM_STREAM_MAGIC;
	s->ctx = ctx;
	s->kind = kind;
	s->flags = flags;
	s->priority = prio;
	s->id = next_stream_id++;
	s->tool_id = ++ctx->last_stream_tool_id;
	s->refs = 1;
	pthread_cond_init(&s->wake, NULL);
	if (!shutting_down) {
		/* Workers run user host functions: keep the application's signals off them. */
		sigset_t all, old;
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		if (pthread_create(&s->thread, NULL, worker, s) == 0) {
			s->has_thread = true;
			s->refs++;
		}
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	s->ctx_next = ctx->streams;
	ctx->streams = s;
	s->all_next = all_streams;
	all_streams = s;
	return s;
}

/* Ends a stream's life as a handle: queued work still runs, then the worker exits. */
static void stream_close(struct sim_stream *s, bool drop_owner)
{
	s->dead = true;
	s->closing = true;
	pthread_cond_signal(&s->wake);
	if (drop_owner)
		sim_stream_put(s);
}

static void pt_cleanup(void *unused)
{
	(void)unused;
	pthread_mutex_lock(&sim_mu);
	for (int i = 0; i < pt_count; i++)
		if (!pt_tab[i].s->dead)
			stream_close(pt_tab[i].s, true);
	pt_count = 0;
	pthread_mutex_unlock(&sim_mu);
}

struct sim_stream *sim_stream_default(struct sim_ctx *ctx, bool per_thread)
{
	if (!per_thread) {
		if (!ctx->legacy)
			ctx->legacy = stream_new(ctx, SIM_STREAM_LEGACY, 0, 0);
		return ctx->legacy;
	}
	for (int i = 0; i < pt_count; i++)
		if (pt_tab[i].ctx == ctx) {
			if (!pt_tab[i].s->dead)
				return pt_tab[i].s;
			/* The context was reset: its streams went, this thread gets a new one. */
			pt_tab[i] = pt_tab[--pt_count];
			break;
		}
	if (pt_count == PT_MAX)
		return sim_stream_default(ctx, false);
	pthread_once(&pt_once, pt_key_init);
	struct sim_stream *s = stream_new(ctx, SIM_STREAM_PER_THREAD, 0, 0);
	if (!s)
		return NULL;
	pt_tab[pt_count++] = (struct pt_entry){ctx, s};
	pthread_setspecific(pt_key, (void *)1);
	return s;
}

CUresult sim_stream_resolve(CUstream h, bool per_thread, struct sim_stream **out)
{
	if (h == NULL || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) {
		struct sim_ctx *ctx;
		CUresult r = sim_ctx_current(&ctx);
		if (r != CUDA_SUCCESS)
			return r;
		bool pts = h == CU_STREAM_PER_THREAD || (h == NULL && per_thread);
		*out = sim_stream_default(ctx, pts);
		return *out ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
	}
	CUresult r = sim_ready();
	if (r != CUDA_SUCCESS)
		return r;
	struct sim_stream *s = (struct sim_stream *)h;
	if (s->magic != SIM_STREAM_MAGIC || s->dead)
		return CUDA_ERROR_INVALID_HANDLE;
	*out = s;
	return CUDA_SUCCESS;
}

static bool blocking(const struct sim_stream *s)
{
	return !(s->flags & CU_STREAM_NON_BLOCKING);
}

static void push(struct sim_stream *s, struct sim_op *op)
{
	op->next = NULL;
	op->seq = ++s->submitted;
	if (s->tail)
		s->tail->next = op;
	else
		s->head = op;
	s->tail = op;
	if (s->has_thread) {
		pthread_cond_signal(&s->wake);
		return;
	}
	/* No worker (process exit, or thread creation failed): run it here and now. */
	if (op->type == SIM_OP_WAIT) {
		while (op->u.wait.s->completed < op->u.wait.seq)
			pthread_cond_wait(&sim_progress, &sim_mu);
	} else if (op->type == SIM_OP_EVENT) {
		event_done(op);
	} else {
		exec_op(op);
	}
	complete(s, op);
}

static bool push_wait(struct sim_stream *s, struct sim_stream *on, uint64_t seq)
{
	struct sim_op *w = calloc(1, sizeof(*w));
	if (!w)
		return false;
	w->type = SIM_OP_WAIT;
	w->u.wait.s = on;
	w->u.wait.seq = seq;
	sim_stream_ref(on);
	push(s, w);
	return true;
}

static void invalidate_capture(struct sim_stream *s)
{
	if (s->capture == CU_STREAM_CAPTURE_STATUS_ACTIVE)
		s->capture = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
}

CUresult sim_submit(struct sim_stream *s, struct sim_op *op)
{
	if (op->type == SIM_OP_COPY) {
		op->xor_data = sim_copy_corrupts(op->u.copy.dst_region, op->u.copy.src_region);
		op->hangs = sim_copy_hangs(op->u.copy.dst_region, op->u.copy.src_region);
	} else if (op->type == SIM_OP_COPY3D) {
		op->xor_data = sim_copy_corrupts(op->u.c3.dst_region, op->u.c3.src_region);
		op->hangs = sim_copy_hangs(op->u.c3.dst_region, op->u.c3.src_region);
	}

	CUresult r = CUDA_SUCCESS;
	if (s->capture == CU_STREAM_CAPTURE_STATUS_INVALIDATED) {
		r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
		goto fail;
	}
	if (s->capture == CU_STREAM_CAPTURE_STATUS_ACTIVE) {
		/* A graph reads its sources when it runs: no snapshot of pageable memory. */
		if (op->type == SIM_OP_COPY) {
			free(op->u.copy.staging);
			op->u.copy.staging = NULL;
		}
		if (op->type == SIM_OP_CALLBACK) {
			invalidate_capture(s);
			r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
		} else if (op->type != SIM_OP_WAIT && op->type != SIM_OP_EVENT &&
			   !sim_graph_append(s->capture_graph, op)) {
			r = CUDA_ERROR_OUT_OF_MEMORY;
		}
		goto fail; /* recorded (or refused): the operation itself is done with */
	}

	if (s->kind == SIM_STREAM_LEGACY) {
		for (struct sim_stream *t = s->ctx->streams; t; t = t->ctx_next)
			if (t != s && blocking(t) &&
			    t->capture == CU_STREAM_CAPTURE_STATUS_ACTIVE) {
				invalidate_capture(t);
				r = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
				goto fail;
			}
		for (struct sim_stream *t = s->ctx->streams; t; t = t->ctx_next)
			if (t != s && blocking(t) && t->submitted > t->completed &&
			    !push_wait(s, t, t->submitted)) {
				r = CUDA_ERROR_OUT_OF_MEMORY;
				goto fail;
			}
	} else if (blocking(s)) {
		struct sim_stream *l = s->ctx->legacy;
		if (l && l->submitted > l->completed && !push_wait(s, l, l->submitted)) {
			r = CUDA_ERROR_OUT_OF_MEMORY;
			goto fail;
		}
	}
	if (op->type == SIM_OP_COPY || op->type == SIM_OP_COPY3D)
		sim_tool_submitted(s, op);
	push(s, op);
	return CUDA_SUCCESS;
fail:
	sim_op_free(op);
	return r;
}

/* Allocation and freeing are "potentially unsafe" while a global-mode capture runs in any
 * thread, or a thread-local one in this thread: they fail and ruin those captures (measured for
 * cuMemAlloc on the H200 pair). */
CUresult sim_capture_forbids_unsafe(void)
{
	CUresult r = CUDA_SUCCESS;
	pthread_t self = pthread_self();
	pthread_mutex_lock(&sim_mu);
	for (struct sim_stream *s = all_streams; s; s = s->all_next)
		if (s->capture == CU_STREAM_CAPTURE_STATUS_ACTIVE &&
		    (s->capture_mode == CU_STREAM_CAPTURE_MODE_GLOBAL ||
		     (s->capture_mode == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
		      pthread_equal(s->capture_thread, self)))) {
			s->capture = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
			r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
		}
	pthread_mutex_unlock(&sim_mu);
	return r;
}

void sim_wait_seq(struct sim_stream *s, uint64_t seq)
{
	sim_stream_ref(s);
	while (s->completed < seq)
		pthread_cond_wait(&sim_progress, &sim_mu);
	sim_stream_put(s);
}

/* What "done" means for a stream: for the legacy stream, earlier work in the blocking streams of
 * its context counts too, as an operation on it would wait for that work. */
static bool stream_idle(struct sim_stream *s)
{
	if (s->completed < s->submitted)
		return false;
	if (s->kind == SIM_STREAM_LEGACY)
		for (struct sim_stream *t = s->ctx->streams; t; t = t->ctx_next)
			if (t != s && blocking(t) && t->completed < t->submitted)
				return false;
	return true;
}

static void stream_sync(struct sim_stream *s)
{
	if (s->kind != SIM_STREAM_LEGACY) {
		sim_wait_seq(s, s->submitted);
		return;
	}
	struct sim_stream *targets[256];
	uint64_t seqs[256];
	int n = 0;
	targets[n] = s;
	seqs[n++] = s->submitted;
	for (struct sim_stream *t = s->ctx->streams; t && n < 256; t = t->ctx_next)
		if (t != s && blocking(t)) {
			targets[n] = t;
			seqs[n++] = t->submitted;
		}
	for (int i = 0; i < n; i++)
		sim_stream_ref(targets[i]);
	for (int i = 0; i < n; i++) {
		sim_wait_seq(targets[i], seqs[i]);
		sim_stream_put(targets[i]);
	}
}

void sim_ctx_sync_locked(struct sim_ctx *ctx)
{
	for (;;) {
		struct sim_stream *pending = NULL;
		for (struct sim_stream *t = ctx->streams; t; t = t->ctx_next)
			if (t->completed < t->submitted) {
				pending = t;
				break;
			}
		if (!pending)
			return;
		sim_wait_seq(pending, pending->submitted);
	}
}

/* A stream whose queue can never move on: its worker sits in a copy that never completes, or
 * waits for such a stream (a chain of waits is followed a few links deep). sim_mu held. */
static bool stream_blocked(const struct sim_stream *s)
{
	for (int depth = 0; s && depth < 16; depth++) {
		if (s->stuck)
			return true;
		const struct sim_op *head = s->head;
		if (!head || head->type != SIM_OP_WAIT ||
		    head->u.wait.s->completed >= head->u.wait.seq)
			return false;
		s = head->u.wait.s;
	}
	return false;
}

void sim_ctx_quiesce_locked(struct sim_ctx *ctx)
{
	for (;;) {
		struct sim_stream *pending = NULL;
		for (struct sim_stream *t = ctx->streams; t; t = t->ctx_next)
			if (t->completed < t->submitted && !stream_blocked(t)) {
				pending = t;
				break;
			}
		if (!pending)
			return;
		/* Woken by every completion, and by a worker that gets stuck. */
		sim_stream_ref(pending);
		pthread_cond_wait(&sim_progress, &sim_mu);
		sim_stream_put(pending);
	}
}

void sim_ctx_drop_streams(struct sim_ctx *ctx)
{
	for (struct sim_stream *t = ctx->streams; t; t = t->ctx_next)
		if (!t->dead) {
			/* The owner's reference stays: handles kept by the application and other
			 * threads' per-thread tables must still read as dead, not as freed memory.
			 */
			stream_close(t, false);
			if (t->capture_graph) {
				sim_graph_free(t->capture_graph);
				t->capture_graph = NULL;
				t->capture = CU_STREAM_CAPTURE_STATUS_NONE;
			}
		}
	ctx->legacy = NULL;
	reap();
}

/* ---- executing operations ---- */

static void delay(size_t bytes)
{
	double ns = sim_cfg.ns_per_byte * (double)bytes;
	if (ns < 1)
		return;
	struct timespec ts = {(time_t)(ns / 1e9), (long)((unsigned long long)ns % 1000000000ull)};
	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

static void flip(unsigned char *p, size_t n)
{
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		uint64_t w;
		memcpy(&w, p + i, 8);
		w = ~w;
		memcpy(p + i, &w, 8);
	}
	for (; i < n; i++)
		p[i] = (unsigned char)~p[i];
}

static void exec_op(struct sim_op *op)
{
	simcuda_copy_observer_fn obs = NULL;
	uint64_t start_ns = 0;
	if (op->type == SIM_OP_COPY || op->type == SIM_OP_COPY3D) {
		obs = sim_copy_observer();
		if (obs)
			start_ns = sim_realtime_ns();
	}
	switch (op->type) {
	case SIM_OP_COPY: {
		const void *src = op->u.copy.staging ? op->u.copy.staging : op->u.copy.src;
		delay(op->u.copy.n);
		memmove(op->u.copy.dst, src, op->u.copy.n);
		if (op->xor_data)
			flip(op->u.copy.dst, op->u.copy.n);
		break;
	}
	case SIM_OP_COPY3D: {
		const struct sim_3d *p = &op->u.c3.p;
		delay(p->width * p->height * p->depth);
		for (size_t z = 0; z < p->depth; z++)
			for (size_t y = 0; y < p->height; y++) {
				unsigned char *d =
				    (unsigned char *)(p->dst + z * p->dst_slice + y * p->dst_pitch);
				const void *s =
				    (const void *)(p->src + z * p->src_slice + y * p->src_pitch);
				memmove(d, s, p->width);
				if (op->xor_data)
					flip(d, p->width);
			}
		break;
	}
	case SIM_OP_MEMSET: {
		unsigned char *d = op->u.set.dst;
		size_t n = op->u.set.count;
		if (op->u.set.elem == 1) {
			memset(d, (int)(op->u.set.value & 0xff), n);
		} else if (op->u.set.elem == 2) {
			uint16_t v = (uint16_t)op->u.set.value;
			for (size_t i = 0; i < n; i++)
				memcpy(d + 2 * i, &v, 2);
		} else {
			uint32_t v = op->u.set.value;
			for (size_t i = 0; i < n; i++)
				memcpy(d + 4 * i, &v, 4);
		}
		break;
	}
	case SIM_OP_HOSTFN:
		op->u.host.fn(op->u.host.data);
		break;
	case SIM_OP_CALLBACK:
		op->u.cb.fn(op->u.cb.handle, CUDA_SUCCESS, op->u.cb.data);
		break;
	case SIM_OP_WAIT:
	case SIM_OP_EVENT:
		break;
	}
	/* Before the stream counts the copy complete: a synchronize that returns has seen it. */
	if (obs)
		sim_copy_finished(obs, op, start_ns);
}

/* ---- streams: API ---- */

static CUresult stream_create(CUstream *ph, unsigned flags, int prio)
{
	struct sim_ctx *ctx;
	CUresult r = sim_ctx_current(&ctx);
	if (r != CUDA_SUCCESS)
		return r;
	if (!ph || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING))
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_mu);
	struct sim_stream *s = stream_new(ctx, SIM_STREAM_USER, flags, prio);
	pthread_mutex_unlock(&sim_mu);
	if (!s)
		return CUDA_ERROR_OUT_OF_MEMORY;
	atomic_fetch_add(&sim_live_streams, 1);
	*ph = (CUstream)s;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
	SIM_FAULT();
	return stream_create(phStream, Flags, 0);
}

SIM_API CUresult cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority)
{
	SIM_FAULT();
	return stream_create(phStream, flags, priority > 0 ? 0 : priority < -5 ? -5 : priority);
}

SIM_API CUresult cuStreamDestroy_v2(CUstream hStream)
{
	SIM_FAULT();
	CUresult r = sim_ready();
	if (r != CUDA_SUCCESS)
		return r;
	if (!hStream || hStream == CU_STREAM_LEGACY || hStream == CU_STREAM_PER_THREAD)
		return CUDA_ERROR_INVALID_HANDLE;
	pthread_mutex_lock(&sim_mu);
	struct sim_stream *s;
	r = sim_stream_resolve(hStream, false, &s);
	if (r == CUDA_SUCCESS) {
		if (s->capture_graph) {
			sim_graph_free(s->capture_graph);
			s->capture_graph = NULL;
		}
		stream_close(s, true);
		reap();
		atomic_fetch_sub(&sim_live_streams, 1);
	}
	pthread_mutex_unlock(&sim_mu);
	return r;
}

/* Shared body of the queries that take a stream and an output. */
#define WITH_STREAM(h, pt, body)                                 \
	do {                                                     \
		pthread_mutex_lock(&sim_mu);                     \
		struct sim_stream *s;                            \
		CUresult r_ = sim_stream_resolve((h), (pt), &s); \
		if (r_ == CUDA_SUCCESS) {                        \
			body;                                    \
		}                                                \
		pthread_mutex_unlock(&sim_mu);                   \
		return r_;                                       \
	} while (0)

static CUresult stream_query(CUstream h, bool pt)
{
	WITH_STREAM(h, pt, {
		if (s->capture == CU_STREAM_CAPTURE_STATUS_ACTIVE) {
			invalidate_capture(s);
			r_ = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
		} else if (!stream_idle(s)) {
			r_ = CUDA_ERROR_NOT_READY;
		}
	});
}

static CUresult stream_synchronize(CUstream h, bool pt)
{
	WITH_STREAM(h, pt, {
		if (s->capture == CU_STREAM_CAPTURE_STATUS_ACTIVE) {
			invalidate_capture(s);
			r_ = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
		} else {
			stream_sync(s);
		}
	});
}

SIM_API CUresult cuStreamQuery(CUstream hStream)
{
	SIM_FAULT();
	return stream_query(hStream, false);
}

SIM_API CUresult cuStreamQuery_ptsz(CUstream hStream)
{
	SIM_FAULT();
	return stream_query(hStream, true);
}

SIM_API CUresult cuStreamSynchronize(CUstream hStream)
{
	SIM_FAULT();
	return stream_synchronize(hStream, false);
}

SIM_API CUresult cuStreamSynchronize_ptsz(CUstream hStream)
{
	SIM_FAULT();
	return stream_synchronize(hStream, true);
}

static CUresult stream_get_ctx(CUstream h, bool pt, CUcontext *pctx)
{
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	WITH_STREAM(h, pt, *pctx = (CUcontext)s->ctx);
}

SIM_API CUresult cuStreamGetCtx(CUstream hStream, CUcontext *pctx)
{
	SIM_FAULT();
	return stream_get_ctx(hStream, false, pctx);
}

SIM_API CUresult cuStreamGetCtx_ptsz(CUstream hStream, CUcontext *pctx)
{
	SIM_FAULT();
	return stream_get_ctx(hStream, true, pctx);
}

SIM_API CUresult cuStreamGetCtx_v2(CUstream hStream, CUcontext *pCtx, CUgreenCtx *pGreenCtx)
{
	SIM_FAULT();
	if (pGreenCtx)
		*pGreenCtx = NULL;
	return stream_get_ctx(hStream, false, pCtx);
}

SIM_API CUresult cuStreamGetCtx_v2_ptsz(CUstream hStream, CUcontext *pCtx, CUgreenCtx *pGreenCtx)
{
	SIM_FAULT();
	if (pGreenCtx)
		*pGreenCtx = NULL;
	return stream_get_ctx(hStream, true, pCtx);
}

static CUresult stream_get_flags(CUstream h, bool pt, unsigned int *flags)
{
	if (!flags)
		return CUDA_ERROR_INVALID_VALUE;
	WITH_STREAM(h, pt, *flags = s->flags);
}

SIM_API CUresult cuStreamGetFlags(CUstream hStream, unsigned int *flags)
{
	SIM_FAULT();
	return stream_get_flags(hStream, false, flags);
}

SIM_API CUresult cuStreamGetFlags_ptsz(CUstream hStream, unsigned int *flags)
{
	SIM_FAULT();
	return stream_get_flags(hStream, true, flags);
}

static CUresult stream_get_priority(CUstream h, bool pt, int *priority)
{
	if (!priority)
		return CUDA_ERROR_INVALID_VALUE;
	WITH_STREAM(h, pt, *priority = s->priority);
}

SIM_API CUresult cuStreamGetPriority(CUstream hStream, int *priority)
{
	SIM_FAULT();
	return stream_get_priority(hStream, false, priority);
}

SIM_API CUresult cuStreamGetPriority_ptsz(CUstream hStream, int *priority)
{
	SIM_FAULT();
	return stream_get_priority(hStream, true, priority);
}

static CUresult stream_get_id(CUstream h, bool pt, unsigned long long *id)
{
	if (!id)
		return CUDA_ERROR_INVALID_VALUE;
	WITH_STREAM(h, pt, *id = s->id);
}

SIM_API CUresult cuStreamGetId(CUstream hStream, unsigned long long *streamId)
{
	SIM_FAULT();
	return stream_get_id(hStream, false, streamId);
}

SIM_API CUresult cuStreamGetId_ptsz(CUstream hStream, unsigned long long *streamId)
{
	SIM_FAULT();
	return stream_get_id(hStream, true, streamId);
}

static CUresult stream_get_device(CUstream h, bool pt, CUdevice *dev)
{
	if (!dev)
		return CUDA_ERROR_INVALID_VALUE;
	WITH_STREAM(h, pt, *dev = s->ctx->dev);
}

SIM_API CUresult cuStreamGetDevice(CUstream hStream, CUdevice *device)
{
	SIM_FAULT();
	return stream_get_device(hStream, false, device);
}

SIM_API CUresult cuStreamGetDevice_ptsz(CUstream hStream, CUdevice *device)
{
	SIM_FAULT();
	return stream_get_device(hStream, true, device);
}

static CUresult launch_host(CUstream h, bool pt, struct sim_op *op)
{
	pthread_mutex_lock(&sim_mu);
	struct sim_stream *s;
	CUresult r = sim_stream_resolve(h, pt, &s);
	if (r == CUDA_SUCCESS)
		r = sim_submit(s, op);
	else
		sim_op_free(op);
	pthread_mutex_unlock(&sim_mu);
	return r;
}

static CUresult host_func(CUstream h, bool pt, CUhostFn fn, void *data)
{
	if (!fn)
		return CUDA_ERROR_INVALID_VALUE;
	struct sim_op *op = calloc(1, sizeof(*op));
	if (!op)
		return CUDA_ERROR_OUT_OF_MEMORY;
	op->type = SIM_OP_HOSTFN;
	op->u.host.fn = fn;
	op->u.host.data = data;
	return launch_host(h, pt, op);
}

SIM_API CUresult cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void *userData)
{
	SIM_FAULT();
	return host_func(hStream, false, fn, userData);
}

SIM_API CUresult cuLaunchHostFunc_ptsz(CUstream hStream, CUhostFn fn, void *userData)
{
	SIM_FAULT();
	return host_func(hStream, true, fn, userData);
}

static CUresult add_callback(CUstream h, bool pt, CUstreamCallback fn, void *data, unsigned flags)
{
	if (!fn || flags != 0)
		return CUDA_ERROR_INVALID_VALUE;
	struct sim_op *op = calloc(1, sizeof(*op));
	if (!op)
		return CUDA_ERROR_OUT_OF_MEMORY;
	op->type = SIM_OP_CALLBACK;
	op->u.cb.fn = fn;
	op->u.cb.data = data;
	op->u.cb.handle = h;
	return launch_host(h, pt, op);
}

SIM_API CUresult cuStreamAddCallback(CUstream hStream, CUstreamCallback callback, void *userData,
				     unsigned int flags)
{
	SIM_FAULT();
	return add_callback(hStream, false, callback, userData, flags);
}

SIM_API CUresult cuStreamAddCallback_ptsz(CUstream hStream, CUstreamCallback callback,
					  void *userData, unsigned int flags)
{
	SIM_FAULT();
	return add_callback(hStream, true, callback, userData, flags);
}

/* ---- events ---- */

/* Any event the application holds, usable or not (destroying one is always allowed). */
static CUresult event_handle(CUevent h, struct sim_event **out)
{
	CUresult r = sim_ready();
	if (r != CUDA_SUCCESS)
		return r;
	struct sim_event *e = (struct sim_event *)h;
	if (!e || e->magic != SIM_EVENT_MAGIC)
		return CUDA_ERROR_INVALID_HANDLE;
	*out = e;
	return CUDA_SUCCESS;
}

/* A usable event. A destroyed context takes its events with it; the case simulated is the one a
 * tool can be fooled by: the context's handle now serves a new context (cuCtxCreate reuses it). */
static CUresult event_check(CUevent h, struct sim_event **out)
{
	CUresult r = event_handle(h, out);
	if (r != CUDA_SUCCESS)
		return r;
	/* A context's teardown renumbers it under the lock, from any thread (the runtime's exit
	 * handler while a tool's thread asks its events): the driver is thread-safe. */
	pthread_mutex_lock(&sim_mu);
	if ((*out)->ctx->id != (*out)->ctx_id)
		r = CUDA_ERROR_CONTEXT_IS_DESTROYED;
	pthread_mutex_unlock(&sim_mu);
	return r;
}

/* Events the application never destroys must not read as leaks of the simulation. */
static struct sim_event *all_events;

static void event_put(struct sim_event *e)
{
	if (--e->refs > 0)
		return;
	if (e->s)
		sim_stream_put(e->s);
	if (e->prev)
		e->prev->next = e->next;
	else
		all_events = e->next;
	if (e->next)
		e->next->prev = e->prev;
	free(e);
}

/* The worker reached a record: stamp it, unless a later record superseded this one. */
static void event_done(struct sim_op *op)
{
	struct sim_event *e = op->u.event.ev;
	if (e->gen == op->u.event.gen) {
		clock_gettime(CLOCK_MONOTONIC, &e->ts);
		e->ts_gen = op->u.event.gen;
	}
}

static bool event_complete(const struct sim_event *e)
{
	return !e->recorded || e->s->completed >= e->seq;
}

SIM_API CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
	SIM_FAULT();
	struct sim_ctx *ctx;
	CUresult r = sim_ctx_current(&ctx);
	if (r != CUDA_SUCCESS)
		return r;
	if (!phEvent ||
	    (Flags & ~(unsigned)(CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING |
				 CU_EVENT_INTERPROCESS)) ||
	    ((Flags & CU_EVENT_INTERPROCESS) && !(Flags & CU_EVENT_DISABLE_TIMING)))
		return CUDA_ERROR_INVALID_VALUE;
	struct sim_event *e = calloc(1, sizeof(*e));
	if (!e)
		return CUDA_ERROR_OUT_OF_MEMORY;
	e->magic = SIM_EVENT_MAGIC;
	e->ctx = ctx;
	e->ctx_id = ctx->id;
	e->flags = Flags;
	e->refs = 1;
	pthread_mutex_lock(&sim_mu);
	e->next = all_events;
	if (all_events)
		all_events->prev = e;
	all_events = e;
	pthread_mutex_unlock(&sim_mu);
	atomic_fetch_add(&sim_live_events, 1);
	*phEvent = (CUevent)e;
	return CUDA_SUCCESS;
}

static CUresult event_record(CUevent h, CUstream hs, bool pt)
{
	struct sim_event *e;
	CUresult r = event_check(h, &e);
	if (r != CUDA_SUCCESS)
		return r;
	pthread_mutex_lock(&sim_mu);
	struct sim_stream *s;
	r = sim_stream_resolve(hs, pt, &s);
	if (r != CUDA_SUCCESS)
		goto out;
	if (s->ctx != e->ctx) {
		r = CUDA_ERROR_INVALID_HANDLE;
		goto out;
	}
	if (s->capture != CU_STREAM_CAPTURE_STATUS_NONE) {
		/* Cross-stream capture dependencies are not simulated; the graph stays linear. */
		r = s->capture == CU_STREAM_CAPTURE_STATUS_ACTIVE
			? CUDA_SUCCESS
			: CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
		goto out;
	}
	struct sim_op *op = calloc(1, sizeof(*op));
	if (!op) {
		r = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	/* The new record must be in place before submission: without a worker the operation
	 * runs inside sim_submit. */
	struct sim_stream *old_s = e->s;
	uint64_t old_seq = e->seq, old_gen = e->gen;
	bool old_recorded = e->recorded;
	op->type = SIM_OP_EVENT;
	op->u.event.ev = e;
	op->u.event.gen = ++e->gen;
	e->refs++;
	e->s = s;
	sim_stream_ref(s);
	e->recorded = true;
	e->seq = s->submitted + 1;
	r = sim_submit(s, op);
	if (r != CUDA_SUCCESS) {
		sim_stream_put(s);
		e->s = old_s;
		e->seq = old_seq;
		e->gen = old_gen;
		e->recorded = old_recorded;
	} else {
		e->seq = s->submitted;
		if (old_s)
			sim_stream_put(old_s);
	}
out:
	pthread_mutex_unlock(&sim_mu);
	return r;
}

SIM_API CUresult cuEventRecord(CUevent hEvent, CUstream hStream)
{
	SIM_FAULT();
	return event_record(hEvent, hStream, false);
}

SIM_API CUresult cuEventRecord_ptsz(CUevent hEvent, CUstream hStream)
{
	SIM_FAULT();
	return event_record(hEvent, hStream, true);
}

SIM_API CUresult cuEventRecordWithFlags(CUevent hEvent, CUstream hStream, unsigned int flags)
{
	SIM_FAULT();
	if (flags & ~(unsigned)CU_EVENT_RECORD_EXTERNAL)
		return CUDA_ERROR_INVALID_VALUE;
	return event_record(hEvent, hStream, false);
}

SIM_API CUresult cuEventRecordWithFlags_ptsz(CUevent hEvent, CUstream hStream, unsigned int flags)
{
	SIM_FAULT();
	if (flags & ~(unsigned)CU_EVENT_RECORD_EXTERNAL)
		return CUDA_ERROR_INVALID_VALUE;
	return event_record(hEvent, hStream, true);
}

SIM_API CUresult cuEventQuery(CUevent hEvent)
{
	SIM_FAULT();
	struct sim_event *e;
	CUresult r = event_check(hEvent, &e);
	if (r != CUDA_SUCCESS)
		return r;
	pthread_mutex_lock(&sim_mu);
	r = event_complete(e) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
	pthread_mutex_unlock(&sim_mu);
	return r;
}

SIM_API CUresult cuEventSynchronize(CUevent hEvent)
{
	SIM_FAULT();
	struct sim_event *e;
	CUresult r = event_check(hEvent, &e);
	if (r != CUDA_SUCCESS)
		return r;
	pthread_mutex_lock(&sim_mu);
	if (e->recorded)
		sim_wait_seq(e->s, e->seq);
	pthread_mutex_unlock(&sim_mu);
	return CUDA_SUCCESS;
}

SIM_API CUresult cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
	SIM_FAULT();
	struct sim_event *a, *b;
	CUresult r = event_check(hStart, &a);
	if (r == CUDA_SUCCESS)
		r = event_check(hEnd, &b);
	if (r != CUDA_SUCCESS)
		return r;
	if (!pMilliseconds)
		return CUDA_ERROR_INVALID_VALUE;
	if ((a->flags | b->flags) & CU_EVENT_DISABLE_TIMING)
		return CUDA_ERROR_INVALID_HANDLE;
	pthread_mutex_lock(&sim_mu);
	if (!a->recorded || !b->recorded)
		r = CUDA_ERROR_INVALID_HANDLE;
	else if (!event_complete(a) || !event_complete(b) || a->ts_gen != a->gen ||
		 b->ts_gen != b->gen)
		r = CUDA_ERROR_NOT_READY;
	else
		*pMilliseconds = (float)((double)(b->ts.tv_sec - a->ts.tv_sec) * 1e3 +
					 (double)(b->ts.tv_nsec - a->ts.tv_nsec) / 1e6);
	pthread_mutex_unlock(&sim_mu);
	return r;
}

SIM_API CUresult cuEventElapsedTime_v2(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
	SIM_FAULT();
	return cuEventElapsedTime(pMilliseconds, hStart, hEnd);
}

SIM_API CUresult cuEventDestroy_v2(CUevent hEvent)
{
	SIM_FAULT();
	struct sim_event *e;
	CUresult r = event_handle(hEvent, &e);
	if (r != CUDA_SUCCESS)
		return r;
	pthread_mutex_lock(&sim_mu);
	e->magic = 0;
	event_put(e);
	pthread_mutex_unlock(&sim_mu);
	atomic_fetch_sub(&sim_live_events, 1);
	return CUDA_SUCCESS;
}

static CUresult wait_event(CUstream hs, CUevent he, unsigned flags, bool pt)
{
	struct sim_event *e;
	CUresult r = event_check(he, &e);
	if (r != CUDA_SUCCESS)
		return r;
	if (flags & ~(unsigned)CU_EVENT_WAIT_EXTERNAL)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_mu);
	struct sim_stream *s;
	r = sim_stream_resolve(hs, pt, &s);
	if (r != CUDA_SUCCESS || !e->recorded || e->s == s ||
	    s->capture == CU_STREAM_CAPTURE_STATUS_ACTIVE)
		goto out;
	struct sim_op *op = calloc(1, sizeof(*op));
	if (!op) {
		r = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	op->type = SIM_OP_WAIT;
	op->u.wait.s = e->s;
	op->u.wait.seq = e->seq;
	sim_stream_ref(e->s);
	r = sim_submit(s, op);
out:
	pthread_mutex_unlock(&sim_mu);
	return r;
}

SIM_API CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
	SIM_FAULT();
	return wait_event(hStream, hEvent, Flags, false);
}

SIM_API CUresult cuStreamWaitEvent_ptsz(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
	SIM_FAULT();
	return wait_event(hStream, hEvent, Flags, true);
}

/* ---- process exit ---- */

/* Workers must not outlive the library. Streams stay allocated (handles may still be used by
 * later destructors); without workers, new work runs synchronously on the caller. */
__attribute__((destructor)) static void stream_fini(void)
{
	if (__atomic_load_n(&sim_init_state, __ATOMIC_ACQUIRE) == 3)
		return; /* a forked child: no workers of its own, sim_mu possibly held */
	pthread_mutex_lock(&sim_mu);
	shutting_down = true;
	for (struct sim_stream *s = all_streams; s; s = s->all_next)
		if (s->has_thread) {
			s->closing = true;
			pthread_cond_signal(&s->wake);
		}
	struct timespec deadline;
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += 5;
	for (struct sim_stream *s = all_streams; s; s = s->all_next) {
		if (!s->has_thread || s->stuck)
			continue;
		while (!s->finished)
			if (pthread_cond_timedwait(&sim_progress, &sim_mu, &deadline) == ETIMEDOUT)
				break;
		if (!s->finished)
			continue; /* stuck in a host function: leave it */
		pthread_join(s->thread, NULL);
		s->joined = true;
		s->has_thread = false;
		s->closing = false;
		s->refs--; /* the worker's reference; the struct itself stays */
	}
	pthread_mutex_unlock(&sim_mu);
}
