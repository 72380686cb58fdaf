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
#include "reentry.h"

/* ---- the prologue every entry point runs ---- */

struct p2pg_scope {
	int saved_errno;
};

extern int p2pg_active; /* 0 before init and when the guard is disabled */

bool p2pg_init_slow(void);
/* The program is initialising the driver (cuInit), which has not happened yet on this path: the
 * moment to start CUPTI (see cupti_timing.h). After p2pg_enter, whatever it returned. */
void p2pg_driver_initialising(void);

/*
 * Returns true when the call is the guard's to handle. False means: go straight through — a call
 * made from inside the guard (or from SQLite, libunwind, NVML while the guard works), or a guard
 * that is disabled. errno is kept for the caller either way.
 */
static inline bool p2pg_enter(struct p2pg_scope *scope)
{
	scope->saved_errno = errno;
	if (p2pg_depth++ > 0)
		return false;
	if (__builtin_expect(!__atomic_load_n(&p2pg_active, __ATOMIC_ACQUIRE), 0) &&
	    !p2pg_init_slow())
		return false;
	return true;
}

static inline void p2pg_leave(struct p2pg_scope *scope)
{
	p2pg_depth--;
	errno = scope->saved_errno;
}

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
enum p2pg_route p2pg_copy_begin(struct p2pg_copy *c);
/* Runs the staged engine; returns a driver status. */
int p2pg_copy_staged(struct p2pg_copy *c);
/* p2pg_copy_staged's answer when the engine cannot start: make the real call instead. */
#define P2PG_STAGED_UNAVAILABLE (-1)
/* Called right after the real call or after p2pg_copy_staged: records. Returns status unchanged. */
int p2pg_copy_end(struct p2pg_copy *c, int status);

/* Records one crossing element of a batch copy (no policy: batches always go through the driver).
 */
void p2pg_copy_note_batch_element(unsigned api, CUdeviceptr dst, CUdeviceptr src, size_t bytes,
				  CUstream stream, int status, uint64_t t0, uint64_t host_ns);

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

enum p2pg_peer_route p2pg_peer_begin(struct p2pg_peer *p);
int p2pg_peer_end(struct p2pg_peer *p, int status);

/* Peers the program has enabled on device, as the guard saw them. */
int p2pg_peers_enabled(int device);

/* The device a context belongs to, or -1. Restores the current context. */
int p2pg_context_device(CUcontext ctx);
/* The device of the current context, or -1. */
int p2pg_current_device(void);

/* From the preload constructor: settings (no CUDA call). The rest initialises on the first call. */
void p2pg_init_early(void);
/* From the preload destructor: the bounded final flush. */
void p2pg_guard_shutdown(void);
