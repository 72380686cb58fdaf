/* SPDX-License-Identifier: MIT */
#include "mapping_table.h"

#include "range_index.h"

#include <stdatomic.h>
#include <string.h>

/*
 * A slot's life: FREE -> BUSY (one writer won it) -> LIVE -> BUSY (one remover won it) -> FREE
 * (ranges) or GONE (handles: a tombstone, so that a probe chain stays unbroken). Whoever holds a
 * slot BUSY is its only writer; it makes the sequence counter odd while it writes. A reader copies
 * the fields between two even, equal reads of the counter.
 */
enum { SLOT_FREE, SLOT_BUSY, SLOT_LIVE, SLOT_GONE };

#define READ_TRIES 64

/* No fences (ThreadSanitizer does not follow them): a writer makes the count odd, then writes
 * the fields with release stores, so that a reader whose acquire load sees any of them sees the
 * odd count too (an atomic read-modify-write alone does not order the stores after it); the even
 * count is a release. Readers load the fields with acquire, which no later load (the counter
 * again) moves ahead of. */
static void begin_write(_Atomic uint32_t *seq)
{
	atomic_fetch_add_explicit(seq, 1, memory_order_acq_rel);
}

static void end_write(_Atomic uint32_t *seq)
{
	atomic_fetch_add_explicit(seq, 1, memory_order_release);
}

/* Adds delta (+1 or -1) to a reference count that has not reached 0: 0 is final, whoever took
 * the last reference removes the entry. Returns the count before, or 0 when it was 0 already. */
static uint32_t add_ref(_Atomic uint32_t *refs, int delta)
{
	uint32_t was = atomic_load_explicit(refs, memory_order_relaxed);
	do {
		if (was == 0)
			return 0;
	} while (!atomic_compare_exchange_weak_explicit(
	    refs, &was, was + (uint32_t)delta, memory_order_acq_rel, memory_order_relaxed));
	return was;
}

/* ---- address ranges ---- */

struct range_slot {
	_Atomic uint32_t state;
	_Atomic uint32_t seq;
	_Atomic uint64_t base, size;
	_Atomic int32_t owner;
	_Atomic uint32_t access, mapping_id, refs;
	_Atomic uint32_t kind; /* handle_type | cross_process << 8 */
};

static struct range_slot ranges[P2PG_MAP_RANGES];
static _Atomic int ranges_high; /* no live slot at or above it */
static _Atomic int ranges_live;
/* Every live range lies in [span_lo, span_hi): an address outside (a process's own memory, in
 * reservations of its own) needs no search. Only ever widened: a shrink could race an add. */
static _Atomic uint64_t span_lo = UINT64_MAX, span_hi;

static void range_store(struct range_slot *s, const struct p2pg_map_range *r)
{
	begin_write(&s->seq);
	atomic_store_explicit(&s->base, r->base, memory_order_release);
	atomic_store_explicit(&s->size, r->size, memory_order_release);
	atomic_store_explicit(&s->owner, r->owner, memory_order_release);
	atomic_store_explicit(&s->access, r->access, memory_order_release);
	atomic_store_explicit(&s->mapping_id, r->mapping_id, memory_order_release);
	atomic_store_explicit(&s->refs, r->refs, memory_order_release);
	atomic_store_explicit(&s->kind, r->handle_type | (uint32_t)r->cross_process << 8,
			      memory_order_release);
	end_write(&s->seq);
}

static void range_copy(struct range_slot *s, struct p2pg_map_range *r)
{
	r->base = atomic_load_explicit(&s->base, memory_order_acquire);
	r->size = atomic_load_explicit(&s->size, memory_order_acquire);
	r->owner = atomic_load_explicit(&s->owner, memory_order_acquire);
	r->access = atomic_load_explicit(&s->access, memory_order_acquire);
	r->mapping_id = atomic_load_explicit(&s->mapping_id, memory_order_acquire);
	r->refs = atomic_load_explicit(&s->refs, memory_order_acquire);
	uint32_t kind = atomic_load_explicit(&s->kind, memory_order_acquire);
	r->handle_type = (uint8_t)kind;
	r->cross_process = (kind >> 8) & 1;
}

/* A consistent copy of a live slot; false when it is not live (or kept changing). */
static bool range_read(struct range_slot *s, struct p2pg_map_range *r)
{
	for (int tries = 0; tries < READ_TRIES; tries++) {
		uint32_t before = atomic_load_explicit(&s->seq, memory_order_acquire);
		if (before & 1)
			continue;
		if (atomic_load_explicit(&s->state, memory_order_acquire) != SLOT_LIVE)
			return false;
		range_copy(s, r);
		if (atomic_load_explicit(&s->seq, memory_order_relaxed) == before)
			return true;
	}
	return false;
}

/* Takes a live slot out: the caller won it, so its copy is exact. */
static bool range_remove(struct range_slot *s, struct p2pg_map_range *r)
{
	uint32_t live = SLOT_LIVE;
	if (!atomic_compare_exchange_strong_explicit(&s->state, &live, SLOT_BUSY,
						     memory_order_acq_rel, memory_order_relaxed))
		return false;
	range_copy(s, r);
	p2pg_range_index_remove((uint32_t)(s - ranges));
	begin_write(&s->seq); /* readers that copied it meanwhile retry and find it busy */
	end_write(&s->seq);
	atomic_store_explicit(&s->state, SLOT_FREE, memory_order_release);
	atomic_fetch_sub_explicit(&ranges_live, 1, memory_order_relaxed);
	return true;
}

static void widen_span(uint64_t lo, uint64_t hi)
{
	uint64_t v = atomic_load_explicit(&span_lo, memory_order_relaxed);
	while (lo < v && !atomic_compare_exchange_weak_explicit(
			     &span_lo, &v, lo, memory_order_release, memory_order_relaxed))
		;
	v = atomic_load_explicit(&span_hi, memory_order_relaxed);
	while (hi > v && !atomic_compare_exchange_weak_explicit(
			     &span_hi, &v, hi, memory_order_release, memory_order_relaxed))
		;
}

/* Whether [base, base+size) may meet a live range at all: a few loads, no search. */
static bool may_meet(uint64_t base, uint64_t size)
{
	if (atomic_load_explicit(&ranges_live, memory_order_relaxed) == 0)
		return false;
	return base < atomic_load_explicit(&span_hi, memory_order_acquire) &&
	       base + (size ? size : 1) > atomic_load_explicit(&span_lo, memory_order_acquire);
}

/* A cheap look before a consistent copy: most slots of a search are live but elsewhere. */
static bool slot_may_meet(struct range_slot *s, uint64_t base, uint64_t size)
{
	if (atomic_load_explicit(&s->state, memory_order_relaxed) != SLOT_LIVE)
		return false;
	uint64_t b = atomic_load_explicit(&s->base, memory_order_relaxed);
	uint64_t n = atomic_load_explicit(&s->size, memory_order_relaxed);
	return b < base + (size ? size : 1) && base < b + (n ? n : 1);
}

_Static_assert(P2PG_MAP_RANGES <= P2PG_RANGE_INDEX_MAX, "the index holds every range");

static int ranges_end(void);

/* The index's rebuild reads the table. */
static int live_ranges(struct p2pg_range_entry *out, int max)
{
	int n = 0;
	for (int k = 0, end = ranges_end(); k < end && n < max; k++) {
		struct p2pg_map_range r;
		if (range_read(&ranges[k], &r))
			out[n++] = (struct p2pg_range_entry){.base = r.base,
							     .end = r.base + (r.size ? r.size : 1),
							     .slot = (uint32_t)k};
	}
	return n;
}

bool p2pg_map_ranges_add(const struct p2pg_map_range *r)
{
	for (int k = 0; k < P2PG_MAP_RANGES; k++) {
		struct range_slot *s = &ranges[k];
		uint32_t free_state = SLOT_FREE;
		if (atomic_load_explicit(&s->state, memory_order_relaxed) != SLOT_FREE ||
		    !atomic_compare_exchange_strong_explicit(&s->state, &free_state, SLOT_BUSY,
							     memory_order_acq_rel,
							     memory_order_relaxed))
			continue;
		range_store(s, r);
		widen_span(r->base, r->base + (r->size ? r->size : 1));
		int high = atomic_load_explicit(&ranges_high, memory_order_relaxed);
		while (high < k + 1 &&
		       !atomic_compare_exchange_weak_explicit(
			   &ranges_high, &high, k + 1, memory_order_release, memory_order_relaxed))
			;
		atomic_fetch_add_explicit(&ranges_live, 1, memory_order_relaxed);
		atomic_store_explicit(&s->state, SLOT_LIVE, memory_order_release);
		p2pg_range_index_init(live_ranges);
		p2pg_range_index_insert(
		    &(struct p2pg_range_entry){.base = r->base,
					       .end = r->base + (r->size ? r->size : 1),
					       .slot = (uint32_t)k});
		return true;
	}
	return false;
}

static int ranges_end(void)
{
	return atomic_load_explicit(&ranges_high, memory_order_acquire);
}

/* The slot of the live range starting at base, with its copy. */
static struct range_slot *range_at(uint64_t base, struct p2pg_map_range *r)
{
	if (!may_meet(base, 1))
		return NULL;
	for (int k = 0, end = ranges_end(); k < end; k++)
		if (slot_may_meet(&ranges[k], base, 1) && range_read(&ranges[k], r) &&
		    r->base == base)
			return &ranges[k];
	return NULL;
}

bool p2pg_map_ranges_get(uint64_t base, struct p2pg_map_range *ret)
{
	struct p2pg_map_range r;
	struct range_slot *s = range_at(base, &r);
	if (!s)
		return false;
	uint32_t refs = add_ref(&s->refs, +1);
	if (refs == 0) /* being removed: the caller's open made a new mapping after all */
		return false;
	r.refs = refs + 1;
	*ret = r;
	return true;
}

int p2pg_map_ranges_put(uint64_t base, struct p2pg_map_range *ret)
{
	struct p2pg_map_range r;
	struct range_slot *s = range_at(base, &r);
	if (!s)
		return -1;
	uint32_t refs = add_ref(&s->refs, -1);
	if (refs == 0)
		return -1;
	r.refs = refs - 1;
	*ret = r;
	if (refs > 1)
		return 0;
	/* This put took the last reference: nobody else removes the slot for it. */
	return range_remove(s, ret) ? 1 : -1;
}

static bool overlaps(const struct p2pg_map_range *r, uint64_t base, uint64_t size)
{
	return r->base < base + (size ? size : 1) && base < r->base + (r->size ? r->size : 1);
}

int p2pg_map_ranges_take(uint64_t base, uint64_t size, struct p2pg_map_range *out, int max)
{
	int n = 0;
	if (!may_meet(base, size))
		return 0;
	for (int k = 0, end = ranges_end(); k < end && n < max; k++) {
		struct p2pg_map_range r;
		if (slot_may_meet(&ranges[k], base, size) && range_read(&ranges[k], &r) &&
		    overlaps(&r, base, size) && range_remove(&ranges[k], &out[n]))
			n++;
	}
	return n;
}

bool p2pg_map_ranges_find(uint64_t p, struct p2pg_map_range *ret)
{
	if (!may_meet(p, 1))
		return false;
	int slot = p2pg_range_index_find(p);
	if (slot == P2PG_RANGE_NONE)
		return false;
	if (slot >= 0 && range_read(&ranges[slot], ret) && p >= ret->base &&
	    p - ret->base < ret->size)
		return true;
	/* A writer at work, or the slot changed since the search: the table answers. */
	for (int k = 0, end = ranges_end(); k < end; k++)
		if (slot_may_meet(&ranges[k], p, 1) && range_read(&ranges[k], ret) &&
		    p >= ret->base && p - ret->base < ret->size)
			return true;
	return false;
}

void p2pg_map_ranges_grant(uint64_t base, uint64_t size, uint32_t devices)
{
	if (!may_meet(base, size))
		return;
	for (int k = 0, end = ranges_end(); k < end; k++) {
		struct p2pg_map_range r;
		if (slot_may_meet(&ranges[k], base, size) && range_read(&ranges[k], &r) &&
		    overlaps(&r, base, size))
			atomic_fetch_or_explicit(&ranges[k].access, devices, memory_order_relaxed);
	}
}

uint32_t p2pg_map_ranges_owners_reached(uint32_t devices)
{
	uint32_t owners = 0;
	if (atomic_load_explicit(&ranges_live, memory_order_relaxed) == 0)
		return 0;
	for (int k = 0, end = ranges_end(); k < end; k++) {
		struct p2pg_map_range r;
		if (range_read(&ranges[k], &r) && (r.access & devices) && r.owner >= 0 &&
		    r.owner < 32)
			owners |= 1u << r.owner;
	}
	return owners;
}

int p2pg_map_ranges_live(void)
{
	return atomic_load_explicit(&ranges_live, memory_order_relaxed);
}

/* ---- imported handles ---- */

struct handle_slot {
	_Atomic uint32_t state;
	_Atomic uint32_t seq;
	_Atomic uint64_t handle;
	_Atomic int32_t owner;
	_Atomic uint32_t mapping_id, handle_type, refs;
};

static struct handle_slot handles[P2PG_MAP_HANDLES];
static _Atomic int handles_live;

static uint32_t hash(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	return (uint32_t)h & (P2PG_MAP_HANDLES - 1);
}

static void handle_copy(struct handle_slot *s, struct p2pg_map_handle *h)
{
	h->handle = atomic_load_explicit(&s->handle, memory_order_acquire);
	h->owner = atomic_load_explicit(&s->owner, memory_order_acquire);
	h->mapping_id = atomic_load_explicit(&s->mapping_id, memory_order_acquire);
	h->handle_type = (uint8_t)atomic_load_explicit(&s->handle_type, memory_order_acquire);
}

/* The slot of a live handle, with its copy; probes stop at a slot never used. */
static struct handle_slot *handle_at(uint64_t handle, struct p2pg_map_handle *h)
{
	if (atomic_load_explicit(&handles_live, memory_order_relaxed) == 0)
		return NULL;
	uint32_t start = hash(handle);
	for (uint32_t i = 0; i < P2PG_MAP_HANDLES; i++) {
		struct handle_slot *s = &handles[(start + i) & (P2PG_MAP_HANDLES - 1)];
		for (int tries = 0; tries < READ_TRIES; tries++) {
			uint32_t before = atomic_load_explicit(&s->seq, memory_order_acquire);
			if (before & 1)
				continue;
			uint32_t state = atomic_load_explicit(&s->state, memory_order_acquire);
			if (state == SLOT_FREE)
				return NULL;
			if (state != SLOT_LIVE)
				break;
			handle_copy(s, h);
			if (atomic_load_explicit(&s->seq, memory_order_relaxed) != before)
				continue;
			if (h->handle == handle)
				return s;
			break;
		}
	}
	return NULL;
}

bool p2pg_map_handles_add(const struct p2pg_map_handle *h)
{
	uint32_t start = hash(h->handle);
	for (uint32_t i = 0; i < P2PG_MAP_HANDLES; i++) {
		struct handle_slot *s = &handles[(start + i) & (P2PG_MAP_HANDLES - 1)];
		uint32_t state = atomic_load_explicit(&s->state, memory_order_relaxed);
		if ((state != SLOT_FREE && state != SLOT_GONE) ||
		    !atomic_compare_exchange_strong_explicit(
			&s->state, &state, SLOT_BUSY, memory_order_acq_rel, memory_order_relaxed))
			continue;
		begin_write(&s->seq);
		atomic_store_explicit(&s->handle, h->handle, memory_order_release);
		atomic_store_explicit(&s->owner, h->owner, memory_order_release);
		atomic_store_explicit(&s->mapping_id, h->mapping_id, memory_order_release);
		atomic_store_explicit(&s->handle_type, h->handle_type, memory_order_release);
		atomic_store_explicit(&s->refs, 1, memory_order_release);
		end_write(&s->seq);
		atomic_fetch_add_explicit(&handles_live, 1, memory_order_relaxed);
		atomic_store_explicit(&s->state, SLOT_LIVE, memory_order_release);
		return true;
	}
	return false;
}

bool p2pg_map_handles_find(uint64_t handle, struct p2pg_map_handle *ret)
{
	return handle_at(handle, ret) != NULL;
}

bool p2pg_map_handles_retain(uint64_t handle)
{
	struct p2pg_map_handle h;
	struct handle_slot *s = handle_at(handle, &h);
	if (!s)
		return false;
	return add_ref(&s->refs, +1) != 0;
}

int p2pg_map_handles_release(uint64_t handle, struct p2pg_map_handle *ret)
{
	struct handle_slot *s = handle_at(handle, ret);
	if (!s)
		return -1;
	uint32_t refs = add_ref(&s->refs, -1);
	if (refs != 1)
		return refs == 0 ? -1 : 0;
	uint32_t live = SLOT_LIVE;
	if (!atomic_compare_exchange_strong_explicit(&s->state, &live, SLOT_BUSY,
						     memory_order_acq_rel, memory_order_relaxed))
		return -1;
	handle_copy(s, ret);
	begin_write(&s->seq);
	end_write(&s->seq);
	atomic_store_explicit(&s->state, SLOT_GONE, memory_order_release);
	atomic_fetch_sub_explicit(&handles_live, 1, memory_order_relaxed);
	return 1;
}

void p2pg_map_tables_reset(void)
{
	memset(ranges, 0, sizeof(ranges));
	memset(handles, 0, sizeof(handles));
	atomic_store(&ranges_high, 0);
	atomic_store(&ranges_live, 0);
	atomic_store(&span_lo, UINT64_MAX);
	atomic_store(&span_hi, 0);
	atomic_store(&handles_live, 0);
	p2pg_range_index_reset();
}

void p2pg_map_tables_after_fork_child(void)
{
	p2pg_range_index_after_fork_child();
}
