/* SPDX-License-Identifier: MIT */
/*
 * NCCL's calls, whatever the interface version: a communicator's start and end, and the start,
 * stop and state of its events. The guard records collectives, point-to-point and copy-engine
 * operations, and times them by their kernel channels (NCCL's proxy thread reads the GPU's
 * globaltimer at each channel's start and end); every event, these included, also goes to the
 * user's own plugin when there is one, with the parents it knows.
 *
 * Nothing NCCL hands over is trusted: a NULL or foreign pointer, an unknown type, a handle that is
 * not ours or a repeated stop is passed on or ignored, never dereferenced blindly. Every call
 * answers success: a profiler must not change what NCCL does.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "driver.h"
#include "nccl_codes.h"
#include "nccl_plugin.h"
#include "notice.h"
#include "recorder.h"
#include "reentry.h"
#include "spool.h"
#include "spool_blob.h"

#define OWN_MASK    (NCCL_EV_COLL | NCCL_EV_P2P | NCCL_EV_KERNEL_CH)
#define NCCL_INFO   3 /* NCCL_LOG_INFO */
#define NCCL_SUBSYS 1 /* NCCL_INIT */

bool (*p2pg_nccl_guard_up)(void) = p2pg_recorder_configured;

static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;

/* The rank's device, as the thread that makes the communicator has it current. */
static void device_identity(int *ret_device, char *uuid, size_t uuid_len, char *pci, size_t pci_len)
{
	*ret_device = -1;
	uuid[0] = pci[0] = '\0';
	CUdevice dev;
	if (!p2pg_drv.cuCtxGetDevice || p2pg_drv.cuCtxGetDevice(&dev) != CUDA_SUCCESS)
		return;
	*ret_device = dev;
	CUuuid u;
	if (p2pg_drv.cuDeviceGetUuid && p2pg_drv.cuDeviceGetUuid(&u, dev) == CUDA_SUCCESS) {
		const unsigned char *b = (const unsigned char *)u.bytes;
		snprintf(uuid, uuid_len,
			 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
			 b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11],
			 b[12], b[13], b[14], b[15]);
	}
	char bus[32];
	unsigned domain, busno, device, function;
	/* CUDA writes 0000:1b:00.0; NVML and nvidia-smi 00000000:1B:00.0 */
	if (p2pg_drv.cuDeviceGetPCIBusId &&
	    p2pg_drv.cuDeviceGetPCIBusId(bus, sizeof(bus), dev) == CUDA_SUCCESS &&
	    sscanf(bus, "%x:%x:%x.%x", &domain, &busno, &device, &function) == 4)
		snprintf(pci, pci_len, "%08X:%02X:%02X.%X", domain, busno, device, function);
}

static void publish_comm(const struct p2pg_nccl_comm *c, int version, const char *name, int nnodes)
{
	struct p2pg_spool_blob *b = p2pg_nccl_sink.blob();
	if (!b)
		return;
	int device;
	char uuid[64], pci[32], host[64];
	device_identity(&device, uuid, sizeof(uuid), pci, sizeof(pci));
	if (gethostname(host, sizeof(host) - 1) < 0)
		snprintf(host, sizeof(host), "unknown");
	host[sizeof(host) - 1] = '\0';
	b->kind = P2PG_BLOB_NCCL_COMM;
	b->serial = c->serial;
	b->tid = p2pg_tid();
	b->seq = c->hash;
	b->started_ns = p2pg_realtime_ns();
	b->status = c->nranks;
	b->signal = c->rank;
	b->device = device;
	b->peer_device = nnodes;
	b->api = (uint32_t)version;
	char comm_name[128];
	p2pg_nccl_copy_string(name, comm_name, sizeof(comm_name));
	p2pg_spool_blob_add(b, comm_name);
	p2pg_spool_blob_add(b, host);
	p2pg_spool_blob_add(b, uuid);
	p2pg_spool_blob_add(b, pci);
	p2pg_spool_blob_add(b, c->chain_ctx ? p2pg_nccl_chain_description() : "");
	p2pg_spool_blob_publish(b);
}

nccl_result p2pg_nccl_init(int version, void **context, uint64_t comm_hash, int *mask,
			   const char *comm_name, int nnodes, int nranks, int rank, nccl_logger log)
{
	if (!context || !mask)
		return NCCL_OK;
	*context = NULL;
	/* Heavy work, once per communicator, on the thread that makes it: the guard's own calls
	 * (the driver, the spool) are not the program's. */
	p2pg_reentry_enter();
	pthread_mutex_lock(&init_lock);
	p2pg_nccl_ops_init();
	p2pg_nccl_chain_load(version);
	/* Before v4 NCCL names no communicator to a plugin's init: nothing the guard could key its
	 * rows by. It only feeds the user's plugin then. */
	bool recording = version >= 4 && p2pg_nccl_guard_up && p2pg_nccl_guard_up();
	struct p2pg_nccl_comm *c = p2pg_nccl_comm_new();
	if (c) {
		c->hash = comm_hash;
		c->rank = rank;
		c->nranks = nranks;
		c->recording = recording;
		if (p2pg_nccl_chained())
			c->chain_ctx =
			    p2pg_nccl_chain_init(comm_hash, comm_name, nnodes, nranks, rank, log);
	} else {
		static bool said;
		if (!said) {
			said = true;
			p2pg_notice("more than 1024 NCCL communicators at once: the newest are not "
				    "recorded");
		}
	}
	int own = recording && c ? OWN_MASK | (version >= 6 ? NCCL_EV_CE_COLL : 0) : 0;
	*mask = own | p2pg_nccl_chain_mask();
	if (c && recording)
		publish_comm(c, version, comm_name, nnodes);
	pthread_mutex_unlock(&init_lock);
	p2pg_reentry_leave();
	if (log && c)
		log(NCCL_INFO, NCCL_SUBSYS, __FILE__, __LINE__,
		    "PROFILER/Plugin: p2pguard %s comm %016llx rank %d/%d as v%d%s%s",
		    recording ? "records" : "does not record", (unsigned long long)comm_hash, rank,
		    nranks, version, c->chain_ctx ? ", feeding " : "",
		    c->chain_ctx ? p2pg_nccl_chain_description() : "");
	*context = c;
	return NCCL_OK;
}

nccl_result p2pg_nccl_finalize(void *context)
{
	struct p2pg_nccl_comm *c = p2pg_nccl_comm_of(context);
	if (!c)
		return NCCL_OK;
	if (c->recording) {
		p2pg_nccl_ops_end_comm(c);
		struct p2pg_record r = {
		    .started_ns = p2pg_realtime_ns(),
		    .host_ns = atomic_load(&c->unreported),
		    .bytes = atomic_load(&c->recorded),
		    .stream = c->hash,
		    .api = P2PG_NCCL_API,
		    .kind = P2PG_REC_NCCL_COMM_END,
		    .src_device = (int16_t)c->serial,
		    .dst_device = -1,
		    .value = (int32_t)(uint32_t)atomic_load(&c->untracked),
		};
		p2pg_nccl_sink.record(&r);
	}
	if (c->chain_ctx)
		p2pg_nccl_chain_finalize(c->chain_ctx);
	p2pg_nccl_comm_free(c);
	return NCCL_OK;
}

/* bytes = count x size, saturating; the count itself when the datatype is unknown. */
static void set_size(struct p2pg_nccl_op_desc *d, size_t count, const char *datatype)
{
	unsigned dtype = p2pg_nccl_name_code(P2PG_NAME_DTYPE, datatype);
	size_t size = p2pg_nccl_dtype_size(dtype);
	d->flags |= P2PG_NCCL_F_MAKE(0, 0, dtype);
	if (!size) {
		d->bytes = count;
		d->flags |= P2PG_NCCL_F_SIZE_UNKNOWN;
	} else {
		d->bytes = count > UINT64_MAX / size ? UINT64_MAX : (uint64_t)count * size;
	}
}

/* An operation's description, or false for an event that is none. */
static bool describe(struct p2pg_nccl_comm *c, const struct nccl_v6_descr *e,
		     struct p2pg_nccl_op_desc *d)
{
	memset(d, 0, sizeof(*d));
	switch (e->type) {
	case NCCL_EV_COLL:
		d->func = (uint8_t)p2pg_nccl_name_code(P2PG_NAME_FUNC, e->coll.func);
		d->algo_proto = (uint8_t)(p2pg_nccl_name_code(P2PG_NAME_ALGO, e->coll.algo) |
					  p2pg_nccl_name_code(P2PG_NAME_PROTO, e->coll.proto) << 4);
		d->seq = e->coll.seqNumber;
		d->value = e->coll.root;
		d->channels = e->coll.nChannels;
		set_size(d, e->coll.count, e->coll.datatype);
		break;
	case NCCL_EV_P2P:
		d->func = (uint8_t)p2pg_nccl_name_code(P2PG_NAME_FUNC, e->p2p.func);
		d->seq = atomic_fetch_add_explicit(&c->p2p_seq, 1, memory_order_relaxed);
		d->value = e->p2p.peer;
		d->channels = e->p2p.nChannels;
		d->flags = P2PG_NCCL_F_P2P;
		set_size(d, e->p2p.count, e->p2p.datatype);
		break;
	case NCCL_EV_CE_COLL:
		/* Copy-engine collectives (v6) report no channels: NCCL's stop is all there is. */
		d->func = (uint8_t)p2pg_nccl_name_code(P2PG_NAME_FUNC, e->ceColl.func);
		d->seq = e->ceColl.seqNumber;
		d->value = e->ceColl.root;
		d->flags = P2PG_NCCL_F_CE;
		set_size(d, e->ceColl.count, e->ceColl.datatype);
		break;
	default:
		return false;
	}
	/* An operation NCCL does not name cannot be keyed: it is left to the user's plugin. */
	if (d->func == P2PG_NCCL_FUNC_UNKNOWN)
		return false;
	d->started_ns = p2pg_realtime_ns();
	return true;
}

/* Our handles among d's parents become the user's plugin's own. */
static void translate_parents(struct nccl_v6_descr *d)
{
	struct p2pg_nccl_op *op = p2pg_nccl_op_of(d->parentObj);
	if (op)
		d->parentObj = p2pg_nccl_op_chain(op);
	/* A proxy operation of another process (PXN) names a parent of that process: left as it
	 * is, for the user's plugin to check the pid as NCCL asks. */
	if (d->type == NCCL_EV_COLL && (op = p2pg_nccl_op_of(d->coll.parentGroup)))
		d->coll.parentGroup = p2pg_nccl_op_chain(op);
	if (d->type == NCCL_EV_P2P && (op = p2pg_nccl_op_of(d->p2p.parentGroup)))
		d->p2p.parentGroup = p2pg_nccl_op_chain(op);
}

nccl_result p2pg_nccl_start(void *context, void **handle, struct nccl_v6_descr *d)
{
	if (!handle)
		return NCCL_OK;
	*handle = NULL;
	if (!d)
		return NCCL_OK;
	struct p2pg_nccl_comm *c = p2pg_nccl_comm_of(context);
	if (!c)
		return NCCL_OK;
	struct p2pg_nccl_op *op = NULL;
	void *channel = NULL;
	if (c->recording) {
		struct p2pg_nccl_op_desc desc;
		if (d->type == NCCL_EV_KERNEL_CH) {
			struct p2pg_nccl_op *parent = p2pg_nccl_op_of(d->parentObj);
			if (parent)
				channel = p2pg_nccl_channel_start(parent, d->kernelCh.channelId,
								  d->kernelCh.pTimer);
		} else if (describe(c, d, &desc)) {
			/* Without channels, NCCL's stop ends it. */
			op = p2pg_nccl_op_start(c, &desc);
		}
	}
	void *theirs = NULL;
	if (c->chain_ctx && p2pg_nccl_chain_wants(d->type)) {
		translate_parents(d);
		theirs = p2pg_nccl_chain_start(c->chain_ctx, d);
	}
	if (op) {
		p2pg_nccl_op_set_chain(op, theirs);
		*handle = op;
	} else if (channel) {
		p2pg_nccl_channel_set_chain(channel, theirs);
		*handle = channel;
	} else {
		/* Not ours: the user's plugin's handle comes back to it unchanged. */
		*handle = theirs;
	}
	return NCCL_OK;
}

nccl_result p2pg_nccl_stop(void *handle)
{
	struct p2pg_nccl_op *op = p2pg_nccl_op_of(handle);
	if (op) {
		void *theirs = p2pg_nccl_op_chain(op);
		if (theirs)
			p2pg_nccl_chain_stop(theirs);
		p2pg_nccl_op_stop(op);
	} else if (p2pg_nccl_is_channel(handle)) {
		void *theirs = p2pg_nccl_channel_chain(handle);
		if (theirs)
			p2pg_nccl_chain_stop(theirs);
		p2pg_nccl_channel_stop(handle);
	} else if (handle && !p2pg_nccl_in_pool(handle)) {
		/* A stale handle of ours (a slot already ended) is never the user's plugin's. */
		p2pg_nccl_chain_stop(handle);
	}
	return NCCL_OK;
}

nccl_result p2pg_nccl_record(void *handle, int state, union nccl_v4_state_args *args)
{
	struct p2pg_nccl_op *op = p2pg_nccl_op_of(handle);
	if (op) {
		void *theirs = p2pg_nccl_op_chain(op);
		if (theirs)
			p2pg_nccl_chain_record(theirs, state, args);
	} else if (p2pg_nccl_is_channel(handle)) {
		if (state == NCCL_STATE_KERNEL_CH_STOP && args)
			p2pg_nccl_channel_gpu_end(handle, args->kernelCh.pTimer);
		void *theirs = p2pg_nccl_channel_chain(handle);
		if (theirs)
			p2pg_nccl_chain_record(theirs, state, args);
	} else if (handle && !p2pg_nccl_in_pool(handle)) {
		p2pg_nccl_chain_record(handle, state, args);
	}
	return NCCL_OK;
}
