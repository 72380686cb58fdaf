/* SPDX-License-Identifier: MIT */
#include "guard.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pystack.h"
#include "backtrace.h"
#include "crash.h"
#include "cupti_timing.h"
#include "driver.h"
#include "evidence.h"
#include "failure.h"
#include "mapping.h"
#include "mapping_table.h"
#include "notice.h"
#include "probe.h"
#include "recorder.h"
#include "reentry.h"
#include "settings.h"
#include "staged.h"
#include "timing.h"

static int active;		    /* the guard started: its state is set up and it records */
static uint64_t realtime_offset_ns; /* CLOCK_REALTIME - CLOCK_MONOTONIC at start */

/* What the guard knows of each ordered device pair (device -> peer). */
enum pair_bits {
	PAIR_ENABLED = 1 << 0,	/* real peer access enabled by the program */
	PAIR_VIRTUAL = 1 << 1,	/* staged mode: the program believes it enabled access */
	PAIR_ABSORBED = 1 << 2, /* fallback: an unsupported enable was absorbed */
	PAIR_NO_P2P = 1 << 3,	/* the driver says this pair cannot do P2P */
	PAIR_CHECKED = 1 << 4,	/* NO_P2P is known either way */
	PAIR_BROKEN = 1 << 5,	/* the health probe found P2P lying or slow */
	PAIR_PROBED = 1 << 6,	/* the health probe ran on this pair */
};

static _Atomic uint8_t pairs[P2PG_MAX_DEVICES][P2PG_MAX_DEVICES];

static bool valid_device(int d)
{
	return d >= 0 && d < P2PG_MAX_DEVICES;
}

static uint8_t pair_get(int a, int b)
{
	return valid_device(a) && valid_device(b)
		   ? atomic_load_explicit(&pairs[a][b], memory_order_relaxed)
		   : 0;
}

static void pair_set(int a, int b, uint8_t bits)
{
	if (valid_device(a) && valid_device(b))
		atomic_fetch_or(&pairs[a][b], bits);
}

static void pair_clear(int a, int b, uint8_t bits)
{
	if (valid_device(a) && valid_device(b))
		atomic_fetch_and(&pairs[a][b], (uint8_t)~bits);
}

int p2pg_peers_enabled(int device)
{
	int n = 0;
	if (!valid_device(device))
		return 0;
	for (int k = 0; k < P2PG_MAX_DEVICES; k++)
		n += (pair_get(device, k) & PAIR_ENABLED) != 0;
	return n;
}

static uint64_t to_realtime(uint64_t mono)
{
	return mono + realtime_offset_ns;
}

/* ---- initialisation ---- */

static pthread_mutex_t driver_init_lock = PTHREAD_MUTEX_INITIALIZER;
static bool driver_initialised;
static __thread bool starting_cupti
    __attribute__((tls_model("initial-exec"))); /* CUPTI's own start may call cuInit */

static void atfork_child(void)
{
	/* A child of a process that initialised CUDA never starts CUPTI (driver_initialised stays
	 * set); one of a process that had not is a fresh start. */
	pthread_mutex_init(&driver_init_lock, NULL);
	p2pg_cupti_after_fork_child();
	p2pg_recorder_atfork_child();
	p2pg_evidence_reset();
	p2pg_map_tables_after_fork_child();
}

static void init(void)
{
	const struct p2pg_settings *settings = p2pg_settings_get();
	if (!settings->enabled)
		return;
	struct timespec rt, mono;
	clock_gettime(CLOCK_REALTIME, &rt);
	clock_gettime(CLOCK_MONOTONIC, &mono);
	realtime_offset_ns = ((uint64_t)rt.tv_sec * 1000000000ull + (uint64_t)rt.tv_nsec) -
			     ((uint64_t)mono.tv_sec * 1000000000ull + (uint64_t)mono.tv_nsec);
	p2pg_recorder_configure(settings, p2pg_mode_name(settings->mode), &p2pg_knowledge_hooks);
	p2pg_failure_configure(settings->rules_dir, settings->backtraces);
	p2pg_staged_set_budget(settings->staging_bytes);
	if (p2pg_driver_load() < 0) {
		p2pg_notice(
		    "cannot find the CUDA driver (libcuda.so.1); the guard passes every call "
		    "through unrecorded");
		return;
	}
	pthread_atfork(NULL, NULL, atfork_child);
	/* exit() runs atexit handlers before any library destructor, the last registered first.
	 * This one, registered before any CUDA runtime initialised, runs after the runtime's
	 * teardown: from there on the drainer asks no more timing events, so nothing of the
	 * guard's touches CUDA while it is torn down. The GPU times pending at exit are resolved
	 * by a handler registered later, which runs before the teardown (p2pg_recorder_arm_exit).
	 */
	atexit(p2pg_recorder_exit_begins);
	/* Fatal signals are watched in processes that use CUDA only: a shell or a compiler that
	 * inherited the preload keeps its handlers to itself. */
	p2pg_crash_install();
	p2pg_recorder_arm_exit(P2PG_EXIT_ARM_START);
	__atomic_store_n(&active, 1, __ATOMIC_RELEASE);
}

/*
 * Whatever the depth: a runtime initialises the driver inside the program's first runtime call,
 * which the guard may be intercepting (the guard's own code calls the real cuInit, never this).
 * A second thread's first cuInit waits for the start, so that no copy is made before it; the
 * first cuInit decides for good, so CUPTI never starts once contexts may exist.
 */
void p2pg_guard_driver_initialising(void)
{
	const struct p2pg_settings *settings = p2pg_settings_get();
	if (__atomic_load_n(&driver_initialised, __ATOMIC_ACQUIRE) || starting_cupti)
		return;
	pthread_mutex_lock(&driver_init_lock);
	if (!driver_initialised && settings->enabled &&
	    settings->gpu_timing == P2PG_GPU_TIMING_CUPTI &&
	    __atomic_load_n(&active, __ATOMIC_ACQUIRE)) {
		starting_cupti = true;
		char why[256];
		if (!p2pg_cupti_start(why, sizeof(why)) && !settings->quiet)
			p2pg_notice("GPU times of peer copies: %s; timing events sampled instead",
				    why);
		starting_cupti = false;
	}
	bool first = !driver_initialised;
	__atomic_store_n(&driver_initialised, true, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&driver_init_lock);
	/* Every guarded CUDA process is seen, peer calls or not: its processes row and crash rows
	 * come from its spool, made here rather than at its first record. A process that never
	 * initialises CUDA (a shell, a tool) makes nothing. */
	if (first && settings->enabled && __atomic_load_n(&active, __ATOMIC_ACQUIRE)) {
		/* An interpreter embedded after the guard loaded is there by now: its traceback
		 * writer is looked up for the crash handler. */
		p2pg_python_stack_prepare();
		p2pg_recorder_process_seen();
	}
}

void p2pg_guard_driver_initialised(CUresult status)
{
	static atomic_bool seen;
	if (status != CUDA_SUCCESS || !__atomic_load_n(&active, __ATOMIC_ACQUIRE) ||
	    atomic_load_explicit(&seen, memory_order_relaxed) || atomic_exchange(&seen, true))
		return;
	/* The driver registered its exit handler inside the call that just returned. */
	p2pg_recorder_arm_exit(P2PG_EXIT_ARM_DRIVER_READY);
	p2pg_recorder_driver_ready();
}

bool p2pg_guard_start(const struct p2pg_guard_start *start)
{
	static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;
	static bool started;
	pthread_mutex_lock(&start_lock);
	if (!started) {
		started = true;
		p2pg_settings_use(start->settings);
		p2pg_reentry_set_depth(start->reentry_depth);
		p2pg_backtrace_entry_module(start->entry_points);
		init();
	}
	pthread_mutex_unlock(&start_lock);
	return __atomic_load_n(&active, __ATOMIC_ACQUIRE);
}

/* ---- devices of pointers and contexts ---- */

/*
 * Context -> device, cached by the context's key (p2pg_context_key: its driver ID, which unlike the
 * handle never comes back for another context). An entry is one 64-bit word, key << 8 | device, so
 * a reader sees both or neither; entries are overwritten round-robin, so a program that keeps
 * creating contexts only costs the cache its oldest ones.
 */
#define CONTEXT_CACHE 32
static _Atomic unsigned long long context_cache[CONTEXT_CACHE];
static _Atomic unsigned context_cache_next;

int p2pg_context_device(CUcontext ctx)
{
	if (!ctx)
		return p2pg_current_device();
	unsigned long long key = p2pg_context_key(ctx) & (~0ull >> 8);
	for (int k = 0; k < CONTEXT_CACHE; k++) {
		unsigned long long e =
		    atomic_load_explicit(&context_cache[k], memory_order_relaxed);
		if (e && e >> 8 == key)
			return (int)(e & 0xff);
	}
	CUdevice dev = -1;
	if (p2pg_drv.cuCtxPushCurrent(ctx) != CUDA_SUCCESS)
		return -1;
	if (p2pg_drv.cuCtxGetDevice(&dev) != CUDA_SUCCESS)
		dev = -1;
	CUcontext popped;
	p2pg_drv.cuCtxPopCurrent(&popped);
	if (dev < 0 || dev > 0xff)
		return dev < 0 ? -1 : dev;
	unsigned slot = atomic_fetch_add_explicit(&context_cache_next, 1, memory_order_relaxed);
	atomic_store_explicit(&context_cache[slot % CONTEXT_CACHE], key << 8 | (unsigned)dev,
			      memory_order_relaxed);
	return dev;
}

int p2pg_current_device(void)
{
	CUdevice dev;
	return p2pg_drv.cuCtxGetDevice(&dev) == CUDA_SUCCESS ? dev : -1;
}

static int pointer_device(CUdeviceptr p)
{
	int ordinal = -1;
	if (p2pg_drv.cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p) !=
	    CUDA_SUCCESS)
		return -1;
	return ordinal;
}

static bool is_device_memory(CUdeviceptr p)
{
	unsigned int type = 0;
	return p2pg_drv.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p) ==
		   CUDA_SUCCESS &&
	       type == CU_MEMORYTYPE_DEVICE;
}

/* The count is fixed once the driver is initialised (CUDA_VISIBLE_DEVICES is read then): asked
 * until the driver answers, then kept. */
int p2pg_visible_devices(void)
{
	static _Atomic int devices; /* 0: not known yet */
	int n = atomic_load_explicit(&devices, memory_order_relaxed);
	if (n == 0) {
		if (p2pg_drv.cuDeviceGetCount(&n) != CUDA_SUCCESS || n <= 0)
			return 0;
		atomic_store_explicit(&devices, n, memory_order_relaxed);
	}
	return n;
}

/* One device visible and no other device's or process's memory mapped here: no copy can cross
 * devices, and none needs the driver's pointer queries (39-72 ns each on an H200). */
static bool alone_on_one_device(void)
{
	return p2pg_visible_devices() == 1 && p2pg_map_ranges_live() == 0 &&
	       !(p2pg_settings_get()->test_hooks & P2PG_TEST_LOCAL_COPIES);
}

/* A generic copy crosses devices when both pointers are device memory of different devices. The
 * ordinal query is the cheap test every generic copy pays; memory types are checked only when the
 * ordinals differ (pinned host memory has an ordinal too). */
static bool classify(struct p2pg_copy *c)
{
	if (alone_on_one_device())
		return false;
	int s = pointer_device(c->src);
	if (s < 0)
		return false;
	int d = pointer_device(c->dst);
	/* A legacy IPC mapping is named by the importer's device, not by its memory's: the
	 * mapping's own record says whose memory it is. */
	if (d == s) {
		int owner = p2pg_mapping_owner(c->src);
		if (owner >= 0)
			s = owner;
		else if ((owner = p2pg_mapping_owner(c->dst)) >= 0)
			d = owner;
	}
	/* P2PGUARD_TEST=local-copies: a copy within one device is taken for a peer copy, so that
	 * one GPU can show how the guard records and times them. */
	bool local = d == s && (p2pg_settings_get()->test_hooks & P2PG_TEST_LOCAL_COPIES);
	if (d < 0 || (d == s && !local))
		return false;
	if ((!c->device_pointers || local) &&
	    (!is_device_memory(c->src) || !is_device_memory(c->dst)))
		return false;
	c->src_device = s;
	c->dst_device = d;
	return true;
}

/* ---- copies ---- */

static bool pair_is_staged(int src, int dst)
{
	const struct p2pg_settings *settings = p2pg_settings_get();
	if (src == dst || !valid_device(src) || !valid_device(dst))
		return false;
	if (settings->mode == P2PG_MODE_STAGED)
		return p2pg_settings_pair_selected(settings, src, dst);
	if (settings->mode != P2PG_MODE_FALLBACK)
		return false;
	uint8_t bits = pair_get(src, dst) | pair_get(dst, src);
	if (bits & (PAIR_BROKEN | PAIR_ABSORBED | PAIR_NO_P2P))
		return true;
	if (!(pair_get(src, dst) & PAIR_CHECKED)) {
		int can = 1;
		if (p2pg_drv.cuDeviceCanAccessPeer(&can, src, dst) == CUDA_SUCCESS && !can) {
			pair_set(src, dst, PAIR_NO_P2P);
			pair_set(dst, src, PAIR_NO_P2P);
		}
		pair_set(src, dst, PAIR_CHECKED);
		return !can;
	}
	return false;
}

/* One end of the copy is another device's memory mapped for the other end's device (an IPC open,
 * an imported or peer-accessible VMM range): the copy engine reaches it over P2P. */
static bool through_peer_mapping(const struct p2pg_copy *c)
{
	return p2pg_mapping_peer_path(c->src, c->dst_device) ||
	       p2pg_mapping_peer_path(c->dst, c->src_device);
}

static CUstream effective_stream(const struct p2pg_copy *c)
{
	return (c->stream == NULL && c->per_thread) ? CU_STREAM_PER_THREAD : c->stream;
}

enum p2pg_route p2pg_copy_begin(struct p2pg_copy *c)
{
	c->timing = -1;
	c->not_capturing = false;
	c->by_cupti = false;
	if ((c->src_device < 0 || c->dst_device < 0) && !classify(c))
		return P2PG_ROUTE_IGNORE;
	c->t0 = p2pg_now_ns();
	CUstream stream = effective_stream(c);
	if (c->async && p2pg_drv.cuStreamIsCapturing) {
		CUstreamCaptureStatus cap = CU_STREAM_CAPTURE_STATUS_NONE;
		if (p2pg_drv.cuStreamIsCapturing(stream, &cap) == CUDA_SUCCESS) {
			if (cap != CU_STREAM_CAPTURE_STATUS_NONE) {
				/* A graph will replay it later; no data moves now, and the staged
				 * engine's buffer reuse is not graph-safe: the driver keeps it. */
				c->path = P2PG_PATH_CAPTURED;
				return P2PG_ROUTE_REAL;
			}
			c->not_capturing = true;
		}
	}
	enum p2pg_route route = P2PG_ROUTE_REAL;
	/* The staged engine reads the source on its device's stream and writes the destination on
	 * its own: a mapping only the other device may touch is left to the program's copy. */
	if (!c->not_stageable && pair_is_staged(c->src_device, c->dst_device) &&
	    p2pg_mapping_usable_by(c->src, c->src_device) &&
	    p2pg_mapping_usable_by(c->dst, c->dst_device)) {
		c->path = P2PG_PATH_STAGED;
		route = P2PG_ROUTE_STAGED;
	} else {
		uint8_t bits =
		    pair_get(c->src_device, c->dst_device) | pair_get(c->dst_device, c->src_device);
		c->path = (bits & PAIR_ENABLED) || through_peer_mapping(c) ? P2PG_PATH_P2P
									   : P2PG_PATH_DRIVER;
	}
	/* The events sit on the caller's stream around whatever moves the data: the staged engine
	 * orders the caller's stream after its last chunk, so a staged copy is timed the same way.
	 * CUPTI records peer copies only: a staged copy is two copies through the host; nor does it
	 * record an empty copy. A synchronous copy between device memory is timed like an
	 * asynchronous one, on the legacy (or per-thread) stream it runs on: it returns before the
	 * copy ends (CUDA says so; on an H200 a 1 GiB cudaMemcpyPeer returned after 16 us of its
	 * 519), so its call's duration is not its copy time. */
	c->by_cupti = c->async && route == P2PG_ROUTE_REAL && c->bytes > 0 && p2pg_cupti_active();
	if (!c->by_cupti)
		c->timing = p2pg_timing_begin(stream, c->bytes, c->t0, &c->ev_end);
	return route;
}

int p2pg_copy_staged(struct p2pg_copy *c)
{
	CUresult ready = p2pg_staged_prepare(c->src_device, c->dst_device);
	if (ready != CUDA_SUCCESS) {
		static atomic_bool said;
		if (!atomic_exchange(&said, true)) {
			const char *name = NULL;
			if (!p2pg_drv.cuGetErrorName || p2pg_drv.cuGetErrorName(ready, &name) != 0)
				name = NULL;
			p2pg_notice("the staged copy engine cannot start (%s %d); copies go to the "
				    "driver as the program called them",
				    name ? name : "error", (int)ready);
		}
		c->path = P2PG_PATH_DRIVER;
		return P2PG_STAGED_UNAVAILABLE;
	}
	struct p2pg_staged_copy sc = {
	    .dst = c->dst,
	    .src = c->src,
	    .dst_device = c->dst_device,
	    .src_device = c->src_device,
	    .bytes = c->bytes,
	    .stream = c->stream,
	    .per_thread_stream = c->per_thread,
	    .async = c->async,
	    .not_capturing = c->not_capturing,
	};
	return (int)p2pg_staged_copy(&sc);
}

int p2pg_copy_end(struct p2pg_copy *c, int status)
{
	uint64_t end = p2pg_now_ns();
	struct p2pg_record r = {
	    .started_ns = to_realtime(c->t0),
	    .host_ns = end - c->t0,
	    .bytes = c->bytes,
	    .stream = (uint64_t)(uintptr_t)c->stream,
	    .api = (uint16_t)c->api,
	    .kind = P2PG_REC_TRANSFER,
	    .path = c->path,
	    .status = status,
	    .src_device = (int16_t)c->src_device,
	    .dst_device = (int16_t)c->dst_device,
	};
	if (c->timing >= 0) {
		if (status == 0 && p2pg_timing_finish(c->timing, c->ev_end, effective_stream(c))) {
			r.flags |= P2PG_REC_F_TIMED;
			r.value = c->timing;
		} else if (status != 0) {
			p2pg_timing_cancel(c->timing);
		}
	}
	uint32_t cupti_context, cupti_stream;
	if (c->by_cupti && status == 0 &&
	    p2pg_cupti_stream_id(c->stream, c->per_thread, &cupti_context, &cupti_stream)) {
		r.flags |= P2PG_REC_F_CUPTI | (cupti_context & 0xffffu)
						  << P2PG_REC_CUPTI_CONTEXT_SHIFT;
		r.value = (int32_t)cupti_stream;
	}
	uint32_t serial = 0;
	uint64_t seq = p2pg_record(&r, &serial);
	/* Folded or dropped: no row, so no drainer will ever free the pair. */
	if ((seq == UINT64_MAX || seq == P2PG_SEQ_FOLDED) && (r.flags & P2PG_REC_F_TIMED))
		p2pg_timing_cancel(c->timing);
	/* Whatever runtime this copy went through has initialised, and registered its exit
	 * teardown, by now: the guard's exit pass registers after it. */
	static atomic_bool exit_armed;
	if ((r.flags & (P2PG_REC_F_TIMED | P2PG_REC_F_CUPTI)) &&
	    __builtin_expect(!atomic_load_explicit(&exit_armed, memory_order_relaxed), 0)) {
		atomic_store(&exit_armed, true);
		p2pg_recorder_arm_exit(P2PG_EXIT_ARM_TIMED_COPY);
	}
	if (status != 0) {
		char args[160];
		snprintf(args, sizeof(args), "dst=0x%llx src=0x%llx bytes=%zu stream=%p",
			 (unsigned long long)c->dst, (unsigned long long)c->src, c->bytes,
			 (void *)c->stream);
		struct p2pg_failure f = {
		    .api = c->api,
		    .status = status,
		    .device = c->src_device,
		    .peer_device = c->dst_device,
		    .args = args,
		    .action = P2PG_ACTION_PASSED,
		    .serial = serial,
		    .seq = seq,
		    .started_ns = r.started_ns,
		    .peers_enabled = p2pg_peers_enabled(c->src_device),
		    .peer_access_enabled =
			(pair_get(c->src_device, c->dst_device) & PAIR_ENABLED) != 0,
		};
		p2pg_failure_record(&f);
	}
	return status;
}

void p2pg_copy_note_batch_element(unsigned api, CUdeviceptr dst, CUdeviceptr src, size_t bytes,
				  CUstream stream, int status, uint64_t t0, uint64_t host_ns)
{
	struct p2pg_copy c = {.api = api,
			      .dst = dst,
			      .src = src,
			      .bytes = bytes,
			      .stream = stream,
			      .src_device = -1,
			      .dst_device = -1};
	if (!classify(&c))
		return;
	uint8_t bits = pair_get(c.src_device, c.dst_device) | pair_get(c.dst_device, c.src_device);
	struct p2pg_record r = {
	    .started_ns = to_realtime(t0),
	    .host_ns = host_ns,
	    .bytes = bytes,
	    .stream = (uint64_t)(uintptr_t)stream,
	    .api = (uint16_t)api,
	    .kind = P2PG_REC_TRANSFER,
	    .path = (bits & PAIR_ENABLED) || through_peer_mapping(&c) ? P2PG_PATH_P2P
								      : P2PG_PATH_DRIVER,
	    .status = status,
	    .src_device = (int16_t)c.src_device,
	    .dst_device = (int16_t)c.dst_device,
	};
	p2pg_record(&r, NULL);
}

/* ---- peer access ---- */

static bool staged_pair(const struct p2pg_peer *p)
{
	const struct p2pg_settings *settings = p2pg_settings_get();
	return settings->mode == P2PG_MODE_STAGED && p->device != p->peer &&
	       valid_device(p->device) && valid_device(p->peer) &&
	       p2pg_settings_pair_selected(settings, p->device, p->peer);
}

/* Fallback: a pair the health probe found broken never gets its real mapping back; the guard
 * answers the program's enables and disables of it, as staged mode does. */
static bool broken_pair(const struct p2pg_peer *p)
{
	const struct p2pg_settings *settings = p2pg_settings_get();
	return settings->mode == P2PG_MODE_FALLBACK && p->device != p->peer &&
	       (pair_get(p->device, p->peer) & PAIR_BROKEN);
}

enum p2pg_peer_route p2pg_peer_begin(struct p2pg_peer *p)
{
	p->t0 = p2pg_now_ns();
	p->action = P2PG_ACTION_PASSED;
	p->clear_runtime_error = false;
	p->answered = false;
	if (!staged_pair(p) && !broken_pair(p))
		return P2PG_PEER_REAL;
	/* Flags other than 0 are a programming error the driver must still report. */
	if ((p->kind == P2PG_PEER_ENABLE && p->flags == 0) || p->kind == P2PG_PEER_DISABLE) {
		p->answered = true;
		return P2PG_PEER_SKIP;
	}
	return P2PG_PEER_REAL;
}

static bool is_masked_attribute(int attribute)
{
	return attribute == CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED ||
	       attribute == CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED ||
	       attribute == CU_DEVICE_P2P_ATTRIBUTE_CUDA_ARRAY_ACCESS_SUPPORTED;
}

/*
 * Fallback mode, first successful enable of a pair: before any of the program's data crosses it,
 * check that P2P delivers the right bytes and beats staging. A pair that fails is staged from now
 * on, and the finding is a failure row of its own.
 */
static void probe_after_enable(const struct p2pg_peer *p, uint32_t serial, uint64_t seq)
{
	const struct p2pg_settings *settings = p2pg_settings_get();
	if (settings->mode != P2PG_MODE_FALLBACK || !settings->probe)
		return;
	/* Test and set in one step: two threads enabling the same pair probe it once. */
	if (!valid_device(p->device) || !valid_device(p->peer) ||
	    (atomic_fetch_or(&pairs[p->device][p->peer], PAIR_PROBED) & PAIR_PROBED))
		return;
	struct p2pg_probe_result res;
	p2pg_probe_pair(p->device, p->peer, 4 << 20, 2, true, settings->probe_timeout_ms, &res);
	if (res.status != 0 || strcmp(res.verdict, "ok") == 0)
		return;
	pair_set(p->device, p->peer, PAIR_BROKEN);
	pair_set(p->peer, p->device, PAIR_BROKEN);
	/* Take the real mapping away again, so that no copy the guard does not stage itself (3D,
	 * batches, the driver's own) can use the lying path either. The program keeps believing it
	 * enabled access; its disable is answered for it (PAIR_ABSORBED). */
	CUcontext mine = NULL, theirs = NULL, saved = NULL;
	p2pg_drv.cuCtxGetCurrent(&saved);
	if (p2pg_drv.cuDevicePrimaryCtxRetain(&mine, p->device) == CUDA_SUCCESS &&
	    p2pg_drv.cuDevicePrimaryCtxRetain(&theirs, p->peer) == CUDA_SUCCESS &&
	    p2pg_drv.cuCtxSetCurrent(mine) == CUDA_SUCCESS &&
	    p2pg_drv.cuCtxDisablePeerAccess(theirs) == CUDA_SUCCESS) {
		pair_clear(p->device, p->peer, PAIR_ENABLED);
		pair_set(p->device, p->peer, PAIR_ABSORBED);
	}
	p2pg_drv.cuCtxSetCurrent(saved);
	char args[192];
	if (strcmp(res.verdict, "hang") == 0)
		snprintf(args, sizeof(args),
			 "health probe: a 4 MiB p2p copy %d -> %d unfinished after %.0f ms "
			 "(P2PGUARD_PROBE_TIMEOUT_MS=%u); the pair is staged",
			 p->device, p->peer, res.elapsed_ms, settings->probe_timeout_ms);
	else
		snprintf(
		    args, sizeof(args),
		    "health probe: p2p %s at %.1f GB/s, staged %.1f GB/s, %.1f ms; the pair is "
		    "staged",
		    res.p2p_correct ? "correct" : "WRONG DATA", res.p2p_gbps, res.staged_gbps,
		    res.elapsed_ms);
	struct p2pg_failure f = {
	    .api = p->api,
	    .status = 0,
	    .device = p->device,
	    .peer_device = p->peer,
	    .flags = p->flags,
	    .args = args,
	    .action = P2PG_ACTION_STAGED,
	    .serial = serial,
	    .seq = seq,
	    .started_ns = to_realtime(p2pg_now_ns()),
	    .peers_enabled = p2pg_peers_enabled(p->device),
	    .peer_access_enabled = 1,
	    .probe = res.verdict,
	};
	p2pg_failure_record(&f);
}

int p2pg_peer_end(struct p2pg_peer *p, int status)
{
	const struct p2pg_settings *settings = p2pg_settings_get();
	int real_status = status;
	bool skipped = p->answered;
	/* What the program believes it enabled: a staged pair's virtual access, or the mapping the
	 * health probe took away from a broken pair. */
	uint8_t believed = staged_pair(p) ? PAIR_VIRTUAL : PAIR_ABSORBED;
	int distinct = p->device != p->peer && valid_device(p->device) && valid_device(p->peer);

	switch (p->kind) {
	case P2PG_PEER_CAN_ACCESS:
		if (status == 0 && p->value) {
			if (staged_pair(p)) {
				*p->value = 0;
				p->action = P2PG_ACTION_REPORTED;
			} else if (distinct && *p->value == 0) {
				pair_set(p->device, p->peer, PAIR_NO_P2P | PAIR_CHECKED);
				pair_set(p->peer, p->device, PAIR_NO_P2P | PAIR_CHECKED);
			}
		}
		break;
	case P2PG_PEER_ATTRIBUTE:
		if (status == 0 && p->value && staged_pair(p) &&
		    is_masked_attribute(p->attribute)) {
			*p->value = 0;
			p->action = P2PG_ACTION_REPORTED;
		}
		break;
	case P2PG_PEER_ENABLE:
		if (skipped) {
			bool was = pair_get(p->device, p->peer) & believed;
			status = real_status =
			    was ? CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED : CUDA_SUCCESS;
			pair_set(p->device, p->peer, believed);
			p->action = P2PG_ACTION_STAGED;
		} else if (status == CUDA_SUCCESS) {
			pair_set(p->device, p->peer, PAIR_ENABLED);
		} else if (status == CUDA_ERROR_PEER_ACCESS_UNSUPPORTED && distinct &&
			   settings->mode == P2PG_MODE_FALLBACK) {
			if (pair_get(p->device, p->peer) & PAIR_ABSORBED)
				status = CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
			else
				status = CUDA_SUCCESS;
			pair_set(p->device, p->peer, PAIR_ABSORBED | PAIR_NO_P2P | PAIR_CHECKED);
			pair_set(p->peer, p->device, PAIR_NO_P2P | PAIR_CHECKED);
			p->action = P2PG_ACTION_ABSORBED;
			p->clear_runtime_error = p->runtime;
		}
		break;
	case P2PG_PEER_DISABLE:
		if (skipped) {
			bool was = pair_get(p->device, p->peer) & believed;
			status = real_status =
			    was ? CUDA_SUCCESS : CUDA_ERROR_PEER_ACCESS_NOT_ENABLED;
			pair_clear(p->device, p->peer, believed);
			p->action = P2PG_ACTION_STAGED;
		} else if (status == CUDA_SUCCESS) {
			pair_clear(p->device, p->peer, PAIR_ENABLED);
		} else if (status == CUDA_ERROR_PEER_ACCESS_NOT_ENABLED &&
			   (pair_get(p->device, p->peer) & PAIR_ABSORBED)) {
			/* The program disables what the guard let it believe it enabled. */
			status = CUDA_SUCCESS;
			pair_clear(p->device, p->peer, PAIR_ABSORBED);
			p->action = P2PG_ACTION_ABSORBED;
			p->clear_runtime_error = p->runtime;
		}
		break;
	}

	struct p2pg_record r = {
	    .started_ns = to_realtime(p->t0),
	    .host_ns = p2pg_now_ns() - p->t0,
	    .api = (uint16_t)p->api,
	    .kind = P2PG_REC_PEER,
	    .path = p->action,
	    .status = status,
	    .src_device = (int16_t)p->device,
	    .dst_device = (int16_t)p->peer,
	    .flags = (uint32_t)p->flags,
	    .value = p->value ? *p->value : 0,
	};
	uint32_t serial = 0;
	uint64_t seq = p2pg_record(&r, &serial);

	if (real_status != CUDA_SUCCESS || p->action == P2PG_ACTION_ABSORBED) {
		char args[128];
		if (p->kind == P2PG_PEER_ATTRIBUTE)
			snprintf(args, sizeof(args), "attribute=%d src=%d dst=%d", p->attribute,
				 p->device, p->peer);
		else
			snprintf(args, sizeof(args), "device=%d peer=%d flags=%llu", p->device,
				 p->peer, p->flags);
		struct p2pg_failure f = {
		    .api = p->api,
		    .status = real_status,
		    .device = p->device,
		    .peer_device = p->peer,
		    .flags = p->flags,
		    .args = args,
		    .action = p->action,
		    .serial = serial,
		    .seq = seq,
		    .started_ns = r.started_ns,
		    .peers_enabled = p2pg_peers_enabled(p->device),
		    .peer_access_enabled =
			valid_device(p->device) && valid_device(p->peer)
			    ? ((pair_get(p->device, p->peer) & (PAIR_ENABLED | PAIR_VIRTUAL)) != 0)
			    : -1,
		};
		p2pg_failure_record(&f);
	}
	if (p->kind == P2PG_PEER_ENABLE && real_status == CUDA_SUCCESS && !skipped)
		probe_after_enable(p, serial, seq);
	return status;
}

void p2pg_guard_shutdown(void)
{
	if (__atomic_load_n(&active, __ATOMIC_ACQUIRE))
		p2pg_recorder_shutdown();
}
