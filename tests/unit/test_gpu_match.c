/* SPDX-License-Identifier: MIT */
/*
 * Pairing rows of asynchronous peer copies with the GPU's records of them: in stream order, never
 * lending a foreign copy's time to a row, never stalling on a row whose copy left no record.
 */
#include <stdlib.h>

#include "gpu_match.h"
#include "tap.h"

#define MAXROWS 64
static uint64_t got[MAXROWS]; /* gpu_ns by row */
static size_t pairs_seen;

static void found(void *arg, const struct p2pg_gpu_row *r, uint64_t gpu_ns)
{
	(void)arg;
	int64_t row = r->row;
	if (row >= 0 && row < MAXROWS)
		got[row] = gpu_ns;
	pairs_seen++;
}

static void reset(void)
{
	for (size_t k = 0; k < MAXROWS; k++)
		got[k] = 0;
	pairs_seen = 0;
}

static void row(struct p2pg_gpu_match *m, int64_t id, uint32_t stream, uint64_t t, uint64_t bytes)
{
	struct p2pg_gpu_row r = {.row = id,
				 .started_ns = t,
				 .bytes = bytes,
				 .stream_id = stream,
				 .src_device = 0,
				 .dst_device = 1};
	p2pg_gpu_match_row(m, &r);
}

static void copy(struct p2pg_gpu_match *m, uint32_t stream, uint64_t start, uint64_t end,
		 uint64_t bytes)
{
	struct p2pg_gpu_copy c = {.start_ns = start,
				  .end_ns = end,
				  .bytes = bytes,
				  .stream_id = stream,
				  .src_device = 0,
				  .dst_device = 1,
				  .has_time = true};
	p2pg_gpu_match_copy(m, &c);
}

int main(void)
{
	struct p2pg_gpu_match *m = p2pg_gpu_match_new();
	CHECK(m != NULL, "a matcher");

	/* In order, two streams interleaved, records arriving before or after their rows. */
	reset();
	row(m, 1, 7, 100, 256);
	copy(m, 8, 150, 170, 4096);
	row(m, 2, 8, 110, 4096);
	copy(m, 7, 120, 125, 256);
	row(m, 3, 7, 130, 256);
	CHECK(p2pg_gpu_match_run(m, 200, 1000, found, NULL) == 2, "two pairs so far");
	CHECK(got[1] == 5 && got[2] == 20, "each row has its own copy's time");
	copy(m, 7, 140, 149, 256);
	CHECK(p2pg_gpu_match_run(m, 200, 1000, found, NULL) == 1 && got[3] == 9,
	      "a record that comes later finds its row");
	CHECK(p2pg_gpu_match_rows_waiting(m) == 0 && p2pg_gpu_match_copies_waiting(m) == 0,
	      "nothing left waiting");

	/* A foreign copy ahead of the row's own (a graph node, a copy the guard did not see). */
	reset();
	row(m, 4, 7, 300, 256);
	copy(m, 7, 290, 295, 256); /* over before the call began */
	copy(m, 7, 301, 310, 65536);
	copy(m, 7, 311, 313, 256);
	CHECK(p2pg_gpu_match_run(m, 400, 1000, found, NULL) == 1 && got[4] == 2,
	      "foreign copies lend nothing; the row gets its own");

	/* A row whose copy leaves no record does not hold the stream up. */
	reset();
	row(m, 5, 7, 500, 1 << 20); /* e.g. staged by the driver: no peer record */
	row(m, 6, 7, 510, 256);
	copy(m, 7, 520, 524, 256);
	CHECK(p2pg_gpu_match_run(m, 600, 1000, found, NULL) == 1 && got[6] == 4 && got[5] == 0,
	      "the later row is paired, the recordless one keeps no time");

	/* A row whose record may still come waits, then ages out. */
	reset();
	row(m, 7, 9, 700, 256);
	copy(m, 9, 705, 800, 512); /* not its size; no later row it could be */
	CHECK(p2pg_gpu_match_run(m, 900, 1000, found, NULL) == 0, "nothing paired while in doubt");
	CHECK(p2pg_gpu_match_rows_waiting(m) == 1, "the row waits");
	CHECK(p2pg_gpu_match_run(m, 5000, 1000, found, NULL) == 0 &&
		  p2pg_gpu_match_rows_waiting(m) == 0 && p2pg_gpu_match_copies_waiting(m) == 0,
	      "both age out, unpaired");

	/* A row let go unpaired may still have its record coming: the stream pairs nothing more,
	 * rather than give the next row that record's time. */
	reset();
	row(m, 20, 12, 10000, 256);
	row(m, 21, 12, 10010, 256);
	CHECK(p2pg_gpu_match_run(m, 20000, 1000, found, NULL) == 0, "rows blocked past the age");
	copy(m, 12, 30000, 30005, 256); /* row 20's, late */
	copy(m, 12, 30006, 30013, 256); /* row 21's */
	row(m, 22, 12, 30020, 256);
	copy(m, 12, 30030, 30032, 256);
	CHECK(p2pg_gpu_match_run(m, 30100, 1000, found, NULL) == 0 && got[21] == 0 && got[22] == 0,
	      "after a row was let go, its stream lends no time to any later row");

	/* Stream IDs are unique only within a context: the same ID in two contexts is two streams.
	 */
	reset();
	struct p2pg_gpu_row ra = {.row = 30,
				  .started_ns = 40000,
				  .bytes = 256,
				  .context_id = 1,
				  .stream_id = 5,
				  .src_device = 0,
				  .dst_device = 1};
	struct p2pg_gpu_row rb = ra;
	rb.row = 31;
	rb.context_id = 2;
	struct p2pg_gpu_copy cb = {.start_ns = 40010,
				   .end_ns = 40017,
				   .bytes = 256,
				   .has_time = true,
				   .context_id = 2,
				   .stream_id = 5,
				   .src_device = 0,
				   .dst_device = 1};
	p2pg_gpu_match_row(m, &ra);
	p2pg_gpu_match_row(m, &rb);
	p2pg_gpu_match_copy(m, &cb);
	CHECK(p2pg_gpu_match_run(m, 40100, 100000, found, NULL) == 1 && got[31] == 7 &&
		  got[30] == 0,
	      "a copy in context 2 goes to context 2's row, not to context 1's");

	/* Devices must agree. */
	reset();
	row(m, 8, 7, 6000, 256);
	struct p2pg_gpu_copy other = {.start_ns = 6010,
				      .end_ns = 6012,
				      .bytes = 256,
				      .stream_id = 7,
				      .src_device = 1,
				      .dst_device = 0,
				      .has_time = true};
	p2pg_gpu_match_copy(m, &other);
	CHECK(p2pg_gpu_match_run(m, 6100, 1000, found, NULL) == 0 && got[8] == 0,
	      "a copy the other way is not the row's");

	/* A record handed over before its copy finished keeps its place but gives no time. */
	reset();
	row(m, 9, 11, 7000, 256);
	row(m, 10, 11, 7010, 256);
	struct p2pg_gpu_copy early = {.start_ns = 7100,
				      .end_ns = 7100,
				      .bytes = 256,
				      .stream_id = 11,
				      .src_device = 0,
				      .dst_device = 1,
				      .has_time = false};
	p2pg_gpu_match_copy(m, &early);
	copy(m, 11, 7020, 7029, 256);
	CHECK(p2pg_gpu_match_run(m, 7200, 1000, found, NULL) == 1 && got[9] == 0 && got[10] == 9,
	      "the row of a record without time keeps none, the next row gets its own");

	/* Many in order. */
	reset();
	p2pg_gpu_match_free(m);
	m = p2pg_gpu_match_new();
	for (int k = 0; k < 50; k++)
		row(m, k + 10, 3, 10000 + (uint64_t)k * 10, 256);
	for (int k = 0; k < 50; k++)
		copy(m, 3, 10005 + (uint64_t)k * 10, 10005 + (uint64_t)k * 10 + (uint64_t)k % 7 + 1,
		     256);
	CHECK(p2pg_gpu_match_run(m, 20000, 100000, found, NULL) == 50, "50 pairs");
	int right = 0;
	for (int k = 0; k < 50 && k + 10 < MAXROWS; k++)
		right += got[k + 10] == (uint64_t)(k % 7 + 1);
	CHECK(right == (MAXROWS - 10 < 50 ? MAXROWS - 10 : 50), "each in its order");
	p2pg_gpu_match_free(m);
	return TAP_DONE();
}
