/* SPDX-License-Identifier: MIT */
/*
 * Pairs the guard's rows of asynchronous peer copies with the GPU's own records of them (CUPTI
 * activity records in P2PGUARD_GPU_TIMING=cupti), which name no call: only a stream, sizes,
 * devices and times.
 *
 * On one stream copies run in the order they were enqueued, and CUPTI delivers a stream's records
 * in that order too, so each stream's rows and records are two queues matched front to front.
 * A record that is not the guard's (a copy the guard does not see: a graph's memcpy node, a
 * synchronous copy on the same stream, a copy made before the guard watched) must not lend its
 * time to a row, and a row whose copy leaves no record (the driver staging it without P2P) must
 * not hold the queue up. So a pair is accepted only when bytes and devices agree and the copy did
 * not end before its call began; otherwise the earlier of the two is let go. When in doubt a row
 * keeps no GPU time rather than a wrong one.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct p2pg_gpu_row {
	int64_t row;	 /* transfers.id */
	uint32_t serial; /* its record: transfers.thread_serial and seq */
	uint64_t seq;
	uint64_t started_ns; /* CLOCK_REALTIME at the call's start */
	uint64_t bytes;
	uint32_t context_id, stream_id; /* CUPTI's (the context's low 16 bits suffice) */
	int16_t src_device, dst_device;
};

struct p2pg_gpu_copy {
	/* CLOCK_REALTIME, converted by CUPTI from GPU timestamps. Without has_time (the record was
	 * handed over before the copy finished) both hold when it was handed over. */
	uint64_t start_ns, end_ns;
	bool has_time;
	uint64_t bytes;
	uint32_t context_id, stream_id;
	int16_t src_device, dst_device;
};

struct p2pg_gpu_match;

struct p2pg_gpu_match *p2pg_gpu_match_new(void);
void p2pg_gpu_match_free(struct p2pg_gpu_match *m);

/* Queue a row, or a record. false: out of memory (the item is not queued). */
bool p2pg_gpu_match_row(struct p2pg_gpu_match *m, const struct p2pg_gpu_row *r);
bool p2pg_gpu_match_copy(struct p2pg_gpu_match *m, const struct p2pg_gpu_copy *c);

/*
 * Pairs what can be paired; calls found(arg, row, gpu_ns) for each pair with a time (a record
 * without one is paired with its row, which then keeps no time). Items older than max_age_ns (by
 * now_ns: rows by their call's start, records by their end) that found no partner are let go.
 * Returns the number of pairs.
 */
size_t p2pg_gpu_match_run(struct p2pg_gpu_match *m, uint64_t now_ns, uint64_t max_age_ns,
			  void (*found)(void *arg, const struct p2pg_gpu_row *row, uint64_t gpu_ns),
			  void *arg);

/* The database the rows are in was replaced: every row waiting keeps its place in its stream's
 * queue (so that the records still pair in order) but is written nowhere (found() gets row 0). */
void p2pg_gpu_match_forget_rows(struct p2pg_gpu_match *m);

/* Rows and records still waiting (for the tests and the drainer's bookkeeping). */
size_t p2pg_gpu_match_rows_waiting(const struct p2pg_gpu_match *m);
size_t p2pg_gpu_match_copies_waiting(const struct p2pg_gpu_match *m);
