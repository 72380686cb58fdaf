/* SPDX-License-Identifier: MIT */
/*
 * The shape every entry point shares: the prologue (keep errno, guard re-entrancy, lazy init), the
 * hand-over to the core, and exact pass-through otherwise.
 */
#pragma once

#include <errno.h>

#include "guard.h"
#include "mapping.h"
#include "resolve.h"

/* ---- the prologue every entry point runs ---- */

/*
 * The re-entrancy depth: above 0, a CUDA call on this thread is the guard's own (or SQLite's,
 * libunwind's, NVML's while the guard works) and goes straight through. initial-exec: the preload
 * is loaded at start, never dlopen'ed, and must not need dynamic TLS.
 */
extern __thread int p2pg_depth __attribute__((tls_model("initial-exec")));
/* 1 once the core is loaded and started; 0 before, and for good when it could not start (a
 * missing library, no driver, P2PGUARD_DISABLE=1). */
extern int p2pg_active;

struct p2pg_scope {
	int saved_errno;
};

/* Loads and starts the core at the first CUDA entry (core_link.c). Returns p2pg_active. */
bool p2pg_init_slow(void);

/*
 * Returns true when the call is the guard's to handle. False means: go straight through — a call
 * made from inside the guard (or from SQLite, libunwind, NVML while the guard works), or a guard
 * that is disabled or could not start. errno is kept for the caller either way.
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

/* From the constructor: the settings, read once, and what must be in the environment before the
 * program's libraries read it (staged mode's NCCL_P2P_DISABLE=1). No CUDA call, nothing loaded. */
void p2pg_init_early(void);
/* libp2pguard-core.so in the preload's own folder, named as LD_PRELOAD named the preload (as a
 * rule absolute). Returns 0, or -1 when it cannot be told. */
int p2pg_core_path(char *buf, size_t len);
/* Whether path is that core's, as LD_PRELOAD names libp2pguard.so by absolute path (false when it
 * does not): an answer with no buffer, no page of stack and no call into libc. */
bool p2pg_core_path_is(const char *path);
/* From the constructor, after the settings: unless P2PGUARD_NCCL=0 (or the guard is off, or the
 * user set NCCL_PROFILER_PLUGIN=none), NCCL will load the core as its profiler plugin; the user's
 * own plugin, if set, is kept to be fed (nccl_offer.c). No CUDA call, nothing loaded. */
void p2pg_nccl_offer(void);
/* The program is initialising the driver: tells the core, if it started. */
void p2pg_core_driver_initialising(void);
/* The program's cuInit returned status: tells the core, if it started. No CUDA call. */
void p2pg_core_driver_initialised(CUresult status);
/* From the destructor: the core's bounded final flush, if it started. */
void p2pg_core_shutdown(void);

#define P2PG_EXPORT __attribute__((visibility("default")))

/* Calls the real function with errno as the caller left it, and keeps what the call left. */
#define P2PG_CALL_REAL(scope, call)            \
	({                                     \
		errno = (scope).saved_errno;   \
		__typeof__(call) _rc = (call); \
		(scope).saved_errno = errno;   \
		_rc;                           \
	})

/* Straight through: not the guard's call (re-entrant, or the guard is off). */
#define P2PG_PASS_THROUGH(scope, call) \
	({                             \
		p2pg_leave(&(scope));  \
		(call);                \
	})

/*
 * A copy: the core classifies and decides; the real call or the staged engine runs; the core
 * records. status_type is CUresult or cudaError_t (their values agree for every status a copy
 * returns).
 */
#define P2PG_COPY(scope, copy, status_type, real_call)                       \
	({                                                                   \
		enum p2pg_route _route = p2pg_copy_begin(&(copy));           \
		status_type _st;                                             \
		int _staged = P2PG_STAGED_UNAVAILABLE;                       \
		if (_route == P2PG_ROUTE_STAGED)                             \
			_staged = p2pg_copy_staged(&(copy));                 \
		if (_staged != P2PG_STAGED_UNAVAILABLE)                      \
			_st = (status_type)_staged;                          \
		else                                                         \
			_st = P2PG_CALL_REAL(scope, real_call);              \
		if (_route != P2PG_ROUTE_IGNORE)                             \
			_st = (status_type)p2pg_copy_end(&(copy), (int)_st); \
		p2pg_leave(&(scope));                                        \
		_st;                                                         \
	})

/* A peer access call. */
#define P2PG_PEER(scope, peer, status_type, real_call)               \
	({                                                           \
		status_type _st = (status_type)0;                    \
		if (p2pg_peer_begin(&(peer)) == P2PG_PEER_REAL)      \
			_st = P2PG_CALL_REAL(scope, real_call);      \
		_st = (status_type)p2pg_peer_end(&(peer), (int)_st); \
		_st;                                                 \
	})

/* A cross-process or VMM mapping call: described, called, recorded; nothing held across the call.
 */
#define P2PG_MAPPING(scope, mapping, status_type, real_call)               \
	({                                                                 \
		p2pg_mapping_begin(&(mapping));                            \
		status_type _st = P2PG_CALL_REAL(scope, real_call);        \
		_st = (status_type)p2pg_mapping_end(&(mapping), (int)_st); \
		p2pg_leave(&(scope));                                      \
		_st;                                                       \
	})
