/* SPDX-License-Identifier: MIT */
/*
 * The live peer ranges of the mapping table (mapping_table.h) sorted by address, so that the
 * question every copy within one device asks while peer mappings are live ("is this pointer in
 * one?") is a binary search, not a walk over every slot: with 256 ranges live the walk cost such
 * a copy +0.31 us (tests/bench/bench_mappings, simulated CUDA), over its 0.2 us budget.
 *
 * Readers never wait and never write: they search between two equal, even reads of a sequence
 * counter, and answer "ask the table" when a writer is at work. Writers never wait either: one
 * that finds another at work leaves the index marked stale, and the one at work rebuilds it from
 * the table before it lets go. So the index is only ever a shortcut; the table stays the truth.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#define P2PG_RANGE_INDEX_MAX 1024

struct p2pg_range_entry {
	uint64_t base, end; /* [base, end) */
	uint32_t slot;	    /* the mapping table's slot */
};

/* Every live range of the table, for a rebuild: fills out (room for max), returns how many. */
typedef int (*p2pg_range_source)(struct p2pg_range_entry *out, int max);

void p2pg_range_index_init(p2pg_range_source source);
/* After the table's slot became live / before it stops being live. */
void p2pg_range_index_insert(const struct p2pg_range_entry *e);
void p2pg_range_index_remove(uint32_t slot);

enum { P2PG_RANGE_NONE = -1, P2PG_RANGE_ASK_TABLE = -2 };
/* The slot of the range containing p (the one starting last, if ranges overlap), P2PG_RANGE_NONE
 * when none does, or P2PG_RANGE_ASK_TABLE while a writer is at work. */
int p2pg_range_index_find(uint64_t p);

/* A forked child: a writer of the parent's that held the index is not in the child. */
void p2pg_range_index_after_fork_child(void);
/* Empty (tests). */
void p2pg_range_index_reset(void);
