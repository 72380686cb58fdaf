/* SPDX-License-Identifier: MIT */
/*
 * A simulated NCCL, as far as its profiler plugin sees it (NVIDIA/nccl src/plugin/profiler.cc and
 * plugin_open.cc, 2.26 to 2.30): it finds the plugin as NCCL does (NCCL_PROFILER_PLUGIN as a
 * library name or path, then libnccl-profiler-NAME.so; without it libnccl-profiler.so; "none":
 * no plugin), takes the newest ncclProfiler_vN its version knows, calls init per communicator,
 * and replays an application's operations with NCCL's event order and parents: the API events on
 * the calling thread, the group and task events at launch, and each task's kernel channels on a
 * proxy thread, with globaltimer-like timestamps. The plugin's activation mask decides which
 * events exist, as in NCCL.
 *
 *   simnccl [--nccl 2.26|2.27|2.28|2.30] [--rank R] [--nranks N] [--comm HEX] [--device D]
 *           [--channels C] SCENARIO ARGS...
 *
 *   allreduce ITERS BYTES        ring all-reduces of BYTES (float32)
 *   sendrecv ITERS BYTES PEER... a group per iteration: a send to and a receive from each PEER
 *   mixed ITERS                  overlapping groups: an all-reduce, a broadcast and a send/recv
 *                                pair in one group, then a nested group
 *   twocomms ITERS               two communicators (COMM and COMM+1), their operations interleaved
 *   stuck FUNC SEQ [hold]        one operation whose kernel starts and never ends; waits to be
 *                                killed ("ready" on stdout first); with hold, the communicator
 *                                is made ("made" on stdout) and the operation waits for a line on
 *                                stdin (a rank known to its peers before it reaches the call)
 *   leave                        makes the communicator and frees it at once (a rank that left)
 *
 * Prints "simnccl: loaded NAME as vN" on stderr, and the plugin's answers it checks (a non-zero
 * result from a plugin call is printed and exits 2: NCCL's plugins must answer success).
 */
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "ref/ref.h"

static int version;    /* the plugin version loaded */
static int newest;     /* the newest version this NCCL knows */
static void *plugin;   /* ncclProfiler_vN */
static int event_mask; /* the union of what init answered */
static unsigned channels = 2;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts); /* the GPU's globaltimer runs on the same epoch */
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void checked(ncclResult_t rc, const char *what)
{
	if (rc != ncclSuccess) {
		fprintf(stderr, "simnccl: the plugin's %s answered %d\n", what, rc);
		exit(2);
	}
}

static void logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
		   const char *fmt, ...)
{
	if (!getenv("SIMNCCL_DEBUG"))
		return;
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "simnccl INFO ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
}

/* ---- loading, as NCCL does ---- */

static void *open_plugin(const char *name, char *used, size_t len)
{
	if (!name || !*name) {
		snprintf(used, len, "libnccl-profiler.so");
		return dlopen(used, RTLD_NOW | RTLD_LOCAL);
	}
	snprintf(used, len, "%s", name);
	void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	size_t n = strlen(name);
	if (!lib && !strchr(name, '/') &&
	    (strncmp(name, "lib", 3) != 0 || n < 3 || strcmp(name + n - 3, ".so") != 0)) {
		snprintf(used, len, "libnccl-profiler-%s.so", name);
		lib = dlopen(used, RTLD_NOW | RTLD_LOCAL);
	}
	return lib;
}

static bool load_plugin(void)
{
	const char *name = getenv("NCCL_PROFILER_PLUGIN");
	if (name && strcasecmp(name, "none") == 0)
		return false;
	char used[512];
	void *lib = open_plugin(name, used, sizeof(used));
	if (!lib)
		return false;
	for (int v = newest; v >= 1; v--) {
		char sym[32];
		snprintf(sym, sizeof(sym), "ncclProfiler_v%d", v);
		void *p = dlsym(lib, sym);
		if (!p)
			continue;
		if (v < 3) {
			fprintf(stderr,
				"simnccl: %s has only %s, which this simulation does not "
				"speak\n",
				used, sym);
			exit(2);
		}
		version = v;
		plugin = p;
		fprintf(stderr, "simnccl: loaded %s as v%d from %s\n", *(const char **)p, v, used);
		return true;
	}
	return false;
}

/* ---- the plugin's calls, in the version loaded ---- */

/* v6's layout holds every version's members at v5's places; v4 is copied member by member. */
static void *start_event(void *ctx, ncclProfilerEventDescr_v6_t *d)
{
	void *handle = (void *)0x1; /* NCCL does not clear it: the plugin must */
	if (version >= 5) {
		ncclResult_t rc =
		    version == 6 ? ((ncclProfiler_v6_t *)plugin)->startEvent(ctx, &handle, d)
				 : ((ncclProfiler_v5_t *)plugin)
				       ->startEvent(ctx, &handle, (ncclProfilerEventDescr_v5_t *)d);
		checked(rc, "startEvent");
		return handle;
	}
	if (version == 3) {
		/* NCCL 2.26 names the communicator in each collective; a later NCCL's adapter for a
		 * v3 plugin leaves both empty (src/plugin/profiler/profiler_v3.cc). No kernel
		 * timestamps either way. */
		bool native = newest == 3;
		ncclProfilerEventDescr_v3_t e3;
		memset(&e3, 0, sizeof(e3));
		e3.type = (uint8_t)d->type;
		e3.parentObj = d->parentObj;
		e3.rank = d->rank;
		switch (d->type) {
		case ncclProfileColl:
			e3.parentObj = d->coll.parentGroup;
			e3.coll.name = native ? "sim" : NULL;
			e3.coll.commHash = native ? 0x5eed : 0;
			e3.coll.seqNumber = d->coll.seqNumber;
			e3.coll.func = d->coll.func;
			e3.coll.sendBuff = d->coll.sendBuff;
			e3.coll.recvBuff = d->coll.recvBuff;
			e3.coll.count = d->coll.count;
			e3.coll.root = d->coll.root;
			e3.coll.datatype = d->coll.datatype;
			e3.coll.nMaxChannels = d->coll.nChannels;
			e3.coll.nWarps = d->coll.nWarps;
			e3.coll.algo = d->coll.algo;
			e3.coll.proto = d->coll.proto;
			break;
		case ncclProfileP2p:
			e3.parentObj = d->p2p.parentGroup;
			e3.p2p.name = native ? "sim" : NULL;
			e3.p2p.commHash = native ? 0x5eed : 0;
			e3.p2p.func = d->p2p.func;
			e3.p2p.buff = d->p2p.buff;
			e3.p2p.datatype = d->p2p.datatype;
			e3.p2p.count = d->p2p.count;
			e3.p2p.peer = d->p2p.peer;
			break;
		case ncclProfileKernelCh:
			e3.kernelCh.channelId = d->kernelCh.channelId;
			break;
		case ncclProfileGroup:
		case ncclProfileProxyCtrl:
			break;
		default:
			return NULL;
		}
		checked(((ncclProfiler_v3_t *)plugin)->startEvent(ctx, &handle, &e3), "startEvent");
		return handle;
	}
	ncclProfilerEventDescr_v4_t e;
	memset(&e, 0, sizeof(e));
	e.type = (uint8_t)d->type;
	e.parentObj = d->parentObj;
	e.rank = d->rank;
	switch (d->type) {
	case ncclProfileColl:
		e.parentObj = d->coll.parentGroup;
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
		break;
	case ncclProfileP2p:
		e.parentObj = d->p2p.parentGroup;
		e.p2p.func = d->p2p.func;
		e.p2p.buff = d->p2p.buff;
		e.p2p.datatype = d->p2p.datatype;
		e.p2p.count = d->p2p.count;
		e.p2p.peer = d->p2p.peer;
		e.p2p.nChannels = d->p2p.nChannels;
		break;
	case ncclProfileKernelCh:
		e.kernelCh.channelId = d->kernelCh.channelId;
		e.kernelCh.pTimer = d->kernelCh.pTimer;
		break;
	case ncclProfileGroup:
	case ncclProfileProxyCtrl:
		break;
	default:
		return NULL; /* the v5 API events do not exist in v4 */
	}
	checked(((ncclProfiler_v4_t *)plugin)->startEvent(ctx, &handle, &e), "startEvent");
	return handle;
}

static void stop_event(void *handle)
{
	if (handle)
		checked(((ncclProfiler_v5_t *)plugin)->stopEvent(handle), "stopEvent");
}

static void record_state(void *handle, ncclProfilerEventState_t state, uint64_t ptimer)
{
	if (!handle)
		return;
	if (version == 3) {
		/* v3 has no kernel timestamps and no group API states */
		if (state == ncclProfilerKernelChStop || state == ncclProfilerGroupStartApiStop ||
		    state == ncclProfilerGroupEndApiStart)
			return;
		ncclProfilerEventStateArgs_v3_t a3;
		memset(&a3, 0, sizeof(a3));
		a3.proxyCtrl.appendedProxyOps = 1;
		checked(((ncclProfiler_v3_t *)plugin)->recordEventState(handle, state, &a3),
			"recordEventState");
		return;
	}
	ncclProfilerEventStateArgs_v5_t args;
	memset(&args, 0, sizeof(args));
	args.kernelCh.pTimer = ptimer;
	checked(((ncclProfiler_v5_t *)plugin)
		    ->recordEventState(handle, state,
				       state == ncclProfilerGroupStartApiStop ||
					       state == ncclProfilerGroupEndApiStart
					   ? NULL
					   : &args),
		"recordEventState");
}

/* NCCL starts an event when its bit, or that of an event it parents, is in the mask. */
static bool emitted(uint64_t type)
{
	int m = event_mask;
	int net =
	    ncclProfileProxyOp | ncclProfileProxyStep | ncclProfileKernelCh | ncclProfileNetPlugin;
	switch (type) {
	case ncclProfileGroupApi:
		return version >= 5 &&
		       (m & (ncclProfileGroupApi | ncclProfileCollApi | ncclProfileP2pApi |
			     ncclProfileKernelLaunch | ncclProfileGroup | ncclProfileColl |
			     ncclProfileP2p | net));
	case ncclProfileCollApi:
		return version >= 5 && (m & (ncclProfileCollApi | ncclProfileColl | net));
	case ncclProfileP2pApi:
		return version >= 5 && (m & (ncclProfileP2pApi | ncclProfileP2p | net));
	case ncclProfileGroup:
		return m & (ncclProfileGroup | ncclProfileColl | ncclProfileP2p | net);
	case ncclProfileColl:
		return m & (ncclProfileColl | net);
	case ncclProfileP2p:
		return m & (ncclProfileP2p | net);
	case ncclProfileKernelCh:
		return m & ncclProfileKernelCh;
	case ncclProfileProxyCtrl:
		return m & ncclProfileProxyCtrl;
	}
	return false;
}

/* ---- communicators ---- */

struct comm {
	void *ctx;
	uint64_t hash;
	int rank, nranks;
	uint64_t seq[16]; /* NCCL's per-function sequence numbers */
};

static void comm_init(struct comm *c, uint64_t hash, int rank, int nranks)
{
	memset(c, 0, sizeof(*c));
	c->hash = hash;
	c->rank = rank;
	c->nranks = nranks;
	int mask = 0;
	char name[32];
	snprintf(name, sizeof(name), "sim-%016" PRIx64, hash);
	ncclResult_t rc;
	if (version == 3)
		rc = ((ncclProfiler_v3_t *)plugin)->init(&c->ctx, &mask);
	else if (version >= 5)
		rc = ((ncclProfiler_v5_t *)plugin)
			 ->init(&c->ctx, hash, &mask, name, 1, nranks, rank, logger);
	else
		rc = ((ncclProfiler_v4_t *)plugin)
			 ->init(&c->ctx, &mask, name, hash, 1, nranks, rank, logger);
	checked(rc, "init");
	event_mask = mask; /* NCCL keeps one mask, the last init's */
}

static void comm_finalize(struct comm *c)
{
	checked(((ncclProfiler_v5_t *)plugin)->finalize(c->ctx), "finalize");
}

/* ---- the proxy thread: kernel channels ---- */

struct kernel_work {
	void *ctx;
	void *task; /* the plugin's handle of the collective or point-to-point event */
	unsigned channel;
	uint64_t ns; /* how long the channel runs; 0: for ever */
	struct kernel_work *next;
};

static pthread_mutex_t work_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work_ready = PTHREAD_COND_INITIALIZER;
static pthread_cond_t work_done = PTHREAD_COND_INITIALIZER;
static struct kernel_work *work_head, **work_tail = &work_head;
static int work_pending;
static atomic_bool ended;

static void *proxy_main(void *arg)
{
	(void)arg;
	for (;;) {
		pthread_mutex_lock(&work_lock);
		while (!work_head && !atomic_load(&ended))
			pthread_cond_wait(&work_ready, &work_lock);
		struct kernel_work *w = work_head;
		if (!w) {
			pthread_mutex_unlock(&work_lock);
			return NULL;
		}
		work_head = w->next;
		if (!work_head)
			work_tail = &work_head;
		pthread_mutex_unlock(&work_lock);

		ncclProfilerEventDescr_v6_t d;
		if (emitted(ncclProfileProxyCtrl)) {
			/* ncclProxyProgress appending the work: a control event of the proxy's */
			memset(&d, 0, sizeof(d));
			d.type = ncclProfileProxyCtrl;
			void *ctrl = start_event(w->ctx, &d);
			record_state(ctrl, ncclProfilerProxyCtrlAppend, 0);
			record_state(ctrl, ncclProfilerProxyCtrlAppendEnd, 0);
			stop_event(ctrl);
		}
		memset(&d, 0, sizeof(d));
		d.type = ncclProfileKernelCh;
		d.parentObj = w->task;
		d.kernelCh.channelId = (uint8_t)w->channel;
		d.kernelCh.pTimer = now_ns();
		void *h = start_event(w->ctx, &d);
		if (w->ns == 0) {
			printf("ready\n");
			fflush(stdout);
			for (;;)
				pause(); /* a kernel that never ends: NCCL's proxy never sees it
					    stop */
		}
		struct timespec nap = {0, (long)w->ns};
		nanosleep(&nap, NULL);
		record_state(h, ncclProfilerKernelChStop, now_ns());
		stop_event(h);
		free(w);
		pthread_mutex_lock(&work_lock);
		if (--work_pending == 0)
			pthread_cond_broadcast(&work_done);
		pthread_mutex_unlock(&work_lock);
	}
}

static void kernel(void *ctx, void *task, unsigned channel, uint64_t ns)
{
	struct kernel_work *w = calloc(1, sizeof(*w));
	if (!w)
		exit(3);
	*w = (struct kernel_work){ctx, task, channel, ns, NULL};
	pthread_mutex_lock(&work_lock);
	*work_tail = w;
	work_tail = &w->next;
	work_pending++;
	pthread_cond_signal(&work_ready);
	pthread_mutex_unlock(&work_lock);
}

static void wait_kernels(void)
{
	pthread_mutex_lock(&work_lock);
	while (work_pending)
		pthread_cond_wait(&work_done, &work_lock);
	pthread_mutex_unlock(&work_lock);
}

/* ---- operations ---- */

struct op {
	bool p2p;
	const char *func;
	size_t count;
	int peer_or_root;
	uint64_t kernel_ns; /* per channel; 0: never ends */
	/* the plugin's handles */
	void *api, *task;
};

static float buffer[1]; /* the "device" buffers: only their addresses are handed over */

/* NCCL numbers each function's collectives on its own. */
static int func_index(const char *func)
{
	static const char *const names[] = {"AllGather", "AllReduce", "AlltoAll",      "Broadcast",
					    "Gather",	 "Reduce",    "ReduceScatter", "Scatter"};
	for (int k = 0; k < 8; k++)
		if (strcmp(func, names[k]) == 0)
			return k;
	return 15;
}

/* NCCL's ncclGroupStart...ncclGroupEnd around ops: the API events as each call is made (one
 * GroupApi event for the outermost group), then at launch the group and task events, the tasks'
 * channels on the proxy thread. */
static void group(struct comm *c, struct op *ops, int n)
{
	ncclProfilerEventDescr_v6_t d;
	void *group_api = NULL;
	if (emitted(ncclProfileGroupApi)) {
		memset(&d, 0, sizeof(d));
		d.type = ncclProfileGroupApi;
		d.groupApi.groupDepth = 2;
		group_api = start_event(c->ctx, &d);
		record_state(group_api, ncclProfilerGroupStartApiStop, 0);
	}
	for (int k = 0; k < n; k++) {
		struct op *o = &ops[k];
		ops[k].api = NULL;
		if (emitted(o->p2p ? ncclProfileP2pApi : ncclProfileCollApi)) {
			memset(&d, 0, sizeof(d));
			d.parentObj = group_api;
			if (o->p2p) {
				d.type = ncclProfileP2pApi;
				d.p2pApi.func = o->func;
				d.p2pApi.count = o->count;
				d.p2pApi.datatype = "ncclFloat32";
			} else {
				d.type = ncclProfileCollApi;
				d.collApi.func = o->func;
				d.collApi.count = o->count;
				d.collApi.datatype = "ncclFloat32";
				d.collApi.root = o->peer_or_root;
			}
			o->api = start_event(c->ctx, &d);
			stop_event(o->api);
		}
	}
	record_state(group_api, ncclProfilerGroupEndApiStart, 0);

	/* launch (hostStreamPlanTask) */
	void *grp = NULL;
	if (emitted(ncclProfileGroup)) {
		memset(&d, 0, sizeof(d));
		d.type = ncclProfileGroup;
		grp = start_event(c->ctx, &d);
	}
	for (int k = 0; k < n; k++) {
		struct op *o = &ops[k];
		o->task = NULL;
		if (!emitted(o->p2p ? ncclProfileP2p : ncclProfileColl))
			continue;
		memset(&d, 0, sizeof(d));
		d.parentObj = o->api;
		d.rank = c->rank;
		if (o->p2p) {
			d.type = ncclProfileP2p;
			d.p2p.func = o->func;
			d.p2p.buff = buffer;
			d.p2p.datatype = "ncclFloat32";
			d.p2p.count = o->count;
			d.p2p.peer = o->peer_or_root;
			d.p2p.nChannels = (uint8_t)channels;
			d.p2p.parentGroup = grp;
		} else {
			d.type = ncclProfileColl;
			d.coll.seqNumber = c->seq[func_index(o->func)]++;
			d.coll.func = o->func;
			d.coll.sendBuff = buffer;
			d.coll.recvBuff = buffer;
			d.coll.count = o->count;
			d.coll.root = o->peer_or_root;
			d.coll.datatype = "ncclFloat32";
			d.coll.nChannels = (uint8_t)channels;
			d.coll.nWarps = 16;
			d.coll.algo = "RING";
			d.coll.proto = "SIMPLE";
			d.coll.parentGroup = grp;
		}
		o->task = start_event(c->ctx, &d);
		/* uploadProxyOps: NCCL adds a proxy operation per channel for the plugin's kernel
		 * events only when it asked for them; the proxy thread may start the channels
		 * before the stop below */
		for (unsigned ch = 0; emitted(ncclProfileKernelCh) && ch < channels; ch++)
			kernel(c->ctx, o->task, ch, o->kernel_ns);
	}
	for (int k = 0; k < n; k++)
		stop_event(ops[k].task);
	stop_event(grp);
	stop_event(group_api);
}

static uint64_t kernel_ns_for(size_t bytes)
{
	return 20000 + bytes / 50; /* 20 us, then 50 GB/s */
}

static struct op coll(const char *func, size_t bytes, int root)
{
	return (struct op){
	    false, func, bytes / 4, root, kernel_ns_for(channels ? bytes / channels : bytes),
	    NULL,  NULL};
}

static struct op p2p(const char *func, size_t bytes, int peer)
{
	return (struct op){
	    true, func, bytes / 4, peer, kernel_ns_for(channels ? bytes / channels : bytes),
	    NULL, NULL};
}

/* ---- the device the rank uses, as NCCL's caller makes it current ---- */

static void use_device(int device)
{
	void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
	if (!cuda)
		return;
	int (*init)(unsigned) = (int (*)(unsigned))dlsym(cuda, "cuInit");
	int (*get)(int *, int) = (int (*)(int *, int))dlsym(cuda, "cuDeviceGet");
	int (*retain)(void **, int) =
	    (int (*)(void **, int))dlsym(cuda, "cuDevicePrimaryCtxRetain");
	int (*set)(void *) = (int (*)(void *))dlsym(cuda, "cuCtxSetCurrent");
	int dev;
	void *ctx;
	if (init && get && retain && set && init(0) == 0 && get(&dev, device) == 0 &&
	    retain(&ctx, dev) == 0)
		set(ctx);
}

int main(int argc, char **argv)
{
	int rank = 0, nranks = 1, device = 0;
	newest = 5;
	uint64_t hash = 0x5eedc0ffee000001ull;
	int k = 1;
	for (; k + 1 < argc && argv[k][0] == '-'; k += 2) {
		if (strcmp(argv[k], "--nccl") == 0)
			newest = strcmp(argv[k + 1], "2.26") == 0   ? 3
				 : strcmp(argv[k + 1], "2.27") == 0 ? 4
				 : strcmp(argv[k + 1], "2.30") == 0 ? 6
								    : 5;
		else if (strcmp(argv[k], "--rank") == 0)
			rank = atoi(argv[k + 1]);
		else if (strcmp(argv[k], "--nranks") == 0)
			nranks = atoi(argv[k + 1]);
		else if (strcmp(argv[k], "--comm") == 0)
			hash = strtoull(argv[k + 1], NULL, 16);
		else if (strcmp(argv[k], "--device") == 0)
			device = atoi(argv[k + 1]);
		else if (strcmp(argv[k], "--channels") == 0)
			channels = (unsigned)atoi(argv[k + 1]);
	}
	if (k >= argc) {
		fprintf(stderr, "usage: simnccl [options] SCENARIO ARGS...\n");
		return 1;
	}
	const char *scenario = argv[k++];
	use_device(device);
	if (!load_plugin()) {
		fprintf(stderr, "simnccl: no profiler plugin\n");
		/* NCCL runs on without one */
	}
	pthread_t proxy;
	pthread_create(&proxy, NULL, proxy_main, NULL);
	struct comm c, c2;
	if (plugin)
		comm_init(&c, hash, rank, nranks);
	int rc = 0;
	if (!plugin) {
		rc = 0;
	} else if (strcmp(scenario, "allreduce") == 0 && k + 1 < argc) {
		int iters = atoi(argv[k]);
		size_t bytes = strtoull(argv[k + 1], NULL, 10);
		for (int i = 0; i < iters; i++) {
			struct op o = coll("AllReduce", bytes, 0);
			group(&c, &o, 1);
		}
	} else if (strcmp(scenario, "sendrecv") == 0 && k + 2 < argc) {
		int iters = atoi(argv[k]);
		size_t bytes = strtoull(argv[k + 1], NULL, 10);
		int npeers = argc - (k + 2);
		struct op *ops = calloc((size_t)npeers * 2, sizeof(*ops));
		for (int i = 0; i < iters && ops; i++) {
			for (int p = 0; p < npeers; p++) {
				int peer = atoi(argv[k + 2 + p]);
				ops[2 * p] = p2p("Send", bytes, peer);
				ops[2 * p + 1] = p2p("Recv", bytes, peer);
			}
			group(&c, ops, npeers * 2);
		}
		free(ops);
	} else if (strcmp(scenario, "mixed") == 0 && k < argc) {
		int iters = atoi(argv[k]);
		int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
		for (int i = 0; i < iters; i++) {
			struct op outer[] = {coll("AllReduce", 1 << 20, 0),
					     coll("Broadcast", 4096, 0), p2p("Send", 65536, next),
					     p2p("Recv", 65536, prev)};
			group(&c, outer, 4);
			struct op inner[] = {coll("ReduceScatter", 1 << 16, 0),
					     coll("AllGather", 1 << 16, 0)};
			group(&c, inner, 2);
		}
	} else if (strcmp(scenario, "twocomms") == 0 && k < argc) {
		int iters = atoi(argv[k]);
		comm_init(&c2, hash + 1, rank, nranks);
		for (int i = 0; i < iters; i++) {
			struct op a = coll("AllReduce", 1 << 16, 0);
			group(&c, &a, 1);
			struct op b = coll("AllGather", 1 << 12, 0);
			group(&c2, &b, 1);
		}
		wait_kernels();
		comm_finalize(&c2);
	} else if (strcmp(scenario, "stuck") == 0 && k + 1 < argc) {
		const char *func = argv[k];
		uint64_t seq = strtoull(argv[k + 1], NULL, 10);
		bool is_p2p = strcmp(func, "Send") == 0 || strcmp(func, "Recv") == 0;
		struct op o =
		    is_p2p ? p2p(func, 1 << 20, (rank + 1) % nranks) : coll(func, 1 << 20, 0);
		o.kernel_ns = 0;
		if (!is_p2p)
			c.seq[func_index(func)] = seq;
		if (k + 2 < argc && strcmp(argv[k + 2], "hold") == 0) {
			char line[16];
			printf("made\n");
			fflush(stdout);
			if (!fgets(line, sizeof(line), stdin))
				return 1;
		}
		group(&c, &o, 1);
		for (;;)
			pause();
	} else if (strcmp(scenario, "leave") == 0) {
		/* made, then freed: this rank is gone */
	} else {
		fprintf(stderr, "simnccl: unknown scenario %s\n", scenario);
		rc = 1;
	}
	wait_kernels();
	if (plugin)
		comm_finalize(&c);
	atomic_store(&ended, true);
	pthread_mutex_lock(&work_lock);
	pthread_cond_broadcast(&work_ready);
	pthread_mutex_unlock(&work_lock);
	pthread_join(proxy, NULL);
	return rc;
}
