/* SPDX-License-Identifier: MIT */
/*
 * The symbols NCCL looks for in a profiler plugin, newest first (NVIDIA/nccl src/plugin/
 * profiler.cc: ncclProfiler_v6 from 2.29, v5 in 2.28, v4 in 2.27). Each version's descriptor is
 * read into v6's layout, a superset, and handed to events.c; which init NCCL called tells which
 * version it chose. NCCL reads these structs and never writes them, but its examples define them
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

EXPORT struct nccl_v6_plugin ncclProfiler_v6 = {
    "p2pguard", v6_init, v6_start, p2pg_nccl_stop, record, p2pg_nccl_finalize,
};

EXPORT struct nccl_v5_plugin ncclProfiler_v5 = {
    "p2pguard", v5_init, v5_start, p2pg_nccl_stop, record, p2pg_nccl_finalize,
};

EXPORT struct nccl_v4_plugin ncclProfiler_v4 = {
    "p2pguard", v4_init, v4_start, p2pg_nccl_stop, record, p2pg_nccl_finalize,
};
