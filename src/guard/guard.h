/* SPDX-License-Identifier: MIT */
/*
 * The core's front door. An entry point (an exported CUDA symbol, a wrapper handed out by
 * cuGetProcAddress, ...) describes its call in driver terms and hands it here; the core decides
 * (policy), does (real call or staged engine) and reports (record, diagnose). The core never learns
 * how the call arrived.
 */
#pragma once

#include <cuda.h>
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api.h"
#include "clock.h"

/*
 * The core is built twice: into the CLI and the tests, linked as usual, and into
 * libp2pguard-core.so, which the preload loads at the first CUDA entry (preload/core_link.c).
 * There it exports the functions marked P2PG_CORE_API and nothing else.
 */
#define P2PG_CORE_API __attribute__((visibility("default")))

struct p2pg_settings;

/* What the entry points hand the core when they start it. */
struct p2pg_guard_start {
	const struct p2pg_settings *settings; /* read from the environment at load; copied */
	int *(*reentry_depth)(void);	      /* the calling thread's re-entrancy depth */
	const void *entry_points; /* an address in their module: its frames leave backtraces */
};

/*
 * Starts the guard, once (later calls return the first one's answer). Returns true when the guard
 * is active; false when it is disabled or the driver cannot be found (said on stderr): every call
 * then passes through.
 */
P2PG_CORE_API bool p2pg_guard_start(const struct p2pg_guard_start *start);
/* The program is initialising the driver (cuInit), which has not happened yet on this path: the
 * moment to start CUPTI (see cupti_timing.h). */
P2PG_CORE_API void p2pg_guard_driver_initialising(void);
/* The program's cuInit returned status (makes no CUDA call). The first success arms the exit's
 * GPU-time pass and gathers the devices' identity (in the drainer). */
P2PG_CORE_API void p2pg_guard_driver_initialised(CUresult status);
/* At the preload's unloading: the bounded final flush. */
P2PG_CORE_API void p2pg_guard_shutdown(void);

/* ---- copies ---- */

enum p2pg_route {
	P2PG_ROUTE_REAL,   /* call the real function */
	P2PG_ROUTE_STAGED, /* call p2pg_copy_staged instead */
	P2PG_ROUTE_IGNORE, /* not a peer copy: call the real function, skip p2pg_copy_end */
};

struct p2pg_copy {
	unsigned api;
	CUdeviceptr dst, src;
	int dst_device, src_device; /* -1: find out from the pointers */
	size_t bytes;
	CUstream stream;
	bool async;
	bool per_thread;      /* stream 0 means the per-thread default stream */
	bool device_pointers; /* both pointers are device memory by contract (DtoD, kind D2D) */
	bool not_stageable;   /* 3D copies: the engine moves linear ranges only */
	/* owned by the core */
	uint64_t t0;
	uint8_t path;
	bool not_capturing; /* the driver said the (async) copy's stream is not being captured */
	bool by_cupti;	    /* its GPU time comes from CUPTI's record, not from events */
	int timing;
	CUevent ev_end;
};

/* Classifies and decides. */
P2PG_CORE_API enum p2pg_route p2pg_copy_begin(struct p2pg_copy *c);
/* Runs the staged engine; returns a driver status. */
P2PG_CORE_API int p2pg_copy_staged(struct p2pg_copy *c);
/* p2pg_copy_staged's answer when the engine cannot start: make the real call instead. */
#define P2PG_STAGED_UNAVAILABLE (-1)
/* Called right after the real call or after p2pg_copy_staged: records. Returns status unchanged. */
P2PG_CORE_API int p2pg_copy_end(struct p2pg_copy *c, int status);

/* Records one crossing element of a batch copy (no policy: batches always go through the driver).
 */
P2PG_CORE_API void p2pg_copy_note_batch_element(unsigned api, CUdeviceptr dst, CUdeviceptr src,
						size_t bytes, CUstream stream, int status,
						uint64_t t0, uint64_t host_ns);

/* ---- peer access calls ---- */

enum p2pg_peer_kind {
	P2PG_PEER_CAN_ACCESS,
	P2PG_PEER_ENABLE,
	P2PG_PEER_DISABLE,
	P2PG_PEER_ATTRIBUTE, /* cuDeviceGetP2PAttribute: *value is the attribute */
};

enum p2pg_peer_route {
	P2PG_PEER_REAL, /* call the real function */
	P2PG_PEER_SKIP, /* do not call it: p2pg_peer_end supplies the status */
};

struct p2pg_peer {
	unsigned api;
	enum p2pg_peer_kind kind;
	int device; /* the calling side (current device / context's device); -1 unknown */
	int peer;   /* the peer; -1 unknown */
	unsigned long long flags;
	int attribute; /* P2P attribute asked for (ATTRIBUTE kind) */
	int *value;    /* CAN_ACCESS / ATTRIBUTE: the caller's out value */
	bool runtime;  /* runtime API: the caller's sticky error state matters */
	/* set by the core */
	bool clear_runtime_error; /* an absorbed runtime failure: the entry point resets
				     cudaGetLastError */
	bool answered; /* an enable or disable the guard answered itself, without the driver */
	uint64_t t0;
	uint8_t action;
};

P2PG_CORE_API enum p2pg_peer_route p2pg_peer_begin(struct p2pg_peer *p);
P2PG_CORE_API int p2pg_peer_end(struct p2pg_peer *p, int status);

/* Peers the program has enabled on device, as the guard saw them. */
int p2pg_peers_enabled(int device);

/* The device a context belongs to, or -1. Restores the current context. */
P2PG_CORE_API int p2pg_context_device(CUcontext ctx);
/* The device of the current context, or -1. */
P2PG_CORE_API int p2pg_current_device(void);
/* How many devices the process sees; 0 until the driver can say. */
int p2pg_visible_devices(void);
