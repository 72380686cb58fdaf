/* SPDX-License-Identifier: MIT */
/*
 * The user's own profiler plugin. NCCL loads one plugin; under the guard that is the guard, so the
 * guard loads the user's (Inspector, a site's) the way NCCL would have and gives it what NCCL would
 * have given it: its own activation mask's events, each in the version it speaks (the descriptor
 * mapped down as NCCL's own adapters do, src/plugin/profiler/profiler_v*.cc), with its own handles
 * as parents.
 *
 * Which library: the user's NCCL_PROFILER_PLUGIN, kept by the preload layer in
 * P2PGUARD_NCCL_CHAIN (a child process inherits it), resolved as NCCL resolves it (the value as a
 * library name or path, then libnccl-profiler-VALUE.so); without one, libnccl-profiler.so if
 * there is one, which NCCL would have loaded by itself.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "driver.h"
#include "nccl_codes.h"
#include "nccl_plugin.h"
#include "notice.h"

static struct {
	bool tried;
	int version; /* 0: none */
	void *lib;
	const void *plugin;
	char description[400];
} chain;

static int chain_mask; /* the user's plugin's activation mask (written by its init) */

static bool is_ours(const void *symbol)
{
	Dl_info theirs, ours;
	return dladdr(symbol, &theirs) && dladdr((const void *)&chain, &ours) &&
	       theirs.dli_fbase == ours.dli_fbase;
}

/* NCCL's tryOpenLib and openPluginLib (src/plugin/plugin_open.cc, 2.28). */
static void *open_like_nccl(const char *value, char *path, size_t path_len)
{
	if (strncasecmp(value, "STATIC_PLUGIN", strlen(value)) == 0) {
		snprintf(path, path_len, "(the program)");
		return dlopen(NULL, RTLD_NOW | RTLD_LOCAL);
	}
	snprintf(path, path_len, "%s", value);
	void *lib = dlopen(value, RTLD_NOW | RTLD_LOCAL);
	size_t n = strlen(value);
	if (!lib && !strchr(value, '/') &&
	    (strncmp(value, "lib", 3) != 0 || n < 3 || strcmp(value + n - 3, ".so") != 0)) {
		snprintf(path, path_len, "libnccl-profiler-%s.so", value);
		lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	}
	return lib;
}

void p2pg_nccl_chain_load(int nccl_version)
{
	if (chain.tried)
		return;
	chain.tried = true;
	const char *value = getenv("P2PGUARD_NCCL_CHAIN");
	bool asked = value && *value;
	char path[280];
	void *lib = asked ? open_like_nccl(value, path, sizeof(path))
			  : dlopen("libnccl-profiler.so", RTLD_NOW | RTLD_LOCAL);
	if (!asked)
		snprintf(path, sizeof(path), "libnccl-profiler.so");
	if (!lib) {
		if (asked)
			p2pg_notice("NCCL_PROFILER_PLUGIN=%s: cannot load it (%s); NCCL's "
				    "operations are recorded, that plugin gets nothing",
				    value, dlerror());
		return;
	}
	/* The newest version it has that NCCL knows: NCCL chose the guard's newest it knows. */
	for (int v = nccl_version < 6 ? nccl_version : 6; v >= 1; v--) {
		char name[32];
		snprintf(name, sizeof(name), "ncclProfiler_v%d", v);
		const void *plugin = p2pg_real_dlsym(lib, name);
		if (!plugin)
			continue;
		if (is_ours(plugin))
			break; /* the guard itself (STATIC_PLUGIN, or its own path): nothing to feed
				*/
		chain.lib = lib;
		chain.plugin = plugin;
		chain.version = v;
		const char *plugin_name = *(const char *const *)plugin;
		snprintf(chain.description, sizeof(chain.description), "%.64s (v%d) %s",
			 plugin_name ? plugin_name : "?", v, path);
		return;
	}
	if (asked && !chain.plugin)
		p2pg_notice("NCCL_PROFILER_PLUGIN=%s has no ncclProfiler_v1..v%d that the guard "
			    "can feed; NCCL's operations are recorded, that plugin gets nothing",
			    value, nccl_version < 6 ? nccl_version : 6);
	dlclose(lib);
}

bool p2pg_nccl_chained(void)
{
	return chain.version > 0;
}

const char *p2pg_nccl_chain_description(void)
{
	return chain.description;
}

int p2pg_nccl_chain_mask(void)
{
	return __atomic_load_n(&chain_mask, __ATOMIC_RELAXED);
}

void *p2pg_nccl_chain_init(uint64_t comm_hash, const char *comm_name, int nnodes, int nranks,
			   int rank, nccl_logger log)
{
	void *ctx = NULL;
	nccl_result rc = NCCL_INTERNAL_ERROR;
	switch (chain.version) {
	case 6:
	case 5:
		rc = ((const struct nccl_v5_plugin *)chain.plugin)
			 ->init(&ctx, comm_hash, &chain_mask, comm_name, nnodes, nranks, rank, log);
		break;
	case 4:
		rc = ((const struct nccl_v4_plugin *)chain.plugin)
			 ->init(&ctx, &chain_mask, comm_name, comm_hash, nnodes, nranks, rank, log);
		break;
	case 3:
	case 2:
	case 1:
		rc = ((const struct nccl_v1_plugin *)chain.plugin)->init(&ctx, &chain_mask);
		break;
	}
	/* NCCL runs on without a plugin whose init fails; so does this communicator. */
	return rc == NCCL_OK ? ctx : NULL;
}

bool p2pg_nccl_chain_wants(uint64_t type)
{
	int m = p2pg_nccl_chain_mask();
	int net = NCCL_EV_PROXY_OP | NCCL_EV_PROXY_STEP | NCCL_EV_KERNEL_CH | NCCL_EV_NET_PLUGIN;
	int ce = NCCL_EV_CE_COLL | NCCL_EV_CE_SYNC | NCCL_EV_CE_BATCH;
	/* NCCL starts an event when its own bit, or that of an event it parents, is in the mask
	 * (src/plugin/profiler.cc's groupApiMask, collApiMask, ...). */
	switch (type) {
	case NCCL_EV_GROUP_API:
		return m & (NCCL_EV_GROUP_API | NCCL_EV_COLL_API | NCCL_EV_P2P_API |
			    NCCL_EV_KERNEL_LAUNCH | NCCL_EV_GROUP | NCCL_EV_COLL | NCCL_EV_P2P |
			    net | ce);
	case NCCL_EV_COLL_API:
		return m & (NCCL_EV_COLL_API | NCCL_EV_COLL | net | ce);
	case NCCL_EV_P2P_API:
		return m & (NCCL_EV_P2P_API | NCCL_EV_P2P | net);
	case NCCL_EV_KERNEL_LAUNCH:
		return m & NCCL_EV_KERNEL_LAUNCH;
	case NCCL_EV_GROUP:
		return m & (NCCL_EV_GROUP | NCCL_EV_COLL | NCCL_EV_P2P | net);
	case NCCL_EV_COLL:
		return m & (NCCL_EV_COLL | net);
	case NCCL_EV_P2P:
		return m & (NCCL_EV_P2P | net);
	case NCCL_EV_PROXY_OP:
		return m & (NCCL_EV_PROXY_OP | NCCL_EV_PROXY_STEP | NCCL_EV_NET_PLUGIN);
	case NCCL_EV_PROXY_STEP:
		return m & (NCCL_EV_PROXY_STEP | NCCL_EV_NET_PLUGIN);
	case NCCL_EV_PROXY_CTRL:
		return m & NCCL_EV_PROXY_CTRL;
	case NCCL_EV_KERNEL_CH:
		return m & NCCL_EV_KERNEL_CH;
	case NCCL_EV_NET_PLUGIN:
		return m & NCCL_EV_NET_PLUGIN;
	case NCCL_EV_CE_COLL:
		return m & ce;
	case NCCL_EV_CE_SYNC:
		return m & NCCL_EV_CE_SYNC;
	case NCCL_EV_CE_BATCH:
		return m & NCCL_EV_CE_BATCH;
	}
	return false;
}

/* ---- descriptors, v6 down to the user's version ---- */

static bool to_v4(const struct nccl_v6_descr *e, struct nccl_v4_descr *d)
{
	memset(d, 0, sizeof(*d));
	d->type = (uint8_t)e->type;
	d->parentObj = e->parentObj;
	d->rank = e->rank;
	switch (e->type) {
	case NCCL_EV_GROUP:
	case NCCL_EV_PROXY_CTRL:
		return true;
	case NCCL_EV_COLL:
		d->coll.seqNumber = e->coll.seqNumber;
		d->coll.func = e->coll.func;
		d->coll.sendBuff = e->coll.sendBuff;
		d->coll.recvBuff = e->coll.recvBuff;
		d->coll.count = e->coll.count;
		d->coll.root = e->coll.root;
		d->coll.datatype = e->coll.datatype;
		d->coll.nChannels = e->coll.nChannels;
		d->coll.nWarps = e->coll.nWarps;
		d->coll.algo = e->coll.algo;
		d->coll.proto = e->coll.proto;
		d->parentObj = e->coll.parentGroup; /* v4's hierarchy */
		return true;
	case NCCL_EV_P2P:
		d->p2p.func = e->p2p.func;
		d->p2p.buff = e->p2p.buff;
		d->p2p.datatype = e->p2p.datatype;
		d->p2p.count = e->p2p.count;
		d->p2p.peer = e->p2p.peer;
		d->p2p.nChannels = e->p2p.nChannels;
		d->parentObj = e->p2p.parentGroup;
		return true;
	case NCCL_EV_PROXY_OP:
		d->proxyOp = e->proxyOp;
		return true;
	case NCCL_EV_PROXY_STEP:
		d->proxyStep.step = e->proxyStep.step;
		return true;
	case NCCL_EV_KERNEL_CH:
		d->kernelCh.channelId = e->kernelCh.channelId;
		d->kernelCh.pTimer = e->kernelCh.pTimer;
		return true;
	case NCCL_EV_NET_PLUGIN:
		d->netPlugin.id = e->netPlugin.id;
		d->netPlugin.data = e->netPlugin.data;
		return true;
	}
	return false; /* v5's API events and v6's copy-engine ones do not exist in v4 */
}

static bool to_v3(const struct nccl_v6_descr *e, struct nccl_v3_descr *d)
{
	memset(d, 0, sizeof(*d));
	d->type = (uint8_t)e->type;
	d->parentObj = e->parentObj;
	d->rank = e->rank;
	switch (e->type) {
	case NCCL_EV_GROUP:
	case NCCL_EV_PROXY_CTRL:
		return true;
	case NCCL_EV_COLL:
		d->parentObj = e->coll.parentGroup;
		d->coll.seqNumber = e->coll.seqNumber;
		d->coll.func = e->coll.func;
		d->coll.sendBuff = e->coll.sendBuff;
		d->coll.recvBuff = e->coll.recvBuff;
		d->coll.count = e->coll.count;
		d->coll.root = e->coll.root;
		d->coll.datatype = e->coll.datatype;
		d->coll.nMaxChannels = e->coll.nChannels;
		d->coll.nWarps = e->coll.nWarps;
		d->coll.algo = e->coll.algo;
		d->coll.proto = e->coll.proto;
		return true;
	case NCCL_EV_P2P:
		d->parentObj = e->p2p.parentGroup;
		d->p2p.func = e->p2p.func;
		d->p2p.buff = e->p2p.buff;
		d->p2p.datatype = e->p2p.datatype;
		d->p2p.count = e->p2p.count;
		d->p2p.peer = e->p2p.peer;
		return true;
	case NCCL_EV_PROXY_OP:
		d->proxyOp = e->proxyOp;
		return true;
	case NCCL_EV_PROXY_STEP:
		d->proxyStep.step = e->proxyStep.step;
		return true;
	case NCCL_EV_KERNEL_CH:
		d->kernelCh.channelId = e->kernelCh.channelId;
		return true;
	case NCCL_EV_NET_PLUGIN:
		d->netPlugin.id = e->netPlugin.id;
		d->netPlugin.data = e->netPlugin.data;
		return true;
	}
	return false;
}

static bool to_v2(const struct nccl_v6_descr *e, struct nccl_v2_descr *d)
{
	struct nccl_v3_descr v3;
	if (!to_v3(e, &v3) || e->type == NCCL_EV_KERNEL_CH || e->type == NCCL_EV_NET_PLUGIN)
		return false;
	memset(d, 0, sizeof(*d));
	d->type = v3.type;
	d->parentObj = v3.parentObj;
	d->rank = v3.rank;
	if (e->type == NCCL_EV_COLL) {
		d->coll.seqNumber = v3.coll.seqNumber;
		d->coll.func = v3.coll.func;
		d->coll.sendBuff = v3.coll.sendBuff;
		d->coll.recvBuff = v3.coll.recvBuff;
		d->coll.count = v3.coll.count;
		d->coll.root = v3.coll.root;
		d->coll.datatype = v3.coll.datatype;
		d->coll.nMaxChannels = v3.coll.nMaxChannels;
		d->coll.nWarps = v3.coll.nWarps;
		d->coll.algo = v3.coll.algo;
		d->coll.proto = v3.coll.proto;
	} else if (e->type == NCCL_EV_P2P) {
		memcpy(&d->p2p, &v3.p2p, sizeof(d->p2p));
	} else if (e->type == NCCL_EV_PROXY_OP) {
		d->proxyOp = v3.proxyOp;
	} else if (e->type == NCCL_EV_PROXY_STEP) {
		d->proxyStep.step = v3.proxyStep.step;
	}
	return true;
}

/* v1 names by number, as NCCL 2.28's adapter turns its strings back into them (its defaults for
 * a name it does not know included). */
static uint8_t v1_func(const char *s)
{
	static const uint8_t codes[P2PG_NCCL_FUNC_COUNT] = {
	    [P2PG_NCCL_FUNC_ALLGATHER] = 2, [P2PG_NCCL_FUNC_ALLREDUCE] = 4,
	    [P2PG_NCCL_FUNC_BROADCAST] = 0, [P2PG_NCCL_FUNC_RECV] = 7,
	    [P2PG_NCCL_FUNC_REDUCE] = 1,    [P2PG_NCCL_FUNC_REDUCESCATTER] = 3,
	    [P2PG_NCCL_FUNC_SENDRECV] = 5,  [P2PG_NCCL_FUNC_SEND] = 6,
	};
	unsigned c = p2pg_nccl_name_code(P2PG_NAME_FUNC, s);
	return c == P2PG_NCCL_FUNC_ALLGATHER || c == P2PG_NCCL_FUNC_ALLREDUCE ||
		       c == P2PG_NCCL_FUNC_BROADCAST || c == P2PG_NCCL_FUNC_RECV ||
		       c == P2PG_NCCL_FUNC_REDUCE || c == P2PG_NCCL_FUNC_REDUCESCATTER ||
		       c == P2PG_NCCL_FUNC_SENDRECV
		   ? codes[c]
		   : 6;
}

static uint8_t v1_dtype(const char *s)
{
	unsigned c = p2pg_nccl_name_code(P2PG_NAME_DTYPE, s);
	/* nccl_codes.h's order is ncclDataType_t's plus one, up to Float8e5m2. */
	return c ? (uint8_t)(c - 1) : 8; /* unknown: ncclFloat64, as NCCL's adapter */
}

static uint8_t v1_algo(const char *s)
{
	unsigned c = p2pg_nccl_name_code(P2PG_NAME_ALGO, s);
	return c ? (uint8_t)(c - 1) : 6; /* NCCL_ALGO_* is nccl_codes.h's minus one; else PAT */
}

static uint8_t v1_proto(const char *s)
{
	unsigned c = p2pg_nccl_name_code(P2PG_NAME_PROTO, s);
	return c ? (uint8_t)(c - 1) : 2; /* else SIMPLE */
}

static bool to_v1(const struct nccl_v6_descr *e, struct nccl_v1_descr *d)
{
	struct nccl_v3_descr v3;
	if (!to_v3(e, &v3) || e->type == NCCL_EV_KERNEL_CH || e->type == NCCL_EV_NET_PLUGIN)
		return false;
	memset(d, 0, sizeof(*d));
	d->type = v3.type;
	d->parentObj = v3.parentObj;
	d->rank = v3.rank;
	if (e->type == NCCL_EV_COLL) {
		d->coll.seqNumber = v3.coll.seqNumber;
		d->coll.func = v1_func(v3.coll.func);
		d->coll.sendBuff = v3.coll.sendBuff;
		d->coll.recvBuff = v3.coll.recvBuff;
		d->coll.count = v3.coll.count;
		d->coll.root = v3.coll.root;
		d->coll.datatype = v1_dtype(v3.coll.datatype);
		d->coll.nMaxChannels = v3.coll.nMaxChannels;
		d->coll.nWarps = v3.coll.nWarps;
		d->coll.algo = v1_algo(v3.coll.algo);
		d->coll.proto = v1_proto(v3.coll.proto);
	} else if (e->type == NCCL_EV_P2P) {
		d->p2p.func = v1_func(v3.p2p.func);
		d->p2p.buff = v3.p2p.buff;
		d->p2p.datatype = v1_dtype(v3.p2p.datatype);
		d->p2p.count = v3.p2p.count;
		d->p2p.peer = v3.p2p.peer;
	} else if (e->type == NCCL_EV_PROXY_OP) {
		d->proxyOp = v3.proxyOp;
	} else if (e->type == NCCL_EV_PROXY_STEP) {
		d->proxyStep.step = v3.proxyStep.step;
	}
	return true;
}

void *p2pg_nccl_chain_start(void *chain_ctx, struct nccl_v6_descr *e)
{
	void *handle = NULL;
	switch (chain.version) {
	case 6:
		((const struct nccl_v6_plugin *)chain.plugin)->startEvent(chain_ctx, &handle, e);
		break;
	case 5: {
		if (e->type >= NCCL_EV_CE_COLL)
			break;
		struct nccl_v5_descr d;
		memcpy(&d, e, sizeof(d));
		((const struct nccl_v5_plugin *)chain.plugin)->startEvent(chain_ctx, &handle, &d);
		break;
	}
	case 4: {
		struct nccl_v4_descr d;
		if (to_v4(e, &d))
			((const struct nccl_v4_plugin *)chain.plugin)
			    ->startEvent(chain_ctx, &handle, &d);
		break;
	}
	case 3:
	case 2:
	case 1: {
		/* v1 to v3 share their plugin struct: only the descriptor's layout differs. */
		union {
			struct nccl_v3_descr v3;
			struct nccl_v2_descr v2;
			struct nccl_v1_descr v1;
		} d;
		bool ok = chain.version == 3   ? to_v3(e, &d.v3)
			  : chain.version == 2 ? to_v2(e, &d.v2)
					       : to_v1(e, &d.v1);
		if (ok)
			handle = p2pg_nccl_chain_start_raw(chain_ctx, &d);
		break;
	}
	}
	return handle;
}

void *p2pg_nccl_chain_start_raw(void *chain_ctx, void *descr)
{
	void *handle = NULL;
	if (chain.version >= 1 && chain.version <= 3)
		((const struct nccl_v1_plugin *)chain.plugin)
		    ->startEvent(chain_ctx, &handle, descr);
	return handle;
}

int p2pg_nccl_chain_version(void)
{
	return chain.version;
}

void p2pg_nccl_chain_stop(void *handle)
{
	if (chain.version)
		((const struct nccl_v1_plugin *)chain.plugin)->stopEvent(handle);
}

static bool proxy_ctrl_state(int state)
{
	return state >= NCCL_STATE_PROXY_CTRL_IDLE && state <= NCCL_STATE_PROXY_CTRL_APPEND_END;
}

static bool proxy_step_state(int state)
{
	return state >= NCCL_STATE_PROXY_STEP_SEND_GPU_WAIT &&
	       state <= NCCL_STATE_PROXY_STEP_RECV_GPU_WAIT;
}

void p2pg_nccl_chain_record(void *handle, int state, const union nccl_v4_state_args *args)
{
	static const union nccl_v4_state_args none;
	const union nccl_v4_state_args *a = args ? args : &none;
	switch (chain.version) {
	case 6:
	case 5:
		((const struct nccl_v5_plugin *)chain.plugin)
		    ->recordEventState(handle, state, (union nccl_v4_state_args *)args);
		break;
	case 4: {
		/* The states v4 knows, as NCCL's adapter passes them. */
		union nccl_v4_state_args v4;
		memset(&v4, 0, sizeof(v4));
		if (proxy_step_state(state) || state == NCCL_STATE_PROXY_STEP_SEND_PEER_WAIT_V4)
			v4.proxyStep.transSize = a->proxyStep.transSize;
		else if (state == NCCL_STATE_NET_PLUGIN_UPDATE)
			v4.netPlugin.data = a->netPlugin.data;
		else if (state == NCCL_STATE_KERNEL_CH_STOP)
			v4.kernelCh.pTimer = a->kernelCh.pTimer;
		else if (proxy_ctrl_state(state))
			v4.proxyCtrl.appendedProxyOps = a->proxyCtrl.appendedProxyOps;
		else if (state != NCCL_STATE_PROXY_OP_IN_PROGRESS_V4)
			break;
		((const struct nccl_v4_plugin *)chain.plugin)->recordEventState(handle, state, &v4);
		break;
	}
	case 3:
	case 2:
	case 1: {
		union nccl_v1_state_args v1;
		memset(&v1, 0, sizeof(v1));
		if (proxy_ctrl_state(state))
			v1.proxyCtrl.appendedProxyOps = a->proxyCtrl.appendedProxyOps;
		else if (!proxy_step_state(state))
			break;
		((const struct nccl_v1_plugin *)chain.plugin)->recordEventState(handle, state, &v1);
		break;
	}
	}
}

void p2pg_nccl_chain_record_old(void *handle, int state, union nccl_v1_state_args *args)
{
	/* NCCL 2.23 to 2.26 handed the guard no handle of its own: each is the user's plugin's. */
	if (chain.version >= 1 && chain.version <= 3 && handle && !p2pg_nccl_in_pool(handle))
		((const struct nccl_v1_plugin *)chain.plugin)
		    ->recordEventState(handle, state, args);
}

void p2pg_nccl_chain_finalize(void *chain_ctx)
{
	if (chain.version)
		((const struct nccl_v1_plugin *)chain.plugin)->finalize(chain_ctx);
}
