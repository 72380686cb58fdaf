/* SPDX-License-Identifier: MIT */
/*
 * What the guard remembers of the mappings it saw, so that a later call can be told apart (an
 * import's handle mapped, a peer range unmapped, a copy through a peer mapping): two fixed tables
 * of static memory, lock-free. Writers take a slot with one compare-and-swap and own it while
 * they write; readers copy a slot under its sequence counter and retry (a bounded number of times)
 * when a writer was at work. No call of the driver is made here, and no lock is ever held. The
 * ranges are also kept sorted by address (range_index.h), so that a pointer is found without a
 * walk over every slot.
 *
 * Only what crosses a process or a device is kept: the imported handles, and the address ranges
 * of IPC opens, of maps of imported handles and of the ranges another device was given access
 * to. A process's own memory on its own device, which expandable segments map by the thousand,
 * never enters them. A full table costs the link between a mapping and its end (said once on
 * stderr by the caller), never a call.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#define P2PG_MAP_RANGES	 1024
#define P2PG_MAP_HANDLES 4096 /* a power of two */

struct p2pg_map_range {
	uint64_t base, size;
	int owner;	 /* the device whose memory it is; -1 unknown */
	uint32_t access; /* the devices (a bit each, below 32) given access through it */
	uint32_t mapping_id;
	uint8_t handle_type; /* enum p2pg_map_handle_type */
	bool cross_process;  /* another process's memory */
	uint32_t refs;	     /* IPC opens of the same handle in one context share one mapping */
};

/* Adds a range (refs as given); false when all P2PG_MAP_RANGES slots are taken. */
bool p2pg_map_ranges_add(const struct p2pg_map_range *r);
/* The live range starting at base: refs taken one down, and the range removed when they reach 0.
 * Returns 1 (removed: *ret is the range), 0 (a reference dropped: *ret as it is), -1 (none). */
int p2pg_map_ranges_put(uint64_t base, struct p2pg_map_range *ret);
/* The live range starting at base: refs one up. False when there is none. */
bool p2pg_map_ranges_get(uint64_t base, struct p2pg_map_range *ret);
/* Removes every live range overlapping [base, base+size), up to max of them into out; returns
 * how many were removed. */
int p2pg_map_ranges_take(uint64_t base, uint64_t size, struct p2pg_map_range *out, int max);
/* A copy of the live range containing p; false when none does. */
bool p2pg_map_ranges_find(uint64_t p, struct p2pg_map_range *ret);
/* Adds devices to the access of every live range overlapping [base, base+size). */
void p2pg_map_ranges_grant(uint64_t base, uint64_t size, uint32_t devices);
/* The owners (a bit each) of the live ranges that give any of devices access. */
uint32_t p2pg_map_ranges_owners_reached(uint32_t devices);
/* Live ranges now: 0 lets the common case (no peer mapping in the process) skip every search. */
int p2pg_map_ranges_live(void);

struct p2pg_map_handle {
	uint64_t handle; /* the CUmemGenericAllocationHandle an import returned */
	int owner;
	uint32_t mapping_id;
	uint8_t handle_type;
};

/* An imported handle, with one reference; false when the table is full. */
bool p2pg_map_handles_add(const struct p2pg_map_handle *h);
bool p2pg_map_handles_find(uint64_t handle, struct p2pg_map_handle *ret);
/* One more reference (cuMemRetainAllocationHandle gave the same handle back); false if unknown. */
bool p2pg_map_handles_retain(uint64_t handle);
/* One reference fewer: 1 when it was the last (removed, *ret set), 0 when more remain, -1 when the
 * handle is not an import the guard knows. */
int p2pg_map_handles_release(uint64_t handle, struct p2pg_map_handle *ret);

/* Forgets everything (tests). Never while another thread uses the tables. */
void p2pg_map_tables_reset(void);
/* A forked child: what a thread of the parent left half done is made whole. */
void p2pg_map_tables_after_fork_child(void);
