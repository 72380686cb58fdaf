/* SPDX-License-Identifier: MIT */
/*
 * The guard's tables of mappings (src/guard/mapping_table.h): what is added is found, references
 * are counted, removal is exact and happens once, a full table refuses without harm; and under
 * threads that add, look up, retain, release and remove at once, no reader ever sees a torn entry
 * and every entry is removed exactly once (run under ThreadSanitizer by scripts/tsan.sh).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "mapping_table.h"
#include "tap.h"

#define THREADS 8
#define ROUNDS	20000

static _Atomic int torn, removed_twice, lost, missed;

/* Each thread owns its own ranges (bases that encode the thread and the round), and reads all. */
static void *worker(void *arg)
{
	uint64_t id = (uint64_t)(uintptr_t)arg;
	for (int k = 0; k < ROUNDS; k++) {
		uint64_t base = (id + 1) << 40 | (uint64_t)k << 16;
		struct p2pg_map_range r = {.base = base,
					   .size = 4096,
					   .owner = (int)id,
					   .access = 1u << id,
					   .mapping_id = (uint32_t)(base >> 16),
					   .refs = 1};
		if (!p2pg_map_ranges_add(&r))
			continue;
		struct p2pg_map_range seen;
		/* An entry read back is whole: its fields all derive from its base. */
		if (!p2pg_map_ranges_find(base + 100, &seen))
			atomic_fetch_add(&missed, 1);
		else if ((seen.base != base || seen.owner != (int)id ||
			  seen.mapping_id != (uint32_t)(base >> 16)))
			atomic_fetch_add(&torn, 1);
		/* Someone else's entry, whatever it is, is whole too. */
		uint64_t other = ((id + 1) % THREADS + 1) << 40 | (uint64_t)k << 16;
		if (p2pg_map_ranges_find(other, &seen) &&
		    (seen.mapping_id != (uint32_t)(seen.base >> 16) ||
		     (uint64_t)(seen.owner + 1) << 40 != (seen.base & ~((1ull << 40) - 1))))
			atomic_fetch_add(&torn, 1);
		struct p2pg_map_range got[2];
		int n = k & 1 ? p2pg_map_ranges_put(base, &got[0])
			      : p2pg_map_ranges_take(base, 4096, got, 2);
		if (n != 1)
			atomic_fetch_add(&lost, 1);
		if (p2pg_map_ranges_put(base, &got[1]) != -1)
			atomic_fetch_add(&removed_twice, 1);

		struct p2pg_map_handle h = {
		    .handle = base, .owner = (int)id, .mapping_id = (uint32_t)k};
		if (!p2pg_map_handles_add(&h))
			continue;
		p2pg_map_handles_retain(base);
		struct p2pg_map_handle out;
		if (p2pg_map_handles_release(base, &out) != 0 ||
		    p2pg_map_handles_release(base, &out) != 1 || out.handle != base ||
		    out.owner != (int)id)
			atomic_fetch_add(&lost, 1);
		if (p2pg_map_handles_release(base, &out) != -1)
			atomic_fetch_add(&removed_twice, 1);
	}
	return NULL;
}

int main(void)
{
	struct p2pg_map_range r = {.base = 0x1000,
				   .size = 0x2000,
				   .owner = 1,
				   .access = 1,
				   .mapping_id = 7,
				   .handle_type = 1,
				   .cross_process = true,
				   .refs = 1};
	struct p2pg_map_range out[4];
	CHECK(p2pg_map_ranges_live() == 0, "empty at start");
	CHECK(p2pg_map_ranges_add(&r), "a range is added");
	CHECK(p2pg_map_ranges_find(0x2fff, out) && out[0].mapping_id == 7 && out[0].cross_process,
	      "it is found by an address inside it");
	CHECK(!p2pg_map_ranges_find(0x3000, out), "not by the address just past it");
	CHECK(p2pg_map_ranges_get(0x1000, out) && out[0].refs == 2, "a second reference");
	CHECK(p2pg_map_ranges_put(0x1000, out) == 0 && out[0].refs == 1, "one put leaves it live");
	p2pg_map_ranges_grant(0x1800, 16, 1u << 3);
	CHECK(p2pg_map_ranges_find(0x1000, out) && out[0].access == (1u | 1u << 3),
	      "access granted over an overlapping range");
	CHECK(p2pg_map_ranges_owners_reached(1u << 3) == 1u << 1,
	      "device 3 reaches device 1's memory");
	CHECK(p2pg_map_ranges_put(0x1000, out) == 1 && out[0].base == 0x1000,
	      "the last put removes it");
	CHECK(p2pg_map_ranges_put(0x1000, out) == -1 && p2pg_map_ranges_live() == 0,
	      "and only once");

	r.size = 0x1000;
	for (uint64_t k = 0; k < 3; k++) {
		r.base = 0x10000 + k * 0x1000;
		p2pg_map_ranges_add(&r);
	}
	CHECK(p2pg_map_ranges_take(0x10800, 0x1000, out, 4) == 2 && p2pg_map_ranges_live() == 1,
	      "take removes the ranges an unmap overlaps, and no other");
	CHECK(p2pg_map_ranges_take(0, UINT64_MAX / 2, out, 4) == 1, "the last one");

	int added = 0;
	for (uint64_t k = 0; k < P2PG_MAP_RANGES + 5; k++) {
		r.base = (k + 1) << 20;
		added += p2pg_map_ranges_add(&r);
	}
	CHECK(added == P2PG_MAP_RANGES, "a full table refuses more (%d added)", added);
	CHECK(p2pg_map_ranges_take(0, UINT64_MAX / 2, out, 4) == 4, "take stops at max");
	p2pg_map_tables_reset();

	/* Found by address among many, added out of order (the sorted index), with the gaps
	 * between them and the addresses around them in none. */
	int wrong = 0;
	for (uint64_t k = 0; k < 1000; k++) {
		r.base = ((k * 7919) % 1000 + 1) << 21;
		r.size = 1 << 20;
		r.mapping_id = (uint32_t)(r.base >> 21);
		p2pg_map_ranges_add(&r);
	}
	for (uint64_t k = 1; k <= 1000; k++) {
		uint64_t base = k << 21;
		wrong += !p2pg_map_ranges_find(base, out) || out[0].mapping_id != k;
		wrong += !p2pg_map_ranges_find(base + (1 << 20) - 1, out) || out[0].base != base;
		wrong += p2pg_map_ranges_find(base + (1 << 20), out);
		wrong += p2pg_map_ranges_find(base - 1, out);
	}
	CHECK(wrong == 0,
	      "1000 ranges: each found by its first and last byte, none in a gap (%d "
	      "wrong)",
	      wrong);
	for (uint64_t k = 1; k <= 1000; k += 2)
		p2pg_map_ranges_take(k << 21, 1, out, 1);
	wrong = 0;
	for (uint64_t k = 1; k <= 1000; k++)
		wrong += p2pg_map_ranges_find((k << 21) + 5, out) != (k % 2 == 0);
	CHECK(wrong == 0 && p2pg_map_ranges_live() == 500,
	      "half taken out: only the other half found (%d wrong)", wrong);
	p2pg_map_tables_reset();

	/* A range inside a larger one (a stale range never unmapped, then a new one): the one
	 * starting last answers inside it, the larger one past its end. */
	r.base = 0x100000, r.size = 0x200000, r.mapping_id = 1;
	p2pg_map_ranges_add(&r);
	r.base = 0x180000, r.size = 0x80000, r.mapping_id = 2;
	p2pg_map_ranges_add(&r);
	r.base = 0x400000, r.size = 0x1000, r.mapping_id = 3;
	p2pg_map_ranges_add(&r);
	CHECK(p2pg_map_ranges_find(0x190000, out) && out[0].mapping_id == 2,
	      "nested: the inner range inside it");
	CHECK(p2pg_map_ranges_find(0x250000, out) && out[0].mapping_id == 1,
	      "nested: the outer range past the inner one's end");
	CHECK(p2pg_map_ranges_find(0x400fff, out) && out[0].mapping_id == 3 &&
		  !p2pg_map_ranges_find(0x300000, out),
	      "and the next range, with the gap before it in none");
	p2pg_map_tables_reset();

	struct p2pg_map_handle h = {.handle = 0xabc, .owner = 2, .mapping_id = 9, .handle_type = 2};
	struct p2pg_map_handle hout;
	CHECK(p2pg_map_handles_add(&h) && p2pg_map_handles_find(0xabc, &hout) &&
		  hout.mapping_id == 9,
	      "an imported handle is found");
	CHECK(!p2pg_map_handles_find(0xabd, &hout), "another is not");
	CHECK(p2pg_map_handles_retain(0xabc), "retained");
	CHECK(p2pg_map_handles_release(0xabc, &hout) == 0, "the first release leaves it");
	CHECK(p2pg_map_handles_release(0xabc, &hout) == 1 && hout.owner == 2,
	      "the last one ends it");
	CHECK(p2pg_map_handles_release(0xabc, &hout) == -1 && !p2pg_map_handles_retain(0xabc),
	      "then it is unknown");
	added = 0;
	for (uint64_t k = 0; k < P2PG_MAP_HANDLES + 3; k++) {
		h.handle = 0x1000 + k;
		added += p2pg_map_handles_add(&h);
	}
	CHECK(added == P2PG_MAP_HANDLES, "a full handle table refuses more (%d)", added);
	CHECK(p2pg_map_handles_find(0x1000 + P2PG_MAP_HANDLES - 1, &hout),
	      "and still finds the last");
	p2pg_map_tables_reset();

	pthread_t t[THREADS];
	for (uintptr_t k = 0; k < THREADS; k++)
		pthread_create(&t[k], NULL, worker, (void *)k);
	for (int k = 0; k < THREADS; k++)
		pthread_join(t[k], NULL);
	CHECK(atomic_load(&torn) == 0, "%d threads: no torn entry read (%d)", THREADS,
	      atomic_load(&torn));
	CHECK(atomic_load(&missed) == 0, "each thread finds its own live range (%d missed)",
	      atomic_load(&missed));
	CHECK(atomic_load(&lost) == 0, "every entry removed by its owner (%d lost)",
	      atomic_load(&lost));
	CHECK(atomic_load(&removed_twice) == 0, "none removed twice");
	CHECK(p2pg_map_ranges_live() == 0, "the table is empty again");
	return TAP_DONE();
}
