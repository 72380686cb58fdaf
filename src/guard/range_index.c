/* SPDX-License-Identifier: MIT */
#include "range_index.h"

#include <stdatomic.h>
#include <stdlib.h>

#define READ_TRIES 4

/* reach: the largest end among this entry and every one before it, so that a search can tell
 * where no earlier range can hold the pointer (ranges may overlap: a stale one never unmapped). */
struct index_entry {
	_Atomic uint64_t base, end, reach;
	_Atomic uint32_t slot;
};

static struct index_entry entries[P2PG_RANGE_INDEX_MAX];
static _Atomic uint32_t count;
static _Atomic uint32_t seq; /* odd while a writer holds the index */
static _Atomic bool stale;   /* a writer changed the table while another held the index */
static _Atomic(p2pg_range_source) source;
/* The holder's room for a rebuild. */
static struct p2pg_range_entry scratch[P2PG_RANGE_INDEX_MAX];

void p2pg_range_index_init(p2pg_range_source from)
{
	atomic_store(&source, from);
}

static void put(uint32_t i, uint64_t base, uint64_t end, uint32_t slot)
{
	atomic_store_explicit(&entries[i].base, base, memory_order_relaxed);
	atomic_store_explicit(&entries[i].end, end, memory_order_relaxed);
	atomic_store_explicit(&entries[i].slot, slot, memory_order_relaxed);
}

static void move(uint32_t to, uint32_t from)
{
	put(to, atomic_load_explicit(&entries[from].base, memory_order_relaxed),
	    atomic_load_explicit(&entries[from].end, memory_order_relaxed),
	    atomic_load_explicit(&entries[from].slot, memory_order_relaxed));
}

static void recompute_reach(uint32_t from, uint32_t n)
{
	uint64_t reach =
	    from ? atomic_load_explicit(&entries[from - 1].reach, memory_order_relaxed) : 0;
	for (uint32_t i = from; i < n; i++) {
		uint64_t end = atomic_load_explicit(&entries[i].end, memory_order_relaxed);
		if (end > reach)
			reach = end;
		atomic_store_explicit(&entries[i].reach, reach, memory_order_relaxed);
	}
}

static int by_base(const void *a, const void *b)
{
	uint64_t x = ((const struct p2pg_range_entry *)a)->base;
	uint64_t y = ((const struct p2pg_range_entry *)b)->base;
	return (x > y) - (x < y);
}

static void rebuild(void)
{
	p2pg_range_source from = atomic_load(&source);
	int n = from ? from(scratch, P2PG_RANGE_INDEX_MAX) : 0;
	if (n < 0)
		n = 0;
	qsort(scratch, (size_t)n, sizeof(scratch[0]), by_base);
	for (int i = 0; i < n; i++)
		put((uint32_t)i, scratch[i].base, scratch[i].end, scratch[i].slot);
	recompute_reach(0, (uint32_t)n);
	atomic_store_explicit(&count, (uint32_t)n, memory_order_relaxed);
}

/* The odd count is an acquire-release read-modify-write, which no later store moves ahead of
 * (mapping_table.c's slots do the same). */
static bool try_hold(void)
{
	uint32_t s = atomic_load_explicit(&seq, memory_order_relaxed);
	return !(s & 1) && atomic_compare_exchange_strong_explicit(
			       &seq, &s, s + 1, memory_order_acq_rel, memory_order_relaxed);
}

/* A writer that marked the index stale while this one held it either sees this one let go (and
 * takes the index itself) or is seen here. */
static void let_go(void)
{
	for (;;) {
		while (atomic_exchange(&stale, false))
			rebuild();
		atomic_fetch_add_explicit(&seq, 1, memory_order_release);
		if (!atomic_load(&stale) || !try_hold())
			return;
	}
}

static void leave_stale(void)
{
	atomic_store(&stale, true);
	if (try_hold())
		let_go();
}

void p2pg_range_index_insert(const struct p2pg_range_entry *e)
{
	if (!try_hold()) {
		leave_stale();
		return;
	}
	uint32_t n = atomic_load_explicit(&count, memory_order_relaxed);
	if (n < P2PG_RANGE_INDEX_MAX) {
		uint32_t at = n;
		while (at > 0 && atomic_load_explicit(&entries[at - 1].base, memory_order_relaxed) >
				     e->base) {
			move(at, at - 1);
			at--;
		}
		put(at, e->base, e->end, e->slot);
		recompute_reach(at, n + 1);
		atomic_store_explicit(&count, n + 1, memory_order_relaxed);
	} else {
		atomic_store(&stale, true); /* not the table's picture: rebuilt from it */
	}
	let_go();
}

void p2pg_range_index_remove(uint32_t slot)
{
	if (!try_hold()) {
		leave_stale();
		return;
	}
	uint32_t n = atomic_load_explicit(&count, memory_order_relaxed);
	uint32_t at = 0;
	while (at < n && atomic_load_explicit(&entries[at].slot, memory_order_relaxed) != slot)
		at++;
	if (at < n) {
		for (uint32_t i = at; i + 1 < n; i++)
			move(i, i + 1);
		recompute_reach(at, n - 1);
		atomic_store_explicit(&count, n - 1, memory_order_relaxed);
	}
	let_go();
}

/* Readers load with acquire (no fences: ThreadSanitizer does not follow them), so that the
 * counter's second read comes after every field read. */
static uint64_t field(const _Atomic uint64_t *v)
{
	return atomic_load_explicit(v, memory_order_acquire);
}

int p2pg_range_index_find(uint64_t p)
{
	for (int tries = 0; tries < READ_TRIES; tries++) {
		uint32_t before = atomic_load_explicit(&seq, memory_order_acquire);
		if (before & 1)
			return P2PG_RANGE_ASK_TABLE;
		uint32_t n = atomic_load_explicit(&count, memory_order_acquire);
		if (n > P2PG_RANGE_INDEX_MAX)
			n = P2PG_RANGE_INDEX_MAX;
		/* The first entry starting past p; the one before it starts last at or before. */
		uint32_t lo = 0, hi = n;
		while (lo < hi) {
			uint32_t mid = lo + (hi - lo) / 2;
			if (field(&entries[mid].base) <= p)
				lo = mid + 1;
			else
				hi = mid;
		}
		int found = P2PG_RANGE_NONE;
		for (uint32_t i = lo; i > 0 && field(&entries[i - 1].reach) > p; i--) {
			if (field(&entries[i - 1].end) > p && field(&entries[i - 1].base) <= p) {
				found = (int)atomic_load_explicit(&entries[i - 1].slot,
								  memory_order_acquire);
				break;
			}
		}
		if (atomic_load_explicit(&seq, memory_order_relaxed) == before)
			return found;
	}
	return P2PG_RANGE_ASK_TABLE;
}

void p2pg_range_index_after_fork_child(void)
{
	uint32_t s = atomic_load(&seq);
	if (!(s & 1) && !atomic_load(&stale))
		return;
	rebuild();
	atomic_store(&stale, false);
	atomic_store(&seq, (s + 1) & ~1u);
}

void p2pg_range_index_reset(void)
{
	atomic_store(&count, 0);
	atomic_store(&seq, 0);
	atomic_store(&stale, false);
}
