/* SPDX-License-Identifier: MIT */
/*
 * What the staged copy engine's two files share and nobody else needs: the engine's devices,
 * rings and pairs, made once by staged_setup.c and used by every copy in staged.c (whose top
 * comment describes the engine's shape, its ways through and its locking).
 */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "staged.h"

/* Chunk and slot sizes are multiples of this. */
#define CHUNK_ALIGN ((size_t)4 << 10)

/* Caller contexts whose start event a pair keeps; rarer ones get a temporary event. */
#define START_CACHE 4
/* Events kept for synchronous copies per pair (more concurrent ones create and destroy). */
#define SYNC_CACHE 4
/* Caller streams per pair whose last wait is remembered (staged.c: "Skipping the slot
 * wait"). */
#define COVER_CACHE 4

struct pair;

struct slot {
	CUevent drained; /* destination context; recorded after the H2D out of this slot */
	bool pending;	 /* drained has been recorded at least once */
	/* Where the H2D that last read the slot ran: the H2D stream of last_pair, or (caller set)
	 * the caller's stream last_stream. */
	bool caller;
	struct pair *last_pair;
	unsigned long long last_stream;
	uint64_t last_seq;
};

struct ring {
	pthread_mutex_t lock;
	unsigned char *host;
	size_t slot_bytes;
	unsigned nslots;
	unsigned next;
	uint64_t seq; /* H2Ds enqueued out of this ring */
	struct slot *slots;
};

struct start_event {
	CUcontext ctx;
	CUevent event;
};

struct cover {
	unsigned long long stream;
	uint64_t seq; /* the stream waited for the pair's H2Ds up to this ring sequence number */
};

struct pair {
	CUcontext src_ctx, dst_ctx;
	struct ring *ring; /* the destination's; its lock covers everything below */
	CUstream d2h;	   /* on the source device */
	CUstream h2d;	   /* on the destination device */
	CUevent landed;	   /* source context; recorded after each D2H */
	struct start_event start[START_CACHE];
	unsigned nstart;
	CUevent sync_free[SYNC_CACHE]; /* destination context */
	unsigned nsync_free;
	struct cover cover[COVER_CACHE];
	unsigned ncover, cover_next;
};

typedef CUresult(CUDAAPI *stream_get_ctx_fn)(CUstream stream, CUcontext *ctx);

struct p2pg_staged_engine {
	pthread_once_t once;
	CUresult init_status;
	pthread_mutex_t lock; /* creation of everything below */
	int ndev;
	CUcontext *ctx;	     /* retained primary contexts, NULL until first use */
	struct ring **rings; /* per destination device */
	struct pair **pairs; /* [src * ndev + dst], published with release stores */
	size_t budget;
	size_t pinned; /* bytes of rings allocated */
	struct p2pg_staged_tuning tuning;
	bool frozen; /* a pair exists: tuning can no longer change */
	stream_get_ctx_fn stream_get_ctx;
};
extern struct p2pg_staged_engine p2pg_staged_eng;

/* pthread_once's routine: the driver's entries and the device count, or why the engine cannot
 * run (p2pg_staged_eng.init_status). */
void p2pg_staged_engine_init(void);
/* The pair's first use: its contexts, streams, events and the destination's ring, made under
 * p2pg_staged_eng.lock; NULL with *ret_status when the driver refused. */
struct pair *p2pg_staged_pair_slow(int src, int dst, CUresult *ret_status);

/* The pair, found with one atomic load once made. The engine is initialised. */
static inline struct pair *pair_get(int src, int dst, CUresult *ret_status)
{
	struct pair *p = __atomic_load_n(
	    &p2pg_staged_eng.pairs[(size_t)src * (size_t)p2pg_staged_eng.ndev + (size_t)dst],
	    __ATOMIC_ACQUIRE);
	return p ? p : p2pg_staged_pair_slow(src, dst, ret_status);
}
