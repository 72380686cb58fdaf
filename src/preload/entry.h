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
