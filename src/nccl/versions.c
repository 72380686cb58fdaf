/* SPDX-License-Identifier: MIT */
/*
 * The symbols NCCL looks for in a profiler plugin, newest first (NVIDIA/nccl src/plugin/
 * profiler.cc: ncclProfiler_v6 from 2.29, v5 in 2.28, v4 in 2.27, v1 to v3 in 2.23 to 2.26). Each
 * version's descriptor is read into v6's layout, a superset, and handed to events.c; which init
 * NCCL called tells which version it chose. v1 to v3 give a plugin no communicator at its start:
 * the guard records nothing there, and only feeds the user's own plugin, which NCCL would have
 * loaded instead. NCCL reads these structs and never writes them, but its examples define them
 * writable, and so do we.
 */
#include <string.h>

#include "nccl_plugin.h"

#define EXPORT __attribute__((visibility("default")))

static nccl_result v6_init(void **context, uint64_t comm_id, int *mask, const char *comm_name,
			   int nnodes, int nranks, int rank, nccl_logger log)
{
	return p2pg_nccl_init(6, context, comm_id, mask, comm_name, nnodes, nranks, rank, log);
}

static nccl_result v5_init(void **context, uint64_t comm_id, int *mask, const char *comm_name,
			   int nnodes, int nranks, int rank, nccl_logger log)
{
	return p2pg_nccl_init(5, context, comm_id, mask, comm_name, nnodes, nranks, rank, log);
}

static nccl_result v4_init(void **context, int *mask, const char *comm_name, uint64_t comm_hash,
			   int nnodes, int nranks, int rank, nccl_logger log)
{
	return p2pg_nccl_init(4, context, comm_hash, mask, comm_name, nnodes, nranks, rank, log);
}

static nccl_result v6_start(void *context, void **handle, struct nccl_v6_descr *d)
{
	struct nccl_v6_descr e;
	if (!d)
		return p2pg_nccl_start(context, handle, NULL);
	memcpy(&e, d, sizeof(e));
	return p2pg_nccl_start(context, handle, &e);
}

static nccl_result v5_start(void *context, void **handle, struct nccl_v5_descr *d)
{
	struct nccl_v6_descr e;
	if (!d)
		return p2pg_nccl_start(context, handle, NULL);
	/* v5 is v6's prefix: the same members at the same places (nccl_abi.h checks). */
	memset(&e, 0, sizeof(e));
	memcpy(&e, d, sizeof(*d));
	return p2pg_nccl_start(context, handle, &e);
}

/* v4: a one-byte type, no API events, and a collective's parent is its group (v5 keeps that as
 * parentGroup). */
static nccl_result v4_start(void *context, void **handle, struct nccl_v4_descr *d)
{
	struct nccl_v6_descr e;
	if (!d)
		return p2pg_nccl_start(context, handle, NULL);
	memset(&e, 0, sizeof(e));
	e.type = d->type;
	e.parentObj = d->parentObj;
	e.rank = d->rank;
	switch (d->type) {
	case NCCL_EV_COLL:
		e.coll.seqNumber = d->coll.seqNumber;
		e.coll.func = d->coll.func;
		e.coll.sendBuff = d->coll.sendBuff;
		e.coll.recvBuff = d->coll.recvBuff;
		e.coll.count = d->coll.count;
		e.coll.root = d->coll.root;
		e.coll.datatype = d->coll.datatype;
		e.coll.nChannels = d->coll.nChannels;
		e.coll.nWarps = d->coll.nWarps;
		e.coll.algo = d->coll.algo;
		e.coll.proto = d->coll.proto;
		e.coll.parentGroup = d->parentObj;
		break;
	case NCCL_EV_P2P:
		e.p2p.func = d->p2p.func;
		e.p2p.buff = d->p2p.buff;
		e.p2p.datatype = d->p2p.datatype;
		e.p2p.count = d->p2p.count;
		e.p2p.peer = d->p2p.peer;
		e.p2p.nChannels = d->p2p.nChannels;
		e.p2p.parentGroup = d->parentObj;
		break;
	case NCCL_EV_PROXY_OP:
		e.proxyOp = d->proxyOp;
		break;
	case NCCL_EV_PROXY_STEP:
		e.proxyStep.step = d->proxyStep.step;
		break;
	case NCCL_EV_KERNEL_CH:
		e.kernelCh.channelId = d->kernelCh.channelId;
		e.kernelCh.pTimer = d->kernelCh.pTimer;
		break;
	case NCCL_EV_NET_PLUGIN:
		e.netPlugin.id = d->netPlugin.id;
		e.netPlugin.data = d->netPlugin.data;
		break;
	default:
		break;
	}
	return p2pg_nccl_start(context, handle, &e);
}

static nccl_result record(void *handle, int state, union nccl_v4_state_args *args)
{
	return p2pg_nccl_record(handle, state, args);
}

/* ---- v1 to v3: forwarding only ---- */

static nccl_result v3_init(void **context, int *mask)
{
	return p2pg_nccl_init(3, context, 0, mask, NULL, 0, -1, -1, NULL);
}

static nccl_result v2_init(void **context, int *mask)
{
	return p2pg_nccl_init(2, context, 0, mask, NULL, 0, -1, -1, NULL);
}

static nccl_result v1_init(void **context, int *mask)
{
	return p2pg_nccl_init(1, context, 0, mask, NULL, 0, -1, -1, NULL);
}

/* What v1 to v3 share of an event; the collective's and point-to-point's parent is the group. */
static void old_common(struct nccl_v6_descr *e, uint8_t type, void *parent, int rank)
{
	memset(e, 0, sizeof(*e));
	e->type = type;
	e->parentObj = parent;
	e->rank = rank;
	e->coll.parentGroup = parent; /* p2p.parentGroup is at another place: set by the caller */
}

/* The events v2 and v3 describe alike: the same member names in structs of their own (v2's
 * collective also has trafficBytes), so one macro of switch cases reads both. */
#define V2_V3_EVENTS(d, e)                               \
	case NCCL_EV_COLL:                               \
		e.coll.seqNumber = d->coll.seqNumber;    \
		e.coll.func = d->coll.func;              \
		e.coll.sendBuff = d->coll.sendBuff;      \
		e.coll.recvBuff = d->coll.recvBuff;      \
		e.coll.count = d->coll.count;            \
		e.coll.root = d->coll.root;              \
		e.coll.datatype = d->coll.datatype;      \
		e.coll.nChannels = d->coll.nMaxChannels; \
		e.coll.nWarps = d->coll.nWarps;          \
		e.coll.algo = d->coll.algo;              \
		e.coll.proto = d->coll.proto;            \
		break;                                   \
	case NCCL_EV_P2P:                                \
		e.p2p.func = d->p2p.func;                \
		e.p2p.buff = d->p2p.buff;                \
		e.p2p.datatype = d->p2p.datatype;        \
		e.p2p.count = d->p2p.count;              \
		e.p2p.peer = d->p2p.peer;                \
		e.p2p.parentGroup = d->parentObj;        \
		break;                                   \
	case NCCL_EV_PROXY_OP:                           \
		e.proxyOp = d->proxyOp;                  \
		break;                                   \
	case NCCL_EV_PROXY_STEP:                         \
		e.proxyStep.step = d->proxyStep.step;    \
		break;

static void v3_decode(const void *descr, struct nccl_v6_descr *ret)
{
	const struct nccl_v3_descr *d = descr;
	struct nccl_v6_descr e;
	old_common(&e, d->type, d->parentObj, d->rank);
	switch (d->type) {
		V2_V3_EVENTS(d, e)
	case NCCL_EV_KERNEL_CH:
		e.kernelCh.channelId = d->kernelCh.channelId;
		break;
	case NCCL_EV_NET_PLUGIN:
		e.netPlugin.id = d->netPlugin.id;
		e.netPlugin.data = d->netPlugin.data;
		break;
	}
	*ret = e;
}

static void v2_decode(const void *descr, struct nccl_v6_descr *ret)
{
	const struct nccl_v2_descr *d = descr;
	struct nccl_v6_descr e;
	old_common(&e, d->type, d->parentObj, d->rank);
	switch (d->type) {
		V2_V3_EVENTS(d, e)
	}
	*ret = e;
}

/* v1 numbers its names (NCCL 2.23's enums); back to NCCL's strings for the canonical layout. */
static const char *v1_name(const char *const *names, unsigned count, uint8_t code)
{
	return code < count ? names[code] : "Unknown";
}

static const char *const v1_funcs[] = {"Broadcast", "Reduce",	"AllGather", "ReduceScatter",
				       "AllReduce", "SendRecv", "Send",	     "Recv",
				       "AlltoAll",  "Scatter",	"Gather"};
static const char *const v1_dtypes[] = {"ncclInt8",	"ncclUint8",	  "ncclInt32",
					"ncclUint32",	"ncclInt64",	  "ncclUint64",
					"ncclFloat16",	"ncclFloat32",	  "ncclFloat64",
					"ncclBfloat16", "ncclFloat8e4m3", "ncclFloat8e5m2"};
static const char *const v1_algos[] = {
    "TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS", "NVLS_TREE", "PAT"};
static const char *const v1_protos[] = {"LL", "LL128", "SIMPLE"};
#define N(a) (sizeof(a) / sizeof((a)[0]))

static void v1_decode(const void *descr, struct nccl_v6_descr *ret)
{
	const struct nccl_v1_descr *d = descr;
	struct nccl_v6_descr e;
	old_common(&e, d->type, d->parentObj, d->rank);
	switch (d->type) {
	case NCCL_EV_COLL:
		e.coll.seqNumber = d->coll.seqNumber;
		e.coll.func = v1_name(v1_funcs, N(v1_funcs), d->coll.func);
		e.coll.sendBuff = d->coll.sendBuff;
		e.coll.recvBuff = d->coll.recvBuff;
		e.coll.count = d->coll.count;
		e.coll.root = d->coll.root;
		e.coll.datatype = v1_name(v1_dtypes, N(v1_dtypes), d->coll.datatype);
		e.coll.nChannels = d->coll.nMaxChannels;
		e.coll.nWarps = d->coll.nWarps;
		e.coll.algo = v1_name(v1_algos, N(v1_algos), d->coll.algo);
		e.coll.proto = v1_name(v1_protos, N(v1_protos), d->coll.proto);
		break;
	case NCCL_EV_P2P:
		e.p2p.func = v1_name(v1_funcs, N(v1_funcs), d->p2p.func);
		e.p2p.buff = d->p2p.buff;
		e.p2p.datatype = v1_name(v1_dtypes, N(v1_dtypes), d->p2p.datatype);
		e.p2p.count = d->p2p.count;
		e.p2p.peer = d->p2p.peer;
		e.p2p.parentGroup = d->parentObj;
		break;
	case NCCL_EV_PROXY_OP:
		e.proxyOp = d->proxyOp;
		break;
	case NCCL_EV_PROXY_STEP:
		e.proxyStep.step = d->proxyStep.step;
		break;
	}
	*ret = e;
}

/*
 * NCCL 2.23 to 2.26: the user's plugin gets the event if its mask asks for it, as NCCL gave it
 * when it speaks the same version (the collective's name and commHash included, which v6's layout
 * has no room for), else mapped down from v6's layout as NCCL's adapters would.
 */
static nccl_result old_start(int version, void *context, void **handle, void *descr,
			     void (*decode)(const void *, struct nccl_v6_descr *))
{
	if (!handle)
		return NCCL_OK;
	*handle = NULL;
	struct p2pg_nccl_comm *c = p2pg_nccl_comm_of(context);
	if (!descr || !c || !c->chain_ctx || !p2pg_nccl_chain_wants(*(const uint8_t *)descr))
		return NCCL_OK;
	if (p2pg_nccl_chain_version() == version) {
		*handle = p2pg_nccl_chain_start_raw(c->chain_ctx, descr);
		return NCCL_OK;
	}
	struct nccl_v6_descr e;
	decode(descr, &e);
	*handle = p2pg_nccl_chain_start(c->chain_ctx, &e);
	return NCCL_OK;
}

static nccl_result v3_start(void *context, void **handle, void *descr)
{
	return old_start(3, context, handle, descr, v3_decode);
}

static nccl_result v2_start(void *context, void **handle, void *descr)
{
	return old_start(2, context, handle, descr, v2_decode);
}

static nccl_result v1_start(void *context, void **handle, void *descr)
{
	return old_start(1, context, handle, descr, v1_decode);
}

/* v1 to v3 share their state arguments: the user's plugin, of the same or an older version, gets
 * them as NCCL gave them. */
static nccl_result old_record(void *handle, int state, union nccl_v1_state_args *args)
{
	p2pg_nccl_chain_record_old(handle, state, args);
	return NCCL_OK;
}

EXPORT struct nccl_v6_plugin ncclProfiler_v6 = {
    "p2pguard", v6_init, v6_start, p2pg_nccl_stop, record, p2pg_nccl_finalize,
};

EXPORT struct nccl_v5_plugin ncclProfiler_v5 = {
    "p2pguard", v5_init, v5_start, p2pg_nccl_stop, record, p2pg_nccl_finalize,
};

EXPORT struct nccl_v4_plugin ncclProfiler_v4 = {
    "p2pguard", v4_init, v4_start, p2pg_nccl_stop, record, p2pg_nccl_finalize,
};

EXPORT struct nccl_v1_plugin ncclProfiler_v3 = {
    "p2pguard", v3_init, v3_start, p2pg_nccl_stop, old_record, p2pg_nccl_finalize,
};

EXPORT struct nccl_v1_plugin ncclProfiler_v2 = {
    "p2pguard", v2_init, v2_start, p2pg_nccl_stop, old_record, p2pg_nccl_finalize,
};

EXPORT struct nccl_v1_plugin ncclProfiler_v1 = {
    "p2pguard", v1_init, v1_start, p2pg_nccl_stop, old_record, p2pg_nccl_finalize,
};
