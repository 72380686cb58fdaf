/* SPDX-License-Identifier: MIT */
/*
 * A thread's ring in the spool, as its writer and its readers touch it: a record published with its
 * checksum beside it, a success folded into the overflow aggregates when the ring is full, an
 * aggregate read whole, a late GPU time put into an unimported record. Inline: p2pg_spool_put is on
 * every intercepted call's path.
 */
#pragma once

#include "p2pguard/spool.h"

#include <stdbool.h>
#include <stdint.h>

#include "crc32c.h"
#include "spool.h"

static inline bool p2pg_spool_agg_matches(const struct p2pg_spool_agg *a,
					  const struct p2pg_record *r, uint8_t size_bucket)
{
	return a->api == r->api && a->src_device == r->src_device &&
	       a->dst_device == r->dst_device && a->path == r->path && a->status == r->status &&
	       a->size_bucket == size_bucket;
}

/*
 * Reads an aggregate's counters as one snapshot of whole calls (see struct p2pg_spool_agg). False
 * when its owner kept folding into it through every try: the next import reads it again. A dead
 * owner's aggregate reads at the first try.
 */
static inline bool p2pg_spool_agg_read(const struct p2pg_spool_agg *a,
				       struct p2pg_spool_totals *out)
{
	struct p2pg_spool_agg *w = (struct p2pg_spool_agg *)a;
	for (int tries = 0; tries < 1000; tries++) {
		uint64_t version = atomic_load_explicit(&w->version, memory_order_acquire);
		/* Acquire: a counter the owner stored for a later fold brings its version store
		 * along, so the check below sees the version moved (no fence: GCC's TSan has none).
		 */
		out->count =
		    atomic_load_explicit(&w->slot[version & 1].count, memory_order_acquire);
		out->bytes =
		    atomic_load_explicit(&w->slot[version & 1].bytes, memory_order_acquire);
		out->host_ns =
		    atomic_load_explicit(&w->slot[version & 1].host_ns, memory_order_acquire);
		/* The owner writes slot[version & 1] again only after it stored version + 1. */
		if (atomic_load_explicit(&w->version, memory_order_relaxed) == version)
			return true;
	}
	return false;
}

/* A copy's size class, floor(log2(bytes)) (0 for 0 and 1 byte): the size_bucket of both
 * transfer_overflow and transfer_summary, which must agree. */
static inline uint8_t p2pg_size_bucket(uint64_t bytes)
{
	return bytes > 1 ? (uint8_t)(63 - __builtin_clzll(bytes)) : 0;
}

/* Adds a record to its thread's overflow aggregate; false when all P2PG_SPOOL_AGGS keys are taken
 * by others. Only the ring's owner calls it: single writer, so plain read-add-store. */
static inline bool p2pg_spool_fold(struct p2pg_spool_thread *t, const struct p2pg_record *r)
{
	uint8_t size_bucket = p2pg_size_bucket(r->bytes);
	uint32_t hash = ((uint32_t)r->api * 31u + (uint32_t)(uint16_t)r->src_device) * 31u +
			(uint32_t)(uint16_t)r->dst_device;
	hash = (hash * 31u + r->path) * 31u + size_bucket + (uint32_t)r->status * 7u;
	hash *= 2654435761u;
	for (uint32_t probe = 0; probe < P2PG_SPOOL_AGGS; probe++) {
		struct p2pg_spool_agg *a = &t->agg[(hash + probe) & (P2PG_SPOOL_AGGS - 1)];
		if (!atomic_load_explicit(&a->used, memory_order_relaxed)) {
			a->status = r->status;
			a->api = r->api;
			a->src_device = r->src_device;
			a->dst_device = r->dst_device;
			a->path = r->path;
			a->size_bucket = size_bucket;
			atomic_store_explicit(&a->used, 1, memory_order_release);
		} else if (!p2pg_spool_agg_matches(a, r, size_bucket)) {
			continue;
		}
		uint64_t version = atomic_load_explicit(&a->version, memory_order_relaxed);
		uint64_t count =
		    atomic_load_explicit(&a->slot[version & 1].count, memory_order_relaxed);
		uint64_t bytes =
		    atomic_load_explicit(&a->slot[version & 1].bytes, memory_order_relaxed);
		uint64_t host_ns =
		    atomic_load_explicit(&a->slot[version & 1].host_ns, memory_order_relaxed);
		/* Release: a reader that sees one of these sees the last fold's version store
		 * before them (p2pg_spool_agg_read). */
		atomic_store_explicit(&a->slot[~version & 1].count, count + 1,
				      memory_order_release);
		atomic_store_explicit(&a->slot[~version & 1].bytes, bytes + r->bytes,
				      memory_order_release);
		atomic_store_explicit(&a->slot[~version & 1].host_ns, host_ns + r->host_ns,
				      memory_order_release);
		atomic_store_explicit(&a->version, version + 1, memory_order_release);
		atomic_store_explicit(&t->folded,
				      atomic_load_explicit(&t->folded, memory_order_relaxed) + 1,
				      memory_order_release);
		return true;
	}
	return false;
}

/* What the checksum beside the record in slot seq must be. */
static inline uint32_t p2pg_spool_record_crc(const struct p2pg_record *r, uint64_t seq)
{
	return p2pg_crc32c_64(r) ^ (uint32_t)seq;
}

/*
 * A published, unimported transfer record whose copy's GPU time was read after the record was
 * written (the exit's last pass, with the database locked): the time goes into the record, then its
 * checksum is made again. A SIGKILL between the two stores leaves a record whose checksum is that
 * of the same record with gpu_ns 0, which p2pg_spool_record_crc_ok accepts for such a record: both
 * states are whole. Only the drainer calls it, on slots in [tail, head): the owner thread never
 * writes them again before the drainer moves the tail past them.
 */
static inline void p2pg_spool_record_set_gpu_ns(struct p2pg_spool_thread *t, uint64_t seq,
						uint64_t gpu_ns)
{
	struct p2pg_record *r = &t->rec[seq & (P2PG_SPOOL_RING - 1)];
	__atomic_store_n(&r->gpu_ns, gpu_ns, __ATOMIC_RELAXED); /* one store: never torn */
	__atomic_store_n(&t->crc[seq & (P2PG_SPOOL_RING - 1)], p2pg_spool_record_crc(r, seq),
			 __ATOMIC_RELAXED);
}

/* Whether crc is the checksum of record r in slot seq, either as written or, for an event-timed
 * transfer given its GPU time later, as written before that time was put in. */
static inline bool p2pg_spool_record_crc_ok(const struct p2pg_record *r, uint32_t crc, uint64_t seq)
{
	if (crc == p2pg_spool_record_crc(r, seq))
		return true;
	if (r->kind != P2PG_REC_TRANSFER || !(r->flags & P2PG_REC_F_TIMED) || r->gpu_ns == 0)
		return false;
	struct p2pg_record before = *r;
	before.gpu_ns = 0;
	return crc == p2pg_spool_record_crc(&before, seq);
}

/*
 * Publishes a record, its checksum beside it. Returns the record's sequence number;
 * P2PG_SEQ_FOLDED when the ring was full and a successful transfer (or finished NCCL operation)
 * was folded into the aggregates instead; UINT64_MAX when it was lost (counted as dropped): a ring
 * full up to its last slot, or aggregates full too.
 */
static inline uint64_t p2pg_spool_put(struct p2pg_spool_layout *spool, int fd,
				      struct p2pg_spool_thread *t, const struct p2pg_record *r)
{
	uint64_t head = atomic_load_explicit(&t->head, memory_order_relaxed);
	uint64_t tail = atomic_load_explicit(&t->tail, memory_order_acquire);
	uint64_t in_file = atomic_load_explicit(&t->records_in_file, memory_order_relaxed);
	if (__builtin_expect(head + P2PG_SPOOL_RESERVE >= in_file, 0))
		in_file = p2pg_spool_ring_grow(spool, fd, t);
	/* A finished NCCL operation folds like a transfer: src/record/nccl_codes.h maps its
	 * communicator, function, peer and algorithm onto the aggregate's key. */
	bool foldable =
	    (r->kind == P2PG_REC_TRANSFER || r->kind == P2PG_REC_NCCL_OP) && r->status == 0;
	uint64_t keep = foldable ? P2PG_SPOOL_RESERVE : 0;
	/* Full: the ring's own room, or the slots with blocks when the disk refused more. */
	if (head - tail >= P2PG_SPOOL_RING - keep || head + keep >= in_file) {
		if (foldable && p2pg_spool_fold(t, r))
			return P2PG_SEQ_FOLDED;
		atomic_fetch_add_explicit(&t->dropped, 1, memory_order_relaxed);
		return UINT64_MAX;
	}
	t->rec[head & (P2PG_SPOOL_RING - 1)] = *r;
	t->crc[head & (P2PG_SPOOL_RING - 1)] = p2pg_spool_record_crc(r, head);
	atomic_store_explicit(&t->head, head + 1, memory_order_release);
	return head;
}
