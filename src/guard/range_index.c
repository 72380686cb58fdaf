/* SPDX-License-Identifier: MIT */
#include "range_index.h"

#include <stdatomic.h>

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
	atomic_store_explicit(&entries[i].base, base, memory_order_release);
	atomic_store_explicit(&entries[i].end, end, memory_order_release);
	atomic_store_explicit(&entries[i].slot, slot, memory_order_release);
}

static struct p2pg_range_entry entry_at(uint32_t i);

static void move(uint32_t to, uint32_t from)
{
	struct p2pg_range_entry e = entry_at(from);
	put(to, e.base, e.end, e.slot);
}

static void recompute_reach(uint32_t from, uint32_t n)
{
	uint64_t reach =
	    from ? atomic_load_explicit(&entries[from - 1].reach, memory_order_relaxed) : 0;
	for (uint32_t i = from; i < n; i++) {
		uint64_t end = atomic_load_explicit(&entries[i].end, memory_order_relaxed);
		if (end > reach)
			reach = end;
		atomic_store_explicit(&entries[i].reach, reach, memory_order_release);
	}
}

/* By base, then by slot: ranges that start together keep one order, whoever built the index. */
static int by_base(const void *a, const void *b)
{
	const struct p2pg_range_entry *x = a, *y = b;
	if (x->base != y->base)
		return (x->base > y->base) - (x->base < y->base);
	return (x->slot > y->slot) - (x->slot < y->slot);
}

static struct p2pg_range_entry entry_at(uint32_t i)
{
	return (struct p2pg_range_entry){
	    .base = atomic_load_explicit(&entries[i].base, memory_order_relaxed),
	    .end = atomic_load_explicit(&entries[i].end, memory_order_relaxed),
	    .slot = atomic_load_explicit(&entries[i].slot, memory_order_relaxed)};
}

static void rebuild(void)
{
	p2pg_range_source from = atomic_load(&source);
	int n = from ? from(scratch, P2PG_RANGE_INDEX_MAX) : 0;
	if (n < 0)
		n = 0;
	/* Shell sort in place: qsort may allocate, and this runs in a forked child too. */
	for (int gap = n / 2; gap > 0; gap /= 2)
		for (int i = gap; i < n; i++) {
			struct p2pg_range_entry e = scratch[i];
			int j = i;
			for (; j >= gap && by_base(&scratch[j - gap], &e) > 0; j -= gap)
				scratch[j] = scratch[j - gap];
			scratch[j] = e;
		}
	for (int i = 0; i < n; i++)
		put((uint32_t)i, scratch[i].base, scratch[i].end, scratch[i].slot);
	recompute_reach(0, (uint32_t)n);
	atomic_store_explicit(&count, (uint32_t)n, memory_order_release);
}

/* Sequentially consistent: a writer's "stale" store then its look at seq, against the holder's
 * seq increment then its look at "stale", must not both read the old values (either the writer
 * takes the index or the holder sees the mark). The entries are written with release stores, so
 * that a reader who sees any of them sees the odd count too. */
static bool try_hold(void)
{
	uint32_t s = atomic_load_explicit(&seq, memory_order_seq_cst);
	return !(s & 1) && atomic_compare_exchange_strong_explicit(
			       &seq, &s, s + 1, memory_order_seq_cst, memory_order_seq_cst);
}

/* A writer that marked the index stale while this one held it either sees this one let go (and
 * takes the index itself) or is seen here. */
static void let_go(void)
{
	for (;;) {
		while (atomic_exchange(&stale, false))
			rebuild();
		atomic_fetch_add_explicit(&seq, 1, memory_order_seq_cst);
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
	/* A rebuild between the slot's going live and this insert has it already. */
	int there =
	    0; /* 1: the same range; -1: another range under that slot, which a rebuild mends */
	for (uint32_t i = 0; i < n && !there; i++) {
		struct p2pg_range_entry got = entry_at(i);
		if (got.slot == e->slot)
			there = got.base == e->base && got.end == e->end ? 1 : -1;
	}
	if (there) {
		if (there < 0)
			atomic_store(&stale, true);
	} else if (n < P2PG_RANGE_INDEX_MAX) {
		uint32_t at = n;
		for (struct p2pg_range_entry prev;
		     at > 0 && (prev = entry_at(at - 1), by_base(&prev, e) > 0); at--)
			move(at, at - 1);
		put(at, e->base, e->end, e->slot);
		recompute_reach(at, n + 1);
		atomic_store_explicit(&count, n + 1, memory_order_release);
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
		atomic_store_explicit(&count, n - 1, memory_order_release);
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
		if ((before & 1) || atomic_load_explicit(&stale, memory_order_acquire))
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
	/* Always: a thread of the parent may have made a slot live and not inserted it yet. */
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
