/* SPDX-License-Identifier: MIT */
/*
 * A user's own NCCL profiler plugin, for the chaining tests: it counts what it is given and checks
 * that every handle it is handed back, and every parent, is one of its own. Built as
 * libnccl-profiler-count.so (ncclProfiler_v5) and, with -DCOUNT_V4, libnccl-profiler-countv4.so
 * (ncclProfiler_v4 only, so the guard must map NCCL's events down to it), and with -DCOUNT_V3
 * libnccl-profiler-countv3.so (ncclProfiler_v3, NCCL 2.26's, with init's no communicator).
 *
 * COUNT_MASK (decimal) is the activation mask it asks for (default: collectives, point-to-point,
 * kernel channels, groups and the proxy thread's control events). At each communicator's finalize
 * it appends one JSON line to COUNT_OUT.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref/ref.h"

#define MAGIC  0x636f756e74ull /* "count" */
#define TYPES  16
#define STATES 32
#define DEFAULT                                                                      \
	(ncclProfileColl | ncclProfileP2p | ncclProfileKernelCh | ncclProfileGroup | \
	 ncclProfileProxyCtrl)

struct event {
	uint64_t magic;
	uint64_t type;
};

struct context {
	uint64_t magic;
	uint64_t comm;
	int rank, nranks;
	char name[64];
	_Atomic long started[TYPES], stopped[TYPES], recorded[STATES];
	_Atomic long bad_parent, foreign, kernel_timestamps, bytes;
};

static int type_index(uint64_t type)
{
	for (int k = 0; k < TYPES; k++)
		if (type == (1ull << k))
			return k;
	return TYPES - 1;
}

static bool ours(const void *p, uint64_t type)
{
	const struct event *e = p;
	return e && e->magic == MAGIC && (type == 0 || e->type == type);
}

static struct context *new_context(uint64_t comm, const char *name, int nranks, int rank, int *mask)
{
	struct context *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->magic = MAGIC;
	c->comm = comm;
	c->rank = rank;
	c->nranks = nranks;
	snprintf(c->name, sizeof(c->name), "%s", name ? name : "");
	const char *m = getenv("COUNT_MASK");
	*mask = m ? atoi(m) : DEFAULT;
	return c;
}

/* The parents NCCL gives a child: its own kernel channel's parent is its own collective or
 * point-to-point event. */
static void start(struct context *c, void **handle, uint64_t type, void *parent, size_t count,
		  const char *datatype)
{
	*handle = NULL;
	if (!c || c->magic != MAGIC)
		return; /* not a context of ours: nothing to count it in */
	atomic_fetch_add(&c->started[type_index(type)], 1);
	if (type == ncclProfileKernelCh && !ours(parent, ncclProfileColl) &&
	    !ours(parent, ncclProfileP2p))
		atomic_fetch_add(&c->bad_parent, 1);
	if ((type == ncclProfileColl || type == ncclProfileP2p) && datatype &&
	    strcmp(datatype, "ncclFloat32") == 0)
		atomic_fetch_add(&c->bytes, (long)count * 4);
	struct event *e = malloc(sizeof(*e));
	if (!e)
		return;
	e->magic = MAGIC;
	e->type = type;
	*handle = e;
}

/* One context per process is enough to find the counts again: handles carry no context. */
static struct context *last_context;

static ncclResult_t stop(void *handle)
{
	struct event *e = handle;
	struct context *c = last_context;
	if (!ours(e, 0)) {
		if (c)
			atomic_fetch_add(&c->foreign, 1);
		return ncclSuccess;
	}
	if (c)
		atomic_fetch_add(&c->stopped[type_index(e->type)], 1);
	/* A collective or point-to-point event stays a parent after its stop (its kernel channels
	 * come later, from the proxy thread): kept, as a real plugin counts references. */
	if (e->type != ncclProfileColl && e->type != ncclProfileP2p) {
		e->magic = 0;
		free(e);
	}
	return ncclSuccess;
}

static ncclResult_t record(void *handle, int state, uint64_t ptimer)
{
	struct context *c = last_context;
	if (!ours(handle, 0)) {
		if (c)
			atomic_fetch_add(&c->foreign, 1);
		return ncclSuccess;
	}
	if (c && state >= 0 && state < STATES)
		atomic_fetch_add(&c->recorded[state], 1);
	if (c && state == ncclProfilerKernelChStop && ptimer)
		atomic_fetch_add(&c->kernel_timestamps, 1);
	return ncclSuccess;
}

static ncclResult_t finalize(void *context)
{
	struct context *c = context;
	if (!c || c->magic != MAGIC)
		return ncclSuccess;
	const char *out = getenv("COUNT_OUT");
	FILE *f = out ? fopen(out, "a") : NULL;
	if (f) {
		fprintf(f,
			"{\"version\": %d, \"comm\": \"%016" PRIx64
			"\", \"rank\": %d, \"nranks\": %d, "
			"\"name\": \"%s\", \"bad_parent\": %ld, \"foreign\": %ld, "
			"\"kernel_timestamps\": %ld, \"float_bytes\": %ld, \"started\": {",
#if defined(COUNT_V3)
			3,
#elif defined(COUNT_V4)
			4,
#else
			5,
#endif
			c->comm, c->rank, c->nranks, c->name, atomic_load(&c->bad_parent),
			atomic_load(&c->foreign), atomic_load(&c->kernel_timestamps),
			atomic_load(&c->bytes));
		for (int k = 0; k < TYPES; k++)
			fprintf(f, "%s\"%d\": %ld", k ? ", " : "", 1 << k,
				atomic_load(&c->started[k]));
		fprintf(f, "}, \"stopped\": {");
		for (int k = 0; k < TYPES; k++)
			fprintf(f, "%s\"%d\": %ld", k ? ", " : "", 1 << k,
				atomic_load(&c->stopped[k]));
		fprintf(f, "}, \"recorded\": {");
		for (int k = 0; k < STATES; k++)
			fprintf(f, "%s\"%d\": %ld", k ? ", " : "", k, atomic_load(&c->recorded[k]));
		fprintf(f, "}}\n");
		fclose(f);
	}
	return ncclSuccess;
}

#if defined(COUNT_V3)

static ncclResult_t init_v3(void **context, int *mask)
{
	*context = last_context = new_context(0, "", 0, -1, mask);
	return *context ? ncclSuccess : ncclInternalError;
}

static ncclResult_t start_v3(void *context, void **handle, ncclProfilerEventDescr_v3_t *d)
{
	size_t count = d->type == ncclProfileColl  ? d->coll.count
		       : d->type == ncclProfileP2p ? d->p2p.count
						   : 0;
	const char *dt = d->type == ncclProfileColl  ? d->coll.datatype
			 : d->type == ncclProfileP2p ? d->p2p.datatype
						     : NULL;
	/* NCCL 2.26 names the communicator in each collective: counted, to see it arrives */
	if (d->type == ncclProfileColl && d->coll.commHash == 0x5eed && context)
		((struct context *)context)->comm = d->coll.commHash;
	start(context, handle, d->type, d->parentObj, count, dt);
	return ncclSuccess;
}

static ncclResult_t record_v3(void *handle, ncclProfilerEventState_v3_t state,
			      ncclProfilerEventStateArgs_v3_t *args)
{
	return record(handle, state, 0);
}

__attribute__((visibility("default")))
ncclProfiler_v3_t ncclProfiler_v3 = {"CountV3", init_v3, start_v3, stop, record_v3, finalize};

#elif defined(COUNT_V4)

static ncclResult_t init_v4(void **context, int *mask, const char *name, uint64_t comm, int nnodes,
			    int nranks, int rank, ncclDebugLogger_t log)
{
	*context = last_context = new_context(comm, name, nranks, rank, mask);
	return *context ? ncclSuccess : ncclInternalError;
}

static ncclResult_t start_v4(void *context, void **handle, ncclProfilerEventDescr_v4_t *d)
{
	size_t count = d->type == ncclProfileColl ? d->coll.count
		       : d->type == ncclProfileP2p ? d->p2p.count
						   : 0;
	const char *dt = d->type == ncclProfileColl ? d->coll.datatype
			 : d->type == ncclProfileP2p ? d->p2p.datatype
						     : NULL;
	start(context, handle, d->type, d->parentObj, count, dt);
	return ncclSuccess;
}

static ncclResult_t record_v4(void *handle, ncclProfilerEventState_v4_t state,
			      ncclProfilerEventStateArgs_v4_t *args)
{
	return record(handle, state,
		      state == ncclProfilerKernelChStop && args ? args->kernelCh.pTimer : 0);
}

__attribute__((visibility("default")))
ncclProfiler_v4_t ncclProfiler_v4 = {"CountV4", init_v4, start_v4, stop, record_v4, finalize};

#else

static ncclResult_t init_v5(void **context, uint64_t comm, int *mask, const char *name, int nnodes,
			    int nranks, int rank, ncclDebugLogger_t log)
{
	*context = last_context = new_context(comm, name, nranks, rank, mask);
	return *context ? ncclSuccess : ncclInternalError;
}

static ncclResult_t start_v5(void *context, void **handle, ncclProfilerEventDescr_v5_t *d)
{
	size_t count = d->type == ncclProfileColl ? d->coll.count
		       : d->type == ncclProfileP2p ? d->p2p.count
						   : 0;
	const char *dt = d->type == ncclProfileColl ? d->coll.datatype
			 : d->type == ncclProfileP2p ? d->p2p.datatype
						     : NULL;
	start(context, handle, d->type, d->parentObj, count, dt);
	return ncclSuccess;
}

static ncclResult_t record_v5(void *handle, ncclProfilerEventState_v5_t state,
			      ncclProfilerEventStateArgs_v5_t *args)
{
	return record(handle, state,
		      state == ncclProfilerKernelChStop && args ? args->kernelCh.pTimer : 0);
}

__attribute__((visibility("default")))
ncclProfiler_v5_t ncclProfiler_v5 = {"Count", init_v5, start_v5, stop, record_v5, finalize};

#endif
