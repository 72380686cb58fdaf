/* SPDX-License-Identifier: MIT */
/*
 * bench_timing: what giving every async peer copy a GPU duration costs the enqueueing thread, on
 * devices 0 and 1, per timing mechanism.
 *
 * Each variant enqueues cuMemcpyPeerAsync(dev 1 <- dev 0, --bytes, 256 B by default) on one stream
 * of device 0, with peer access enabled where cuDeviceCanAccessPeer allows it:
 *   bare        the copy alone
 *   events2     cuEventRecord(start); copy; cuEventRecord(end), timing events (CU_EVENT_DEFAULT)
 *   events1     copy; cuEventRecord(end), timing events: durations are gaps between end events
 *   notiming2   as events2 with CU_EVENT_DISABLE_TIMING events
 *   cupti       CUPTI activity tracing of MEMCPY and MEMCPY2 (peer copies) enabled
 *   cupti+corr  as cupti, plus EXTERNAL_CORRELATION enabled and a CUSTOM0 external correlation id
 *               pushed before and popped after every copy
 *   cupti2      CUPTI activity tracing of MEMCPY2 (peer copies) alone
 *   queries, queries:cupti
 *               the copy plus the two questions the guard asks the driver about its stream
 *               (cuStreamIsCapturing, cuStreamGetId), untraced (against bare) and with CUPTI
 *               tracing (against cupti): whether tracing makes the guard's own calls dearer
 * and, because the guard must not slow the program's other calls either, what tracing costs calls
 * that are not peer copies (each beside its own untraced run):
 *   h2d, h2d:cupti, h2d:cupti2           cuMemcpyHtoDAsync of --bytes from pinned memory, device 0
 *   launch, launch:cupti, launch:cupti2  cuLaunchKernel of an empty kernel (from PTX) on device 0
 * Events come from pools of --pool pairs used round-robin, so a batch never re-records an event it
 * recorded already. A run is --calls copies in batches of --batch; the stream is synchronised after
 * each batch, and only the enqueueing (the loop of a batch) is timed, by CLOCK_MONOTONIC. Variants
 * run interleaved, run 1 of each, then run 2 (the order rotating by one each run), so drift hits
 * them equally; the table has the median of --runs runs, every run, the difference to bare, and
 * the GPU durations the mechanism delivered (events: cuEventElapsedTime after each batch's
 * synchronise; CUPTI: the records' end - start), none of which is timed.
 *
 * Before CUPTI is first called, variants bare to notiming2 run once more as a pre-pass: CUPTI may
 * stay attached to the driver after its activity is disabled again, and the pre-pass shows whether
 * that alone costs the other variants something.
 *
 * libcupti is loaded with dlopen (never linked): --cupti PATH, else libcupti.so.13, libcupti.so and
 * the toolkit's usual places (with the simulated CUDA on LD_LIBRARY_PATH, its simulated libcupti).
 * Where it cannot be loaded or refuses to trace the CUPTI rows say why and the program still
 * exits 0. Any other
 * failing CUDA or CUPTI call ends it with status 1.
 *
 *   bench_timing [--calls N] [--batch N] [--runs N] [--pool N] [--bytes N] [--cupti PATH]
 *                [--no-cupti] [--no-prepass]
 *
 * On real GPUs: `build/tests/bench/bench_timing` (the real libcuda.so.1 must be the one found).
 * With the simulated CUDA: `LD_LIBRARY_PATH=build/tests/simcuda build/tests/bench/bench_timing
 * --calls 2000`.
 */
#include "bench_devices.h"
#include "driver.h"

#include <cupti.h>

#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_RUNS	   64
#define CUPTI_BUFFER_BYTES ((size_t)8 << 20)

enum variant {
	V_BARE,
	V_EVENTS2,
	V_EVENTS1,
	V_NOTIMING2,
	V_CUPTI,
	V_CUPTI_CORR,
	V_CUPTI2,
	V_H2D,
	V_H2D_CUPTI,
	V_H2D_CUPTI2,
	V_LAUNCH,
	V_LAUNCH_CUPTI,
	V_LAUNCH_CUPTI2,
	V_QUERIES,
	V_QUERIES_CUPTI,
	NVARIANTS,
};

/* What a variant enqueues, and which CUPTI activity kinds are on while it runs. */
enum op { OP_PEER, OP_H2D, OP_LAUNCH };
enum tracing { T_NONE, T_MEMCPY_BOTH, T_MEMCPY2, T_MEMCPY_BOTH_CORR };

static const struct {
	enum op op;
	enum tracing tracing;
	enum variant bare; /* the untraced variant of the same call, for vs_bare */
} variant_kind[] = {
    [V_BARE] = {OP_PEER, T_NONE, V_BARE},
    [V_EVENTS2] = {OP_PEER, T_NONE, V_BARE},
    [V_EVENTS1] = {OP_PEER, T_NONE, V_BARE},
    [V_NOTIMING2] = {OP_PEER, T_NONE, V_BARE},
    [V_CUPTI] = {OP_PEER, T_MEMCPY_BOTH, V_BARE},
    [V_CUPTI_CORR] = {OP_PEER, T_MEMCPY_BOTH_CORR, V_BARE},
    [V_CUPTI2] = {OP_PEER, T_MEMCPY2, V_BARE},
    [V_H2D] = {OP_H2D, T_NONE, V_H2D},
    [V_H2D_CUPTI] = {OP_H2D, T_MEMCPY_BOTH, V_H2D},
    [V_H2D_CUPTI2] = {OP_H2D, T_MEMCPY2, V_H2D},
    [V_LAUNCH] = {OP_LAUNCH, T_NONE, V_LAUNCH},
    [V_LAUNCH_CUPTI] = {OP_LAUNCH, T_MEMCPY_BOTH, V_LAUNCH},
    [V_LAUNCH_CUPTI2] = {OP_LAUNCH, T_MEMCPY2, V_LAUNCH},
    [V_QUERIES] = {OP_PEER, T_NONE, V_BARE},
    [V_QUERIES_CUPTI] = {OP_PEER, T_MEMCPY_BOTH, V_CUPTI},
};
/* The pre-pass runs these, before CUPTI is called. */
#define NPLAIN (V_NOTIMING2 + 1)

static const char *const variant_name[NVARIANTS] = {
    "bare",	  "events2",	  "events1",	   "notiming2", "cupti",
    "cupti+corr", "cupti2",	  "h2d",	   "h2d:cupti", "h2d:cupti2",
    "launch",	  "launch:cupti", "launch:cupti2", "queries",	"queries:cupti",
};

struct opts {
	unsigned calls, batch, runs, pool;
	size_t bytes;
	const char *cupti_path;
	bool no_cupti, no_prepass;
};

/* GPU durations, ns. */
struct durs {
	double *v;
	size_t n, cap;
	bool oom;
};

/* CUPTI records that arrived during one variant's runs (warm-ups excluded). */
struct cupti_counts {
	uint64_t memcpy, memcpy2, no_timestamp, ext, ext_custom0, other;
	uint64_t forced_flushes;
	/* Correlation ids, to tell whether the external records name the copies. */
	uint32_t *copy_corr, *ext_corr;
	size_t ncopy_corr, n_ext_corr, cap_copy_corr, cap_ext_corr;
	bool oom;
};

struct result {
	double ns[MAX_RUNS]; /* enqueue ns per call, one per run */
	unsigned nruns;
	struct durs gpu;
	struct cupti_counts cc;
	bool unavailable;
	char why[512];
};

struct cupti {
	void *lib;
	char path[256];
	__typeof__(cuptiActivityRegisterCallbacks) *RegisterCallbacks;
	__typeof__(cuptiActivityEnable) *Enable;
	__typeof__(cuptiActivityDisable) *Disable;
	__typeof__(cuptiActivityFlushAll) *FlushAll;
	__typeof__(cuptiGetResultString) *GetResultString;
	__typeof__(cuptiActivityGetNextRecord) *GetNextRecord;
	__typeof__(cuptiActivityPushExternalCorrelationId) *PushExternalCorrelationId;
	__typeof__(cuptiActivityPopExternalCorrelationId) *PopExternalCorrelationId;
	/* Optional. */
	__typeof__(cuptiActivityGetNumDroppedRecords) *GetNumDroppedRecords;
	__typeof__(cuptiGetVersion) *GetVersion;
	bool loaded, ok, corr_ok;
	char why[512], corr_why[512], tried[512];
};

struct bench {
	struct opts o;
	CUdevice d0, d1;
	CUcontext ctx0, ctx1;
	CUstream s;
	CUdeviceptr src, dst; /* src on device 0, dst on device 1 */
	void *host;	      /* pinned, --bytes, source of the h2d variants */
	CUfunction nop;	      /* NULL: no launch variants (why in nop_why) */
	CUresult(CUDAAPI *launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
				  unsigned, unsigned, CUstream, void **, void **);
	char nop_why[256];
	CUevent *t_start, *t_end, *n_start, *n_end; /* timing and non-timing pools */
	unsigned pool_next;
	uint64_t ext_id;
	bool p2p;
	char p2p_note[128];
};

static struct cupti cupti;

/* What the buffer-completed callback (a CUPTI thread) counts into; NULL: records are dropped. */
static pthread_mutex_t cb_mu = PTHREAD_MUTEX_INITIALIZER;
static struct result *cb_target;
static uint64_t cb_stray, cb_dropped, cb_walk_errors;
static CUptiResult cb_walk_error;

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return (x > y) - (x < y);
}

/* Sorts v. */
static double median(double *v, size_t n)
{
	if (!n)
		return 0;
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void durs_add(struct durs *d, double ns)
{
	if (d->n == d->cap) {
		size_t cap = d->cap ? 2 * d->cap : 4096;
		double *v = realloc(d->v, cap * sizeof(*v));
		if (!v) {
			d->oom = true;
			return;
		}
		d->v = v;
		d->cap = cap;
	}
	d->v[d->n++] = ns;
}

static void u32_add(uint32_t **v, size_t *n, size_t *cap, uint32_t x, bool *oom)
{
	if (*n == *cap) {
		size_t c = *cap ? 2 * *cap : 4096;
		uint32_t *p = realloc(*v, c * sizeof(*p));
		if (!p) {
			*oom = true;
			return;
		}
		*v = p;
		*cap = c;
	}
	(*v)[(*n)++] = x;
}

#define CHECK(call)                                                                             \
	do {                                                                                    \
		CUresult r_ = (call);                                                           \
		if (r_ != CUDA_SUCCESS) {                                                       \
			fprintf(stderr, "bench_timing: %s failed: %s (%d) at line %d\n", #call, \
				p2pg_cu_error_name(r_), (int)r_, __LINE__);                     \
			return -1;                                                              \
		}                                                                               \
	} while (0)

static const char *cupti_error(CUptiResult r)
{
	const char *s = NULL;
	if (!cupti.GetResultString || cupti.GetResultString(r, &s) != CUPTI_SUCCESS || !s)
		return "unknown CUPTI status";
	return s;
}

#define CUPTI_CHECK(call)                                                                       \
	do {                                                                                    \
		CUptiResult r_ = (call);                                                        \
		if (r_ != CUPTI_SUCCESS) {                                                      \
			fprintf(stderr, "bench_timing: %s failed: %s (%d) at line %d\n", #call, \
				cupti_error(r_), (int)r_, __LINE__);                            \
			return -1;                                                              \
		}                                                                               \
	} while (0)

/* ---- CUPTI ---- */

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
	*buffer = aligned_alloc(8, CUPTI_BUFFER_BYTES);
	*size = *buffer ? CUPTI_BUFFER_BYTES : 0;
	*max_records = 0;
}

/* Called with cb_mu held. */
static void count_record(const CUpti_Activity *rec)
{
	struct result *t = cb_target;
	if (!t) {
		cb_stray++;
		return;
	}
	struct cupti_counts *c = &t->cc;
	uint64_t start, end;
	uint32_t corr;
	switch (rec->kind) {
	case CUPTI_ACTIVITY_KIND_MEMCPY: {
		const CUpti_ActivityMemcpy6 *m = (const CUpti_ActivityMemcpy6 *)rec;
		c->memcpy++;
		start = m->start;
		end = m->end;
		corr = m->correlationId;
		break;
	}
	case CUPTI_ACTIVITY_KIND_MEMCPY2: {
		const CUpti_ActivityMemcpyPtoP4 *m = (const CUpti_ActivityMemcpyPtoP4 *)rec;
		c->memcpy2++;
		start = m->start;
		end = m->end;
		corr = m->correlationId;
		break;
	}
	case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
		const CUpti_ActivityExternalCorrelation *x =
		    (const CUpti_ActivityExternalCorrelation *)rec;
		c->ext++;
		if (x->externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0) {
			c->ext_custom0++;
			u32_add(&c->ext_corr, &c->n_ext_corr, &c->cap_ext_corr, x->correlationId,
				&c->oom);
		}
		return;
	}
	default:
		c->other++;
		return;
	}
	u32_add(&c->copy_corr, &c->ncopy_corr, &c->cap_copy_corr, corr, &c->oom);
	if (!start && !end)
		c->no_timestamp++;
	else
		durs_add(&t->gpu, (double)(end - start));
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream_id, uint8_t *buffer,
				      size_t size, size_t valid)
{
	pthread_mutex_lock(&cb_mu);
	if (buffer && valid) {
		CUpti_Activity *rec = NULL;
		for (;;) {
			CUptiResult r = cupti.GetNextRecord(buffer, valid, &rec);
			if (r == CUPTI_ERROR_MAX_LIMIT_REACHED)
				break;
			if (r != CUPTI_SUCCESS) {
				cb_walk_errors++;
				cb_walk_error = r;
				break;
			}
			count_record(rec);
		}
	}
	size_t dropped = 0;
	if (cupti.GetNumDroppedRecords &&
	    cupti.GetNumDroppedRecords(ctx, stream_id, &dropped) == CUPTI_SUCCESS)
		cb_dropped += dropped;
	pthread_mutex_unlock(&cb_mu);
	free(buffer);
}

static void set_target(struct result *r)
{
	pthread_mutex_lock(&cb_mu);
	cb_target = r;
	pthread_mutex_unlock(&cb_mu);
}

static uint64_t target_copies(const struct result *r)
{
	pthread_mutex_lock(&cb_mu);
	uint64_t n = r ? r->cc.memcpy + r->cc.memcpy2 : 0;
	pthread_mutex_unlock(&cb_mu);
	return n;
}

#define RESOLVE(field, name, required)                                                         \
	do {                                                                                   \
		cupti.field = (__typeof__(cupti.field))dlsym(cupti.lib, name);                 \
		if (!cupti.field && (required)) {                                              \
			snprintf(cupti.why, sizeof(cupti.why), "%s: no %s", cupti.path, name); \
			return -1;                                                             \
		}                                                                              \
	} while (0)

/* dlopen and dlsym only: no CUPTI call yet. -1 with cupti.why set when it cannot be had. */
static int cupti_load(const char *path)
{
	const char *candidates[] = {
	    path,
	    "libcupti.so.13",
	    "libcupti.so",
	    "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13",
	    "/usr/local/cuda/lib64/libcupti.so.13",
	};
	size_t used = 0;
	cupti.why[0] = cupti.tried[0] = '\0';
	for (size_t k = 0; k < sizeof(candidates) / sizeof(candidates[0]); k++) {
		if (!candidates[k])
			continue;
		cupti.lib = dlopen(candidates[k], RTLD_NOW | RTLD_LOCAL);
		if (cupti.lib) {
			snprintf(cupti.path, sizeof(cupti.path), "%s", candidates[k]);
			break;
		}
		const char *e = dlerror();
		if (used < sizeof(cupti.why))
			used +=
			    (size_t)snprintf(cupti.why + used, sizeof(cupti.why) - used, "%s%s",
					     used ? "; " : "no libcupti: ", e ? e : candidates[k]);
	}
	if (!cupti.lib)
		return -1;
	/* What failed before the one that loaded, for the header. */
	snprintf(cupti.tried, sizeof(cupti.tried), "%s", cupti.why);
	cupti.why[0] = '\0';
	RESOLVE(RegisterCallbacks, "cuptiActivityRegisterCallbacks", true);
	RESOLVE(Enable, "cuptiActivityEnable", true);
	RESOLVE(Disable, "cuptiActivityDisable", true);
	RESOLVE(FlushAll, "cuptiActivityFlushAll", true);
	RESOLVE(GetResultString, "cuptiGetResultString", true);
	RESOLVE(GetNextRecord, "cuptiActivityGetNextRecord", true);
	RESOLVE(PushExternalCorrelationId, "cuptiActivityPushExternalCorrelationId", true);
	RESOLVE(PopExternalCorrelationId, "cuptiActivityPopExternalCorrelationId", true);
	RESOLVE(GetNumDroppedRecords, "cuptiActivityGetNumDroppedRecords", false);
	RESOLVE(GetVersion, "cuptiGetVersion", false);
	cupti.loaded = true;
	return 0;
}

/*
 * The first CUPTI calls: register the buffer callbacks, and enable then disable each kind once, so
 * that a kind the library or driver refuses marks its variants unavailable instead of failing the
 * bench. Returns -1 only for a failure after that (disabling what was enabled).
 */
static int cupti_probe(void)
{
	CUptiResult r = cupti.RegisterCallbacks(buffer_requested, buffer_completed);
	if (r != CUPTI_SUCCESS) {
		snprintf(cupti.why, sizeof(cupti.why), "cuptiActivityRegisterCallbacks: %s (%d)",
			 cupti_error(r), (int)r);
		return 0;
	}
	const CUpti_ActivityKind kinds[] = {CUPTI_ACTIVITY_KIND_MEMCPY,
					    CUPTI_ACTIVITY_KIND_MEMCPY2};
	const char *names[] = {"MEMCPY", "MEMCPY2"};
	for (unsigned k = 0; k < 2; k++) {
		r = cupti.Enable(kinds[k]);
		if (r != CUPTI_SUCCESS) {
			snprintf(cupti.why, sizeof(cupti.why),
				 "cuptiActivityEnable(CUPTI_ACTIVITY_KIND_%s): %s (%d)", names[k],
				 cupti_error(r), (int)r);
			for (unsigned j = 0; j < k; j++)
				CUPTI_CHECK(cupti.Disable(kinds[j]));
			return 0;
		}
	}
	cupti.ok = true;
	r = cupti.Enable(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION);
	if (r != CUPTI_SUCCESS)
		snprintf(cupti.corr_why, sizeof(cupti.corr_why),
			 "cuptiActivityEnable(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION): %s (%d)",
			 cupti_error(r), (int)r);
	else {
		cupti.corr_ok = true;
		CUPTI_CHECK(cupti.Disable(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION));
	}
	for (unsigned k = 0; k < 2; k++)
		CUPTI_CHECK(cupti.Disable(kinds[k]));
	CUPTI_CHECK(cupti.FlushAll(0));
	return 0;
}

static int cupti_begin(enum variant v, struct result *r)
{
	enum tracing t = variant_kind[v].tracing;
	set_target(r);
	if (t != T_MEMCPY2)
		CUPTI_CHECK(cupti.Enable(CUPTI_ACTIVITY_KIND_MEMCPY));
	CUPTI_CHECK(cupti.Enable(CUPTI_ACTIVITY_KIND_MEMCPY2));
	if (t == T_MEMCPY_BOTH_CORR)
		CUPTI_CHECK(cupti.Enable(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION));
	return 0;
}

/* How many copy records a run of `calls` calls of v should leave. */
static unsigned expected_records(enum variant v, unsigned calls)
{
	enum op op = variant_kind[v].op;
	if (op == OP_PEER || (op == OP_H2D && variant_kind[v].tracing != T_MEMCPY2))
		return calls;
	return 0;
}

/* After the stream was synchronised: collect what the run left, then stop tracing. */
static int cupti_end(enum variant v, struct result *r, uint64_t before, unsigned calls)
{
	enum tracing t = variant_kind[v].tracing;
	CUPTI_CHECK(cupti.FlushAll(0));
	if (target_copies(r) - before < expected_records(v, calls)) {
		/* A default flush keeps buffers that hold an incomplete record. */
		CUPTI_CHECK(cupti.FlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
		if (r)
			r->cc.forced_flushes++;
	}
	if (t == T_MEMCPY_BOTH_CORR)
		CUPTI_CHECK(cupti.Disable(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION));
	CUPTI_CHECK(cupti.Disable(CUPTI_ACTIVITY_KIND_MEMCPY2));
	if (t != T_MEMCPY2)
		CUPTI_CHECK(cupti.Disable(CUPTI_ACTIVITY_KIND_MEMCPY));
	CUPTI_CHECK(cupti.FlushAll(0));
	set_target(NULL);
	return 0;
}

/* ---- runs ---- */

static CUresult copy(struct bench *b)
{
	return p2pg_drv.cuMemcpyPeerAsync(b->dst, b->ctx1, b->src, b->ctx0, b->o.bytes, b->s);
}

/* One batch of n calls of variant v; the pools' slots from b->pool_next on. */
static int batch(struct bench *b, enum variant v, unsigned n)
{
	unsigned pool = b->o.pool, first = b->pool_next;
	switch (v) {
	case V_BARE:
	case V_CUPTI:
	case V_CUPTI2:
		for (unsigned k = 0; k < n; k++)
			CHECK(copy(b));
		break;
	case V_H2D:
	case V_H2D_CUPTI:
	case V_H2D_CUPTI2:
		for (unsigned k = 0; k < n; k++)
			CHECK(p2pg_drv.cuMemcpyHtoDAsync(b->src, b->host, b->o.bytes, b->s));
		break;
	case V_LAUNCH:
	case V_LAUNCH_CUPTI:
	case V_LAUNCH_CUPTI2:
		for (unsigned k = 0; k < n; k++)
			CHECK(b->launch(b->nop, 1, 1, 1, 32, 1, 1, 0, b->s, NULL, NULL));
		break;
	case V_EVENTS2:
	case V_NOTIMING2: {
		CUevent *st = v == V_EVENTS2 ? b->t_start : b->n_start;
		CUevent *en = v == V_EVENTS2 ? b->t_end : b->n_end;
		for (unsigned k = 0; k < n; k++) {
			unsigned i = (first + k) % pool;
			CHECK(p2pg_drv.cuEventRecord(st[i], b->s));
			CHECK(copy(b));
			CHECK(p2pg_drv.cuEventRecord(en[i], b->s));
		}
		break;
	}
	case V_EVENTS1:
		for (unsigned k = 0; k < n; k++) {
			CHECK(copy(b));
			CHECK(p2pg_drv.cuEventRecord(b->t_end[(first + k) % pool], b->s));
		}
		break;
	case V_QUERIES:
	case V_QUERIES_CUPTI:
		for (unsigned k = 0; k < n; k++) {
			CUstreamCaptureStatus cap;
			unsigned long long id;
			CHECK(p2pg_drv.cuStreamIsCapturing(b->s, &cap));
			CHECK(copy(b));
			CHECK(p2pg_drv.cuStreamGetId(b->s, &id));
		}
		break;
	case V_CUPTI_CORR:
		for (unsigned k = 0; k < n; k++) {
			uint64_t last = 0;
			CUPTI_CHECK(cupti.PushExternalCorrelationId(
			    CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, ++b->ext_id));
			CHECK(copy(b));
			CUPTI_CHECK(cupti.PopExternalCorrelationId(
			    CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last));
		}
		break;
	case NVARIANTS:
		return -1;
	}
	return 0;
}

/* After the batch's synchronise: the durations its events measured. */
static int batch_durations(struct bench *b, enum variant v, unsigned n, struct durs *d)
{
	unsigned pool = b->o.pool, first = b->pool_next;
	float ms;
	if (v == V_EVENTS2) {
		for (unsigned k = 0; k < n; k++) {
			unsigned i = (first + k) % pool;
			CHECK(p2pg_drv.cuEventElapsedTime(&ms, b->t_start[i], b->t_end[i]));
			durs_add(d, (double)ms * 1e6);
		}
	} else if (v == V_EVENTS1) {
		/* The first end event of a batch follows an idle stream: no gap to measure. */
		for (unsigned k = 1; k < n; k++) {
			CHECK(p2pg_drv.cuEventElapsedTime(&ms, b->t_end[(first + k - 1) % pool],
							  b->t_end[(first + k) % pool]));
			durs_add(d, (double)ms * 1e6);
		}
	}
	return 0;
}

/*
 * One run of `calls` calls; *ret_ns: enqueue ns per call. r (NULL for a warm-up) gets the GPU
 * durations.
 */
static int run_once(struct bench *b, enum variant v, unsigned calls, struct result *r,
		    double *ret_ns)
{
	bool traced = variant_kind[v].tracing != T_NONE;
	uint64_t before = target_copies(r);
	if (traced && cupti_begin(v, r) < 0)
		return -1;
	double enq = 0;
	for (unsigned done = 0; done < calls;) {
		unsigned n = calls - done < b->o.batch ? calls - done : b->o.batch;
		double t0 = now_ns();
		if (batch(b, v, n) < 0)
			return -1;
		enq += now_ns() - t0;
		CHECK(p2pg_drv.cuStreamSynchronize(b->s));
		if (r && batch_durations(b, v, n, &r->gpu) < 0)
			return -1;
		b->pool_next = (b->pool_next + n) % b->o.pool;
		done += n;
	}
	if (traced && cupti_end(v, r, before, calls) < 0)
		return -1;
	*ret_ns = enq / calls;
	return 0;
}

/* Runs of the variants [0, nv), interleaved, each after one untimed warm-up batch. */
static int measure(struct bench *b, struct result *res, unsigned nv)
{
	double ns;
	for (unsigned v = 0; v < nv; v++)
		if (!res[v].unavailable && run_once(b, v, b->o.batch, NULL, &ns) < 0)
			return -1;
	for (unsigned run = 0; run < b->o.runs; run++)
		for (unsigned j = 0; j < nv; j++) {
			unsigned v = (run + j) % nv;
			if (res[v].unavailable)
				continue;
			if (run_once(b, v, b->o.calls, &res[v], &ns) < 0)
				return -1;
			res[v].ns[res[v].nruns++] = ns;
		}
	return 0;
}

/* ---- output ---- */

static double result_median(const struct result *r)
{
	double v[MAX_RUNS];
	memcpy(v, r->ns, r->nruns * sizeof(v[0]));
	return median(v, r->nruns);
}

static void print_table(const struct bench *b, struct result *res, unsigned nv)
{
	int width = b->o.runs * 8 > 19 ? (int)(b->o.runs * 8) : 19;
	printf("%-13s %12s  %-*s %12s  %s\n", "variant", "ns_per_call", width, "runs (ns per call)",
	       "vs_bare(+ns)", "gpu_durations");
	for (unsigned v = 0; v < nv; v++) {
		struct result *r = &res[v];
		printf("%-13s ", variant_name[v]);
		if (r->unavailable) {
			printf("unavailable: %s\n", r->why);
			continue;
		}
		double med = result_median(r);
		double bare = result_median(&res[variant_kind[v].bare]);
		printf("%12.1f  ", med);
		for (unsigned k = 0; k < b->o.runs; k++)
			printf("%7.1f ", r->ns[k]);
		printf("%*s%+12.1f  ", width - (int)(b->o.runs * 8), "", med - bare);
		if (r->gpu.n) {
			double sum = 0;
			for (size_t k = 0; k < r->gpu.n; k++)
				sum += r->gpu.v[k];
			size_t n = r->gpu.n;
			printf("%zu of %" PRIu64 ", mean %.0f ns, median %.0f ns%s\n", n,
			       (uint64_t)b->o.calls * b->o.runs, sum / (double)n,
			       median(r->gpu.v, n), r->gpu.oom ? " (out of memory: partial)" : "");
		} else if (variant_kind[v].tracing != T_NONE && expected_records(v, 1)) {
			printf("0 of %" PRIu64 "\n", (uint64_t)b->o.calls * b->o.runs);
		} else {
			printf("-\n");
		}
	}
}

/* How many ids of a (sorted in place) occur in b (sorted in place). */
static size_t matched(uint32_t *a, size_t na, uint32_t *bv, size_t nb)
{
	if (!na || !nb)
		return 0;
	qsort(a, na, sizeof(*a), cmp_u32);
	qsort(bv, nb, sizeof(*bv), cmp_u32);
	size_t m = 0;
	for (size_t i = 0, j = 0; i < na && j < nb;) {
		if (a[i] < bv[j])
			i++;
		else if (a[i] > bv[j])
			j++;
		else
			m++, i++;
	}
	return m;
}

static void print_cupti_details(const struct bench *b, struct result *res)
{
	pthread_mutex_lock(&cb_mu);
	for (unsigned v = V_CUPTI; v < NVARIANTS; v++) {
		struct result *r = &res[v];
		if (r->unavailable || variant_kind[v].tracing == T_NONE)
			continue;
		struct cupti_counts *c = &r->cc;
		printf("%-13s records over %u runs of %u calls: MEMCPY %" PRIu64 ", MEMCPY2 (PtoP) "
		       "%" PRIu64 ", without timestamps %" PRIu64 ", other kinds %" PRIu64
		       "; runs needing a forced flush %" PRIu64 "\n",
		       variant_name[v], b->o.runs, b->o.calls, c->memcpy, c->memcpy2,
		       c->no_timestamp, c->other, c->forced_flushes);
		if (v == V_CUPTI_CORR) {
			size_t m = matched(c->ext_corr, c->n_ext_corr, c->copy_corr, c->ncopy_corr);
			printf("%-13s external correlation records: %" PRIu64 " (CUSTOM0 %" PRIu64
			       ") for %" PRIu64 " pushed ids; naming a traced copy's correlation "
			       "id: %zu%s\n",
			       "", c->ext, c->ext_custom0, (uint64_t)b->o.calls * b->o.runs, m,
			       c->oom ? " (out of memory: partial)" : "");
		}
	}
	printf("CUPTI: %" PRIu64 " records outside the traced runs (warm-ups), %" PRIu64
	       " dropped, %" PRIu64 " buffer walks failed%s%s\n",
	       cb_stray, cb_dropped, cb_walk_errors, cb_walk_errors ? ", last: " : "",
	       cb_walk_errors ? cupti_error(cb_walk_error) : "");
	pthread_mutex_unlock(&cb_mu);
}

/* ---- set-up ---- */

static int usage(void)
{
	fprintf(stderr, "usage: bench_timing [--calls N] [--batch N] [--runs N] [--pool N] "
			"[--bytes N] [--cupti PATH] [--no-cupti] [--no-prepass]\n");
	return 2;
}

static int parse_args(int argc, char **argv, struct opts *o)
{
	for (int k = 1; k < argc; k++) {
		const char *a = argv[k];
		const char *v = k + 1 < argc ? argv[k + 1] : NULL;
		if (!strcmp(a, "--no-cupti")) {
			o->no_cupti = true;
			continue;
		}
		if (!strcmp(a, "--no-prepass")) {
			o->no_prepass = true;
			continue;
		}
		if (!v)
			return usage();
		k++;
		if (!strcmp(a, "--cupti")) {
			o->cupti_path = v;
			continue;
		}
		char *end;
		errno = 0;
		unsigned long long n = strtoull(v, &end, 10);
		if (errno || end == v || *end || n == 0 || n > 1u << 30)
			return usage();
		if (!strcmp(a, "--calls"))
			o->calls = (unsigned)n;
		else if (!strcmp(a, "--batch"))
			o->batch = (unsigned)n;
		else if (!strcmp(a, "--runs") && n <= MAX_RUNS)
			o->runs = (unsigned)n;
		else if (!strcmp(a, "--pool"))
			o->pool = (unsigned)n;
		else if (!strcmp(a, "--bytes"))
			o->bytes = (size_t)n;
		else
			return usage();
	}
	if (o->pool < o->batch) {
		fprintf(stderr,
			"bench_timing: --pool (%u) must be at least --batch (%u): a batch "
			"must not re-record its own events\n",
			o->pool, o->batch);
		return 2;
	}
	return 0;
}

static int create_pool(CUevent **ret, unsigned n, unsigned flags)
{
	*ret = calloc(n, sizeof(**ret));
	if (!*ret) {
		fprintf(stderr, "bench_timing: out of memory\n");
		return -1;
	}
	for (unsigned k = 0; k < n; k++)
		CHECK(p2pg_drv.cuEventCreate(&(*ret)[k], flags));
	return 0;
}

/* An empty kernel, JIT-compiled by the driver for whatever device runs it. */
static const char nop_ptx[] = ".version 8.0\n"
			      ".target sm_80\n"
			      ".address_size 64\n"
			      ".visible .entry p2pg_nop()\n"
			      "{\n"
			      "\tret;\n"
			      "}\n";

/*
 * The launch variants' kernel, in the current context (device 0's). Not in the guard's driver
 * table, so looked up in libcuda itself; where that fails (the simulated CUDA has no modules) the
 * launch variants are marked unavailable with the reason.
 */
static void load_nop(struct bench *b)
{
	void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	CUresult(CUDAAPI * load)(CUmodule *, const void *) =
	    lib ? (CUresult(CUDAAPI *)(CUmodule *, const void *))dlsym(lib, "cuModuleLoadData")
		: NULL;
	CUresult(CUDAAPI * get)(CUfunction *, CUmodule, const char *) =
	    lib ? (CUresult(CUDAAPI *)(CUfunction *, CUmodule, const char *))dlsym(
		      lib, "cuModuleGetFunction")
		: NULL;
	b->launch = lib ? (__typeof__(b->launch))dlsym(lib, "cuLaunchKernel") : NULL;
	if (!load || !get || !b->launch) {
		snprintf(b->nop_why, sizeof(b->nop_why),
			 "libcuda.so.1 has no cuModuleLoadData/cuModuleGetFunction/cuLaunchKernel");
		return;
	}
	CUmodule mod;
	CUresult r = load(&mod, nop_ptx);
	if (r == CUDA_SUCCESS)
		r = get(&b->nop, mod, "p2pg_nop");
	if (r != CUDA_SUCCESS) {
		b->nop = NULL;
		snprintf(b->nop_why, sizeof(b->nop_why), "loading the empty kernel: %s (%d)",
			 p2pg_cu_error_name(r), (int)r);
	}
}

static int setup(struct bench *b)
{
	struct bench_devices dev;
	if (bench_devices_open("bench_timing", &dev) < 0)
		return -1;
	b->d0 = dev.d0;
	b->d1 = dev.d1;
	b->ctx0 = dev.ctx0;
	b->ctx1 = dev.ctx1;
	int can01 = 0, can10 = 0;
	CHECK(p2pg_drv.cuDeviceCanAccessPeer(&can01, b->d0, b->d1));
	CHECK(p2pg_drv.cuDeviceCanAccessPeer(&can10, b->d1, b->d0));
	CHECK(p2pg_drv.cuCtxSetCurrent(b->ctx1));
	CHECK(p2pg_drv.cuMemAlloc(&b->dst, b->o.bytes));
	CHECK(p2pg_drv.cuMemsetD8(b->dst, 0, b->o.bytes));
	if (can01 && can10)
		CHECK(p2pg_drv.cuCtxEnablePeerAccess(b->ctx0, 0));
	CHECK(p2pg_drv.cuCtxSetCurrent(b->ctx0));
	CHECK(p2pg_drv.cuMemAlloc(&b->src, b->o.bytes));
	CHECK(p2pg_drv.cuMemsetD8(b->src, 0x5a, b->o.bytes));
	if (can01 && can10)
		CHECK(p2pg_drv.cuCtxEnablePeerAccess(b->ctx1, 0));
	b->p2p = can01 && can10;
	if (b->p2p)
		snprintf(b->p2p_note, sizeof(b->p2p_note), "peer access enabled");
	else
		snprintf(
		    b->p2p_note, sizeof(b->p2p_note),
		    "NO peer access (cuDeviceCanAccessPeer 0->1 %d, 1->0 %d): measured without "
		    "it, the driver stages the copies",
		    can01, can10);
	CHECK(p2pg_drv.cuStreamCreate(&b->s, CU_STREAM_NON_BLOCKING));
	CHECK(p2pg_drv.cuMemAllocHost(&b->host, b->o.bytes));
	memset(b->host, 0x5a, b->o.bytes);
	load_nop(b);
	if (create_pool(&b->t_start, b->o.pool, CU_EVENT_DEFAULT) < 0 ||
	    create_pool(&b->t_end, b->o.pool, CU_EVENT_DEFAULT) < 0 ||
	    create_pool(&b->n_start, b->o.pool, CU_EVENT_DISABLE_TIMING) < 0 ||
	    create_pool(&b->n_end, b->o.pool, CU_EVENT_DISABLE_TIMING) < 0)
		return -1;
	/* The copy works: the destination holds the source's bytes. */
	CHECK(copy(b));
	CHECK(p2pg_drv.cuStreamSynchronize(b->s));
	unsigned char *back = malloc(b->o.bytes);
	if (!back) {
		fprintf(stderr, "bench_timing: out of memory\n");
		return -1;
	}
	CHECK(p2pg_drv.cuMemcpyDtoH(back, b->dst, b->o.bytes));
	for (size_t k = 0; k < b->o.bytes; k++)
		if (back[k] != 0x5a) {
			fprintf(stderr, "bench_timing: the peer copy delivered wrong bytes\n");
			free(back);
			return -1;
		}
	free(back);
	return 0;
}

static int destroy_pool(CUevent *pool, unsigned n)
{
	for (unsigned k = 0; pool && k < n; k++)
		CHECK(p2pg_drv.cuEventDestroy(pool[k]));
	free(pool);
	return 0;
}

static void free_results(struct result *res, unsigned nv)
{
	for (unsigned v = 0; v < nv; v++) {
		free(res[v].gpu.v);
		free(res[v].cc.copy_corr);
		free(res[v].cc.ext_corr);
	}
}

static int teardown(struct bench *b)
{
	if (destroy_pool(b->t_start, b->o.pool) < 0 || destroy_pool(b->t_end, b->o.pool) < 0 ||
	    destroy_pool(b->n_start, b->o.pool) < 0 || destroy_pool(b->n_end, b->o.pool) < 0)
		return -1;
	CHECK(p2pg_drv.cuStreamDestroy(b->s));
	CHECK(p2pg_drv.cuMemFreeHost(b->host));
	CHECK(p2pg_drv.cuMemFree(b->src));
	CHECK(p2pg_drv.cuCtxSetCurrent(b->ctx1));
	CHECK(p2pg_drv.cuMemFree(b->dst));
	return 0;
}

static int print_header(const struct bench *b)
{
	struct bench_devices_names names;
	CHECK(bench_devices_describe(&(struct bench_devices){b->d0, b->d1, b->ctx0, b->ctx1},
				     &names));
	printf("bench_timing: device 0 \"%s\" -> device 1 \"%s\", cuMemcpyPeerAsync of %zu B; %s; "
	       "driver %d\n",
	       names.d0, names.d1, b->o.bytes, b->p2p_note, names.driver_version);
	if (b->o.no_cupti) {
		printf("CUPTI: not loaded (--no-cupti)\n");
	} else if (!cupti.loaded) {
		printf("CUPTI: %s\n", cupti.why);
	} else {
		uint32_t cv = 0;
		if (cupti.GetVersion && cupti.GetVersion(&cv) != CUPTI_SUCCESS)
			cv = 0;
		printf("CUPTI: %s, API version %u (built against %u)%s%s\n", cupti.path, cv,
		       (unsigned)CUPTI_API_VERSION, cupti.tried[0] ? "; before it, " : "",
		       cupti.tried);
	}
	printf("%u calls per run in batches of %u (stream synchronised between batches, untimed); "
	       "median of %u runs, variants interleaved; events from pools of %u pairs\n",
	       b->o.calls, b->o.batch, b->o.runs, b->o.pool);
	return 0;
}

int main(int argc, char **argv)
{
	struct bench b = {
	    .o = {.calls = 20000, .batch = 256, .runs = 5, .pool = 512, .bytes = 256}};
	int pr = parse_args(argc, argv, &b.o);
	if (pr)
		return pr;
	if (setup(&b) < 0)
		return 1;

	static struct result pre[NPLAIN], res[NVARIANTS];
	bool have_cupti = false;
	if (b.o.no_cupti)
		snprintf(cupti.why, sizeof(cupti.why), "--no-cupti");
	else
		have_cupti = cupti_load(b.o.cupti_path) == 0;
	if (print_header(&b) < 0)
		return 1;
	fflush(stdout);

	/* Before any CUPTI call. */
	bool prepass = have_cupti && !b.o.no_prepass;
	if (prepass && measure(&b, pre, NPLAIN) < 0)
		return 1;

	if (have_cupti && cupti_probe() < 0)
		return 1;
	for (unsigned v = V_CUPTI; v < NVARIANTS; v++) {
		const char *why = NULL;
		if (variant_kind[v].op == OP_LAUNCH && !b.nop)
			why = b.nop_why;
		else if ((v == V_QUERIES || v == V_QUERIES_CUPTI) &&
			 (!p2pg_drv.cuStreamIsCapturing || !p2pg_drv.cuStreamGetId))
			why = "the driver has no cuStreamIsCapturing or cuStreamGetId";
		else if (variant_kind[v].tracing == T_NONE)
			why = NULL;
		else if (!cupti.ok)
			why = cupti.why;
		else if (v == V_CUPTI_CORR && !cupti.corr_ok)
			why = cupti.corr_why;
		if (why) {
			res[v].unavailable = true;
			snprintf(res[v].why, sizeof(res[v].why), "%s", why);
		}
	}
	if (measure(&b, res, NVARIANTS) < 0)
		return 1;

	printf("\n");
	print_table(&b, res, NVARIANTS);
	printf("events2/notiming2: 2 records per copy; events2 durations: start..end of each copy; "
	       "events1 durations: gaps between consecutive end events (none for a batch's first); "
	       "h2d and launch rows: vs_bare against their own untraced row\n");
	if (cupti.ok)
		print_cupti_details(&b, res);
	if (prepass) {
		printf("\npre-pass, before CUPTI was first called (run ahead of the table above; "
		       "vs_bare against this pass's bare):\n");
		print_table(&b, pre, NPLAIN);
	}
	/* Nothing may touch the records after this: tracing is off and the last flush is done. */
	set_target(NULL);
	free_results(pre, NPLAIN);
	free_results(res, NVARIANTS);
	return teardown(&b) < 0 ? 1 : 0;
}
